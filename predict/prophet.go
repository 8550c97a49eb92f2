package predict

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Prophet-style model constants (Prophet's defaults).
const (
	// prophetEpoch is Dynamo's timestamp origin, 2024-01-01T00:00:00Z, in Unix seconds.
	prophetEpoch          = 1704067200.0
	prophetMaxCP          = 25   // n_changepoints
	prophetCPRange        = 0.8  // changepoint_range
	prophetCPPriorScale   = 0.05 // changepoint_prior_scale
	prophetSeasonPrior    = 10.0 // seasonality_prior_scale
	prophetTrendPrior     = 5.0  // normal(0, 5) priors of k and m
	prophetSigmaPrior     = 0.5  // half-normal(0, 0.5) prior of sigma_obs
	prophetMaxAlternation = 100
	secondsPerDay         = 86400.0
)

// prophetPredictor is the Prophet-style predictor (see the package doc).
type prophetPredictor struct {
	series
	opts Options
}

func (p *prophetPredictor) Add(v float64) { p.add(v) }

func (p *prophetPredictor) Predict() (Forecast, error) {
	if len(p.vals) < minModelPoints {
		return p.fewerThan(minModelPoints), nil
	}
	n := min(len(p.vals), p.opts.ProphetWindow)
	window := p.vals[len(p.vals)-n:]
	y := make([]float64, n)
	for i, v := range window {
		y[i] = toModel(v, p.opts.Log1p)
	}
	firstStep := p.stored - int64(n) // the first stored point has step 0
	f, err := prophetForecast(y, firstStep, p.opts.StepSeconds)
	if err != nil {
		return p.lastValueForecast("prophet fit failed: " + err.Error()), nil
	}
	v := fromModel(f, p.opts.Log1p)
	if !finite(v) {
		return p.lastValueForecast("prophet forecast is not finite"), nil
	}
	return Forecast{Value: v}, nil
}

func (p *prophetPredictor) State() State { return p.state(Prophet) }

// seasonality is one Fourier seasonality: period in days and order.
type seasonality struct {
	period float64
	order  int
}

// prophetSeasonalities are the seasonalities Prophet enables automatically for a history
// spanning span seconds with points step seconds apart.
func prophetSeasonalities(span, step float64) []seasonality {
	var s []seasonality
	if span >= 730*secondsPerDay {
		s = append(s, seasonality{period: 365.25, order: 10})
	}
	if span >= 14*secondsPerDay && step < 7*secondsPerDay {
		s = append(s, seasonality{period: 7, order: 3})
	}
	if span >= 2*secondsPerDay && step < secondsPerDay {
		s = append(s, seasonality{period: 1, order: 4})
	}
	return s
}

// prophetChangepoints returns the changepoint times (scaled t) for n points: Prophet's
// round(linspace(0, hist_size-1, n_cp+1)) indexes of the first 80 % of the history, first
// one dropped.
func prophetChangepoints(n int) []float64 {
	hist := int(math.Floor(float64(n) * prophetCPRange))
	ncp := prophetMaxCP
	if ncp+1 > hist {
		ncp = hist - 1
	}
	if ncp <= 0 {
		return nil
	}
	cps := make([]float64, 0, ncp)
	for j := 1; j <= ncp; j++ {
		idx := math.RoundToEven(float64(j) * float64(hist-1) / float64(ncp))
		cps = append(cps, idx/float64(n-1))
	}
	return cps
}

// prophetRow writes the design row of scaled time t at Unix time ds.
func prophetRow(row []float64, t, ds float64, cps []float64, seas []seasonality) {
	row[0], row[1] = 1, t
	c := 2
	for _, s := range cps {
		row[c] = math.Max(0, t-s)
		c++
	}
	days := ds / secondsPerDay
	for _, s := range seas {
		for i := 1; i <= s.order; i++ {
			arg := 2 * math.Pi * float64(i) * days / s.period
			row[c], row[c+1] = math.Sin(arg), math.Cos(arg)
			c += 2
		}
	}
}

// prophetForecast fits the Prophet-style model to y (n >= 2 points, consecutive steps from
// firstStep) and returns the forecast of the next step in y's scale.
func prophetForecast(y []float64, firstStep int64, step float64) (float64, error) {
	n := len(y)
	if n < 2 {
		return 0, errors.New("fewer than 2 points")
	}
	yScale := 0.0
	for _, v := range y {
		yScale = math.Max(yScale, math.Abs(v))
	}
	if yScale == 0 {
		yScale = 1
	}
	ds0 := prophetEpoch + float64(firstStep)*step
	cps := prophetChangepoints(n)
	seas := prophetSeasonalities(float64(n-1)*step, step)
	k := 2 + len(cps)
	for _, s := range seas {
		k += 2 * s.order
	}
	// Prior precision of each coefficient.
	prec := make([]float64, k)
	prec[0] = 1 / (prophetTrendPrior * prophetTrendPrior)
	prec[1] = prec[0]
	c := 2
	for range cps {
		prec[c] = 1 / (prophetCPPriorScale * prophetCPPriorScale)
		c++
	}
	for ; c < k; c++ {
		prec[c] = 1 / (prophetSeasonPrior * prophetSeasonPrior)
	}
	// Design matrix, X'X and X'y (y scaled by max |y|).
	x := mat.NewDense(n, k, nil)
	ys := mat.NewVecDense(n, nil)
	row := make([]float64, k)
	for i := range n {
		t := float64(i) / float64(n-1)
		prophetRow(row, t, ds0+float64(i)*step, cps, seas)
		x.SetRow(i, row)
		ys.SetVec(i, y[i]/yScale)
	}
	var xtx mat.SymDense
	xtx.SymOuterK(1, x.T())
	var xty mat.VecDense
	xty.MulVec(x.T(), ys)

	// MAP by alternation: θ | σ² is ridge regression, σ² | θ is closed form.
	a := mat.NewSymDense(k, nil)
	var chol mat.Cholesky
	theta := mat.NewVecDense(k, nil)
	var fitted mat.VecDense
	sigma2 := 1.0
	fn := float64(n)
	for range prophetMaxAlternation {
		a.CopySym(&xtx)
		for j := range k {
			a.SetSym(j, j, a.At(j, j)+sigma2*prec[j])
		}
		if !chol.Factorize(a) {
			return 0, errors.New("normal equations are not positive definite")
		}
		if err := chol.SolveVecTo(theta, &xty); err != nil {
			return 0, err
		}
		fitted.MulVec(x, theta)
		ssr := 0.0
		for i := range n {
			r := ys.AtVec(i) - fitted.AtVec(i)
			ssr += r * r
		}
		// argmin over σ² of n·log σ + SSR/(2σ²) + σ²/(2·0.5²).
		q := 1 / (prophetSigmaPrior * prophetSigmaPrior)
		next := (-fn + math.Sqrt(fn*fn+4*q*ssr)) / (2 * q)
		next = math.Max(next, 1e-12)
		done := math.Abs(next-sigma2) <= 1e-9*sigma2
		sigma2 = next
		if done {
			break
		}
	}
	tNext := fn / float64(n-1)
	prophetRow(row, tNext, ds0+fn*step, cps, seas)
	f := 0.0
	for j := range k {
		f += row[j] * theta.AtVec(j)
	}
	f *= yScale
	if !finite(f) {
		return 0, errors.New("forecast is not finite")
	}
	return f, nil
}
