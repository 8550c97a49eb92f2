package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrefixCacheLRU(t *testing.T) {
	tests := []struct {
		name         string
		ops          func(c *prefixCache)
		wantInactive []uint64 // least recently used first
		wantBlocks   int
	}{
		{"a request's blocks are released last first", func(c *prefixCache) {
			c.acquire([]uint64{1, 2, 3})
			c.release([]uint64{1, 2, 3})
		}, []uint64{3, 2, 1}, 3},
		{"later releases are more recent", func(c *prefixCache) {
			c.acquire([]uint64{1, 2, 3})
			c.release([]uint64{1, 2, 3})
			c.acquire([]uint64{4, 5})
			c.release([]uint64{4, 5})
		}, []uint64{3, 2, 1, 5, 4}, 5},
		{"eviction takes the least recently used", func(c *prefixCache) {
			c.acquire([]uint64{1, 2, 3})
			c.release([]uint64{1, 2, 3})
			c.acquire([]uint64{4, 5})
			c.release([]uint64{4, 5})
			require.True(t, c.evictOne())
			require.True(t, c.evictOne())
		}, []uint64{1, 5, 4}, 3},
		{"a hit makes a block active, its release most recent", func(c *prefixCache) {
			c.acquire([]uint64{1, 2})
			c.release([]uint64{1, 2})
			c.acquire([]uint64{3})
			c.release([]uint64{3})
			c.acquire([]uint64{2})
			require.Equal(t, []uint64{1, 3}, c.inactiveHashes(), "active blocks are out of the list")
			c.release([]uint64{2})
		}, []uint64{1, 3, 2}, 3},
		{"active blocks are never evicted", func(c *prefixCache) {
			c.acquire([]uint64{1, 2})
			c.acquire([]uint64{3})
			c.release([]uint64{3})
			require.True(t, c.evictOne())
			require.False(t, c.evictOne(), "only active blocks are left")
			require.Equal(t, 2, c.match([]uint64{1, 2, 3}))
		}, nil, 2},
		{"a block shared by two requests stays active until both release it", func(c *prefixCache) {
			c.acquire([]uint64{1, 2})
			c.acquire([]uint64{1, 9})
			c.release([]uint64{1, 2})
		}, []uint64{2}, 3},
		{"evicted slots are reused", func(c *prefixCache) {
			c.acquire([]uint64{1})
			c.release([]uint64{1})
			require.True(t, c.evictOne())
			c.acquire([]uint64{7})
			require.Len(t, c.entries, 1)
			c.release([]uint64{7})
		}, []uint64{7}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newPrefixCache(8)
			tc.ops(c)
			require.Equal(t, tc.wantInactive, c.inactiveHashes())
			require.Equal(t, len(tc.wantInactive), c.inactive)
			require.Len(t, c.index, tc.wantBlocks)
		})
	}
}

func TestPrefixCacheMatch(t *testing.T) {
	c := newPrefixCache(8)
	c.acquire([]uint64{1, 2, 3, 5})
	for _, tc := range []struct {
		hashes []uint64
		want   int
	}{
		{nil, 0},
		{[]uint64{1, 2, 3}, 3},
		{[]uint64{1, 2, 4, 5}, 2},
		{[]uint64{2, 3}, 2},
		{[]uint64{9, 1, 2}, 0},
		{[]uint64{1, 2, 3, 5, 6}, 4},
	} {
		require.Equal(t, tc.want, c.match(tc.hashes), "%v", tc.hashes)
	}
}

// cachingConfig is a prefill engine with the prefix cache on and numBlocks KV blocks of 64
// tokens (a 512-token hash block costs 8).
func cachingConfig(role Role, numBlocks int) Config {
	cfg := DefaultConfig(role)
	cfg.EnablePrefixCaching = true
	cfg.NumGPUBlocks = numBlocks
	return cfg
}

// prefillOf runs one request to idle and returns the prefill batch of its first pass and
// that pass's FPM sum_prefill_kv_tokens.
func prefillOf(t *testing.T, e *Engine, tim *fixedTiming, r Request) (PrefillBatch, int64) {
	t.Helper()
	tim.prefills = tim.prefills[:0]
	require.NoError(t, e.Submit(r))
	passes := runAll(t, e, 0)
	require.NotEmpty(t, tim.prefills)
	return tim.prefills[0], passes[0].FPM.Scheduled.SumPrefillKVTokens
}

func TestPrefixHit(t *testing.T) {
	tests := []struct {
		name       string
		prior      [][]uint64 // hash ids of requests run before (ISL 512 a block)
		req        Request
		wantCached int
		wantBlocks int64
	}{
		{"no prior request: a miss", nil,
			Request{ISL: 1600, OSL: 1, HashIDs: []uint64{1, 2, 9, 10}}, 0, 0},
		{"longest leading run", [][]uint64{{1, 2, 3}},
			Request{ISL: 1600, OSL: 1, HashIDs: []uint64{1, 2, 9, 10}}, 1024, 2},
		{"a gap ends the run", [][]uint64{{1, 2, 3}},
			Request{ISL: 1600, OSL: 1, HashIDs: []uint64{1, 7, 3, 10}}, 512, 1},
		{"a whole prompt in the cache still computes one token", [][]uint64{{1, 2, 3}},
			Request{ISL: 1536, OSL: 1, HashIDs: []uint64{1, 2, 3}}, 1535, 3},
		{"blocks of two earlier requests", [][]uint64{{1}, {1, 2}},
			Request{ISL: 1600, OSL: 1, HashIDs: []uint64{1, 2, 3}}, 1024, 2},
		{"the caller's CachedTokens when larger", [][]uint64{{1}},
			Request{ISL: 1600, OSL: 1, CachedTokens: 700, HashIDs: []uint64{1, 2}}, 700, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tim := &fixedTiming{PrefillFixed: 1, PrefillPerToken: 0.01, DecodeFixed: 1}
			e := newEngine(t, cachingConfig(RolePrefill, 1000), tim)
			for i, h := range tc.prior {
				require.NoError(t, e.Submit(Request{ID: uint64(100 + i), ISL: 512 * len(h), OSL: 1, HashIDs: h}))
				runAll(t, e, 0)
			}
			before := e.PrefixStats()
			pb, kv := prefillOf(t, e, tim, tc.req)
			require.Equal(t, PrefillBatch{NumRequests: 1, NewTokens: tc.req.ISL - tc.wantCached, CachedTokens: tc.wantCached}, pb)
			require.Equal(t, int64(tc.wantCached), kv, "FPM sum_prefill_kv_tokens counts the hit")
			st := e.PrefixStats()
			require.Equal(t, tc.wantBlocks, st.HitBlocks-before.HitBlocks)
			require.Equal(t, int64(len(tc.req.HashIDs)), st.LookupBlocks-before.LookupBlocks)
			require.Equal(t, before.Lookups+1, st.Lookups)
			require.Equal(t, int64(tc.req.ISL), st.PromptTokens-before.PromptTokens)
			require.Equal(t, int64(max(0, tc.wantCached-tc.req.CachedTokens)), st.HitTokens-before.HitTokens)
			require.Equal(t, len(tc.req.HashIDs), e.CachedBlocks(tc.req.HashIDs), "the prompt's blocks are cached after it ran")
		})
	}
}

func TestPrefixCacheOffOrDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"prefill, cache off", func() Config { c := cachingConfig(RolePrefill, 1000); c.EnablePrefixCaching = false; return c }()},
		{"decode, cache on", cachingConfig(RoleDecode, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tim := &fixedTiming{PrefillFixed: 1, PrefillPerToken: 0.01, DecodeFixed: 1}
			e := newEngine(t, tc.cfg, tim)
			hashes := []uint64{1, 2, 3}
			for i := range 2 {
				require.NoError(t, e.Submit(Request{ID: uint64(i), ISL: 1536, OSL: 2, HashIDs: hashes}))
				runAll(t, e, 0)
			}
			require.Equal(t, 0, e.CachedBlocks(hashes))
			require.Equal(t, PrefixStats{}, e.PrefixStats())
			for _, p := range tim.prefills {
				require.Zero(t, p.CachedTokens)
			}
		})
	}
}

func TestPrefixCacheEviction(t *testing.T) {
	// 64 KV blocks of 64 tokens: 8 hash blocks of 512 tokens.
	tim := &fixedTiming{PrefillFixed: 1, PrefillPerToken: 0.01, DecodeFixed: 1}
	e := newEngine(t, cachingConfig(RolePrefill, 64), tim)
	run := func(id uint64, hashes ...uint64) {
		require.NoError(t, e.Submit(Request{ID: id, ISL: 512 * len(hashes), OSL: 1, HashIDs: hashes}))
		runAll(t, e, 0)
	}
	run(1, 1, 2, 3, 4)
	run(2, 5, 6, 7, 8)
	require.Equal(t, 8, e.PrefixStats().Inactive, "the cache fills the free memory")
	run(3, 9, 10) // needs 16 KV blocks: the two least recently used go
	require.Equal(t, 2, e.CachedBlocks([]uint64{1, 2, 3, 4}), "request 1's last blocks were the least recently used")
	require.Equal(t, 4, e.CachedBlocks([]uint64{5, 6, 7, 8}))
	require.Equal(t, 2, e.CachedBlocks([]uint64{9, 10}))
	st := e.PrefixStats()
	require.Equal(t, int64(2), st.Evictions)
	require.Equal(t, 8, st.Inactive)
	require.LessOrEqual(t, st.Inactive*8, e.cfg.NumGPUBlocks-e.Load().KVBlocksUsed)
}

func TestPrefixCacheActiveNeverEvicted(t *testing.T) {
	// An aggregated engine of 40 KV blocks (5 hash blocks). Request 1 runs long with its
	// two blocks active while other prompts need all the remaining memory.
	tim := &fixedTiming{PrefillFixed: 1, PrefillPerToken: 0.01, DecodeFixed: 1}
	e := newEngine(t, cachingConfig(RoleAggregated, 40), tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 1024, OSL: 50, HashIDs: []uint64{1, 2}}))
	now := 0.0
	step := func() {
		p, ok := e.Step(now)
		require.True(t, ok)
		now = p.End()
	}
	step() // request 1 prefilled: its blocks are cached and active
	require.Equal(t, 2, e.CachedBlocks([]uint64{1, 2}))
	for id := uint64(2); id < 6; id++ {
		require.NoError(t, e.Submit(Request{ID: id, ISL: 1000, OSL: 1, HashIDs: []uint64{10 * id, 10*id + 1}}))
		for e.Load().Running+e.Load().Waiting > 1 {
			step()
		}
		require.Equal(t, 2, e.CachedBlocks([]uint64{1, 2}), "request %d: the running request's blocks stay", id)
		st := e.PrefixStats()
		require.LessOrEqual(t, st.Inactive*8, 40-e.Load().KVBlocksUsed, "inactive blocks fit in the free memory")
	}
	require.Positive(t, e.PrefixStats().Evictions, "older inactive prompts were evicted instead")
	require.Equal(t, 0, e.CachedBlocks([]uint64{20, 21}), "the first short prompt was evicted")
	runAll(t, e, now)
	require.Equal(t, 2, e.CachedBlocks([]uint64{1, 2}), "released, request 1's blocks are the most recent inactive ones")
}

func TestPrefixCacheClone(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 1, PrefillPerToken: 0.01, DecodeFixed: 1}
	e := newEngine(t, cachingConfig(RolePrefill, 1000), tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 1024, OSL: 1, HashIDs: []uint64{1, 2}}))
	runAll(t, e, 0)
	c := e.Clone()
	require.NoError(t, c.Submit(Request{ID: 2, ISL: 1024, OSL: 1, HashIDs: []uint64{3, 4}}))
	runAll(t, c, 0)
	require.Equal(t, 2, c.CachedBlocks([]uint64{3, 4}))
	require.Equal(t, 0, e.CachedBlocks([]uint64{3, 4}), "the original's cache is unchanged")
	require.Equal(t, int64(1), e.PrefixStats().Lookups)
}

func TestSubmitHashBound(t *testing.T) {
	e := newEngine(t, cachingConfig(RolePrefill, 1000), &fixedTiming{})
	err := e.Submit(Request{ID: 1, ISL: 1024, OSL: 1, HashIDs: []uint64{1, 2, 3, 4}})
	require.ErrorIs(t, err, ErrInvalidRequest)
	require.ErrorContains(t, err, "4 hash ids for isl 1024: at most 3")
	require.True(t, e.Idle())
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 1024, OSL: 1, HashIDs: []uint64{1, 2, 3}}))

	cfg := cachingConfig(RolePrefill, 1000)
	cfg.EnablePrefixCaching = false
	plain := newEngine(t, cfg, &fixedTiming{})
	require.NoError(t, plain.Submit(Request{ID: 1, ISL: 1024, OSL: 1, HashIDs: []uint64{1, 2, 3, 4}}),
		"without a cache the ids are not read, whatever their block size")
}
