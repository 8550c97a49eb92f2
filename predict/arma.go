package predict

import (
	"errors"
	"math"
)

// maxARMA is the largest AR or MA order the search can reach (pmdarima max_p = max_q = 5);
// maxState is the dimension of the Harvey state-space form, max(p, q+1).
const (
	maxARMA  = 5
	maxState = maxARMA + 1
)

// rootLimit is pmdarima's near-unit-root threshold: a model with an AR or MA inverse root of
// modulus above 1 - 1e-2 scores AIC = +Inf.
const rootLimit = 1 - 1e-2

// constrainStationary is statsmodels' constrain_stationary_univariate (Monahan 1984 / Jones
// 1980): unconstrained reals -> partial autocorrelations r = x/sqrt(1+x²) in (-1, 1) ->
// Durbin-Levinson recursion -> coefficients of a stationary AR polynomial
// 1 - out[0] L - ... - out[n-1] L^n. When jac is not nil it receives the Jacobian,
// jac[i*n+j] = d out[i] / d x[j].
func constrainStationary(x, out, jac []float64) {
	n := len(x)
	if n == 0 {
		return
	}
	var y, yp [maxARMA]float64
	var dy, dyp [maxARMA][maxARMA]float64 // dy[i][j] = d y[i] / d x[j]
	for k := range n {
		r := x[k] / math.Sqrt(1+x[k]*x[k])
		dr := math.Pow(1+x[k]*x[k], -1.5)
		yp, dyp = y, dy
		for i := range k {
			y[i] = yp[i] + r*yp[k-i-1]
			if jac != nil {
				for j := 0; j <= k; j++ {
					dy[i][j] = dyp[i][j] + r*dyp[k-i-1][j]
				}
				dy[i][k] += dr * yp[k-i-1]
			}
		}
		y[k] = r
		if jac != nil {
			for j := range k {
				dy[k][j] = 0
			}
			dy[k][k] = dr
		}
	}
	for i := range n {
		out[i] = -y[i]
		if jac != nil {
			for j := range n {
				jac[i*n+j] = -dy[i][j]
			}
		}
	}
}

// unconstrainStationary inverts constrainStationary (statsmodels'
// unconstrain_stationary_univariate). ok is false when coef is not strictly stationary.
func unconstrainStationary(coef, x []float64) (ok bool) {
	n := len(coef)
	var y, yn [maxARMA]float64
	for i := range n {
		y[i] = -coef[i]
	}
	for k := n - 1; k >= 0; k-- {
		r := y[k]
		if !(math.Abs(r) < 1) {
			return false
		}
		x[k] = r / math.Sqrt(1-r*r)
		for i := range k {
			yn[i] = (y[i] - r*y[k-i-1]) / (1 - r*r)
		}
		copy(y[:k], yn[:k])
	}
	return true
}

// rootsInside reports whether every inverse root of 1 - a[0] z - ... - a[n-1] z^n has
// modulus below limit. Scaling a[i] by limit^-(i+1) divides the inverse roots by limit, and
// the Schur-Cohn step-down recursion (the inverse Durbin-Levinson) tells exactly whether
// all of them are inside the unit circle: every reflection coefficient must be in (-1, 1).
func rootsInside(a []float64, limit float64) bool {
	n := len(a)
	var y, yn [maxARMA]float64
	f := 1.0
	for i := range n {
		f /= limit
		y[i] = a[i] * f
	}
	for k := n - 1; k >= 0; k-- {
		r := y[k]
		if !(math.Abs(r) < 1) {
			return false
		}
		for i := range k {
			yn[i] = (y[i] + r*y[k-i-1]) / (1 - r*r)
		}
		copy(y[:k], yn[:k])
	}
	return true
}

// cssProblem is the conditional-sum-of-squares objective of an ARMA(p,q) model (with or
// without a mean) on a differenced series w, in the unconstrained parameters x = (AR, MA).
// Residuals e_t = z_t - Σ φ_i z_{t-i} - Σ θ_j e_{t-j}, z = w - μ, for t = p..m-1 with
// e_t = 0 before p; the mean μ is profiled out in closed form (e is affine in μ). The
// objective is ½·log(SSR), whose gradient is that of the concentrated per-observation
// negative log-likelihood.
type cssProblem struct {
	w         []float64
	p, q      int
	intercept bool

	phi, theta []float64
	jphi, jth  []float64
	a, b, e    []float64
	de         [][]float64 // d e_t / d (φ, θ)
	gc         []float64   // gradient in (φ, θ)
	mu         float64
}

func newCSSProblem(m int) *cssProblem {
	c := &cssProblem{
		phi: make([]float64, maxARMA), theta: make([]float64, maxARMA),
		jphi: make([]float64, maxARMA*maxARMA), jth: make([]float64, maxARMA*maxARMA),
		a: make([]float64, m), b: make([]float64, m), e: make([]float64, m),
		gc: make([]float64, 2*maxARMA),
	}
	c.de = make([][]float64, 2*maxARMA)
	for i := range c.de {
		c.de[i] = make([]float64, m)
	}
	return c
}

func (c *cssProblem) reset(w []float64, p, q int, intercept bool) {
	c.w, c.p, c.q, c.intercept = w, p, q, intercept
}

// coefficients sets phi and theta (and their Jacobians) from x.
func (c *cssProblem) coefficients(x []float64) {
	p, q := c.p, c.q
	constrainStationary(x[:p], c.phi[:p], c.jphi[:p*p])
	constrainStationary(x[p:p+q], c.theta[:q], c.jth[:q*q])
	for j := range q {
		c.theta[j] = -c.theta[j]
	}
	for j := range q * q {
		c.jth[j] = -c.jth[j]
	}
}

// eval returns ½·log(SSR) at x and, when g is not nil, its gradient.
func (c *cssProblem) eval(x, g []float64) float64 {
	p, q, w := c.p, c.q, c.w
	m := len(w)
	c.coefficients(x)
	phi, theta := c.phi[:p], c.theta[:q]
	a, b, e := c.a, c.b, c.e
	for t := range m {
		if t < p {
			a[t], b[t] = 0, 0
			continue
		}
		at, bt := w[t], 1.0
		for i, f := range phi {
			at -= f * w[t-i-1]
			bt -= f
		}
		for j, th := range theta {
			if t-j-1 >= p {
				at -= th * a[t-j-1]
				bt -= th * b[t-j-1]
			}
		}
		a[t], b[t] = at, bt
	}
	mu := 0.0
	if c.intercept {
		sab, sbb := 0.0, 0.0
		for t := p; t < m; t++ {
			sab += a[t] * b[t]
			sbb += b[t] * b[t]
		}
		if sbb > 0 {
			mu = sab / sbb
		}
	}
	c.mu = mu
	ssr := 0.0
	for t := range m {
		e[t] = a[t] - mu*b[t]
		ssr += e[t] * e[t]
	}
	if !(ssr > 0) || math.IsInf(ssr, 0) {
		if g != nil {
			clear(g)
		}
		if ssr == 0 {
			return math.Inf(-1)
		}
		return math.NaN()
	}
	f := 0.5 * math.Log(ssr)
	if g == nil {
		return f
	}
	// d e_t / d φ_i = -(z_{t-i}) - Σ θ_j d e_{t-j} / d φ_i;
	// d e_t / d θ_j = -e_{t-j} - Σ θ_k d e_{t-k} / d θ_j.
	k := p + q
	for r := range k {
		de := c.de[r]
		sum := 0.0
		for t := range m {
			if t < p {
				de[t] = 0
				continue
			}
			var v float64
			if r < p {
				v = -(w[t-r-1] - mu)
			} else if s := t - (r - p) - 1; s >= p {
				v = -e[s]
			}
			for j, th := range theta {
				if t-j-1 >= p {
					v -= th * de[t-j-1]
				}
			}
			de[t] = v
			sum += e[t] * v
		}
		c.gc[r] = sum / ssr
	}
	// Chain rule through the constraining transforms.
	for j := range p {
		s := 0.0
		for i := range p {
			s += c.gc[i] * c.jphi[i*p+j]
		}
		g[j] = s
	}
	for j := range q {
		s := 0.0
		for i := range q {
			s += c.gc[p+i] * c.jth[i*q+j]
		}
		g[p+j] = s
	}
	return f
}

// stateSpace is the Harvey form of a zero-mean ARMA(p,q): α_{t+1} = T α_t + R ε_t, z_t = α_t[0],
// T the companion matrix with φ in its first column, R = (1, θ_1, ..., θ_{r-1}).
type stateSpace struct {
	r   int
	phi [maxState]float64
	rr  [maxState]float64
	p0  [maxState][maxState]float64
}

func newStateSpace(phi, theta []float64) (ss stateSpace, ok bool) {
	r := max(len(phi), len(theta)+1)
	ss.r = r
	copy(ss.phi[:], phi)
	ss.rr[0] = 1
	copy(ss.rr[1:], theta)
	// Stationary covariance P = T P T' + R R' by the doubling algorithm:
	// P_{k+1} = P_k + A_k P_k A_k', A_{k+1} = A_k², starting from P_0 = R R', A_0 = T.
	var a, tmp [maxState][maxState]float64
	for i := range r {
		a[i][0] = ss.phi[i]
		if i+1 < r {
			a[i][i+1] = 1
		}
		for j := range r {
			ss.p0[i][j] = ss.rr[i] * ss.rr[j]
		}
	}
	for range 64 {
		// ap = A P A'.
		for i := range r {
			for j := range r {
				s := 0.0
				for k := range r {
					s += a[i][k] * ss.p0[k][j]
				}
				tmp[i][j] = s
			}
		}
		change, size, total := 0.0, 0.0, 0.0
		for i := range r {
			for j := range r {
				s := 0.0
				for k := range r {
					s += tmp[i][k] * a[j][k]
				}
				ss.p0[i][j] += s
				change = maxAbsOf(change, s)
				size = maxAbsOf(size, ss.p0[i][j])
				total += ss.p0[i][j]
			}
		}
		if !finite(total) {
			return ss, false
		}
		if change <= 1e-15*size {
			return ss, true
		}
		for i := range r {
			for j := range r {
				s := 0.0
				for k := range r {
					s += a[i][k] * a[k][j]
				}
				tmp[i][j] = s
			}
		}
		a = tmp
	}
	return ss, false
}

// likelihood is the exact Gaussian likelihood of a differenced series under an ARMA model,
// with the mean (when there is one) and the innovation variance profiled out.
type likelihood struct {
	mu      float64 // GLS estimate of the mean (0 without intercept)
	sigma2  float64 // ML estimate of the innovation variance
	sumLogF float64 // Σ log F_t (F_t: innovation variances for unit σ²)
	predW   float64 // one-step prediction of the next w from the filter run on w
	predOne float64 // the same for the series of ones
}

// next is the one-step forecast of the next w value for the mean mu: the filter is linear,
// so the prediction for w - mu is predW - mu·predOne.
func (l likelihood) next(mu float64) float64 {
	return mu + (l.predW - mu*l.predOne)
}

// negLogLik is the concentrated negative log-likelihood per observation, without the
// constant ½(log 2π + 1).
func (l likelihood) negLogLik(m int) float64 {
	return 0.5*math.Log(l.sigma2) + 0.5*l.sumLogF/float64(m)
}

// aic is -2·llf + 2·nParams (statsmodels' definition; σ² counts as a parameter).
func (l likelihood) aic(m, nParams int) float64 {
	fm := float64(m)
	llf := -0.5*fm*(math.Log(2*math.Pi*l.sigma2)+1) - 0.5*l.sumLogF
	return -2*llf + 2*float64(nParams)
}

// filter runs the Kalman filter (unit innovation variance) over w. The filter is linear in
// its input, so w and a series of ones run through the same gains, and the mean is the GLS
// estimate Σ v·u/F / Σ u²/F (u: innovations of the ones). Once the covariance has
// converged, the gains are frozen (steady state): the result is exact to rounding.
func (ss *stateSpace) filter(w []float64, intercept bool) (likelihood, bool) {
	r := ss.r
	var xw, x1, k [maxState]float64
	p := ss.p0
	var svv, svu, suu, sumLogF float64
	steady := false
	var f, logF float64
	for _, wt := range w {
		if !steady {
			f = p[0][0]
			if !(f > 0) {
				return likelihood{}, false
			}
			logF = math.Log(f)
			for i := range r {
				k[i] = p[i][0] / f
			}
		}
		v := wt - xw[0]
		u := 1 - x1[0]
		svv += v * v / f
		svu += v * u / f
		suu += u * u / f
		sumLogF += logF
		// Update then predict both state means: x = T (x + k v).
		for i := range r {
			xw[i] += k[i] * v
			x1[i] += k[i] * u
		}
		w0, u0 := xw[0], x1[0]
		for i := range r {
			nw, nu := ss.phi[i]*w0, ss.phi[i]*u0
			if i+1 < r {
				nw += xw[i+1]
				nu += x1[i+1]
			}
			xw[i], x1[i] = nw, nu
		}
		if steady {
			continue
		}
		// P = T (P - k P[0,:]) T' + R R'.
		prev := p
		row0 := p[0]
		for i := range r {
			for j := range r {
				p[i][j] -= k[i] * row0[j]
			}
		}
		var np [maxState][maxState]float64
		p00 := p[0][0]
		change, size := 0.0, 0.0
		for i := range r {
			for j := i; j < r; j++ {
				s := ss.phi[i]*ss.phi[j]*p00 + ss.rr[i]*ss.rr[j]
				if j+1 < r {
					s += ss.phi[i] * p[0][j+1]
				}
				if i+1 < r {
					s += ss.phi[j] * p[i+1][0]
					if j+1 < r {
						s += p[i+1][j+1]
					}
				}
				np[i][j], np[j][i] = s, s
			}
		}
		for i := range r {
			for j := range r {
				change = maxAbsOf(change, np[i][j]-prev[i][j])
				size = maxAbsOf(size, np[i][j])
			}
		}
		steady = change <= 1e-13*size
		p = np
	}
	m := float64(len(w))
	l := likelihood{sumLogF: sumLogF}
	if intercept && suu > 0 {
		l.mu = svu / suu
	}
	// Σ (v - μu)²/F.
	l.sigma2 = (svv - 2*l.mu*svu + l.mu*l.mu*suu) / m
	if !(l.sigma2 > 0) {
		l.sigma2 = math.SmallestNonzeroFloat64 // a perfect fit: the best possible score
	}
	l.predW, l.predOne = xw[0], x1[0]
	ok := finite(l.sigma2) && finite(sumLogF) && finite(l.predW) && finite(l.predOne) && finite(l.mu)
	return l, ok
}

// armaFit is one fitted candidate of the stepwise search.
type armaFit struct {
	p, q      int
	intercept bool
	x         []float64 // unconstrained parameters
	mu        float64
	aic       float64 // +Inf when rejected by the root test
}

var errFitFailed = errors.New("fit failed")

// exactProblem is the exact Gaussian negative log-likelihood per observation of an ARMA(p,q)
// on w (mean and σ² profiled out), in the unconstrained parameters; its gradient is taken by
// forward differences.
type exactProblem struct {
	w         []float64
	p, q      int
	intercept bool
	xs        []float64
	phi       [maxARMA]float64
	theta     [maxARMA]float64
}

// likelihoodAt evaluates the exact likelihood at the unconstrained parameters x.
func (e *exactProblem) likelihoodAt(x []float64) (likelihood, bool) {
	p, q := e.p, e.q
	constrainStationary(x[:p], e.phi[:p], nil)
	constrainStationary(x[p:p+q], e.theta[:q], nil)
	for j := range q {
		e.theta[j] = -e.theta[j]
	}
	ss, ok := newStateSpace(e.phi[:p], e.theta[:q])
	if !ok {
		return likelihood{}, false
	}
	return ss.filter(e.w, e.intercept)
}

func (e *exactProblem) value(x []float64) float64 {
	l, ok := e.likelihoodAt(x)
	if !ok {
		return math.NaN()
	}
	return l.negLogLik(len(e.w))
}

func (e *exactProblem) eval(x, g []float64) float64 {
	f := e.value(x)
	if g == nil || !finite(f) {
		return f
	}
	xs := e.xs[:len(x)]
	copy(xs, x)
	for i := range x {
		h := 1e-7 * math.Max(1, math.Abs(x[i]))
		xs[i] = x[i] + h
		fi := e.value(xs)
		if !finite(fi) { // step out of the feasible region: difference backwards
			xs[i] = x[i] - h
			fi = e.value(xs)
			h = -h
		}
		xs[i] = x[i]
		g[i] = (fi - f) / h
		if !finite(g[i]) {
			g[i] = 0
		}
	}
	return f
}

// fitARMA fits ARMA(p,q) (with a mean when intercept) to the differenced series w and scores
// it with the exact Gaussian AIC. From start (zeros when nil) it runs up to cssIter L-BFGS
// iterations on the conditional sum of squares, then up to mlIter on the exact likelihood.
// When rootTest is true, a model with an inverse root of modulus above rootLimit scores +Inf.
func fitARMA(cs *cssProblem, opt *lbfgs, w []float64, p, q int, intercept bool, start []float64, cssIter, mlIter int, rootTest bool) (armaFit, error) {
	k := p + q
	nc := 0
	if intercept {
		nc = 1
	}
	m := len(w)
	// Residual degrees of freedom of the conditional fit must stay positive.
	if m-p <= k+nc {
		return armaFit{}, errFitFailed
	}
	x := make([]float64, k)
	if start != nil {
		copy(x, start)
	}
	if k > 0 && cssIter > 0 {
		cs.reset(w, p, q, intercept)
		if fx, ok := opt.minimize(cs.eval, x, cssIter); !ok || math.IsNaN(fx) {
			return armaFit{}, errFitFailed
		}
	}
	ex := &exactProblem{w: w, p: p, q: q, intercept: intercept, xs: make([]float64, k)}
	if k > 0 && mlIter > 0 {
		if _, ok := opt.minimize(ex.eval, x, mlIter); !ok {
			return armaFit{}, errFitFailed
		}
	}
	l, ok := ex.likelihoodAt(x)
	if !ok {
		return armaFit{}, errFitFailed
	}
	fit := armaFit{p: p, q: q, intercept: intercept, x: x, mu: l.mu, aic: l.aic(m, k+nc+1)}
	if rootTest {
		var neg [maxARMA]float64
		for j := range q {
			neg[j] = -ex.theta[j]
		}
		if !rootsInside(ex.phi[:p], rootLimit) || !rootsInside(neg[:q], rootLimit) {
			fit.aic = math.Inf(1)
		}
	}
	return fit, nil
}

// coefficientsOf returns φ and θ of the unconstrained parameters x of an ARMA(p,q).
func coefficientsOf(x []float64, p, q int) (phi, theta []float64) {
	phi = make([]float64, p)
	theta = make([]float64, q)
	constrainStationary(x[:p], phi, nil)
	constrainStationary(x[p:p+q], theta, nil)
	for j := range theta {
		theta[j] = -theta[j]
	}
	return phi, theta
}

// difference returns the d-th difference of y (a new slice).
func difference(y []float64, d int) []float64 {
	w := append([]float64(nil), y...)
	for range d {
		for i := 0; i+1 < len(w); i++ {
			w[i] = w[i+1] - w[i]
		}
		if len(w) > 0 {
			w = w[:len(w)-1]
		}
	}
	return w
}

// maxAbsOf returns max(m, |v|) for m >= 0 (NaN in v propagates as NaN-free m: callers check
// finiteness separately).
func maxAbsOf(m, v float64) float64 {
	if v < 0 {
		v = -v
	}
	if v > m {
		return v
	}
	return m
}
