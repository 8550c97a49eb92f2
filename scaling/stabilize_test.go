package scaling

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

func TestPushRecommendation(t *testing.T) {
	r := func(at float64, n int) Recommendation { return Recommendation{At: at, Replicas: n} }
	tests := []struct {
		name  string
		h     []Recommendation
		add   Recommendation
		since float64
		want  []Recommendation
	}{
		{name: "first", add: r(5, 3), since: -295, want: []Recommendation{r(5, 3)}},
		{name: "lower kept behind the highest", h: []Recommendation{r(5, 4)}, add: r(10, 2), since: -290, want: []Recommendation{r(5, 4), r(10, 2)}},
		{name: "equal or higher replaces", h: []Recommendation{r(5, 4), r(10, 2)}, add: r(15, 4), since: -285, want: []Recommendation{r(15, 4)}},
		{name: "middle outranked", h: []Recommendation{r(5, 5), r(10, 2)}, add: r(15, 3), since: -285, want: []Recommendation{r(5, 5), r(15, 3)}},
		{name: "expired highest dropped", h: []Recommendation{r(5, 5), r(10, 2)}, add: r(306, 1), since: 6, want: []Recommendation{r(10, 2), r(306, 1)}},
		{name: "window inclusive", h: []Recommendation{r(5, 5)}, add: r(305, 1), since: 5, want: []Recommendation{r(5, 5), r(305, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]Recommendation(nil), tc.h...)
			require.Equal(t, tc.want, pushRecommendation(tc.h, tc.add, tc.since))
			require.Equal(t, orig, tc.h, "the input is not modified")
		})
	}
}

// TestScaleDownStabilization drives a decode-only threshold planner (one step per 5 s
// tick): scale-up on a hot engine, then idle engines. Without the window it scales down at
// the first idle tick; with a 30 s window only once every recommendation of the last 30 s
// allows it, one engine at a time.
func TestScaleDownStabilization(t *testing.T) {
	caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxKVTokens: 100000}}
	hot := func(n int) *FPMObservations {
		var f []perf.FPM
		for i := range n {
			f = append(f, decodeEngine(string(rune('a'+i)), 40, 110000, 0))
		}
		return &FPMObservations{Decode: f}
	}
	idle := func(n int) *FPMObservations {
		var f []perf.FPM
		for i := range n {
			f = append(f, decodeEngine(string(rune('a'+i)), 1, 1000, 0))
		}
		return &FPMObservations{Decode: f}
	}
	planner := func(window int) *Planner {
		c := config.Default()
		c.Mode, c.MaxGPUBudget, c.ScaleDownStabilizationSeconds = config.ModeDecode, -1, window
		return mustPlanner(t, c)
	}
	type step struct {
		now    float64
		ready  int
		fpm    func(int) *FPMObservations
		want   int // 0: no decision
		reason Reason
	}
	tests := []struct {
		name   string
		window int
		steps  []step
	}{
		{name: "off: Dynamo's behaviour", window: 0, steps: []step{
			{5, 1, hot, 2, ReasonScaleUp}, {10, 2, hot, 3, ReasonScaleUp}, {15, 3, idle, 2, ReasonScaleDown},
		}},
		{name: "30 s window", window: 30, steps: []step{
			{5, 1, hot, 2, ReasonScaleUp},
			{10, 2, hot, 3, ReasonScaleUp},
			{15, 3, idle, 0, ReasonScaleDownStabilizing},
			{20, 3, idle, 0, ReasonScaleDownStabilizing},
			{25, 3, idle, 0, ReasonScaleDownStabilizing},
			{30, 3, idle, 0, ReasonScaleDownStabilizing},
			{35, 3, idle, 0, ReasonScaleDownStabilizing},
			{40, 3, idle, 0, ReasonScaleDownStabilizing}, // 3 was recommended at 10, 30 s ago
			{45, 3, idle, 2, ReasonScaleDown},            // the window holds only 2s (held ticks record their raw 2): 3 -> 2
			{50, 2, hot, 3, ReasonScaleUp},
			{55, 3, idle, 0, ReasonScaleDownStabilizing},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := planner(tc.window)
			st := mustInit(t, p, 0, Bootstrap{})
			for _, s := range tc.steps {
				next, dec, diag, err := p.Decide(st, Input{Now: s.now, Workers: counts(0, s.ready), Capabilities: caps, FPM: s.fpm(s.ready)})
				require.NoError(t, err)
				st = next
				if s.want == 0 {
					require.True(t, dec.Empty(), "t=%v: %v", s.now, dec)
				} else {
					require.NotNil(t, dec.Decode, "t=%v", s.now)
					require.Equal(t, s.want, *dec.Decode, "t=%v", s.now)
				}
				require.Equal(t, s.reason, diag.LoadReason, "t=%v", s.now)
			}
			if tc.window == 0 {
				require.Empty(t, st.StabilizationDecode, "nothing recorded without a window")
			}
		})
	}
}

func TestScaleDownStabilization_NeverHoldsTheBudget(t *testing.T) {
	caps := WorkerCapabilities{Decode: &EngineCapabilities{NumGPU: 1, MaxKVTokens: 100000}}
	hot := &FPMObservations{Decode: []perf.FPM{decodeEngine("a", 40, 110000, 0), decodeEngine("b", 40, 110000, 0), decodeEngine("c", 40, 110000, 0)}}
	c := config.Default()
	c.Mode, c.MaxGPUBudget, c.ScaleDownStabilizationSeconds = config.ModeDecode, -1, 300
	p := mustPlanner(t, c)
	st := mustInit(t, p, 0, Bootstrap{})
	st, dec, _, err := p.Decide(st, Input{Now: 5, Workers: counts(0, 3), Capabilities: caps, FPM: hot})
	require.NoError(t, err)
	require.Equal(t, 4, *dec.Decode)
	// The operator lowers the budget to 2 GPUs (set_limits): the planner must come down to it
	// at once, whatever it recommended within the window.
	c.MaxGPUBudget = 2
	p = mustPlanner(t, c)
	_, dec, diag, err := p.Decide(st, Input{Now: 10, Workers: counts(0, 4), Capabilities: caps, FPM: &FPMObservations{Decode: append(hot.Decode, decodeEngine("d", 40, 110000, 0))}})
	require.NoError(t, err)
	require.Equal(t, ReasonGPUBudgetReconcile, diag.LoadReason)
	require.Equal(t, 2, *dec.Decode)

	t.Run("throughput loop alone", func(t *testing.T) {
		cfg := slaConfig(func(c *config.Config) {
			c.Mode, c.TTFTMs, c.MaxGPUBudget, c.ScaleDownStabilizationSeconds = config.ModePrefill, 2000, -1, 300
		})
		boot := Bootstrap{PrefillFPMs: linearPrefillFPMs(0.001, 0, 500, 1000, 1500, 2000, 2500)}
		caps := WorkerCapabilities{Prefill: &EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, MaxNumSeqs: 512}}
		p := mustPlanner(t, cfg)
		st := mustInit(t, p, 0, boot)
		st.NextLoadAt = ptr(10000.0) // only the throughput loop is due
		st, dec, _ := decideAt(t, p, st, Input{Now: 180, Workers: counts(1, 0), Traffic: traffic(180, 378, 1000, 100), Capabilities: caps})
		require.Equal(t, 3, *dec.Prefill)
		// Demand falls: within the window the scale-down is held.
		_, dec, diag := decideAt(t, p, st, Input{Now: 360, Workers: counts(3, 0), Traffic: traffic(180, 100, 1000, 100), Capabilities: caps})
		require.True(t, dec.Empty(), "%v", diag.Notes)
		require.Equal(t, ReasonScaleDownStabilizing, diag.ThroughputReason)
		// The budget is lowered to 2 GPUs: the reconcile goes through at once.
		cfg.MaxGPUBudget = 2
		p = mustPlanner(t, cfg)
		_, dec, diag = decideAt(t, p, st, Input{Now: 360, Workers: counts(3, 0), Traffic: traffic(180, 100, 1000, 100), Capabilities: caps})
		require.NotNil(t, dec.Prefill, "%v", diag.Notes)
		require.LessOrEqual(t, *dec.Prefill, 2)
	})
}
