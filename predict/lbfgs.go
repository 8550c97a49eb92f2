package predict

import "math"

// lbfgs is a small, allocation-free (after construction), deterministic L-BFGS minimiser for
// the few-parameter ARMA fits: two-loop recursion with memory lbfgsMemory, a backtracking
// Armijo line search with quadratic interpolation, and scipy's fmin_l_bfgs_b stopping rules
// (max |gradient| <= pgtol, or relative decrease <= factr*eps, or maxIter iterations).
//
// gonum/optimize's LBFGS does the same mathematics but runs every evaluation through
// goroutines and channels, which costs more than the ARMA objective itself here.
type lbfgs struct {
	n        int // capacity: the largest problem dimension
	s, y     [lbfgsMemory][]float64
	rho      [lbfgsMemory]float64
	alpha    [lbfgsMemory]float64
	head, k  int // ring buffer of the last k pairs, next slot head
	g, d, xt []float64
	gt       []float64
}

const (
	lbfgsMemory = 10
	lbfgsPGTol  = 1e-5                        // scipy's pgtol default
	lbfgsFTol   = 1e7 * 2.220446049250313e-16 // scipy's factr (1e7) times machine epsilon
	armijoC1    = 1e-4
	maxLineStep = 30
)

func newLBFGS(n int) *lbfgs {
	l := &lbfgs{n: n}
	for i := range lbfgsMemory {
		l.s[i] = make([]float64, n)
		l.y[i] = make([]float64, n)
	}
	l.g = make([]float64, n)
	l.d = make([]float64, n)
	l.xt = make([]float64, n)
	l.gt = make([]float64, n)
	return l
}

// minimize minimises f from x (updated in place) and returns the final value. f writes the
// gradient into g and returns the value; a non-finite value marks an infeasible point.
// ok is false when the starting point itself is not finite.
func (l *lbfgs) minimize(f func(x, g []float64) float64, x []float64, maxIter int) (fx float64, ok bool) {
	n := len(x)
	if n > l.n {
		panic("predict: lbfgs problem larger than its workspace")
	}
	for i := range lbfgsMemory {
		l.s[i], l.y[i] = l.s[i][:n], l.y[i][:n]
	}
	l.g, l.d, l.xt, l.gt = l.g[:n], l.d[:n], l.xt[:n], l.gt[:n]
	l.head, l.k = 0, 0
	fx = f(x, l.g)
	if !finite(fx) {
		return fx, false
	}
	for iter := 0; iter < maxIter; iter++ {
		if maxAbs(l.g) <= lbfgsPGTol {
			break
		}
		// Direction d = -H g by the two-loop recursion.
		copy(l.d, l.g)
		for j := 0; j < l.k; j++ {
			i := (l.head - 1 - j + 2*lbfgsMemory) % lbfgsMemory
			l.alpha[i] = l.rho[i] * dot(l.s[i], l.d)
			axpy(-l.alpha[i], l.y[i], l.d)
		}
		if l.k > 0 {
			i := (l.head - 1 + lbfgsMemory) % lbfgsMemory
			scale(dot(l.s[i], l.y[i])/dot(l.y[i], l.y[i]), l.d)
		}
		for j := l.k - 1; j >= 0; j-- {
			i := (l.head - 1 - j + 2*lbfgsMemory) % lbfgsMemory
			b := l.rho[i] * dot(l.y[i], l.d)
			axpy(l.alpha[i]-b, l.s[i], l.d)
		}
		scale(-1, l.d)
		dg := dot(l.d, l.g)
		if !(dg < 0) { // not a descent direction: restart from steepest descent
			l.k = 0
			copy(l.d, l.g)
			scale(-1, l.d)
			dg = dot(l.d, l.g)
		}
		step := 1.0
		if l.k == 0 {
			step = math.Min(1, 1/math.Sqrt(-dg)) // first step of length at most 1
		}
		var ft float64
		accepted := false
		for range maxLineStep {
			for i := range n {
				l.xt[i] = x[i] + step*l.d[i]
			}
			ft = f(l.xt, l.gt)
			if finite(ft) && ft <= fx+armijoC1*step*dg {
				accepted = true
				break
			}
			next := 0.5 * step
			if finite(ft) { // minimiser of the quadratic through f(0), f'(0), f(step)
				den := 2 * (ft - fx - dg*step)
				if den > 0 {
					next = math.Min(0.5*step, math.Max(0.1*step, -dg*step*step/den))
				}
			}
			step = next
		}
		if !accepted {
			break
		}
		// Store the pair (s, y) when the curvature is positive.
		sy, yy := 0.0, 0.0
		s, y := l.s[l.head], l.y[l.head]
		for i := range n {
			s[i] = l.xt[i] - x[i]
			y[i] = l.gt[i] - l.g[i]
			sy += s[i] * y[i]
			yy += y[i] * y[i]
		}
		if sy > 1e-10*yy && sy > 0 {
			l.rho[l.head] = 1 / sy
			l.head = (l.head + 1) % lbfgsMemory
			l.k = min(l.k+1, lbfgsMemory)
		}
		rel := (fx - ft) / math.Max(math.Max(math.Abs(fx), math.Abs(ft)), 1)
		copy(x, l.xt)
		copy(l.g, l.gt)
		fx = ft
		if rel <= lbfgsFTol {
			break
		}
	}
	return fx, true
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(a float64, x, y []float64) {
	for i := range x {
		y[i] += a * x[i]
	}
}

func scale(a float64, x []float64) {
	for i := range x {
		x[i] *= a
	}
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
