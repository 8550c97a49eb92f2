package scaling

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"

	"github.com/stretchr/testify/require"
)

func TestAhead_ForgetsWhatWasLearnedAgainstAnotherSLA(t *testing.T) {
	// learned is a state of the ahead policy on the test profile (TTFT 200 ms, ITL 10 ms)
	// that has learned everything forgetOtherSLA may forget.
	learned := func(t *testing.T, p *Planner, st State) State {
		for now := 5.0; now <= 60; now += 5 {
			in := aheadInput(now, 4, 4, 4, 4, 20)
			in.Traffic.TTFTMs = ptr(150.0) // slower than the queueing model: an excess wait
			next, _, _, err := p.Decide(st, in)
			require.NoError(t, err)
			st = next
		}
		a := st.Ahead
		require.Equal(t, 200.0, a.LearnedTTFTMs, "the targets are recorded")
		require.Equal(t, 10.0, a.LearnedITLMs)
		require.Positive(t, a.ExcessWait, "an excess wait learned")
		a.DecodeEdgeRPS, a.DecodeWatchAt = 5, 60
		a.DecodeShown = []ShownBatch{{N: 60, KV: 60 * 3150}}
		a.FeedbackPrefill = &SLOFeedback{Missed: 2, Seen: 10, Headroom: 0.5, ChangedAt: 60}
		a.FeedbackDecode = &SLOFeedback{Missed: 2, Seen: 10, Headroom: 0.5, ChangedAt: 60}
		for i := range a.NeedPrefill {
			a.NeedPrefill[i], a.NeedDecode[i] = 9, 9
		}
		return st
	}
	// kept says what survives: the decode learning (edge, batches shown, concurrency), and
	// each pool's SLO feedback and per-bucket needs.
	type kept struct{ decode, prefillFeedback, decodeFeedback, prefillNeeds, decodeNeeds bool }
	tests := []struct {
		name   string
		agg    bool
		change func(*config.Config)
		old    bool // the state predates the recorded targets
		want   kept
		note   string
	}{
		{"the same targets: everything kept", false, func(*config.Config) {}, false,
			kept{true, true, true, true, true}, ""},
		{"a tighter ITL: the decode learning, feedback and needs forgotten", false,
			func(c *config.Config) { c.ITLMs = 8 }, false,
			kept{false, true, false, true, false}, "ITL 10 → 8 ms"},
		{"a looser TTFT: the prefill feedback and needs forgotten", false,
			func(c *config.Config) { c.TTFTMs = 400 }, false,
			kept{true, false, true, false, true}, "TTFT 200 → 400 ms"},
		{"both: both pools'", false,
			func(c *config.Config) { c.TTFTMs, c.ITLMs = 400, 20 }, false,
			kept{false, false, false, false, false}, "the prefill SLO feedback"},
		{"aggregated, a looser TTFT: its one pool's feedback and needs", true,
			func(c *config.Config) { c.TTFTMs = 400 }, false,
			kept{true, true, false, true, false}, "the aggregated SLO feedback"},
		{"a state from before the targets were recorded: kept, the targets recorded", false,
			func(c *config.Config) { c.ITLMs = 8 }, true,
			kept{true, true, true, true, true}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newPlanner := func(change func(*config.Config)) *Planner {
				if tc.agg {
					cfg := slaConfig(func(c *config.Config) {
						c.Mode, c.ScalingPolicy = config.ModeAgg, config.PolicyAhead
						c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 200, 10, 16
						change(c)
					})
					return mustPlanner(t, cfg)
				}
				p, _ := aheadPlannerWith(t, change)
				return p
			}
			var st State
			if tc.agg {
				var p *Planner
				p, st = aggAheadPlanner(t)
				st = learned(t, p, st)
			} else {
				p, st0 := aheadPlanner(t)
				st = learned(t, p, st0)
			}
			if tc.old {
				st.Ahead.LearnedTTFTMs, st.Ahead.LearnedITLMs = 0, 0
			}
			before := *st.Ahead.clone()
			p := newPlanner(tc.change)
			next, _, diag, err := p.Decide(st, aheadInput(65, 4, 4, 4, 4, 20))
			require.NoError(t, err)
			a := next.Ahead
			require.Equal(t, p.cfg.TTFTMs, a.LearnedTTFTMs, "the targets now learned against")
			require.Equal(t, p.cfg.ITLMs, a.LearnedITLMs)
			notes := strings.Join(diag.Notes, "\n")
			if tc.note == "" {
				require.NotContains(t, notes, "SLA targets changed")
			} else {
				require.Contains(t, notes, "SLA targets changed")
				require.Contains(t, notes, tc.note)
			}

			require.Equal(t, tc.want.decode, a.DecodeEdgeRPS > 0, "decode edge rate %v", a.DecodeEdgeRPS)
			require.Equal(t, tc.want.decode, a.DecodeWatchAt > 0, "the last interval at the ITL watch %v", a.DecodeWatchAt)
			require.Equal(t, tc.want.decode, len(a.DecodeShown) > 0, "batches shown %v", a.DecodeShown)
			require.Equal(t, tc.want.decode, len(a.DecodeConcurrency) > 1, "decode concurrency %v", a.DecodeConcurrency)
			if !tc.agg {
				require.Equal(t, tc.want.prefillFeedback, a.FeedbackPrefill.Headroom > 0, "prefill headroom %+v", a.FeedbackPrefill)
			}
			require.Equal(t, tc.want.decodeFeedback, a.FeedbackDecode.Headroom > 0, "decode headroom %+v", a.FeedbackDecode)
			type poolNeeds struct {
				needs []int
				kept  bool
			}
			pools := []poolNeeds{{a.NeedDecode, tc.want.decodeNeeds}}
			if !tc.agg { // an aggregated deployment has no prefill pool
				pools = append(pools, poolNeeds{a.NeedPrefill, tc.want.prefillNeeds})
			}
			for _, pool := range pools {
				require.Len(t, pool.needs, len(a.Count), "aligned with the history again")
				require.Equal(t, pool.kept, pool.needs[0] == 9, "what the first bucket needed: %v", pool.needs)
			}
			require.Equal(t, before.Count[0], a.Count[0], "the traffic history is kept")
			require.Positive(t, a.ExcessWait, "the excess wait is kept")
		})
	}
}

func TestAhead_ExcessWaitNotLearnedFromABacklogBeingCleared(t *testing.T) {
	// Twelve ticks at 20 req/s of 3,000-token prompts on 4 ready engines whose mean TTFT
	// (150 ms) is slower than the queueing model says: an excess wait, unless a backlog is
	// being cleared — the prompts queued on an engine take it longer than the TTFT slack to
	// clear (an engine's queue is its own), and fewer are queued than an interval before (the
	// waits are then the backlog's tail, which the sizing counts as demand already). A
	// backlog that does not shrink is a pool falling behind: learned.
	shrinking := func(from int64) func(int) int64 {
		return func(i int) int64 { return from - int64(i)*3000 }
	}
	steady := func(n int64) func(int) int64 { return func(int) int64 { return n } }
	always := func(int) bool { return true }
	tests := []struct {
		name     string
		agg      bool
		backlog  func(tick int) int64 // prompt tokens queued at each tick (-1: the one before)
		engines  int64                // engines the backlog is queued on, in equal parts (0: one)
		readable func(tick int) bool  // whether the tick's mean TTFT is read
		every    float64              // seconds between ticks (the interval is 5 s)
		learned  bool                 // an excess wait at the end
		skipped  bool                 // a tick said it did not learn
		hold     func(tick int) bool  // ticks whose traffic is unreadable (they hold; nil: none)
	}{
		{"no backlog: learned", false, steady(0), 0, always, 5, true, false, nil},
		{"a hundred prompts queued, not shrinking: learned", false, steady(300000), 0, always, 5, true, false, nil},
		{"a hundred prompts queued, growing: learned", false, func(i int) int64 { return 300000 + int64(i)*3000 }, 0, always, 5, true, false, nil},
		{"a hundred prompts being cleared: not learned", false, shrinking(300000), 0, always, 5, false, true, nil},
		{"three prompts being cleared, one an engine, within the slack: learned", false, func(i int) int64 { return 9000 - int64(i)*300 }, 3, always, 5, true, false, nil},
		{"three prompts being cleared on one engine, over the slack: not learned", false, func(i int) int64 { return 9000 - int64(i)*100 }, 0, always, 5, false, true, nil},
		{"growing, then being cleared: learned while it grew only", false,
			func(i int) int64 { return 300000 - int64(max(0, i-5))*40000 + int64(min(i, 5))*3000 }, 0, always, 5, true, true, nil},
		{"being cleared, every other tick's TTFT unreadable: each tick's backlog is the next one's before", false,
			shrinking(300000), 0, func(i int) bool { return i%2 == 0 }, 5, false, true, nil},
		{"being cleared, but the ticks 10 s apart (missed ones): not compared, learned", false, shrinking(300000), 0, always, 10, true, false, nil},
		{"being cleared, with a hold on unreadable traffic between: the hold records its backlog too", false,
			shrinking(300000), 0, always, 5, false, true, func(i int) bool { return i == 5 }},
		{"aggregated, no backlog: learned", true, steady(0), 0, always, 5, true, false, nil},
		{"aggregated, a hundred prompts being cleared: not learned", true, shrinking(300000), 0, always, 5, false, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p *Planner
			var st State
			if tc.agg {
				p, st = aggAheadPlanner(t)
			} else {
				p, st = aheadPlanner(t)
			}
			// What the tick before the first saw.
			st.Ahead.PromptBacklog, st.Ahead.PromptBacklogAt = float64(tc.backlog(-1)), 10-tc.every
			var notes []string
			var grown float64 // the excess wait when the backlog last grew
			for i := range 12 {
				now := 10 + tc.every*float64(i)
				in := aheadInput(now, 4, 4, 4, 4, 20)
				if tc.readable(i) {
					in.Traffic.TTFTMs = ptr(150.0)
				}
				if tc.hold != nil && tc.hold(i) {
					in.Traffic.NumReq = nil
				}
				tokens := tc.backlog(i)
				var queued []perf.FPM
				for e := range max(1, tc.engines) {
					each := tokens / max(1, tc.engines)
					queued = append(queued, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("w%d", e), Queued: perf.QueuedRequests{NumPrefillRequests: each / 3000, SumPrefillTokens: each}})
				}
				if tc.agg {
					in.FPM.Decode = queued
				} else {
					in.FPM.Prefill = queued
				}
				next, _, diag, err := p.Decide(st, in)
				require.NoError(t, err)
				st = next
				require.Equal(t, float64(tokens), st.Ahead.PromptBacklog, "the tick's backlog is recorded for the next")
				require.Equal(t, now, st.Ahead.PromptBacklogAt)
				notes = append(notes, diag.Notes...)
				if tokens >= tc.backlog(i-1) {
					grown = st.Ahead.ExcessWait
				}
			}
			skipped := strings.Contains(strings.Join(notes, "\n"), "excess wait not learned: a backlog is being cleared")
			require.Equal(t, tc.learned, st.Ahead.ExcessWait > 0, "excess wait %v", st.Ahead.ExcessWait)
			require.Equal(t, tc.skipped, skipped, "the diagnostics say why: %q", notes)
			if tc.skipped {
				require.Equal(t, grown, st.Ahead.ExcessWait, "nothing learned while the backlog was being cleared")
			}
		})
	}
}

// The backlog rule's guards: it needs the prompts' length (a backlog in tokens is read as
// prompts) and a TTFT slack (with none, every backlog would take longer than it to clear).
// Without either, or without the backlog an interval before, the wait is learned.
func TestLearnExcessWait_TheBacklogRuleNeedsLengthsSlackAndTheBacklogBefore(t *testing.T) {
	tests := []struct {
		name        string
		isl         float64
		service     float64 // seconds per prompt (the TTFT SLA is 200 ms)
		ttftMs      float64
		beforeKnown bool
		learned     bool
	}{
		{"a backlog being cleared: not learned", 3000, 0.05, 150, true, false},
		{"no prompt length: the rule does not apply", 0, 0.05, 150, true, true},
		{"no TTFT slack: the rule does not apply", 3000, 0.21, 350, true, true},
		{"the backlog an interval before unknown: the rule does not apply", 3000, 0.05, 150, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			st.Ahead.PromptBacklog = 300000
			tk := newTick(p, &st, 4, 4)
			tk.in = Input{Traffic: &TrafficObservation{DurationS: 5, TTFTMs: ptr(tc.ttftMs)},
				FPM: &FPMObservations{Prefill: []perf.FPM{{Version: perf.FPMVersion, WorkerID: "w0", Queued: perf.QueuedRequests{NumPrefillRequests: 100, SumPrefillTokens: 300000}}}}}
			tk.backlogBefore, tk.backlogBeforeKnown = 303000, tc.beforeKnown
			excess := tk.learnExcessWait(Forecast{Level: 10}, tc.service, 1, tc.isl)
			require.Equal(t, !tc.learned, tk.clearingBacklog, "the SLO feedback is told when a backlog is being cleared")
			require.Equal(t, tc.learned, st.Ahead.ExcessWait > 0, "excess wait %v", st.Ahead.ExcessWait)
			require.Equal(t, math.Max(0, st.Ahead.ExcessWait), excess)
			require.Equal(t, !tc.learned, strings.Contains(strings.Join(tk.diag.Notes, "\n"), "a backlog is being cleared"), tk.diag.Notes)
		})
	}
}

// TestBacklogRate: each engine's queued prompts add the rate that clears them within the
// lead time, at most the rate one engine serves (its queue is its own).
func TestBacklogRate(t *testing.T) {
	p, st := aheadPlanner(t)
	queue := func(tokens ...int64) []perf.FPM {
		var out []perf.FPM
		for i, n := range tokens {
			out = append(out, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("w%d", i), Queued: perf.QueuedRequests{NumPrefillRequests: n / 3000, SumPrefillTokens: n}})
		}
		return out
	}
	const isl, service, lead = 3000.0, 0.05, 60.0 // an engine serves 20 prompts a second
	for _, tc := range []struct {
		name string
		fpms []perf.FPM
		want float64
	}{
		{"nothing queued", queue(0, 0), 0},
		{"60 prompts on one engine: 1 a second", queue(180000), 1},
		{"60 prompts on each of two: 2 a second", queue(180000, 180000), 2},
		{"3,600 prompts on one engine: one engine's 20, not 60", queue(10800000), 20},
		{"3,600 on one, 60 on another", queue(10800000, 180000), 21},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := &tick{p: p, st: &st, in: Input{FPM: &FPMObservations{Prefill: tc.fpms}}, diag: &Diagnostics{}}
			require.InDelta(t, tc.want, tk.backlogRate(isl, service, lead), 1e-9)
		})
	}

	// Through the prefill sizing: ten million prompt tokens queued on one of four engines add
	// one engine's rate (a 3,000-token prompt takes 65 ms: 15.4 req/s), not the 51 req/s that
	// would clear them in the lead time.
	sized := func(tokens int64) (int, string) {
		p, st := aheadPlanner(t)
		var dec Decision
		var diag Diagnostics
		for now := 5.0; now <= 300; now += 5 {
			in := aheadInput(now, 4, 4, 4, 4, 20)
			in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(80.0), ptr(6.0)
			in.FPM.Prefill = queue(0, 0, 0, 0)
			if now == 300 {
				in.FPM.Prefill = queue(tokens, 0, 0, 0)
			}
			dec, diag = decideAndSubmit(t, p, &st, in)
		}
		n := 4
		if dec.Prefill != nil {
			n = *dec.Prefill
		}
		return n, strings.Join(diag.Notes, "\n")
	}
	without, _ := sized(0)
	with, notes := sized(10_000_000)
	m := regexp.MustCompile(`prefill \d+ \(([\d.]+) req/s incl\. backlog 10000000 tokens, (\d+) ms each`).FindStringSubmatch(notes)
	require.NotNil(t, m, notes)
	rate, _ := strconv.ParseFloat(m[1], 64)
	ms, _ := strconv.ParseFloat(m[2], 64)
	require.InDelta(t, 20+1000/ms, rate, 0.5, "the level plus one engine's rate: %s", notes)
	require.Equal(t, without, with, "four engines serve 35 req/s")
}

// TestAhead_ExcessWaitNotLearnedAtTheTickABacklogEnds: the interval after the last tick that
// found a backlog being cleared ends that queue's tail — its mean TTFT is the last queued
// prompts' — so the excess wait is not learned from it and the SLO feedback does not count
// its TTFT (over the SLA here) as missed either; the tick after that learns again, and so
// does a tick after a clearing one whose backlog grew. Ticks that are not an interval apart
// are not compared.
func TestAhead_ExcessWaitNotLearnedAtTheTickABacklogEnds(t *testing.T) {
	tests := []struct {
		name    string
		backlog []int64 // prompt tokens queued on one engine at each tick (the one before: 40,000)
		every   float64 // seconds between ticks
		learned []bool  // whether each tick learned an excess wait and counted a missed TTFT
		ended   []bool  // whether each tick said it ends the backlog the last tick cleared
	}{
		{"cleared to nothing: the tick after the last clearing one is not learned", []int64{30000, 20000, 10000, 0, 0, 0}, 5,
			[]bool{false, false, false, false, true, true}, []bool{false, false, false, true, false, false}},
		{"cleared to nothing, then a queue within the slack that grows: learned", []int64{30000, 0, 300, 600}, 5,
			[]bool{false, false, true, true}, []bool{false, true, false, false}},
		{"being cleared, then growing: learned", []int64{30000, 35000, 36000}, 5,
			[]bool{false, true, true}, []bool{false, false, false}},
		{"the ticks 10 s apart: not compared, learned", []int64{30000, 20000, 10000, 0}, 10,
			[]bool{true, true, true, true}, []bool{false, false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			st.Ahead.PromptBacklog, st.Ahead.PromptBacklogAt = 40000, 10-tc.every
			for i, tokens := range tc.backlog {
				now := 10 + tc.every*float64(i)
				in := aheadInput(now, 4, 4, 4, 4, 20)
				in.Traffic.TTFTMs = ptr(250.0) // over the 200 ms SLA
				in.FPM.Prefill = []perf.FPM{{Version: perf.FPMVersion, WorkerID: "w0", Queued: perf.QueuedRequests{NumPrefillRequests: tokens / 3000, SumPrefillTokens: tokens}}}
				before := st.Ahead.ExcessWait
				var missedBefore float64
				if f := st.Ahead.FeedbackPrefill; f != nil {
					missedBefore = f.Missed
				}
				next, _, diag, err := p.Decide(st, in)
				require.NoError(t, err)
				st = next
				notes := strings.Join(diag.Notes, "\n")
				require.Equal(t, tc.learned[i], st.Ahead.ExcessWait != before, "tick %d: excess wait %v → %v (%s)", i, before, st.Ahead.ExcessWait, notes)
				require.NotNil(t, st.Ahead.FeedbackPrefill)
				require.Equal(t, tc.learned[i], st.Ahead.FeedbackPrefill.Missed > missedBefore, "tick %d: the SLO feedback's missed requests %v → %v", i, missedBefore, st.Ahead.FeedbackPrefill.Missed)
				require.Equal(t, tc.ended[i], strings.Contains(notes, "ends the backlog the last tick was clearing"), "tick %d: %s", i, notes)
			}
		})
	}
}
