package perf

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFPMReservoir(t *testing.T) {
	tests := []struct {
		name     string
		offered  int
		wantKept int
	}{
		{"empty", 0, 0},
		{"fewer than the size: all kept", 10, 10},
		{"exactly the size", FPMReservoirSize, FPMReservoirSize},
		{"more: a sample of the size", 1000, FPMReservoirSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r FPMReservoir
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range tc.offered {
				f := FPM{WallTime: 0.01, CounterID: int64(i)}
				r.Add(&f, rng)
			}
			require.Equal(t, uint64(tc.offered), r.Seen())
			got := r.Take()
			require.Len(t, got, tc.wantKept)
			for i := 1; i < len(got); i++ {
				require.Less(t, got[i-1].CounterID, got[i].CounterID, "arrival order")
			}
			if tc.offered > 2*FPMReservoirSize {
				require.Greater(t, got[len(got)-1].CounterID, int64(tc.offered/2), "later arrivals replace earlier ones")
			}
			require.Zero(t, r.Seen(), "Take empties it")
			require.Nil(t, r.Take())
		})
	}
}
