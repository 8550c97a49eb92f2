package predict

import (
	"errors"
	"fmt"
	"math"
)

// Kind names a load predictor. The names are Dynamo's load_predictor values.
type Kind string

// The predictor kinds.
const (
	// Constant forecasts the last observation.
	Constant Kind = "constant"
	// ARIMA is a pmdarima-style auto_arima (stepwise order search, then incremental updates).
	ARIMA Kind = "arima"
	// Kalman is a local-linear-trend Kalman filter (filterpy semantics).
	Kalman Kind = "kalman"
	// Prophet is a Prophet-style trend + seasonality regression (not Meta's Prophet).
	Prophet Kind = "prophet"
)

// Kinds lists every predictor kind, in a fixed order.
var Kinds = []Kind{Constant, ARIMA, Kalman, Prophet}

// Defaults of Options, equal to Dynamo's (the throughput interval is Dynamo's 180 s default).
const (
	DefaultProphetWindow   = 50
	DefaultStepSeconds     = 180.0
	DefaultKalmanQLevel    = 1.0
	DefaultKalmanQTrend    = 0.1
	DefaultKalmanR         = 10.0
	DefaultKalmanMinPoints = 5
	DefaultMaxHistory      = 256
	// MaxMaxHistory bounds MaxHistory so that a State stays a few KB to tens of KB.
	MaxMaxHistory = 4096
	// minModelPoints is the number of stored points the ARIMA and Prophet predictors need
	// before they fit a model (Dynamo's minimum_data_points).
	minModelPoints = 5
)

// Options configure a predictor. The zero value of every field means "the default" (see
// WithDefaults).
type Options struct {
	// Kind selects the predictor.
	Kind Kind
	// Log1p makes the predictor model log1p(max(0, y)) and return max(0, expm1(forecast))
	// (Dynamo load_predictor_log1p). It applies to arima, kalman and prophet; the constant
	// predictor ignores it.
	Log1p bool
	// ProphetWindow is the number of most recent points the prophet predictor fits
	// (prophet_window_size, default 50).
	ProphetWindow int
	// StepSeconds is the spacing of the prophet predictor's timestamps: the throughput
	// adjustment interval (default 180).
	StepSeconds float64
	// KalmanQLevel is the Kalman level process noise (default 1.0; values below 1e-12 are
	// raised to 1e-12, as Dynamo does).
	KalmanQLevel float64
	// KalmanQTrend is the Kalman trend process noise (default 0.1; floor 1e-12).
	KalmanQTrend float64
	// KalmanR is the Kalman measurement noise (default 10.0; floor 1e-9).
	KalmanR float64
	// KalmanMinPoints is how many stored points the Kalman predictor needs before it
	// forecasts from the filter instead of returning the last value (default 5).
	KalmanMinPoints int
	// MaxHistory is how many recent points every predictor retains (default 256). It keeps
	// the serialised State small; Dynamo's buffers are unbounded. ARIMA updates and refits
	// use the retained points only.
	MaxHistory int
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.ProphetWindow == 0 {
		o.ProphetWindow = DefaultProphetWindow
	}
	if o.StepSeconds == 0 {
		o.StepSeconds = DefaultStepSeconds
	}
	if o.KalmanQLevel == 0 {
		o.KalmanQLevel = DefaultKalmanQLevel
	}
	if o.KalmanQTrend == 0 {
		o.KalmanQTrend = DefaultKalmanQTrend
	}
	if o.KalmanR == 0 {
		o.KalmanR = DefaultKalmanR
	}
	if o.KalmanMinPoints == 0 {
		o.KalmanMinPoints = DefaultKalmanMinPoints
	}
	if o.MaxHistory == 0 {
		o.MaxHistory = DefaultMaxHistory
	}
	return o
}

// Validate reports every problem of o (after WithDefaults, a valid Kind is the only
// requirement left for defaults to pass). Errors name the Dynamo configuration key.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch o.Kind {
	case Constant, ARIMA, Kalman, Prophet:
	default:
		bad("predict: load_predictor %q is not one of constant, arima, kalman, prophet", string(o.Kind))
	}
	if o.ProphetWindow < minModelPoints {
		bad("predict: prophet_window_size must be >= %d (got %d)", minModelPoints, o.ProphetWindow)
	}
	if !(o.StepSeconds > 0) || math.IsInf(o.StepSeconds, 0) {
		bad("predict: step seconds (throughput interval) must be positive and finite (got %v)", o.StepSeconds)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"kalman_q_level", o.KalmanQLevel}, {"kalman_q_trend", o.KalmanQTrend}, {"kalman_r", o.KalmanR}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			bad("predict: %s must be >= 0 and finite (got %v)", f.name, f.v)
		}
	}
	if o.KalmanMinPoints < 1 {
		bad("predict: kalman_min_points must be >= 1 (got %d)", o.KalmanMinPoints)
	}
	switch {
	case o.MaxHistory < minModelPoints || o.MaxHistory > MaxMaxHistory:
		bad("predict: max history must be in [%d, %d] (got %d)", minModelPoints, MaxMaxHistory, o.MaxHistory)
	case o.Kind == Prophet && o.MaxHistory < o.ProphetWindow:
		bad("predict: max history (%d) must be >= prophet_window_size (%d)", o.MaxHistory, o.ProphetWindow)
	case o.Kind == Kalman && o.MaxHistory < o.KalmanMinPoints:
		bad("predict: max history (%d) must be >= kalman_min_points (%d)", o.MaxHistory, o.KalmanMinPoints)
	}
	return errors.Join(errs...)
}
