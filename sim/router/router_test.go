package router

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPick(t *testing.T) {
	tests := []struct {
		name  string
		mode  Mode
		cands []Candidate
		want  []int // successive picks over the same candidates
	}{
		{"none", KV, nil, []int{-1}},
		{"least loaded", LeastLoaded, []Candidate{{Load: 3}, {Load: 1}, {Load: 1}}, []int{1, 1}},
		{"least loaded ignores the cache", LeastLoaded, []Candidate{{Load: 2, CachedBlocks: 9}, {Load: 1}}, []int{1}},
		{"zero value is least loaded", "", []Candidate{{Load: 3}, {Load: 0}}, []int{1}},
		{"round robin cycles", RoundRobin, []Candidate{{Load: 9}, {Load: 0}, {Load: 5}}, []int{0, 1, 2, 0, 1}},
		{"kv: most cached blocks among equally busy engines", KV,
			[]Candidate{{Load: 0, CachedBlocks: 1}, {Load: 7, CachedBlocks: 4}, {Load: 1, CachedBlocks: 3}}, []int{1, 1}},
		{"kv: equal cost ties by load", KV,
			[]Candidate{{Load: 5, CachedBlocks: 2}, {Load: 2, CachedBlocks: 2}, {Load: 3, CachedBlocks: 2}}, []int{1}},
		{"kv: ties by load then first", KV, []Candidate{{Load: 2, CachedBlocks: 2}, {Load: 2, CachedBlocks: 2}}, []int{0}},
		{"kv: a hit outweighs less work", KV,
			[]Candidate{{ActiveTokens: 1000}, {ActiveTokens: 1400, CachedBlocks: 1}}, []int{1}},
		{"kv: a busy engine loses its hit", KV,
			[]Candidate{{ActiveTokens: 1000, Load: 9}, {ActiveTokens: 9000, CachedBlocks: 10, Load: 1}}, []int{0}},
		{"kv: cost ties go to fewer requests", KV,
			[]Candidate{{ActiveTokens: 1512, CachedBlocks: 1, Load: 3}, {ActiveTokens: 1000, Load: 2}}, []int{1}},
		{"kv without hits is the least busy", KV, []Candidate{{Load: 1, ActiveTokens: 4000}, {Load: 3, ActiveTokens: 2000}}, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Router{mode: tc.mode}
			var got []int
			for range tc.want {
				got = append(got, r.Pick(tc.cands))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRoundRobinCopy(t *testing.T) {
	r, err := New(RoundRobin)
	require.NoError(t, err)
	cands := make([]Candidate, 3)
	require.Equal(t, 0, r.Pick(cands))
	c := r
	require.Equal(t, 1, c.Pick(cands))
	require.Equal(t, 1, r.Pick(cands), "a copy keeps its own position")
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  string
	}{
		{"", LeastLoaded, ""},
		{"kv", KV, ""},
		{"round-robin", RoundRobin, ""},
		{"round_robin", RoundRobin, ""},
		{"least-loaded", LeastLoaded, ""},
		{"random", "", `router mode "random": want least_loaded, round_robin or kv`},
	} {
		got, err := ParseMode(tc.in)
		if tc.err != "" {
			require.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err := New("bogus")
	require.Error(t, err)
}

func TestHitRate(t *testing.T) {
	for _, tc := range []struct {
		cached, blocks int
		want           float64
	}{
		{0, 0, 0}, {0, 4, 0}, {1, 4, 0.25}, {4, 4, 1}, {5, 4, 1},
	} {
		require.Equal(t, tc.want, HitRate(tc.cached, tc.blocks), "%d/%d", tc.cached, tc.blocks)
	}
}
