// Package router chooses the engine a request goes to, as Dynamo's frontend router modes
// do: round robin, least loaded, or KV-aware (Dynamo's KV router cost: the prompt tokens
// the engine would have to compute, its cached prefix taken off, plus the KV tokens it is
// already busy with; the lowest wins). The offline replay (sim/replay) and the live frontend
// (sim/frontend) share it, so both route alike.
package router

import (
	"fmt"
	"strings"
)

// Mode is a routing mode.
type Mode string

// The routing modes.
const (
	// LeastLoaded picks the engine with the fewest outstanding requests (ties: the first
	// candidate). The default.
	LeastLoaded Mode = "least_loaded"
	// RoundRobin cycles through the candidates in order.
	RoundRobin Mode = "round_robin"
	// KV is Dynamo's KV router (overlap score weight 1, temperature 0): the engine with the
	// lowest cost ActiveTokens − CachedBlocks × BlockTokens, i.e. the most cached leading
	// blocks of the request's prompt among equally busy engines, and a less busy engine
	// when that outweighs its smaller hit (without the load term, every request sharing a
	// popular first block would pile onto one engine). Ties go to the fewest requests, then
	// the first candidate.
	KV Mode = "kv"
)

// Modes lists the modes, for flag help and errors.
var Modes = []Mode{LeastLoaded, RoundRobin, KV}

// ParseMode reads a mode name; "" is LeastLoaded, and Dynamo's spellings "round-robin" and
// "least-loaded" are accepted.
func ParseMode(s string) (Mode, error) {
	m := Mode(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	switch m {
	case "":
		return LeastLoaded, nil
	case LeastLoaded, RoundRobin, KV:
		return m, nil
	}
	return "", fmt.Errorf("router mode %q: want %s, %s or %s", s, LeastLoaded, RoundRobin, KV)
}

// Candidate is one routable engine as the router sees it.
type Candidate struct {
	// Load is the engine's outstanding requests: running, waiting, and finishing in a pass
	// still in flight (the replay), or in flight from routing to response (the live frontend).
	Load int
	// ActiveTokens is the KV router's measure of how busy the engine is: the tokens of the
	// requests it holds (their KV and the prompt tokens still to compute).
	ActiveTokens int
	// CachedBlocks is the number of the request's leading prompt blocks the engine holds
	// in its prefix cache (0 when unknown or off).
	CachedBlocks int
}

// Router picks among candidates. The zero value is a LeastLoaded router; a Router is a
// value (copying it copies its round-robin position) and not safe for concurrent use.
type Router struct {
	mode Mode
	next uint64
}

// New returns a router of mode (see ParseMode for "").
func New(mode Mode) (Router, error) {
	m, err := ParseMode(string(mode))
	if err != nil {
		return Router{}, err
	}
	return Router{mode: m}, nil
}

// Mode is the router's mode.
func (r *Router) Mode() Mode {
	if r.mode == "" {
		return LeastLoaded
	}
	return r.mode
}

// Pick returns the index of the chosen candidate, or −1 when there is none.
func (r *Router) Pick(cands []Candidate) int {
	if len(cands) == 0 {
		return -1
	}
	switch r.Mode() {
	case RoundRobin:
		i := int(r.next % uint64(len(cands)))
		r.next++
		return i
	case KV:
		cost := func(c Candidate) int { return c.ActiveTokens - c.CachedBlocks*BlockTokens }
		best := 0
		for i, c := range cands[1:] {
			b := cands[best]
			if cost(c) < cost(b) || (cost(c) == cost(b) && c.Load < b.Load) {
				best = i + 1
			}
		}
		return best
	}
	best := 0
	for i, c := range cands[1:] {
		if c.Load < cands[best].Load {
			best = i + 1
		}
	}
	return best
}

// BlockTokens is the number of prompt tokens a cached block stands for in the KV router's
// cost: the traces' 512-token hash blocks.
const BlockTokens = 512

// HitRate is the KV hit rate of one routed request, as Dynamo's router observes it in
// dynamo_component_router_kv_hit_rate: the chosen engine's cached leading blocks over the
// request's blocks (0 for a request without blocks).
func HitRate(cachedBlocks, requestBlocks int) float64 {
	if requestBlocks <= 0 {
		return 0
	}
	return float64(min(cachedBlocks, requestBlocks)) / float64(requestBlocks)
}
