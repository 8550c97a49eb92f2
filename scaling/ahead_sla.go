package scaling

import (
	"fmt"
	"strings"

	"github.com/llmplanner/planner/config"
)

// forgetOtherSLA clears what the ahead policy learned against SLA targets other than the
// configured ones — changed since by `set_sla` or `update_config` — and notes what it forgot.
// Measured against the ITL target: the decode edge rate (the rate per engine at which the ITL
// neared it), the batches the engines ran within it, the decode concurrency (scaled to it
// when over it) and the perf model's SLA batches of the last lead time. Per pool, against the
// target it is scored on (prefill: TTFT; decode: ITL; an aggregated pool: both): its SLO
// feedback, whose missed share and headroom were counted against the old target, and the
// counts it needed per bucket (the quiet-gap and bursty holds), which were sized for it.
// Kept: what does not depend on the targets — the traffic history and its period, the
// startup delay and the prompt service times — the excess wait (its observations are capped
// at twice the TTFT target, and it converges again within about 20 intervals), and the
// lead time's highest need that a scale-down holds (gone within a lead time). Without this a
// tightened ITL target would still trust batches that ran within the old one (an undersized
// decode pool), and a loosened one would hold the counts and the headroom the old one needed.
func (t *tick) forgetOtherSLA() {
	a := t.st.Ahead
	ttft, itl := t.p.cfg.TTFTMs, t.p.cfg.ITLMs
	if a.LearnedTTFTMs == 0 && a.LearnedITLMs == 0 {
		a.LearnedTTFTMs, a.LearnedITLMs = ttft, itl
		return
	}
	ttftChanged, itlChanged := a.LearnedTTFTMs != ttft, a.LearnedITLMs != itl
	if !ttftChanged && !itlChanged {
		return
	}
	var forgot []string
	if itlChanged {
		a.DecodeEdgeRPS, a.DecodeWatchAt, a.DecodeShown, a.DecodeConcurrency, a.DecodeBatch = 0, 0, nil, nil, nil
		forgot = append(forgot, "the decode edge rate, the batches the engines ran within the ITL target, the decode concurrency and SLA batches")
	}
	agg := t.p.cfg.Mode == config.ModeAgg
	if ttftChanged && !agg {
		a.FeedbackPrefill, a.NeedPrefill = nil, nil
		forgot = append(forgot, "the prefill SLO feedback and the prefill counts needed per bucket")
	}
	if itlChanged || (agg && ttftChanged) {
		a.FeedbackDecode, a.NeedDecode = nil, nil
		pool := "decode"
		if agg {
			pool = "aggregated"
		}
		forgot = append(forgot, fmt.Sprintf("the %s SLO feedback and the %s counts needed per bucket", pool, pool))
	}
	t.diag.note(fmt.Sprintf("ahead: SLA targets changed (TTFT %g → %g ms, ITL %g → %g ms): forgot %s",
		a.LearnedTTFTMs, ttft, a.LearnedITLMs, itl, strings.Join(forgot, "; ")))
	a.LearnedTTFTMs, a.LearnedITLMs = ttft, itl
}
