package perf

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// FPMReservoirSize is how many regression samples an FPMReservoir keeps between two takes.
const FPMReservoirSize = 64

// FPMReservoir is a fixed-size uniform sample (Algorithm R) of the non-heartbeat FPMs of one
// role seen since the last Take: what the live worker (observe.FPMStore) and the offline
// replay (sim/replay) hand the perf models as extra regression samples each tick. A
// reservoir, not a stride, so engines served round-robin are not aliased away. The zero value
// is empty and ready; it is not safe for concurrent use.
type FPMReservoir struct {
	buf  [FPMReservoirSize]reservoirSample
	n    int
	seen uint64
	seq  uint64
}

type reservoirSample struct {
	seq uint64
	fpm FPM
}

// Add offers f to the reservoir, drawing from rng once it is full. Heartbeats are the
// caller's to leave out.
func (s *FPMReservoir) Add(f *FPM, rng *rand.Rand) {
	s.seen++
	s.seq++
	if s.n < len(s.buf) {
		s.buf[s.n] = reservoirSample{seq: s.seq, fpm: *f}
		s.n++
		return
	}
	if j := rng.Uint64N(s.seen); j < uint64(len(s.buf)) {
		s.buf[j] = reservoirSample{seq: s.seq, fpm: *f}
	}
}

// Seen is the number of FPMs offered since the last Take.
func (s *FPMReservoir) Seen() uint64 { return s.seen }

// Take returns the kept samples in arrival order (nil when none) and empties the reservoir.
func (s *FPMReservoir) Take() []FPM {
	if s.n == 0 {
		s.seen = 0
		return nil
	}
	kept := slices.Clone(s.buf[:s.n])
	slices.SortFunc(kept, func(a, b reservoirSample) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]FPM, len(kept))
	for i := range kept {
		out[i] = kept[i].fpm
	}
	s.n, s.seen = 0, 0
	return out
}
