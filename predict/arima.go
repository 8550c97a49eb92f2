package predict

import (
	"errors"
	"fmt"
	"math"
)

// arimaPredictor is Dynamo's ARIMAPredictor over the auto_arima of autoarima.go.
type arimaPredictor struct {
	series
	logMode bool
	model   *arimaModel
	fitted  int64 // series.stored when the model was last fitted or updated
}

func newARIMA(o Options, sr series, st *ARIMAState) (*arimaPredictor, error) {
	a := &arimaPredictor{series: sr, logMode: o.Log1p}
	if st == nil {
		return a, nil
	}
	if o.Log1p && !st.LogMode {
		return nil, errors.New("predict: restore: arima state is in raw mode but the options ask for log1p")
	}
	a.logMode = st.LogMode
	if m := st.Model; m != nil {
		switch {
		case m.P < 0 || m.P > maxARMA || m.Q < 0 || m.Q > maxARMA || m.D < 0 || m.D > arimaMaxD:
			return nil, fmt.Errorf("predict: restore: arima order (%d,%d,%d) is out of range", m.P, m.D, m.Q)
		case len(m.Params) != m.P+m.Q:
			return nil, fmt.Errorf("predict: restore: arima(%d,%d,%d) needs %d parameters, state has %d", m.P, m.D, m.Q, m.P+m.Q, len(m.Params))
		case m.Fitted > sr.stored:
			return nil, fmt.Errorf("predict: restore: arima model fitted at point %d, after the %d points stored", m.Fitted, sr.stored)
		case !finite(m.Mean):
			return nil, errors.New("predict: restore: arima mean is not finite")
		}
		for _, v := range m.Params {
			if !finite(v) {
				return nil, errors.New("predict: restore: arima parameters are not finite")
			}
		}
		a.model = &arimaModel{p: m.P, d: m.D, q: m.Q, intercept: m.Intercept, x: append([]float64(nil), m.Params...), mu: m.Mean}
		a.fitted = m.Fitted
	}
	return a, nil
}

func (a *arimaPredictor) Add(v float64) { a.add(v) }

// modelSeries is the retained series in the model's scale.
func (a *arimaPredictor) modelSeries() []float64 {
	y := make([]float64, len(a.vals))
	for i, v := range a.vals {
		y[i] = toModel(v, a.logMode)
	}
	return y
}

func (a *arimaPredictor) Predict() (Forecast, error) {
	if len(a.vals) < minModelPoints {
		return a.fewerThan(minModelPoints), nil
	}
	if isConstant(a.vals) {
		return Forecast{Value: math.Max(0, a.vals[0])}, nil
	}
	y := a.modelSeries()
	switch {
	case a.model == nil:
		m, err := autoARIMA(y)
		if err != nil {
			return a.lastValueForecast("arima fit failed: " + err.Error()), nil
		}
		if !a.logMode && m.p == 0 && m.q == 0 {
			// Dynamo: a (0,d,0) pick in raw space is refitted on log1p(y), for good.
			a.logMode = true
			y = a.modelSeries()
			if m, err = autoARIMA(y); err != nil {
				return a.lastValueForecast("arima fit failed (log1p refit): " + err.Error()), nil
			}
		}
		a.model, a.fitted = m, a.stored
	case a.stored > a.fitted:
		added := int(min(a.stored-a.fitted, int64(len(a.vals))))
		next := *a.model
		if err := next.update(y, max(arimaMinFits, added/10)); err != nil {
			return a.lastValueForecast("arima fit failed: " + err.Error()), nil
		}
		a.model, a.fitted = &next, a.stored
	}
	f, err := a.model.forecast(y)
	if err != nil {
		return a.lastValueForecast("arima forecast failed: " + err.Error()), nil
	}
	v := fromModel(f, a.logMode)
	if !finite(v) {
		return a.lastValueForecast("arima forecast is not finite"), nil
	}
	return Forecast{Value: v}, nil
}

func (a *arimaPredictor) State() State {
	s := a.state(ARIMA)
	if a.logMode || a.model != nil {
		s.ARIMA = &ARIMAState{LogMode: a.logMode}
	}
	if m := a.model; m != nil {
		s.ARIMA.Model = &ARIMAModel{
			P: m.p, D: m.d, Q: m.q, Intercept: m.intercept,
			Params: append([]float64(nil), m.x...), Mean: m.mu, Fitted: a.fitted,
		}
	}
	return s
}

// Order reports the ARIMA (p, d, q), whether it has an intercept, and whether it models
// log1p(y); ok is false before the first successful fit or for another kind of predictor.
func Order(p Predictor) (order [3]int, intercept, logMode, ok bool) {
	a, isARIMA := p.(*arimaPredictor)
	if !isARIMA || a.model == nil {
		return order, false, false, false
	}
	m := a.model
	return [3]int{m.p, m.d, m.q}, m.intercept, a.logMode, true
}
