package scripted

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/llmplanner/planner/perf"
	"github.com/stretchr/testify/require"
)

func TestScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"entries": [
	  {"from_tick": 0, "traffic": {"requests_per_second": 2, "isl": 3000, "osl": 300},
	   "decode_engine": {"wall_time": 0.01, "scheduled_requests": {"num_decode_requests": 8, "sum_decode_kv_tokens": 24000}},
	   "capabilities": {"decode": {"num_gpu": 1, "max_kv_tokens": 100000}}},
	  {"from_tick": 5, "traffic": {"requests_per_second": 0}},
	  {"from_tick": 9, "traffic": {"unreadable": true}}
	]}`), 0o600))
	s, err := LoadScript(path)
	require.NoError(t, err)

	tr := s.Traffic(3, 180)
	require.Equal(t, 360.0, *tr.NumReq)
	require.Equal(t, 3000.0, *tr.ISL)
	require.Equal(t, 180.0, tr.DurationS)
	f := s.FPM(3, 0, 3)
	require.Len(t, f.Decode, 3, "one copy per ready decode worker")
	require.Equal(t, []string{"d0", "d1", "d2"}, []string{f.Decode[0].WorkerID, f.Decode[1].WorkerID, f.Decode[2].WorkerID})
	require.Equal(t, int64(perf.FPMVersion), f.Decode[0].Version)
	require.Nil(t, f.Prefill)
	require.Equal(t, int64(100000), s.Capabilities(4).Decode.MaxKVTokens)

	idle := s.Traffic(7, 60)
	require.Equal(t, 0.0, *idle.NumReq)
	require.Nil(t, idle.ISL, "no requests, no mean length")
	require.Nil(t, s.FPM(7, 1, 1), "the entry from tick 5 has no FPM")
	require.Nil(t, s.Traffic(20, 60).NumReq, "unreadable is nil, never zero")

	for _, bad := range []string{`{"entries": []}`, `{"entries": [{"from_tick": 3}, {"from_tick": 1}]}`, `{"entries": [{"from_tick": 0, "traffic": {"isl": -1}}]}`, `{`} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
		_, err := LoadScript(path)
		require.Error(t, err, bad)
	}
}
