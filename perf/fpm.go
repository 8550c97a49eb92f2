package perf

import "fmt"

// FPMVersion is the current Forward Pass Metrics schema version (Dynamo's FPM_VERSION).
const FPMVersion = 1

// FPM is one Forward Pass Metrics message: what one engine scheduler did in one iteration,
// as Dynamo's engines publish it (reference §8.1). Field names and order follow Dynamo's
// msgspec structs so the wire decoder (observe) and this type stay one-to-one.
type FPM struct {
	// Version is the schema version; 0 means a legacy message without the field.
	Version int64 `json:"version"`
	// WorkerID is the Dynamo runtime instance id of the worker that ran the iteration.
	WorkerID string `json:"worker_id"`
	// DPRank is the attention data-parallel rank (one scheduler per rank).
	DPRank int64 `json:"dp_rank"`
	// CounterID is the publisher's sequence number.
	CounterID int64 `json:"counter_id"`
	// WallTime is the iteration's duration in seconds; 0 marks an idle heartbeat.
	WallTime float64 `json:"wall_time"`
	// Scheduled describes the requests executed in this iteration.
	Scheduled ScheduledRequests `json:"scheduled_requests"`
	// Queued describes the requests waiting, not scheduled, at the end of the iteration.
	Queued QueuedRequests `json:"queued_requests"`
}

// ScheduledRequests is the scheduled part of an FPM (Dynamo's ScheduledRequestMetrics).
type ScheduledRequests struct {
	// NumPrefillRequests counts new and chunked-prefill continuation requests.
	NumPrefillRequests int64 `json:"num_prefill_requests"`
	// SumPrefillTokens is the number of prompt tokens computed this iteration.
	SumPrefillTokens int64 `json:"sum_prefill_tokens"`
	// VarPrefillLength is the population variance of the full prompt lengths.
	VarPrefillLength float64 `json:"var_prefill_length"`
	// SumPrefillKVTokens is the KV tokens read, not computed, for prefill (prefix hits, earlier chunks).
	SumPrefillKVTokens int64 `json:"sum_prefill_kv_tokens"`
	// NumDecodeRequests counts decode requests in the iteration.
	NumDecodeRequests int64 `json:"num_decode_requests"`
	// SumDecodeKVTokens is the total KV context of the decode requests.
	SumDecodeKVTokens int64 `json:"sum_decode_kv_tokens"`
	// VarDecodeKVTokens is the population variance of the decode requests' KV context.
	VarDecodeKVTokens float64 `json:"var_decode_kv_tokens"`
}

// QueuedRequests is the queued part of an FPM (Dynamo's QueuedRequestMetrics).
type QueuedRequests struct {
	// NumPrefillRequests counts waiting requests.
	NumPrefillRequests int64 `json:"num_prefill_requests"`
	// SumPrefillTokens is the total prompt tokens of the waiting requests.
	SumPrefillTokens int64 `json:"sum_prefill_tokens"`
	// VarPrefillLength is the population variance of the waiting prompt lengths.
	VarPrefillLength float64 `json:"var_prefill_length"`
	// NumDecodeRequests counts preempted decode requests put back in the queue.
	NumDecodeRequests int64 `json:"num_decode_requests"`
	// SumDecodeKVTokens is the KV context of the queued decode requests.
	SumDecodeKVTokens int64 `json:"sum_decode_kv_tokens"`
	// VarDecodeKVTokens is the population variance of the queued decode KV context.
	VarDecodeKVTokens float64 `json:"var_decode_kv_tokens"`
}

// IsHeartbeat reports whether the message is an idle heartbeat (no work, wall time 0).
// Heartbeats count as the latest state of an engine but are never regression samples.
func (f *FPM) IsHeartbeat() bool { return f.WallTime == 0 }

// Bounds on what one FPM may report. They are far past any engine — an iteration of an hour,
// a trillion requests, a quadrillion tokens — and far below what makes the sums, products
// and regressions the planner computes from them overflow float64 or int64: a message past
// one is a broken publisher, not load.
const (
	// MaxFPMWallTime bounds an iteration's wall time (seconds).
	MaxFPMWallTime = 3600
	// MaxFPMRequests bounds each request count of an iteration, scheduled or queued.
	MaxFPMRequests = 1 << 40
	// MaxFPMTokens bounds each token sum of an iteration, scheduled or queued.
	MaxFPMTokens = 1 << 50
	// MaxFPMVariance bounds each length variance (tokens²): MaxFPMTokens squared.
	MaxFPMVariance = float64(MaxFPMTokens) * MaxFPMTokens
)

// OutOfBounds names the first field of f past its bound (or negative, or not finite), with
// its value: "" when every field is within them.
func (f *FPM) OutOfBounds() string {
	floats := [...]struct {
		name    string
		v, most float64
	}{
		{"wall_time", f.WallTime, MaxFPMWallTime},
		{"scheduled var_prefill_length", f.Scheduled.VarPrefillLength, MaxFPMVariance},
		{"scheduled var_decode_kv_tokens", f.Scheduled.VarDecodeKVTokens, MaxFPMVariance},
		{"queued var_prefill_length", f.Queued.VarPrefillLength, MaxFPMVariance},
		{"queued var_decode_kv_tokens", f.Queued.VarDecodeKVTokens, MaxFPMVariance},
	}
	for _, c := range floats {
		if !(c.v >= 0 && c.v <= c.most) {
			return fmt.Sprintf("%s %g (0..%g)", c.name, c.v, c.most)
		}
	}
	ints := [...]struct {
		name    string
		v, most int64
	}{
		{"scheduled num_prefill_requests", f.Scheduled.NumPrefillRequests, MaxFPMRequests},
		{"scheduled sum_prefill_tokens", f.Scheduled.SumPrefillTokens, MaxFPMTokens},
		{"scheduled sum_prefill_kv_tokens", f.Scheduled.SumPrefillKVTokens, MaxFPMTokens},
		{"scheduled num_decode_requests", f.Scheduled.NumDecodeRequests, MaxFPMRequests},
		{"scheduled sum_decode_kv_tokens", f.Scheduled.SumDecodeKVTokens, MaxFPMTokens},
		{"queued num_prefill_requests", f.Queued.NumPrefillRequests, MaxFPMRequests},
		{"queued sum_prefill_tokens", f.Queued.SumPrefillTokens, MaxFPMTokens},
		{"queued num_decode_requests", f.Queued.NumDecodeRequests, MaxFPMRequests},
		{"queued sum_decode_kv_tokens", f.Queued.SumDecodeKVTokens, MaxFPMTokens},
	}
	for _, c := range ints {
		if c.v < 0 || c.v > c.most {
			return fmt.Sprintf("%s %d (0..%d)", c.name, c.v, c.most)
		}
	}
	return ""
}
