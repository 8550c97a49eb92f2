package scaling

import (
	"strings"
	"testing"

	"github.com/llmplanner/planner/config"

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
		a.DecodeEdgeRPS = 5
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
