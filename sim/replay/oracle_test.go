package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// oracleOptions scores against TTFT 200 ms / ITL 10 ms (Dynamo's rr-5-45 test SLAs) at a
// 90% goodput target, searching up to 6 engines per role.
func oracleOptions(t testing.TB) OracleOptions {
	c := loadConfig()
	c.TTFTMs, c.ITLMs = 200, 10
	c.ThroughputAdjustmentIntervalSeconds = 60
	return OracleOptions{Options: Options{Config: c, Profile: profile(t)}, Target: 0.9, MaxPrefill: 6, MaxDecode: 6}
}

func TestBestStatic_IsTheSmallestDeploymentMeetingTheTarget(t *testing.T) {
	// 25 req/s at ISL 3000 is about 1.5 prefill engines' worth; OSL 300 at ITL 10 ms needs
	// more than one decode engine.
	reqs := steps(step{0, 240, 25, 3000, 300})
	o := oracleOptions(t)
	best, err := BestStatic(reqs, o)
	require.NoError(t, err)
	require.True(t, best.Feasible)
	require.GreaterOrEqual(t, best.Goodput, o.Target)
	require.GreaterOrEqual(t, best.Prefill, 2)
	require.GreaterOrEqual(t, best.Decode, 2)
	require.Zero(t, best.ScaleActions)
	require.Empty(t, best.Timeline, "a static deployment runs no planner")
	t.Logf("best static %dP%dD: goodput %.3f, %.0f GPU-s, %d trial replays", best.Prefill, best.Decode, best.Goodput, best.GPUSeconds, best.Evaluations)

	// One engine fewer of either role misses the target.
	static := func(p, d int) Result {
		ro := o.Options
		ro.Static, ro.InitialPrefill, ro.InitialDecode = true, p, d
		res, err := Run(reqs, ro)
		require.NoError(t, err)
		return res
	}
	require.Less(t, static(best.Prefill-1, best.Decode).Goodput, o.Target)
	require.Less(t, static(best.Prefill, best.Decode-1).Goodput, o.Target)
	// The static replay provisions exactly its engines for the whole run.
	require.InDelta(t, float64(best.Prefill+best.Decode)*best.Duration, best.GPUSeconds, 1e-6)
}

// TestBestStatic_CountsFromScoredFrom: the search counts only the requests the evaluation
// scores, so a heavy first window that no row counts does not size the deployment.
func TestBestStatic_CountsFromScoredFrom(t *testing.T) {
	reqs := steps(step{0, 60, 40, 3000, 300}, step{60, 300, 6, 3000, 300})
	o := oracleOptions(t)
	whole, err := BestStatic(reqs, o)
	require.NoError(t, err)
	o.ScoredFrom = 120
	scored, err := BestStatic(reqs, o)
	require.NoError(t, err)
	require.True(t, scored.Feasible)
	require.Less(t, scored.Prefill+scored.Decode, whole.Prefill+whole.Decode, "the first minute's 40 req/s is not scored")
	require.GreaterOrEqual(t, Score(scored.Requests, 200, 10, o.ScoredFrom).Goodput, o.Target, "the scored requests meet the target")
}

// TestBestStaticAndOracle_StayWithinTheTotal: with the policies' GPU budget as the total, the
// searches never deploy more engines than it allows, and say when that misses the target.
func TestBestStaticAndOracle_StayWithinTheTotal(t *testing.T) {
	reqs := steps(step{0, 240, 25, 3000, 300})
	o := oracleOptions(t)
	free, err := BestStatic(reqs, o)
	require.NoError(t, err)
	require.True(t, free.Feasible)
	o.MaxTotal = free.Prefill + free.Decode - 1
	capped, err := BestStatic(reqs, o)
	require.NoError(t, err)
	require.False(t, capped.Feasible, "one engine fewer than the smallest deployment meeting the target")
	require.Equal(t, o.MaxTotal, capped.Prefill+capped.Decode, "the whole total, split for the most goodput")
	for np := 1; np < o.MaxTotal; np++ {
		ro := o.Options
		ro.Static, ro.InitialPrefill, ro.InitialDecode = true, np, o.MaxTotal-np
		res, err := Run(reqs, ro)
		require.NoError(t, err)
		require.LessOrEqual(t, res.Goodput, capped.Goodput, "%dP %dD", np, o.MaxTotal-np)
	}
	orc, err := Oracle(reqs, o)
	require.NoError(t, err)
	require.Positive(t, orc.Infeasible)
	for _, st := range orc.Schedule {
		require.LessOrEqual(t, st.Prefill+st.Decode, o.MaxTotal, "at %.0f s", st.At)
		if !st.Feasible {
			require.Equal(t, o.MaxTotal, st.Prefill+st.Decode, "at %.0f s: an interval no split serves gets the whole total", st.At)
		}
	}
}

func TestOracle_FollowsTheLoadAndBeatsTheBestStatic(t *testing.T) {
	// 3 minutes quiet, 3 minutes at 30 req/s, 4 minutes quiet.
	reqs := steps(step{0, 180, 2, 3000, 300}, step{180, 360, 30, 3000, 300}, step{360, 600, 2, 3000, 300})
	o := oracleOptions(t)
	orc, err := Oracle(reqs, o)
	require.NoError(t, err)
	require.Len(t, orc.Schedule, 10)
	require.Zero(t, orc.Infeasible)
	for _, st := range orc.Schedule {
		t.Logf("%4.0f s: %4d requests → %dP %dD", st.At, st.Requests, st.Prefill, st.Decode)
	}
	quiet, busy := orc.Schedule[1], orc.Schedule[4]
	require.Equal(t, 1, quiet.Prefill)
	require.Equal(t, 1, quiet.Decode)
	require.Greater(t, busy.Prefill, 1)
	require.Greater(t, busy.Decode, 1)
	require.Equal(t, 1, orc.Schedule[9].Prefill, "back to the minimum after the peak")
	// Scored per interval, the whole replay meets the target too.
	require.GreaterOrEqual(t, orc.Goodput, o.Target)

	best, err := BestStatic(reqs, o)
	require.NoError(t, err)
	require.Less(t, orc.GPUSeconds, best.GPUSeconds)
	t.Logf("oracle: goodput %.3f, %.0f GPU-s, %d trials; best static %dP%dD: goodput %.3f, %.0f GPU-s",
		orc.Goodput, orc.GPUSeconds, orc.Evaluations, best.Prefill, best.Decode, best.Goodput, best.GPUSeconds)
}

func TestOracle_StartupDelayIsChargedNotWaited(t *testing.T) {
	reqs := steps(step{0, 180, 2, 3000, 300}, step{180, 360, 30, 3000, 300}, step{360, 600, 2, 3000, 300})
	o := oracleOptions(t)
	instant, err := Oracle(reqs, o)
	require.NoError(t, err)
	o.StartupDelay = 60 * time.Second
	slow, err := Oracle(reqs, o)
	require.NoError(t, err)
	// Ordered ahead, the engines serve exactly as without delay ...
	require.Equal(t, instant.Schedule, slow.Schedule)
	require.Equal(t, instant.Good, slow.Good)
	// ... and each engine started costs 60 GPU-seconds.
	upP, upD := 0, 0
	for i := 1; i < len(slow.Schedule); i++ {
		upP += max(0, slow.Schedule[i].Prefill-slow.Schedule[i-1].Prefill)
		upD += max(0, slow.Schedule[i].Decode-slow.Schedule[i-1].Decode)
	}
	require.Positive(t, upP)
	require.Positive(t, upD)
	require.InDelta(t, instant.PrefillGPUSeconds+float64(upP)*60, slow.PrefillGPUSeconds, 1e-6)
	require.InDelta(t, instant.DecodeGPUSeconds+float64(upD)*60, slow.DecodeGPUSeconds, 1e-6)
}

func TestOracle_InvalidOptions(t *testing.T) {
	reqs := steps(step{0, 10, 1, 1000, 10})
	for name, mod := range map[string]func(*OracleOptions){
		"target zero":    func(o *OracleOptions) { o.Target = 0 },
		"target above 1": func(o *OracleOptions) { o.Target = 1.5 },
		"bounds":         func(o *OracleOptions) { o.MaxPrefill = 0 },
		"interval":       func(o *OracleOptions) { o.Interval = -time.Second },
		"total negative": func(o *OracleOptions) { o.MaxTotal = -1 },
		"total too low":  func(o *OracleOptions) { o.MaxTotal = 1 },
	} {
		t.Run(name, func(t *testing.T) {
			o := oracleOptions(t)
			mod(&o)
			_, err := Oracle(reqs, o)
			require.ErrorIs(t, err, ErrInvalidOptions)
			_, err = BestStatic(reqs, o)
			require.ErrorIs(t, err, ErrInvalidOptions)
		})
	}
}
