package scaletest

import (
	"math"
	"slices"
	"sort"
)

// Tick is what the measurement keeps of one planner tick, read from the planner's history
// (ReadTicks).
type Tick struct {
	// N is the tick's number, counted over the planner's runs.
	N int64
	// At is when the tick decided, in Unix seconds: the workflow's time after the tick's
	// observations returned (TickRecord.At, Diagnostics.At).
	At float64
	// DueAt is when the tick was due: the end of the timer the planner waited on before it
	// (0: it waited on none, being due already when the previous tick finished).
	DueAt float64
	// NextTickAt is when the tick scheduled the next one, where the history records it (the
	// Decide local activity's Diagnostics.NextTickAt, history generations 1 and 2); else 0.
	NextTickAt float64
	// FiredAt is when the timer the tick waited on fired (the TimerFired event), and WokeAt
	// when the workflow task that started the tick (the first after it) started, in Unix
	// seconds; 0 when unknown.
	FiredAt, WokeAt float64
	// Scheduled is false for an override pass (a replica override applied between ticks).
	Scheduled bool
	// Decided is true when the tick made a decision (an Apply followed it).
	Decided bool
	// Failures name what failed in the tick ("decide failed").
	Failures []string
}

// Stats summarises a sample.
type Stats struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Min   float64 `json:"min"`
}

// NewStats summarises values (the zero Stats when there are none). It sorts a copy.
func NewStats(values []float64) Stats {
	if len(values) == 0 {
		return Stats{}
	}
	s := slices.Clone(values)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Stats{Count: len(s), Mean: sum / float64(len(s)), P50: Percentile(s, 0.50), P90: Percentile(s, 0.90),
		P99: Percentile(s, 0.99), Max: s[len(s)-1], Min: s[0]}
}

// Percentile is the nearest-rank q-quantile (0 < q <= 1) of sorted values: the smallest
// value with at least q of the values at or below it. NaN for no values.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}

// Window is the measured span, in Unix seconds: ticks that decided within [Start, End].
type Window struct {
	Start, End float64
}

// Contains reports whether t is in the window.
func (w Window) Contains(t float64) bool { return t >= w.Start && t <= w.End }

// TickStats are the measured ticks of all planners over a window.
type TickStats struct {
	// Expected is planners × window / interval: the ticks an on-time planner runs.
	Expected float64 `json:"expected"`
	// Run is the ticks that decided within the window, from the tick numbers (a tick the
	// measurement did not see between two it saw still counts).
	Run int64 `json:"run"`
	// RunRatio is Run / Expected.
	RunRatio float64 `json:"run_ratio"`
	// Unobserved are ticks counted in Run that were not read (none when every history was
	// read); they have no lateness.
	Unobserved int64 `json:"unobserved"`
	// LatenessS is each tick's lateness in seconds (see Lateness).
	LatenessS Stats `json:"lateness_s"`
	// The lateness in parts: TimerS until the server fired the tick's timer, DispatchS from
	// then until the tick's first workflow task started on a worker (WakeS: the two
	// together), ObserveS the rest (the observe activities' round trips and the workflow
	// task that receives their results).
	TimerS    Stats `json:"timer_s"`
	DispatchS Stats `json:"dispatch_s"`
	WakeS     Stats `json:"wake_s"`
	ObserveS  Stats `json:"observe_s"`
	// IntervalS is the time between consecutive ticks of a planner, in seconds.
	IntervalS Stats `json:"interval_s"`
	// PlannersWithTicks is the number of planners with at least one tick in the window.
	PlannersWithTicks int `json:"planners_with_ticks"`
	// NoTimer is the ticks in the window that waited on no timer: due already when the tick
	// before finished (their lateness is not split).
	NoTimer int64 `json:"no_timer"`
	// Decisions is the ticks in the window that made a decision.
	Decisions int64 `json:"decisions"`
	// Failures counts what failed in the ticks of the window.
	Failures map[string]int64 `json:"failures,omitempty"`
}

// Due is when tick cur was due, given prev, the tick before it (nil when unknown), and the
// planners' load interval in seconds: the end of the timer cur waited on; without one (cur
// was due when prev finished, e.g. after a slow Apply), prev's NextTickAt, or, where the
// history does not record it (generation 3), prev's decision time plus the interval, which
// is the schedule of a load-only planner. ok is false when it cannot tell, and for an
// override pass.
func Due(prev *Tick, cur Tick, intervalS float64) (due float64, ok bool) {
	switch {
	case !cur.Scheduled:
		return 0, false
	case cur.DueAt > 0:
		return cur.DueAt, true
	case prev == nil || prev.N != cur.N-1 || len(prev.Failures) > 0:
		return 0, false
	case prev.NextTickAt > 0:
		return prev.NextTickAt, true
	}
	return prev.At + intervalS, true
}

// Lateness is how late tick cur decided: cur.At minus when it was due (Due).
//
// The planner takes a tick's time after its observations return, and schedules the next
// tick one interval after it (docs/workflow.md), so the lateness is everything between the
// due time and the decision: the timer firing on the server, the workflow task reaching the
// worker and running, the observe activities' round trips through the server, and the
// workflow task that receives their results. It does not accumulate: each tick is due one
// interval after the previous one decided, so a planner that is late every tick runs fewer
// ticks (TickStats.RunRatio) instead of falling further behind.
func Lateness(prev *Tick, cur Tick, intervalS float64) (float64, bool) {
	due, ok := Due(prev, cur, intervalS)
	if !ok {
		return 0, false
	}
	return cur.At - due, true
}

// Measure computes the tick statistics of the planners' observed ticks over the window, for
// the configured interval (seconds). Each planner's ticks may come in any order and repeat.
func Measure(ticks map[string][]Tick, w Window, intervalS float64) TickStats {
	out := TickStats{Expected: float64(len(ticks)) * (w.End - w.Start) / intervalS, Failures: map[string]int64{}}
	var late, timer, dispatch, wake, observe, gaps []float64
	for _, ts := range ticks {
		ts = dedupe(ts)
		first, last := int64(-1), int64(-1)
		seen := int64(0)
		for i, t := range ts {
			if !w.Contains(t.At) {
				continue
			}
			if first < 0 {
				first = t.N
			}
			last = t.N
			seen++
			if t.Decided {
				out.Decisions++
			}
			for _, f := range t.Failures {
				out.Failures[f]++
			}
			var prev *Tick
			if i > 0 {
				prev = &ts[i-1]
			}
			if l, ok := Lateness(prev, t, intervalS); ok {
				late = append(late, l)
			}
			if t.DueAt > 0 && t.FiredAt > 0 && t.WokeAt > 0 {
				timer = append(timer, t.FiredAt-t.DueAt)
				dispatch = append(dispatch, t.WokeAt-t.FiredAt)
				wake = append(wake, t.WokeAt-t.DueAt)
				observe = append(observe, t.At-t.WokeAt)
			} else if t.DueAt == 0 {
				out.NoTimer++
			}
			if prev != nil && prev.N == t.N-1 {
				gaps = append(gaps, t.At-prev.At)
			}
		}
		if first < 0 {
			continue
		}
		out.PlannersWithTicks++
		out.Run += last - first + 1
		out.Unobserved += last - first + 1 - seen
	}
	if out.Expected > 0 {
		out.RunRatio = float64(out.Run) / out.Expected
	}
	out.LatenessS, out.IntervalS = NewStats(late), NewStats(gaps)
	out.TimerS, out.DispatchS, out.WakeS, out.ObserveS = NewStats(timer), NewStats(dispatch), NewStats(wake), NewStats(observe)
	if len(out.Failures) == 0 {
		out.Failures = nil
	}
	return out
}

// dedupe sorts ticks by number and keeps the last copy of each.
func dedupe(ts []Tick) []Tick {
	s := slices.Clone(ts)
	slices.SortStableFunc(s, func(a, b Tick) int {
		switch {
		case a.N < b.N:
			return -1
		case a.N > b.N:
			return 1
		}
		return 0
	})
	out := s[:0]
	for _, t := range s {
		if len(out) > 0 && out[len(out)-1].N == t.N {
			out[len(out)-1] = t
			continue
		}
		out = append(out, t)
	}
	return out
}
