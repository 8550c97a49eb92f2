package replay

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/router"
)

// staticOptions is a static 2P1D deployment.
func staticOptions(t *testing.T, mode router.Mode, cache bool) Options {
	o := loadOptions(t)
	o.Static = true
	o.InitialPrefill, o.InitialDecode = 2, 1
	o.Router, o.PrefixCache = mode, cache
	return o
}

func TestRun_RouterChoice(t *testing.T) {
	// X (no hashes, two chunks long: still running when A arrives) goes to prefill-0, A to
	// prefill-1 (less loaded); B, once both are idle, shares A's three blocks.
	reqs := []predict.Request{
		{Arrival: 0, InputTokens: 16000, OutputTokens: 2},
		{Arrival: 0.001, InputTokens: 1536, OutputTokens: 2, HashIDs: []uint64{1, 2, 3}},
		{Arrival: 10, InputTokens: 2048, OutputTokens: 2, HashIDs: []uint64{1, 2, 3, 4}},
	}
	tests := []struct {
		name      string
		mode      router.Mode
		hitBlocks []int64 // prefill-0, prefill-1
		kvHitRate float64
	}{
		{"kv picks the engine holding the prefix", router.KV, []int64{0, 3}, (0 + 0 + 0.75) / 3},
		{"least loaded ties to the first engine", router.LeastLoaded, []int64{0, 0}, 0},
		{"round robin cycles", router.RoundRobin, []int64{0, 0}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(reqs, staticOptions(t, tc.mode, true))
			require.NoError(t, err)
			require.Equal(t, 3, res.Finished)
			require.Len(t, res.PrefixEngines, 2)
			for i, e := range res.PrefixEngines {
				require.Equal(t, []string{"prefill-0", "prefill-1"}[i], e.ID)
				require.Equal(t, tc.hitBlocks[i], e.HitBlocks, e.ID)
			}
			require.InDelta(t, tc.kvHitRate, res.KVHitRate, 1e-12)
			require.Equal(t, int64(7), res.Prefix.LookupBlocks)
			require.Equal(t, tc.hitBlocks[0]+tc.hitBlocks[1], res.Prefix.HitBlocks)
		})
	}
}

func TestTraffic_KVHitRate(t *testing.T) {
	s, err := newSim(nil, staticOptions(t, router.KV, true))
	require.NoError(t, err)
	s.routedKV(1, 0)
	s.routedKV(6, 0.5)
	s.routedKV(7, 1)
	for _, tc := range []struct {
		name     string
		now, dur float64
		want     *float64
	}{
		{"last five seconds", 10, 5, ptr(0.75)},
		{"everything", 10, 10, ptr(0.5)},
		{"nothing routed: unknown, not zero", 20, 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requirePtr(t, tc.want, s.traffic(tc.now, tc.dur).KVHitRate)
		})
	}
}

// conversations is sessions of turns: each turn's prompt is the previous turn's plus one
// block, so turn k shares k blocks with turn k−1.
func conversations(sessions, turns int, gap float64) []predict.Request {
	var out []predict.Request
	next := uint64(0)
	for s := range sessions {
		var hashes []uint64
		for k := range turns {
			for len(hashes) < k+4 {
				hashes = append(hashes, next)
				next++
			}
			out = append(out, predict.Request{Arrival: float64(s)*0.7 + float64(k)*gap, InputTokens: 512 * len(hashes),
				OutputTokens: 20, HashIDs: append([]uint64(nil), hashes...)})
		}
	}
	return out
}

func TestRun_PrefixReuse(t *testing.T) {
	reqs := conversations(20, 6, 5)
	off, err := Run(reqs, staticOptions(t, router.LeastLoaded, false))
	require.NoError(t, err)
	on, err := Run(reqs, staticOptions(t, router.KV, true))
	require.NoError(t, err)
	require.Equal(t, len(reqs), off.Finished)
	require.Equal(t, len(reqs), on.Finished)
	require.Nil(t, off.Prefix, "no cache, no counters")
	require.Zero(t, off.KVHitRate)

	// Every turn after the first finds the earlier turn's blocks on the engine it went to.
	var want int64
	for _, r := range reqs {
		want += int64(len(r.HashIDs))
	}
	require.Equal(t, want, on.Prefix.LookupBlocks)
	require.Equal(t, int64(20*(4+5+6+7+8)), on.Prefix.HitBlocks, "turn k reuses its predecessor's k+3 blocks")
	require.Greater(t, on.KVHitRate, 0.5)
	require.Less(t, on.TTFT.P50, off.TTFT.P50, "reused prefixes are not prefilled again")

	// The cache without hash ids changes nothing.
	plain := make([]predict.Request, len(reqs))
	for i, r := range reqs {
		r.HashIDs = nil
		plain[i] = r
	}
	a, err := Run(plain, staticOptions(t, router.LeastLoaded, false))
	require.NoError(t, err)
	b, err := Run(plain, staticOptions(t, router.LeastLoaded, true))
	require.NoError(t, err)
	require.Equal(t, a.Requests, b.Requests)
	require.Equal(t, a.Requests, off.Requests, "hash ids without the cache change nothing")
}

func TestRun_InvalidRouter(t *testing.T) {
	_, err := Run(nil, staticOptions(t, "random", false))
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorContains(t, err, `router mode "random"`)
}

func TestRun_HashesOfAnotherBlockSize(t *testing.T) {
	// 16 ids for 1,024 tokens: a trace hashed in 64-token blocks. Without the cache the ids
	// are not read and the replay runs; with it, the replay refuses before it starts.
	reqs := []predict.Request{{Arrival: 0, InputTokens: 1024, OutputTokens: 4, HashIDs: make([]uint64, 16)}}
	res, err := Run(reqs, staticOptions(t, router.LeastLoaded, false))
	require.NoError(t, err)
	require.Equal(t, 1, res.Finished)
	_, err = Run(reqs, staticOptions(t, router.KV, true))
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorContains(t, err, "request 0 has 16 hash ids for 1024 prompt tokens")
}
