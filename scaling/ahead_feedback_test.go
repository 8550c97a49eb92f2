package scaling

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSLOHeadroom(t *testing.T) {
	p, st := aheadPlanner(t) // TTFT SLA 200 ms, ITL 10 ms
	const lead = 65.0
	tk := func(now float64, readyP, expectedP int, ttft float64) *tick {
		in := aheadInput(now, readyP, 4, expectedP, 4, 20)
		in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(ttft), ptr(5.0)
		return &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: readyP, readyD: 4,
			expectedP: ptr(expectedP), expectedD: ptr(4), countsKnown: true}
	}
	// A settled pool whose TTFT breaks the SLA: a step of headroom (a quarter of the need,
	// at least one engine), no more than one a lead time.
	require.Equal(t, 1, tk(5, 4, 4, 500).sloHeadroom(Prefill, 4, lead))
	require.Equal(t, 1, tk(10, 4, 4, 500).sloHeadroom(Prefill, 4, lead), "within the lead time of the last step")
	require.Equal(t, 4, tk(75, 4, 4, 500).sloHeadroom(Prefill, 8, lead), "a lead time later: half of a need of 8")
	require.Zero(t, tk(75, 4, 4, 500).sloHeadroom(Decode, 4, lead), "the decode pool met its SLA")
	require.Equal(t, 1, tk(80, 4, 4, 100).sloHeadroom(Prefill, 1, lead), "a share of the need: one engine on a need of 1")
	for now := 140.0; now < 400; now += 65 {
		tk(now, 4, 4, 500).sloHeadroom(Prefill, 4, lead)
	}
	require.Equal(t, 8, tk(400, 4, 4, 500).sloHeadroom(Prefill, 8, lead), "never more than doubling the need")

	// Met from then on: kept for aheadFeedbackLeads lead times after the last change, then
	// lowered a step at a time.
	now, h := 405.0, 8
	for ; h == 8; now += 5 {
		h = tk(now, 4, 4, 100).sloHeadroom(Prefill, 8, lead)
	}
	require.GreaterOrEqual(t, now-5, 205+aheadFeedbackLeads*lead, "the last step was at 205 s")
	require.Equal(t, 6, h, "a quarter of the need off")
	for ; h > 0 && now < 1e5; now += 5 {
		h = tk(now, 4, 4, 100).sloHeadroom(Prefill, 8, lead)
	}
	require.Zero(t, h)

	// Misses while the pool scales up are the forecast's lag: no headroom.
	p, st = aheadPlanner(t)
	for now := 5.0; now <= 600; now += 5 {
		require.Zero(t, tk(now, 2, 5, 900).sloHeadroom(Prefill, 5, lead), "at %v", now)
	}
	require.InDelta(t, 0, st.Ahead.FeedbackPrefill.share(), 1e-12)
}
