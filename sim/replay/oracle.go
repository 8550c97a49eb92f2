package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/predict"
)

// watch counts the outcome of the requests whose arrival positions (in arrival order) are
// in [lo, hi): an oracle evaluation's stop condition and score.
type watch struct {
	lo, hi     int
	ttftOnly   bool    // score the TTFT only (a prefill search)
	ttftMs     float64 // the SLAs
	itlMs      float64
	pos        []int // request index → arrival position
	n          int   // requests watched
	resolved   int   // watched requests whose score is known
	bad        int   // watched requests that miss the SLA (or never run)
	allowedBad int   // the evaluation stops as soon as bad exceeds it
}

func (w *watch) in(i int) bool { p := w.pos[i]; return p >= w.lo && p < w.hi }

// firstToken scores a watched request's TTFT (a TTFT-only search resolves it here).
func (w *watch) firstToken(s *sim, i int) {
	if !w.in(i) {
		return
	}
	rec := &s.res.Requests[i]
	if w.ttftOnly {
		w.resolved++
		if rec.TTFTMs > w.ttftMs {
			w.bad++
		}
	}
}

// done scores a watched request that finished or failed.
func (w *watch) done(s *sim, i int) {
	if !w.in(i) {
		return
	}
	rec := &s.res.Requests[i]
	if w.ttftOnly {
		if rec.Error != "" { // failed before any first token
			w.resolved++
			w.bad++
		}
		return
	}
	w.resolved++
	if !rec.Finished || rec.TTFTMs > w.ttftMs || (rec.OSL > 1 && rec.ITLMs > w.itlMs) {
		w.bad++
	}
}

// over reports whether the evaluation's outcome is known: every watched request resolved,
// or too many bad already.
func (w *watch) over() bool { return w.resolved >= w.n || w.bad > w.allowedBad }

// clone returns an independent copy of the replay's state (the planner is not copied: the
// oracle and static replays run none).
func (s *sim) clone() *sim {
	c := *s
	c.res.Requests = slices.Clone(s.res.Requests)
	c.res.Timeline = nil
	c.res.Replicas = slices.Clone(s.res.Replicas)
	c.res.PrefixEngines = slices.Clone(s.res.PrefixEngines)
	c.p, c.d = s.p.clone(), s.d.clone()
	c.hand = slices.Clone(s.hand)
	// The traffic windows only grow by appending: sharing their backing arrays is safe as
	// long as neither copy's appends are seen by the other, which a full slice expression
	// guarantees (an append to either reallocates).
	c.arrivals = s.arrivals[:len(s.arrivals):len(s.arrivals)]
	c.firstT = s.firstT[:len(s.firstT):len(s.firstT)]
	c.cumISL = s.cumISL[:len(s.cumISL):len(s.cumISL)]
	c.cumOSL = s.cumOSL[:len(s.cumOSL):len(s.cumOSL)]
	c.finT = s.finT[:len(s.finT):len(s.finT)]
	c.cumTTFT = s.cumTTFT[:len(s.cumTTFT):len(s.cumTTFT)]
	c.cumDur = s.cumDur[:len(s.cumDur):len(s.cumDur)]
	c.itlT = s.itlT[:len(s.itlT):len(s.itlT)]
	c.cumITL = s.cumITL[:len(s.cumITL):len(s.cumITL)]
	c.kvT = s.kvT[:len(s.kvT):len(s.kvT)]
	c.cumKV = s.cumKV[:len(s.cumKV):len(s.cumKV)]
	c.stop = func() bool { return c.done == len(c.reqs) }
	c.rng = rand.New(rand.NewPCG(0x6670, 0x6d)) // its own draws: the copies may run at once
	c.watch = nil
	c.o.Progress = nil
	return &c
}

func (pl *pool) clone() *pool {
	c := *pl
	c.queue = slices.Clone(pl.queue)
	c.cands, c.candReps = nil, nil
	c.reps = make([]*replica, len(pl.reps))
	for i, r := range pl.reps {
		cp := *r
		cp.eng = r.eng.Clone()
		cp.events = slices.Clone(r.events)
		c.reps[i] = &cp
	}
	return &c
}

// setTargets scales the pools to p prefill and d decode engines at the time the replay stands
// at (new engines are ready after the startup delay; fewer cancel, then drain). In agg mode
// p is 0 and d counts the aggregated engines.
func (s *sim) setTargets(p, d int) error { return s.apply(&p, &d, s.now) }

// OracleOptions configure the hindsight oracle and the best static search.
type OracleOptions struct {
	// Options are the replay's: Config supplies the SLAs (and, for the oracle, the decision
	// interval), Profile the engines' timing. The oracle knows the future, so it orders every
	// engine StartupDelay before it is needed: its engines are ready when it wants them and
	// each one started is charged StartupDelay GPU-seconds of starting. InitialPrefill and
	// InitialDecode are ignored. In agg mode the search is over the aggregated pool (the
	// decode bounds; the prefill ones are ignored and the prefill pool stays empty).
	Options
	// Interval is the oracle's decision interval (0: the config's throughput adjustment
	// interval).
	Interval time.Duration
	// Target is the goodput the oracle must reach in every interval, and the static search
	// over the requests from ScoredFrom on, in (0, 1].
	Target float64
	// MinPrefill, MinDecode, MaxPrefill and MaxDecode bound the search (0 minimums: 1).
	MinPrefill, MinDecode, MaxPrefill, MaxDecode int
	// MaxTotal bounds prefill + decode engines together (the GPU budget the policies are
	// held to; 0: only the per-pool bounds).
	MaxTotal int
	// ScoredFrom is when scoring starts (seconds): the static search counts only the
	// requests arriving then or later, as the evaluation's rows do.
	ScoredFrom float64
}

// OracleStep is the oracle's choice for one interval.
type OracleStep struct {
	// At is the interval's start in seconds; Requests the arrivals in it.
	At       float64 `json:"at"`
	Requests int     `json:"requests"`
	// Prefill and Decode are the engines chosen for the interval.
	Prefill int `json:"prefill"`
	Decode  int `json:"decode"`
	// Feasible is false when even the maximum deployment misses the target.
	Feasible bool `json:"feasible"`
}

// OracleResult is the oracle's replay with the schedule it chose.
type OracleResult struct {
	Result
	// Schedule has one step per interval.
	Schedule []OracleStep `json:"schedule"`
	// Evaluations counts the trial replays the search ran.
	Evaluations int `json:"evaluations"`
	// Infeasible counts the intervals no deployment within the bounds served at the target.
	Infeasible int `json:"infeasible_intervals"`
}

// StaticResult is the best static deployment's replay.
type StaticResult struct {
	Result
	// Prefill and Decode are the deployment found.
	Prefill int `json:"prefill"`
	Decode  int `json:"decode"`
	// Feasible is false when even the maximum deployment misses the target.
	Feasible bool `json:"feasible"`
	// Evaluations counts the trial replays the search ran.
	Evaluations int `json:"evaluations"`
}

func (o *OracleOptions) validate() error {
	if !(o.Target > 0 && o.Target <= 1) {
		return fmt.Errorf("%w: goodput target %v not in (0, 1]", ErrInvalidOptions, o.Target)
	}
	if o.Config.Mode == config.ModeAgg {
		o.MinPrefill, o.MaxPrefill = 0, 0 // one pool: the decode bounds size it
	} else if o.MinPrefill <= 0 {
		o.MinPrefill = 1
	}
	if o.MinDecode <= 0 {
		o.MinDecode = 1
	}
	if o.MaxTotal < 0 || (o.MaxTotal > 0 && o.MinPrefill+o.MinDecode > o.MaxTotal) {
		return fmt.Errorf("%w: total bound %d below the minimums %d + %d", ErrInvalidOptions, o.MaxTotal, o.MinPrefill, o.MinDecode)
	}
	if o.MaxPrefill < o.MinPrefill || o.MaxDecode < o.MinDecode {
		return fmt.Errorf("%w: search bounds prefill %d..%d, decode %d..%d", ErrInvalidOptions,
			o.MinPrefill, o.MaxPrefill, o.MinDecode, o.MaxDecode)
	}
	if o.Interval < 0 {
		return fmt.Errorf("%w: negative oracle interval", ErrInvalidOptions)
	}
	if o.Interval == 0 {
		o.Interval = time.Duration(o.Config.ThroughputAdjustmentIntervalSeconds) * time.Second
	}
	if o.Interval <= 0 {
		return fmt.Errorf("%w: no oracle interval", ErrInvalidOptions)
	}
	return nil
}

// maxPrefill is the most prefill engines beside d decode engines: MaxPrefill, within MaxTotal.
func (o *OracleOptions) maxPrefill(d int) int {
	if o.MaxTotal > 0 {
		return max(o.MinPrefill, min(o.MaxPrefill, o.MaxTotal-d))
	}
	return o.MaxPrefill
}

// maxDecode is the most decode engines beside p prefill engines: MaxDecode, within MaxTotal.
func (o *OracleOptions) maxDecode(p int) int {
	if o.MaxTotal > 0 {
		return max(o.MinDecode, min(o.MaxDecode, o.MaxTotal-p))
	}
	return o.MaxDecode
}

// searchSmallest returns the smallest n in [lo, hi] for which ok holds, assuming ok is
// monotone in n; hi and false when none does.
func searchSmallest(lo, hi int, ok func(n int) bool) (int, bool) {
	if !ok(hi) {
		return hi, false
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// Oracle replays reqs under the hindsight oracle: a simulation-based search that knows the
// trace (agg: the prefill step is skipped and the decode search sizes the one pool). At the start of every interval it picks the smallest prefill count whose
// engines give the interval's arrivals a TTFT within the SLA at the target rate, then the
// smallest decode count giving them the target goodput (both SLAs), by bisection over trial
// replays that continue from the real state (queues, running requests and draining engines
// carry over) with later arrivals included, until the interval's requests are all scored.
// The choice is then applied and the replay moves to the next interval. With hindsight the
// oracle orders engines ahead, so they are ready at the interval's start; each started
// engine is charged StartupDelay GPU-seconds. Per-interval greediness makes it an upper
// bound on the best schedule's cost, not an exact minimum.
func Oracle(reqs []predict.Request, o OracleOptions) (OracleResult, error) {
	if err := o.validate(); err != nil {
		return OracleResult{}, err
	}
	ro := o.Options
	ro.Static, ro.StartupDelay = true, 0
	ro.InitialPrefill, ro.InitialDecode = o.MinPrefill, o.MinDecode
	s, err := newSim(reqs, ro)
	if err != nil {
		return OracleResult{}, err
	}
	var out OracleResult
	pos := positions(s)
	step := o.Interval.Seconds()
	cfg := s.planner.Config()
	p, d := o.MinPrefill, o.MinDecode
	last := -1.0
	if n := len(s.order); n > 0 {
		last = s.reqs[s.order[n-1]].Arrival
	}
	for at := 0.0; at <= last; at += step {
		if !s.advanceTo(at) {
			break
		}
		lo := s.next
		hi := lo
		for hi < len(s.order) && s.reqs[s.order[hi]].Arrival < at+step {
			hi++
		}
		st := OracleStep{At: at, Requests: hi - lo, Feasible: true}
		if hi == lo {
			p, d = o.MinPrefill, o.MinDecode
		} else {
			allowed := int(math.Floor((1 - o.Target) * float64(hi-lo) * (1 + 1e-12)))
			// good replays the interval's requests on np prefill and nd decode engines and
			// counts those within the SLAs (-1: the targets are refused); over the allowed
			// misses it stops early, so the count is exact only up to there.
			good := func(np, nd int, ttftOnly bool, allowedBad int) int {
				out.Evaluations++
				c := s.clone()
				if err := c.setTargets(np, nd); err != nil {
					return -1
				}
				w := &watch{lo: lo, hi: hi, ttftOnly: ttftOnly, ttftMs: cfg.TTFTMs, itlMs: cfg.ITLMs,
					pos: pos, n: hi - lo, allowedBad: allowedBad}
				c.watch = w
				c.stop = w.over
				c.advanceTo(math.Inf(1))
				return w.resolved - w.bad
			}
			trial := func(np, nd int, ttftOnly bool) bool {
				return good(np, nd, ttftOnly, allowed) >= (hi-lo)-allowed
			}
			okP, okD := true, false
			if !s.agg {
				// TTFT alone (the trial may exceed the total: decode barely changes it).
				p, okP = searchSmallest(o.MinPrefill, o.maxPrefill(o.MinDecode), func(n int) bool { return trial(n, d, true) })
			}
			for {
				d, okD = searchSmallest(o.MinDecode, o.maxDecode(p), func(n int) bool { return trial(p, n, false) })
				if okD || p >= o.maxPrefill(o.MinDecode) {
					break
				}
				p++ // TTFT and ITL misses of different requests add up: more prefill helps
			}
			st.Feasible = okP && okD
			if !st.Feasible {
				out.Infeasible++
				if o.MaxTotal > 0 && !s.agg {
					// Within the total, the split serving the most of the interval's requests
					// (the searches' last trial starves decode).
					bestGood := -1
					for np := o.MinPrefill; np <= o.maxPrefill(o.MinDecode); np++ {
						if g := good(np, o.maxDecode(np), false, hi-lo); g > bestGood {
							bestGood, p, d = g, np, o.maxDecode(np)
						}
					}
				}
			}
		}
		st.Prefill, st.Decode = p, d
		if err := s.setTargets(p, d); err != nil {
			return OracleResult{}, err
		}
		out.Schedule = append(out.Schedule, st)
	}
	s.advanceTo(math.Inf(1))
	// The engines' startup, ordered ahead of time.
	s.p.gpuSec += float64(s.p.started) * o.StartupDelay.Seconds()
	s.d.gpuSec += float64(s.d.started) * o.StartupDelay.Seconds()
	s.summarise()
	out.Result = s.res
	return out, nil
}

// BestStatic searches the smallest static deployment serving the requests from ScoredFrom on
// at the target goodput (agg: the smallest number of aggregated engines meeting both SLAs);
// when none within MaxTotal does, the split of the whole total with the most goodput over
// those requests (Feasible false). The search: the smallest prefill count meeting the TTFT
// SLA at the target rate, then the smallest decode count meeting both (with more prefill
// when no decode count does), by bisection over full replays. Smallest is per role, so it
// is the smallest total when the roles' needs are independent, which they nearly are
// (decode only sees prefill's timing).
func BestStatic(reqs []predict.Request, o OracleOptions) (StaticResult, error) {
	if err := o.validate(); err != nil {
		return StaticResult{}, err
	}
	var out StaticResult
	var runErr error
	var pos []int // arrival positions: the same for every trial
	scored := 0   // the requests from ScoredFrom on: the last positions
	for _, r := range reqs {
		if r.Arrival >= o.ScoredFrom {
			scored++
		}
	}
	trial := func(np, nd int, ttftOnly bool) bool {
		out.Evaluations++
		ro := o.Options
		ro.Static, ro.InitialPrefill, ro.InitialDecode, ro.Progress = true, np, nd, nil
		s, err := newSim(reqs, ro)
		if err != nil {
			runErr = err
			return false
		}
		if pos == nil {
			pos = positions(s)
		}
		cfg := s.planner.Config()
		w := &watch{lo: len(reqs) - scored, hi: len(reqs), ttftOnly: ttftOnly, ttftMs: cfg.TTFTMs, itlMs: cfg.ITLMs, pos: pos, n: scored,
			allowedBad: int(math.Floor((1 - o.Target) * float64(scored) * (1 + 1e-12)))}
		s.watch, s.stop = w, w.over
		s.advanceTo(math.Inf(1))
		return w.resolved-w.bad >= scored-w.allowedBad
	}
	p, okP := o.MinPrefill, true // agg: no prefill pool (0), the decode search sizes the one pool
	if o.Config.Mode != config.ModeAgg {
		// TTFT alone, with the most decode engines (the trial may exceed the total: decode
		// barely changes TTFT).
		p, okP = searchSmallest(o.MinPrefill, o.maxPrefill(o.MinDecode), func(n int) bool { return trial(n, o.MaxDecode, true) })
	}
	var d int
	var okD bool
	for {
		d, okD = searchSmallest(o.MinDecode, o.maxDecode(p), func(n int) bool { return trial(p, n, false) })
		if okD || p >= o.maxPrefill(o.MinDecode) {
			break
		}
		p++
	}
	if runErr != nil {
		return StaticResult{}, runErr
	}
	run := func(p, d int) (Result, error) {
		ro := o.Options
		ro.Static, ro.InitialPrefill, ro.InitialDecode = true, p, d
		return Run(reqs, ro)
	}
	if !(okP && okD) && o.MaxTotal > 0 && o.Config.Mode != config.ModeAgg {
		// No deployment within the total meets the target: the best one is the split of the
		// whole total with the most goodput (the searches' last trial is not it).
		var best Result
		bestP, bestGoodput := -1, 0.0
		for np := o.MinPrefill; np <= o.maxPrefill(o.MinDecode); np++ {
			nd := o.maxDecode(np)
			res, err := run(np, nd)
			if err != nil {
				return StaticResult{}, err
			}
			out.Evaluations++
			if g := Score(res.Requests, o.Config.TTFTMs, o.Config.ITLMs, o.ScoredFrom).Goodput; bestP < 0 || g > bestGoodput {
				best, bestP, bestGoodput = res, np, g
			}
		}
		out.Result, out.Prefill, out.Decode = best, bestP, o.maxDecode(bestP)
		return out, nil
	}
	res, err := run(p, d)
	if err != nil {
		return StaticResult{}, err
	}
	out.Result, out.Prefill, out.Decode, out.Feasible = res, p, d, okP && okD
	return out, nil
}

// positions maps request indexes to their arrival positions.
func positions(s *sim) []int {
	pos := make([]int, len(s.order))
	for p, i := range s.order {
		pos[i] = p
	}
	return pos
}
