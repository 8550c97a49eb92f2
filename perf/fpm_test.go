package perf

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFPM_OutOfBounds(t *testing.T) {
	ok := FPM{Version: FPMVersion, WorkerID: "w", WallTime: MaxFPMWallTime,
		Scheduled: ScheduledRequests{NumPrefillRequests: MaxFPMRequests, SumPrefillTokens: MaxFPMTokens, VarPrefillLength: MaxFPMVariance},
		Queued:    QueuedRequests{NumDecodeRequests: MaxFPMRequests, SumDecodeKVTokens: MaxFPMTokens}}
	require.Empty(t, ok.OutOfBounds(), "at the bounds")
	require.Empty(t, (&FPM{}).OutOfBounds(), "a heartbeat")
	tests := []struct {
		name   string
		mutate func(*FPM)
		want   string
	}{
		{"an iteration of over an hour", func(f *FPM) { f.WallTime = MaxFPMWallTime + 1 }, "wall_time 3601"},
		{"a NaN wall time", func(f *FPM) { f.WallTime = math.NaN() }, "wall_time NaN"},
		{"a negative variance", func(f *FPM) { f.Queued.VarPrefillLength = -1 }, "queued var_prefill_length -1"},
		{"an infinite variance", func(f *FPM) { f.Scheduled.VarDecodeKVTokens = math.Inf(1) }, "scheduled var_decode_kv_tokens +Inf"},
		{"too many requests queued", func(f *FPM) { f.Queued.NumPrefillRequests = MaxFPMRequests + 1 }, "queued num_prefill_requests"},
		{"too many tokens queued", func(f *FPM) { f.Queued.SumPrefillTokens = 1 << 62 }, "queued sum_prefill_tokens 4611686018427387904"},
		{"a negative count", func(f *FPM) { f.Scheduled.NumDecodeRequests = -1 }, "scheduled num_decode_requests -1"},
	}
	for _, tc := range tests {
		f := ok
		tc.mutate(&f)
		require.Contains(t, f.OutOfBounds(), tc.want, tc.name)
	}
}
