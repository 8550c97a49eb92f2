package engine

import "maps"

// PrefixStats are an engine's prefix-cache counters since it was built.
type PrefixStats struct {
	// Lookups counts the requests admitted with hash ids while the cache is on (a request
	// recomputing after preemption is looked up again).
	Lookups int64 `json:"lookups"`
	// LookupBlocks and HitBlocks are those requests' hash blocks and the leading ones found
	// in the cache.
	LookupBlocks int64 `json:"lookup_blocks"`
	HitBlocks    int64 `json:"hit_blocks"`
	// PromptTokens and HitTokens are their prompt tokens and the ones skipped thanks to a hit
	// (at most ISL − 1 a request: one token is always computed).
	PromptTokens int64 `json:"prompt_tokens"`
	HitTokens    int64 `json:"hit_tokens"`
	// Evictions counts the inactive blocks evicted to make room.
	Evictions int64 `json:"evictions"`
	// Blocks is the number of hash blocks the cache holds now; Inactive those no running
	// request references (evictable).
	Blocks, Inactive int `json:"-"`
}

// HitRate is HitBlocks/LookupBlocks (0 without lookups): the fraction of the looked-up
// blocks found in the cache.
func (s PrefixStats) HitRate() float64 {
	if s.LookupBlocks == 0 {
		return 0
	}
	return float64(s.HitBlocks) / float64(s.LookupBlocks)
}

// prefixCache is an engine's prefix cache: prompt blocks of Config.HashBlockTokens tokens
// keyed by the request's hash ids, each referenced by the running requests that use it.
// A block with references is active; a block without is inactive, kept for reuse in a
// least-recently-used list and evicted, least recently used first, when its memory is
// needed. The engine charges an active block to the requests holding it (their own KV
// blocks) and an inactive one to the free memory: the cache never holds more inactive
// blocks than the free KV blocks can take, so it never makes a request wait or be
// preempted. Entries live in a slice linked by index, so a clone is a few copies.
type prefixCache struct {
	cost    int              // engine KV blocks one hash block occupies
	index   map[uint64]int32 // hash → entry
	entries []cacheEntry
	spare   []int32 // unused entry slots
	// head and tail of the inactive list: head is the least recently used (−1: empty).
	head, tail int32
	inactive   int
	stats      PrefixStats
}

type cacheEntry struct {
	hash       uint64
	refs       int32
	prev, next int32 // inactive list links (−1: none)
}

func newPrefixCache(cost int) *prefixCache {
	return &prefixCache{cost: cost, index: map[uint64]int32{}, head: -1, tail: -1}
}

func (c *prefixCache) clone() *prefixCache {
	cp := *c
	cp.index = maps.Clone(c.index)
	cp.entries = append([]cacheEntry(nil), c.entries...)
	cp.spare = append([]int32(nil), c.spare...)
	return &cp
}

// match is the number of leading hashes present in the cache.
func (c *prefixCache) match(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := c.index[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// acquire takes a reference on every hash, adding the missing ones; an inactive block
// becomes active.
func (c *prefixCache) acquire(hashes []uint64) {
	for _, h := range hashes {
		i, ok := c.index[h]
		if !ok {
			if n := len(c.spare); n > 0 {
				i = c.spare[n-1]
				c.spare = c.spare[:n-1]
			} else {
				i = int32(len(c.entries))
				c.entries = append(c.entries, cacheEntry{})
			}
			c.entries[i] = cacheEntry{hash: h, prev: -1, next: -1}
			c.index[h] = i
		}
		e := &c.entries[i]
		if e.refs == 0 && ok {
			c.unlink(i)
		}
		e.refs++
	}
}

// release drops a reference on every hash, last first: a block left without references
// becomes the most recently used inactive block, so a request's first blocks (the prefix
// others share) are evicted after its last ones.
func (c *prefixCache) release(hashes []uint64) {
	for k := len(hashes) - 1; k >= 0; k-- {
		i := c.index[hashes[k]]
		e := &c.entries[i]
		e.refs--
		if e.refs == 0 {
			c.pushTail(i)
		}
	}
}

// evictOne removes the least recently used inactive block; false when there is none.
func (c *prefixCache) evictOne() bool {
	i := c.head
	if i < 0 {
		return false
	}
	c.unlink(i)
	delete(c.index, c.entries[i].hash)
	c.entries[i] = cacheEntry{}
	c.spare = append(c.spare, i)
	c.stats.Evictions++
	return true
}

func (c *prefixCache) pushTail(i int32) {
	e := &c.entries[i]
	e.prev, e.next = c.tail, -1
	if c.tail >= 0 {
		c.entries[c.tail].next = i
	} else {
		c.head = i
	}
	c.tail = i
	c.inactive++
}

func (c *prefixCache) unlink(i int32) {
	e := &c.entries[i]
	if e.prev >= 0 {
		c.entries[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.entries[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = -1, -1
	c.inactive--
}

// inactiveHashes lists the inactive blocks from least to most recently used (for tests).
func (c *prefixCache) inactiveHashes() []uint64 {
	var out []uint64
	for i := c.head; i >= 0; i = c.entries[i].next {
		out = append(out, c.entries[i].hash)
	}
	return out
}

// take allocates need KV blocks (the caller checked that they are free), evicting inactive
// cached blocks whose memory they reuse.
func (e *Engine) take(need int) {
	e.freeBlocks -= need
	e.usedBlocks += need
	if e.cache != nil {
		e.trim()
	}
}

// trim evicts least recently used inactive blocks until the free KV blocks hold the rest.
func (e *Engine) trim() {
	if e.cache == nil {
		return
	}
	for e.cache.inactive*e.cache.cost > e.freeBlocks && e.cache.evictOne() {
	}
}

// lookup is the prefix hit of a waiting request about to be admitted: the number of its
// leading hash blocks in the cache and the computed tokens it then starts with (the hit's
// tokens, at most ISL − 1, or the caller's CachedTokens when more).
func (e *Engine) lookup(s *seq) (blocks, computed int) {
	p := s.pfx
	if p == nil || e.cache == nil || s.generated > 0 || p.held > 0 {
		return 0, s.computed
	}
	blocks = e.cache.match(p.hashes)
	return blocks, max(s.computed, min(blocks*e.cfg.HashBlockTokens, s.isl-1))
}

// admitted records the prefix hit of a request just admitted and takes its references.
func (e *Engine) admitted(s *seq, blocks, computed int) {
	p := s.pfx
	if p == nil || e.cache == nil || s.generated > 0 || p.held > 0 {
		return
	}
	st := &e.cache.stats
	st.Lookups++
	st.LookupBlocks += int64(len(p.hashes))
	st.HitBlocks += int64(blocks)
	st.PromptTokens += int64(s.isl)
	st.HitTokens += int64(computed - s.computed)
	s.computed = computed
	e.cache.acquire(p.hashes[:blocks])
	p.held = blocks
}

// prefilled caches the rest of a request's prompt blocks once its prompt is computed.
func (e *Engine) prefilled(s *seq) {
	p := s.pfx
	if p == nil || e.cache == nil || p.held >= len(p.hashes) {
		return
	}
	e.cache.acquire(p.hashes[p.held:])
	p.held = len(p.hashes)
}

// unheld drops a request's references (it finished or was preempted): its blocks become
// inactive, evictable.
func (e *Engine) unheld(s *seq) {
	p := s.pfx
	if p == nil || e.cache == nil || p.held == 0 {
		return
	}
	e.cache.release(p.hashes[:p.held])
	p.held = 0
	e.trim()
}

// CachedBlocks is the number of leading hashes (prompt blocks of Config.HashBlockTokens
// tokens) found in the engine's prefix cache, active or inactive: what a KV-aware router
// scores the engine with. 0 when the cache is off.
func (e *Engine) CachedBlocks(hashes []uint64) int {
	if e.cache == nil {
		return 0
	}
	return e.cache.match(hashes)
}

// PrefixStats returns the prefix-cache counters (zero when the cache is off).
func (e *Engine) PrefixStats() PrefixStats {
	if e.cache == nil {
		return PrefixStats{}
	}
	st := e.cache.stats
	st.Blocks, st.Inactive = len(e.cache.index), e.cache.inactive
	return st
}
