package predict

import (
	"fmt"
	"math"
	"strconv"
)

// Forecast is a predictor's answer for the next interval.
type Forecast struct {
	// Value is the forecast in the original scale, never negative and always finite.
	Value float64
	// Fallback is empty when Value comes from the model. Otherwise Value is the last
	// observation (0 with no data) and Fallback says why, e.g. "fewer than 5 points" or
	// "arima fit failed: ...".
	Fallback string
}

// Predictor forecasts the next value of one series (request count, ISL or OSL). One instance
// per series; not safe for concurrent use.
type Predictor interface {
	// Add stores an observation (Dynamo add_data_point): NaN and ±Inf become 0, and zeros
	// are dropped until a non-zero value has been seen since the last ResetIdleSkip (the
	// initial idle period is skipped).
	Add(v float64)
	// Predict forecasts the next value. It returns an error only when no finite forecast
	// can be given at all; model failures fall back to the last value (see Forecast).
	Predict() (Forecast, error)
	// LastValue is the last stored observation in the original scale, 0 when empty.
	LastValue() float64
	// ResetIdleSkip makes Add drop leading zeros again (called after warm-up).
	ResetIdleSkip()
	// State is a serialisable snapshot; Restore rebuilds an identical predictor from it.
	State() State
}

// StateVersion is the layout version written in State.Version.
const StateVersion = 1

// State is the serialisable snapshot of a predictor. It is compact (the retained points plus
// a few numbers), deterministic, and round-trips exactly through encoding/json (every float
// is finite, and Go writes float64 in a form that parses back to the same bits).
type State struct {
	// Version is StateVersion.
	Version int `json:"v"`
	// Kind is the predictor kind the state belongs to.
	Kind Kind `json:"kind"`
	// Values are the retained observations, oldest first, in the original scale.
	Values []float64 `json:"values,omitempty"`
	// Stored counts the observations ever stored (not dropped as idle): the step counter of
	// the prophet timestamps and the bookkeeping of ARIMA updates.
	Stored int64 `json:"stored,omitempty"`
	// Active is true once a non-zero value has been seen since the last ResetIdleSkip.
	Active bool `json:"active,omitempty"`
	// Kalman is the filter state of a kalman predictor.
	Kalman *KalmanState `json:"kalman,omitempty"`
	// ARIMA is the model state of an arima predictor.
	ARIMA *ARIMAState `json:"arima,omitempty"`
}

// KalmanState is the filter of a kalman predictor (in the modelled scale).
type KalmanState struct {
	// X is the state mean: level and trend.
	X [2]float64 `json:"x"`
	// P is the state covariance, row-major.
	P [2][2]float64 `json:"p"`
	// Cached is true when Predict has advanced the filter (predict step) and its forecast is
	// still valid: the next Add then only runs the update step.
	Cached bool `json:"cached,omitempty"`
}

// ARIMAState is the model of an arima predictor.
type ARIMAState struct {
	// LogMode is true when the model works on log1p(y): from Options.Log1p, or for good
	// after a first fit in raw space selected an (0,d,0) order.
	LogMode bool `json:"log,omitempty"`
	// Model is the fitted model, nil before the first successful fit.
	Model *ARIMAModel `json:"model,omitempty"`
}

// ARIMAModel is a fitted ARIMA(p,d,q) model.
type ARIMAModel struct {
	P int `json:"p"`
	D int `json:"d"`
	Q int `json:"q"`
	// Intercept is true when the model has a constant (a mean for d=0, a drift for d=1).
	Intercept bool `json:"c,omitempty"`
	// Params are the unconstrained parameters, AR then MA, that the constrained
	// coefficients are computed from (see the package doc).
	Params []float64 `json:"x,omitempty"`
	// Mean is the mean of the differenced series (0 without intercept).
	Mean float64 `json:"mu,omitempty"`
	// Fitted is the value of State.Stored when the model was last fitted or updated.
	Fitted int64 `json:"fitted"`
}

// New returns a predictor for o (defaults applied).
func New(o Options) (Predictor, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return build(o, State{Version: StateVersion, Kind: o.Kind})
}

// Restore rebuilds a predictor from a State taken with Predictor.State and the same Options;
// the result behaves exactly (bit for bit) like the predictor the state came from. Options
// with a smaller MaxHistory (an operator lowered load_predictor_history_size) keep the newest
// MaxHistory values, as if the history had always been that long.
func Restore(o Options, s State) (Predictor, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("predict: restore: state version %d, want %d", s.Version, StateVersion)
	}
	if s.Kind != o.Kind {
		return nil, fmt.Errorf("predict: restore: state is for predictor %q, options ask for %q", s.Kind, o.Kind)
	}
	if extra := len(s.Values) - o.MaxHistory; extra > 0 {
		s.Values = s.Values[extra:] // build copies them
	}
	if s.Stored < int64(len(s.Values)) {
		return nil, fmt.Errorf("predict: restore: stored count %d is below the %d retained values", s.Stored, len(s.Values))
	}
	for i, v := range s.Values {
		if !finite(v) {
			return nil, fmt.Errorf("predict: restore: value %d is not finite", i)
		}
	}
	return build(o, s)
}

func build(o Options, s State) (Predictor, error) {
	sr := series{
		max:    o.MaxHistory,
		vals:   append(make([]float64, 0, min(len(s.Values)+1, o.MaxHistory)), s.Values...),
		stored: s.Stored,
		active: s.Active,
	}
	if (s.Kalman != nil && o.Kind != Kalman) || (s.ARIMA != nil && o.Kind != ARIMA) {
		return nil, fmt.Errorf("predict: restore: %s state carries another predictor's model", o.Kind)
	}
	switch o.Kind {
	case Constant:
		return &constantPredictor{series: sr}, nil
	case Kalman:
		return newKalman(o, sr, s.Kalman)
	case ARIMA:
		return newARIMA(o, sr, s.ARIMA)
	case Prophet:
		return &prophetPredictor{series: sr, opts: o}, nil
	}
	return nil, fmt.Errorf("predict: unknown predictor %q", o.Kind)
}

// series is the buffer and idle-skip rule shared by every predictor (Dynamo BasePredictor).
type series struct {
	max    int
	vals   []float64
	stored int64
	active bool
}

// add applies the shared rules and reports whether v was stored.
func (s *series) add(v float64) bool {
	if !finite(v) || v == 0 {
		v = 0 // NaN/±Inf -> 0, and -0 -> 0
	}
	if !s.active {
		if v == 0 {
			return false
		}
		s.active = true
	}
	if len(s.vals) == s.max {
		copy(s.vals, s.vals[1:])
		s.vals = s.vals[:s.max-1]
	}
	s.vals = append(s.vals, v)
	s.stored++
	return true
}

func (s *series) LastValue() float64 {
	if len(s.vals) == 0 {
		return 0
	}
	return s.vals[len(s.vals)-1]
}

func (s *series) ResetIdleSkip() { s.active = false }

func (s *series) state(k Kind) State {
	st := State{Version: StateVersion, Kind: k, Stored: s.stored, Active: s.active}
	if len(s.vals) > 0 {
		st.Values = append([]float64(nil), s.vals...)
	}
	return st
}

// lastValueForecast is the fallback answer: the last value, clamped at 0.
func (s *series) lastValueForecast(why string) Forecast {
	return Forecast{Value: math.Max(0, s.LastValue()), Fallback: why}
}

// fewerThan is the fallback reason of the minimum-points gates.
func (s *series) fewerThan(n int) Forecast {
	if len(s.vals) == 0 {
		return s.lastValueForecast("no data")
	}
	return s.lastValueForecast("fewer than " + strconv.Itoa(n) + " points")
}

// toModel maps an observation to the modelled scale.
func toModel(v float64, log bool) float64 {
	if log {
		return math.Log1p(math.Max(0, v))
	}
	return v
}

// fromModel maps a forecast back to the original scale, clamped at 0.
func fromModel(f float64, log bool) float64 {
	if log {
		f = math.Expm1(f)
	}
	if !(f > 0) { // negative, -0 or NaN
		return 0
	}
	return f
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// constantPredictor forecasts the last value.
type constantPredictor struct{ series }

func (p *constantPredictor) Add(v float64) { p.add(v) }

func (p *constantPredictor) Predict() (Forecast, error) {
	if len(p.vals) == 0 {
		return p.lastValueForecast("no data"), nil
	}
	return Forecast{Value: math.Max(0, p.LastValue())}, nil
}

func (p *constantPredictor) State() State { return p.state(Constant) }
