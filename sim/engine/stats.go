package engine

import (
	"math"
	"math/bits"
)

// welford accumulates a population variance with Welford's algorithm (as Dynamo's FPM
// publisher does for the scheduled requests). The pass's prompt lengths keep it: the ahead
// policy reads their variance (promptSpread), and its rounding is what the benchmarks were
// measured with.
type welford struct {
	n        int64
	mean, m2 float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

// variance is the population variance (0 for fewer than two values).
func (w *welford) variance() float64 {
	if w.n < 2 {
		return 0
	}
	return math.Max(0, w.m2/float64(w.n))
}

// moments keeps the count, sum and sum of squares of a multiset of non-negative integers
// with O(1) insertion and removal: for the queued-request statistics (the waiting queue can
// hold thousands of requests, and walking it every pass would make a pass cost O(queue)
// instead of O(batch)) and for the pass's decode contexts (no decision reads their variance;
// Welford's update divides once per request, and a pass holds a whole decode batch).
// Integer sums make removal exact, and the variance is computed from them exactly in
// 128-bit arithmetic and then rounded (once while n·Σx² < 2⁵³ and n < 2²⁶), so it does not
// suffer the cancellation of the floating-point sum-of-squares formula.
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
