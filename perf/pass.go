package perf

// PassTime is the modelled time (seconds) of one forward pass carrying prefillTokens prompt
// tokens and decodeRequests decoding requests holding decodeKV KV tokens, as the engine
// kind's regression sees it (a prefill model ignores the decode load, a decode model the
// prefill tokens, an aggregated model the request count). Counts are clamped to [0, 2^32-1].
// ok is false when the model is not ready or the estimate is not a finite, non-negative
// time.
func (m *EngineModel) PassTime(prefillTokens, decodeRequests, decodeKV int64) (float64, bool) {
	if ok, _ := m.reg.Fit(); !ok {
		return 0, false
	}
	clamp := func(v int64) int64 { return max(0, min(v, u32Max)) }
	t, ok := m.forward(clamp(prefillTokens), clamp(decodeRequests), clamp(decodeKV))
	if !ok || !finite(t) || t < 0 {
		return 0, false
	}
	return t, true
}
