package predict

import (
	"errors"
	"fmt"
	"math"
)

// auto_arima settings: pmdarima's defaults as Dynamo calls it (m=1, so non-seasonal).
const (
	arimaStartP     = 2
	arimaStartQ     = 2
	arimaMaxP       = 5
	arimaMaxQ       = 5
	arimaMaxD       = 2
	arimaAlpha      = 0.05
	arimaMaxIter    = 50  // L-BFGS iterations of a search fit (pmdarima maxiter)
	arimaPolishIter = 20  // L-BFGS iterations of the maximum-likelihood polish of the selection
	arimaMaxFits    = 100 // pmdarima's stepwise max_k
	arimaMinFits    = 5   // model.update: maxiter = max(5, new points // 10)
	kpssLagFactor   = 3.0 // lshort=True: lag = trunc(3·sqrt(n)/13)
)

// kpss critical values (level stationarity, lshort) and their p-values.
var (
	kpssTable  = [4]float64{0.347, 0.463, 0.574, 0.739}
	kpssTableP = [4]float64{0.10, 0.05, 0.025, 0.01}
)

// kpssPValue is pmdarima's KPSSTest(null='level', lshort=True) p-value of x (NaN when the
// long-run variance is zero).
func kpssPValue(x []float64) float64 {
	stat := kpssStat(x)
	if math.IsNaN(stat) {
		return stat
	}
	return interpolatePValue(stat)
}

// kpssStat is the KPSS level-stationarity statistic of x with the short lag
// trunc(3·sqrt(n)/13) and Bartlett weights (NaN when the long-run variance is not positive).
func kpssStat(x []float64) float64 {
	n := len(x)
	fn := float64(n)
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= fn
	e := make([]float64, n)
	for i, v := range x {
		e[i] = v - mean
	}
	eta, s, s2 := 0.0, 0.0, 0.0
	for _, v := range e {
		s += v
		eta += s * s
		s2 += v * v
	}
	eta /= fn * fn
	s2 /= fn
	lags := int(math.Trunc(kpssLagFactor * math.Sqrt(fn) / 13))
	acc := 0.0
	for i := 1; i <= lags; i++ {
		t := 0.0
		for j := i; j < n; j++ {
			t += e[j] * e[j-i]
		}
		acc += t * (1 - float64(i)/(float64(lags)+1))
	}
	s2 += 2 * acc / fn
	stat := eta / s2
	if !(s2 > 0) || !finite(stat) {
		return math.NaN()
	}
	return stat
}

// interpolatePValue is R's approx(table, tablep, stat, rule=2).
func interpolatePValue(stat float64) float64 {
	if stat <= kpssTable[0] {
		return kpssTableP[0]
	}
	last := len(kpssTable) - 1
	if stat >= kpssTable[last] {
		return kpssTableP[last]
	}
	for i := 1; i <= last; i++ {
		if stat <= kpssTable[i] {
			f := (stat - kpssTable[i-1]) / (kpssTable[i] - kpssTable[i-1])
			return kpssTableP[i-1] + f*(kpssTableP[i]-kpssTableP[i-1])
		}
	}
	return kpssTableP[last]
}

// ndiffs is pmdarima's ndiffs(x, alpha=0.05, test='kpss', max_d=2).
func ndiffs(x []float64) int {
	if isConstant(x) {
		return 0
	}
	pv := kpssPValue(x)
	if math.IsNaN(pv) {
		return 0
	}
	d := 0
	for pv < arimaAlpha && d < arimaMaxD {
		d++
		x = difference(x, 1)
		if isConstant(x) {
			return d
		}
		pv = kpssPValue(x)
		if math.IsNaN(pv) {
			return d - 1
		}
	}
	return d
}

func isConstant(x []float64) bool {
	for _, v := range x {
		if v != x[0] {
			return false
		}
	}
	return true
}

// arimaModel is a fitted ARIMA(p,d,q) with its parameters.
type arimaModel struct {
	p, d, q   int
	intercept bool
	x         []float64
	mu        float64
}

// autoARIMA selects and fits a model to y the way pmdarima.auto_arima does with Dynamo's
// arguments (see the package doc for what is and is not the same).
func autoARIMA(y []float64) (*arimaModel, error) {
	n := len(y)
	if n < 2 {
		return nil, fmt.Errorf("%d points are too few", n)
	}
	for _, v := range y {
		if !finite(v) {
			return nil, errors.New("series is not finite")
		}
	}
	if isConstant(y) {
		return &arimaModel{intercept: true, mu: y[0]}, nil
	}
	maxP := min(arimaMaxP, n/3)
	maxQ := min(arimaMaxQ, n/3)
	startP := min(arimaStartP, maxP)
	startQ := min(arimaStartQ, maxQ)
	d := ndiffs(y)
	w := difference(y, d)
	if isConstant(w) {
		// A perfect (0,d,0) fit: the constant is the mean of w (with an intercept when d < 2).
		m := &arimaModel{d: d, intercept: d < 2}
		if m.intercept {
			m.mu = w[0]
		}
		return m, nil
	}
	withIntercept := d <= 1
	if n < 10 {
		startP, startQ = min(startP, 1), min(startQ, 1)
	}
	s := stepwise{
		w: w, maxP: maxP, maxQ: maxQ, intercept: withIntercept,
		cs: newCSSProblem(len(w)), opt: newLBFGS(2 * maxARMA),
	}
	best, err := s.solve(startP, startQ)
	if err != nil {
		return nil, err
	}
	// Maximum-likelihood polish of the selected model, from its CSS estimate.
	if best.p+best.q > 0 {
		if ml, err := fitARMA(s.cs, s.opt, w, best.p, best.q, best.intercept, best.x, 0, arimaPolishIter, false); err == nil {
			best = ml
		}
	}
	return &arimaModel{p: best.p, d: d, q: best.q, intercept: best.intercept, x: best.x, mu: best.mu}, nil
}

// stepwise is pmdarima's _StepwiseFitWrapper restricted to m=1 (no seasonal terms).
type stepwise struct {
	w          []float64
	maxP, maxQ int
	intercept  bool
	cs         *cssProblem
	opt        *lbfgs

	k    int                                  // fits made
	seen [maxARMA + 1][maxARMA + 1][2]bool    // (p, q, intercept) already fitted
	fits [maxARMA + 1][maxARMA + 1][2]armaFit // their results
	ok   [maxARMA + 1][maxARMA + 1][2]bool    // fit succeeded with a finite AIC
	best *armaFit
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// doFit fits (p, d, q) with the given intercept unless already fitted, and reports whether
// it became the best model (a strictly lower AIC).
func (s *stepwise) doFit(p, q int, intercept bool) bool {
	c := b2i(intercept)
	if s.seen[p][q][c] {
		return false
	}
	s.seen[p][q][c] = true
	s.k++
	fit, err := fitARMA(s.cs, s.opt, s.w, p, q, intercept, nil, arimaMaxIter, 0, true)
	if err != nil || math.IsInf(fit.aic, 0) || math.IsNaN(fit.aic) {
		return false
	}
	s.fits[p][q][c] = fit
	s.ok[p][q][c] = true
	if s.best == nil || fit.aic < s.best.aic {
		s.best = &s.fits[p][q][c]
		return true
	}
	return false
}

func (s *stepwise) solve(p, q int) (armaFit, error) {
	maxP, maxQ := s.maxP, s.maxQ
	s.doFit(p, q, s.intercept)
	if s.doFit(0, 0, s.intercept) {
		p, q = 0, 0
	}
	if maxP > 0 && s.doFit(1, 0, s.intercept) {
		p, q = 1, 0
	}
	if maxQ > 0 && s.doFit(0, 1, s.intercept) {
		p, q = 0, 1
	}
	if s.intercept && s.doFit(0, 0, false) {
		p, q = 0, 0
	}
	startK := 0
	for startK < s.k && s.k < arimaMaxFits {
		startK = s.k
		c := s.intercept
		can := func() bool { return s.k < arimaMaxFits }
		switch {
		case p > 0 && can() && s.doFit(p-1, q, c):
			p--
		case q > 0 && can() && s.doFit(p, q-1, c):
			q--
		case p < maxP && can() && s.doFit(p+1, q, c):
			p++
		case q < maxQ && can() && s.doFit(p, q+1, c):
			q++
		case q > 0 && p > 0 && can() && s.doFit(p-1, q-1, c):
			p, q = p-1, q-1
		case q < maxQ && p > 0 && can() && s.doFit(p-1, q+1, c):
			p, q = p-1, q+1
		case q > 0 && p < maxP && can() && s.doFit(p+1, q-1, c):
			p, q = p+1, q-1
		case q < maxQ && p < maxP && can() && s.doFit(p+1, q+1, c):
			p, q = p+1, q+1
		case can() && s.doFit(p, q, !c):
			s.intercept = !c
		}
	}
	if s.best == nil {
		return armaFit{}, errors.New("no viable ARIMA model")
	}
	return *s.best, nil
}

// update re-estimates the parameters on y (the model's order kept), starting from the
// current ones, with at most maxIter L-BFGS iterations (pmdarima ARIMA.update).
func (m *arimaModel) update(y []float64, maxIter int) error {
	if m.p+m.q == 0 && !m.intercept {
		return nil
	}
	w := difference(y, m.d)
	cs := newCSSProblem(len(w))
	fit, err := fitARMA(cs, newLBFGS(max(1, m.p+m.q)), w, m.p, m.q, m.intercept, m.x, 0, maxIter, false)
	if err != nil {
		return fmt.Errorf("update of ARIMA(%d,%d,%d): %w", m.p, m.d, m.q, err)
	}
	m.x, m.mu = fit.x, fit.mu
	return nil
}

// forecast is the one-step-ahead forecast after y: the Kalman-filter prediction of the next
// differenced value (with the model's mean), integrated back d times.
func (m *arimaModel) forecast(y []float64) (float64, error) {
	n := len(y)
	if n <= m.d {
		return 0, fmt.Errorf("%d points are too few for d=%d", n, m.d)
	}
	w := difference(y, m.d)
	phi, theta := coefficientsOf(m.x, m.p, m.q)
	ss, ok := newStateSpace(phi, theta)
	if !ok {
		return 0, errors.New("no stationary covariance for the state")
	}
	l, ok := ss.filter(w, m.intercept)
	if !ok {
		return 0, errors.New("kalman filter diverged")
	}
	f := l.next(m.mu)
	switch m.d {
	case 1:
		f += y[n-1]
	case 2:
		f += 2*y[n-1] - y[n-2]
	}
	if !finite(f) {
		return 0, errors.New("forecast is not finite")
	}
	return f, nil
}
