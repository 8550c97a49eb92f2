package predict

import (
	"errors"
	"math"
)

// kalmanPredictor is Dynamo's KalmanPredictor: a local-linear-trend filter with filterpy's
// KalmanFilter(dim_x=2, dim_z=1) semantics.
type kalmanPredictor struct {
	series
	log       bool
	minPoints int
	qLevel    float64
	qTrend    float64
	r         float64
	f         kalmanFilter
}

// kalmanFilter holds x (level, trend), P and whether a forecast (predict step) is cached.
type kalmanFilter struct {
	x      [2]float64
	p      [2][2]float64
	cached bool
}

// kalmanInitialP is filterpy's P after `kf.P *= 1000`.
const kalmanInitialP = 1000.0

func newKalman(o Options, sr series, st *KalmanState) (*kalmanPredictor, error) {
	k := &kalmanPredictor{
		series:    sr,
		log:       o.Log1p,
		minPoints: o.KalmanMinPoints,
		qLevel:    math.Max(1e-12, o.KalmanQLevel),
		qTrend:    math.Max(1e-12, o.KalmanQTrend),
		r:         math.Max(1e-9, o.KalmanR),
	}
	k.f.p = [2][2]float64{{kalmanInitialP, 0}, {0, kalmanInitialP}}
	if st == nil && sr.stored > 0 {
		return nil, errors.New("predict: restore: kalman state is missing its filter")
	}
	if st != nil {
		for _, v := range []float64{st.X[0], st.X[1], st.P[0][0], st.P[0][1], st.P[1][0], st.P[1][1]} {
			if !finite(v) {
				return nil, errors.New("predict: restore: kalman state is not finite")
			}
		}
		k.f = kalmanFilter{x: st.X, p: st.P, cached: st.Cached}
	}
	return k, nil
}

func (k *kalmanPredictor) Add(v float64) {
	first := k.stored == 0
	if !k.add(v) {
		return
	}
	z := toModel(k.LastValue(), k.log)
	if first {
		k.f.x = [2]float64{z, 0}
		return
	}
	if !k.f.cached {
		k.f.predict(k.qLevel, k.qTrend)
	}
	k.f.update(z, k.r)
	k.f.cached = false
}

func (k *kalmanPredictor) Predict() (Forecast, error) {
	if len(k.vals) < k.minPoints {
		return k.fewerThan(k.minPoints), nil
	}
	level := k.level()
	f := fromModel(level, k.log)
	if !finite(f) {
		return k.lastValueForecast("kalman forecast is not finite"), nil
	}
	return Forecast{Value: f}, nil
}

// level runs (once) the predict step and returns the unclamped level in the modelled scale.
func (k *kalmanPredictor) level() float64 {
	if !k.f.cached {
		k.f.predict(k.qLevel, k.qTrend)
		k.f.cached = true
	}
	return k.f.x[0]
}

func (k *kalmanPredictor) State() State {
	s := k.state(Kalman)
	s.Kalman = &KalmanState{X: k.f.x, P: k.f.p, Cached: k.f.cached}
	return s
}

// predict is filterpy's predict(): x = F x, P = F P F' + Q with F = [[1,1],[0,1]].
func (f *kalmanFilter) predict(qLevel, qTrend float64) {
	f.x = [2]float64{f.x[0] + f.x[1], f.x[1]}
	a, b, c, d := f.p[0][0], f.p[0][1], f.p[1][0], f.p[1][1]
	// F P = [[a+c, b+d], [c, d]];  (F P) F' = [[a+c+b+d, b+d], [c+d, d]].
	f.p = [2][2]float64{
		{(a + c) + (b + d) + qLevel, b + d},
		{c + d, d + qTrend},
	}
}

// update is filterpy's update(z) with H = [1, 0], including the Joseph-form covariance
// update P = (I-KH) P (I-KH)' + K R K'.
func (f *kalmanFilter) update(z, r float64) {
	p := f.p
	s := p[0][0] + r
	k0, k1 := p[0][0]/s, p[1][0]/s
	y := z - f.x[0]
	f.x = [2]float64{f.x[0] + k0*y, f.x[1] + k1*y}
	// I - K H = [[1-k0, 0], [-k1, 1]].
	i00, i10 := 1-k0, -k1
	// M = (I-KH) P.
	m00, m01 := i00*p[0][0], i00*p[0][1]
	m10, m11 := i10*p[0][0]+p[1][0], i10*p[0][1]+p[1][1]
	// M (I-KH)' + K R K'.
	f.p = [2][2]float64{
		{m00*i00 + k0*r*k0, m00*i10 + m01 + k0*r*k1},
		{m10*i00 + k1*r*k0, m10*i10 + m11 + k1*r*k1},
	}
}
