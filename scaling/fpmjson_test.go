package scaling

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
)

func TestFPMObservationsJSONIsCompactAndRoundTrips(t *testing.T) {
	full := perf.FPM{Version: 1, WorkerID: "d7", DPRank: 2, CounterID: 1 << 60, WallTime: 0.0123,
		Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 512, VarPrefillLength: 3.5, SumPrefillKVTokens: 64,
			NumDecodeRequests: 40, SumDecodeKVTokens: 123456, VarDecodeKVTokens: 9.25},
		Queued: perf.QueuedRequests{NumPrefillRequests: 3, SumPrefillTokens: 9000, VarPrefillLength: 1.5, NumDecodeRequests: 2, SumDecodeKVTokens: 800, VarDecodeKVTokens: 0.5}}
	sparse := perf.FPM{WorkerID: "p0", WallTime: 0.05, Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 3000}}
	heartbeat := perf.FPM{WorkerID: "p1"}
	obs := FPMObservations{Prefill: []perf.FPM{sparse, heartbeat}, Decode: []perf.FPM{full}, DecodeSamples: []perf.FPM{full, sparse}}

	data, err := json.Marshal(obs)
	require.NoError(t, err)
	require.Contains(t, string(data), `[0,"p0",0,0,0.05,2,3000]`, "trailing zeros dropped")
	require.Contains(t, string(data), `[0,"p1"]`)
	var back FPMObservations
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, obs, back)

	// The object form older histories hold still decodes.
	legacy, err := json.Marshal(map[string][]perf.FPM{"prefill": obs.Prefill, "decode": obs.Decode, "decode_samples": obs.DecodeSamples})
	require.NoError(t, err)
	var old FPMObservations
	require.NoError(t, json.Unmarshal(legacy, &old))
	require.Equal(t, obs, old)
	t.Logf("compact %d bytes, object form %d bytes", len(data), len(legacy))
	require.Less(t, len(data)*2, len(legacy))

	require.ErrorContains(t, json.Unmarshal([]byte(`{"decode":[[0,"d",0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]]}`), &back), "19 fields, at most 18")
	require.Error(t, json.Unmarshal([]byte(`{"decode":[[0,5]]}`), &back))
}
