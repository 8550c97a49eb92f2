package perf

import "math"

// PrefillBootstrapFPMs converts the points of a prefill profile into benchmark FPMs
// (Dynamo §6.1): one prefill request of isl tokens that took ttft milliseconds.
func PrefillBootstrapFPMs(p *PrefillProfile) []FPM {
	if p == nil {
		return nil
	}
	out := make([]FPM, 0, len(p.ISL))
	for i := range p.ISL {
		out = append(out, FPM{
			Version:  FPMVersion,
			WorkerID: "profile",
			WallTime: p.TTFTMs[i] / 1000,
			Scheduled: ScheduledRequests{
				NumPrefillRequests: 1,
				SumPrefillTokens:   int64(math.RoundToEven(p.ISL[i])),
			},
		})
	}
	return out
}

// DecodeBootstrapFPMs converts the points of a decode profile into benchmark FPMs (Dynamo
// §6.1): KV tokens = round(kv_usage × max_kv_tokens), requests = max(1, round(kv / context)),
// wall time = the point's ITL. Python's round (half to even) is matched.
func DecodeBootstrapFPMs(d *DecodeProfile) []FPM {
	if d == nil {
		return nil
	}
	out := make([]FPM, 0, len(d.KVUsage))
	for i := range d.KVUsage {
		kv := math.RoundToEven(d.KVUsage[i] * float64(d.MaxKVTokens))
		reqs := int64(1)
		if d.ContextLength[i] > 0 {
			reqs = max(1, int64(math.RoundToEven(kv/d.ContextLength[i])))
		}
		out = append(out, FPM{
			Version:  FPMVersion,
			WorkerID: "profile",
			WallTime: d.ITLMs[i] / 1000,
			Scheduled: ScheduledRequests{
				NumDecodeRequests: reqs,
				SumDecodeKVTokens: int64(kv),
			},
		})
	}
	return out
}
