package engine

import "math/bits"

// moments keeps the count, sum and sum of squares of a multiset of non-negative integers
// with O(1) insertion and removal: for the FPM's length variances (Dynamo's publisher keeps
// Welford's running mean for the scheduled ones; exact sums give the same variance without a
// division per request, which cost 10–17% of a replay's time) and for the queued-request
// statistics (the waiting queue can hold thousands of requests, and walking it every pass
// would make a pass cost O(queue) instead of O(batch)). Integer sums make removal exact, and
// the variance is computed from them exactly in 128-bit arithmetic before the single final
// rounding, so it does not suffer the cancellation of the floating-point sum-of-squares
// formula.
type moments struct {
	n, sum, sumSq uint64
}

func (m *moments) add(x int) {
	v := uint64(x)
	m.n++
	m.sum += v
	m.sumSq += v * v
}

func (m *moments) remove(x int) {
	v := uint64(x)
	m.n--
	m.sum -= v
	m.sumSq -= v * v
}

// variance is the population variance (n·Σx² − (Σx)²) / n².
func (m *moments) variance() float64 {
	if m.n < 2 {
		return 0
	}
	aHi, aLo := bits.Mul64(m.n, m.sumSq)
	bHi, bLo := bits.Mul64(m.sum, m.sum)
	lo, borrow := bits.Sub64(aLo, bLo, 0)
	hi, _ := bits.Sub64(aHi, bHi, borrow)
	num := float64(hi)*0x1p64 + float64(lo)
	nf := float64(m.n)
	return num / (nf * nf)
}
