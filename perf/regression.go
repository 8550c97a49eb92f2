package perf

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// RegressionOptions are the retention and readiness settings of a regression model
// (Dynamo's max_num_fpm_samples, load_min_observations and fpm_sample_bucket_size).
type RegressionOptions struct {
	// MaxSamples is how many samples are retained (default 64).
	MaxSamples int
	// MinObservations is how many samples a fit needs (default 5).
	MinObservations int
	// BucketCount is the number of retention buckets: along the axis for a 1-D model, and
	// isqrt(BucketCount) per axis for a 2-D model (default 16).
	BucketCount int
}

// DefaultRegressionOptions are Dynamo's defaults.
func DefaultRegressionOptions() RegressionOptions {
	return RegressionOptions{MaxSamples: 64, MinObservations: 5, BucketCount: 16}
}

// Validate reports options a model cannot work with.
func (o RegressionOptions) Validate() error {
	var errs []error
	if o.MaxSamples < 1 {
		errs = append(errs, fmt.Errorf("max samples must be >= 1, got %d", o.MaxSamples))
	}
	if o.MinObservations < 1 {
		errs = append(errs, fmt.Errorf("min observations must be >= 1, got %d", o.MinObservations))
	}
	if r := isqrt(o.BucketCount); o.BucketCount < 1 || r*r != o.BucketCount {
		errs = append(errs, fmt.Errorf("bucket count must be a perfect square >= 1, got %d", o.BucketCount))
	}
	return errors.Join(errs...)
}

func isqrt(n int) int {
	if n <= 0 {
		return 0
	}
	r := int(math.Sqrt(float64(n)))
	for r*r > n {
		r--
	}
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}

// Sample is one regression observation: up to two features and the measured wall time in
// seconds, as [x0, x1, y] (x1 is 0 for a 1-D model). The array form keeps the workflow
// state compact.
type Sample [3]float64

// RegressionState is the serialisable content of a Regression: the retained samples by
// bucket, in Dynamo's bucket insertion order, and the axis bounds. The fit is not stored:
// it is a pure function of the samples and is recomputed on demand.
type RegressionState struct {
	// Buckets holds the samples, bucket by bucket, oldest first within a bucket.
	Buckets []BucketState `json:"buckets,omitempty"`
	// Lo and Hi are the per-axis bounds seen so far (meaningful when Buckets is non-empty or
	// HasBounds is set).
	Lo [2]float64 `json:"lo"`
	Hi [2]float64 `json:"hi"`
	// HasBounds is false until the first sample.
	HasBounds bool `json:"has_bounds,omitempty"`
}

// BucketState is one retention bucket.
type BucketState struct {
	Key     [2]int   `json:"key"`
	Samples []Sample `json:"samples"`
}

// Regression is Dynamo's _BaseRegressionModel: ordinary least squares with intercept on one
// or two features, fitted lazily on a bounded, bucketed sample set. When the sample count
// exceeds MaxSamples, the oldest sample of the fullest bucket (the first such bucket in
// insertion order) is retired, so sustained traffic at one operating point cannot push out
// the rest of the performance surface. The bucket grid is rebuilt whenever the axis bounds
// grow. Collinear features get the minimum-norm solution (as scikit-learn's
// LinearRegression via scipy's lstsq), computed here with gonum's SVD.
type Regression struct {
	ndim      int
	relaxable int // feature index whose small negative coefficient is tolerated, or -1
	opts      RegressionOptions
	perAxis   int
	buckets   []*bucket
	hasBounds bool
	lo, hi    [2]float64
	total     int
	fit       *fitResult // nil until fitted after the last change
}

type bucket struct {
	key     [2]int
	samples []Sample
}

type fitResult struct {
	ok        bool
	reason    string
	coef      [2]float64
	intercept float64
}

// relaxTolerance is how negative a relaxable coefficient may be before it is clamped to 0.
const relaxTolerance = -1e-6

// minPrediction is the floor of every predicted wall time (Dynamo's max(1e-6, ...)).
const minPrediction = 1e-6

// NewRegression returns an empty model with ndim (1 or 2) features. relaxable is the index
// of a feature whose negative coefficient is clamped to 0 instead of rejecting the fit (the
// decode model's request count), or -1 for none.
func NewRegression(ndim, relaxable int, opts RegressionOptions) (*Regression, error) {
	if ndim != 1 && ndim != 2 {
		return nil, fmt.Errorf("regression: ndim must be 1 or 2, got %d", ndim)
	}
	if relaxable >= ndim {
		return nil, fmt.Errorf("regression: relaxable feature %d out of range for %d features", relaxable, ndim)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("regression: %w", err)
	}
	r := &Regression{ndim: ndim, relaxable: relaxable, opts: opts}
	r.perAxis = opts.BucketCount
	if ndim == 2 {
		r.perAxis = isqrt(opts.BucketCount)
	}
	return r, nil
}

// RestoreRegression rebuilds a model from its state. If the options now retain fewer
// samples than the state holds, the retirement rule trims it.
func RestoreRegression(ndim, relaxable int, opts RegressionOptions, st RegressionState) (*Regression, error) {
	r, err := NewRegression(ndim, relaxable, opts)
	if err != nil {
		return nil, err
	}
	r.hasBounds, r.lo, r.hi = st.HasBounds || len(st.Buckets) > 0, st.Lo, st.Hi
	for i, b := range st.Buckets {
		if len(b.Samples) == 0 {
			return nil, fmt.Errorf("regression state: bucket %d is empty", i)
		}
		for _, s := range b.Samples {
			for _, v := range s {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("regression state: bucket %d holds a non-finite sample %v", i, s)
				}
			}
		}
		r.buckets = append(r.buckets, &bucket{key: b.Key, samples: append([]Sample(nil), b.Samples...)})
		r.total += len(b.Samples)
	}
	for r.total > r.opts.MaxSamples {
		r.retire()
	}
	return r, nil
}

// State returns a deep copy of the model's content for serialisation.
func (r *Regression) State() RegressionState {
	st := RegressionState{Lo: r.lo, Hi: r.hi, HasBounds: r.hasBounds}
	for _, b := range r.buckets {
		st.Buckets = append(st.Buckets, BucketState{Key: b.key, Samples: append([]Sample(nil), b.samples...)})
	}
	return st
}

// Len is the number of retained samples.
func (r *Regression) Len() int { return r.total }

// HasSufficientData reports whether enough samples are retained to fit
// (Dynamo's has_sufficient_data).
func (r *Regression) HasSufficientData() bool { return r.total >= r.opts.MinObservations }

// Add records one observation. x holds the features (x[1] ignored for a 1-D model);
// wallTime is the iteration's duration in seconds. Non-finite values are ignored.
func (r *Regression) Add(x [2]float64, wallTime float64) {
	if r.ndim == 1 {
		x[1] = 0
	}
	if !finite(x[0]) || !finite(x[1]) || !finite(wallTime) {
		return
	}
	if r.updateBounds(x) && r.total > 0 {
		r.rebuild()
	}
	r.append(r.key(x), Sample{x[0], x[1], wallTime})
	r.total++
	if r.total > r.opts.MaxSamples {
		r.retire()
	}
	r.fit = nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func (r *Regression) updateBounds(x [2]float64) bool {
	if !r.hasBounds {
		r.hasBounds, r.lo, r.hi = true, x, x
		return true
	}
	changed := false
	for i := 0; i < r.ndim; i++ {
		if x[i] < r.lo[i] {
			r.lo[i], changed = x[i], true
		}
		if x[i] > r.hi[i] {
			r.hi[i], changed = x[i], true
		}
	}
	return changed
}

func (r *Regression) key(x [2]float64) [2]int {
	var k [2]int
	for i := 0; i < r.ndim; i++ {
		lo, hi := r.lo[i], r.hi[i]
		if hi <= lo {
			continue
		}
		idx := int((x[i] - lo) / (hi - lo) * float64(r.perAxis)) // Python int(): truncation
		k[i] = max(0, min(idx, r.perAxis-1))
	}
	return k
}

func (r *Regression) append(k [2]int, s Sample) {
	for _, b := range r.buckets {
		if b.key == k {
			b.samples = append(b.samples, s)
			return
		}
	}
	r.buckets = append(r.buckets, &bucket{key: k, samples: []Sample{s}})
}

// rebuild re-indexes every sample with the current bounds. Like Dynamo, it walks the old
// buckets in insertion order, so the new buckets' order is that of first appearance.
func (r *Regression) rebuild() {
	old := r.buckets
	r.buckets = nil
	for _, b := range old {
		for _, s := range b.samples {
			r.append(r.key([2]float64{s[0], s[1]}), s)
		}
	}
}

// retire drops the oldest sample of the fullest bucket (the first in insertion order on ties).
func (r *Regression) retire() {
	fat := 0
	for i, b := range r.buckets {
		if len(b.samples) > len(r.buckets[fat].samples) {
			fat = i
		}
	}
	b := r.buckets[fat]
	b.samples = b.samples[1:]
	r.total--
	if len(b.samples) == 0 {
		r.buckets = append(r.buckets[:fat], r.buckets[fat+1:]...)
	}
	r.fit = nil
}

// Fit fits the model if needed and reports whether it is usable; when it is not, reason
// says why (too few samples, or a rejected negative coefficient).
func (r *Regression) Fit() (ok bool, reason string) {
	if r.fit == nil {
		r.fit = r.solve()
	}
	return r.fit.ok, r.fit.reason
}

// Coefficients returns the fitted coefficients and intercept; ok is false when the model is
// not usable.
func (r *Regression) Coefficients() (coef [2]float64, intercept float64, ok bool) {
	if ok, _ := r.Fit(); !ok {
		return coef, 0, false
	}
	return r.fit.coef, r.fit.intercept, true
}

// Predict returns the predicted wall time in seconds for features x, floored at 1e-6 s as
// Dynamo does; ok is false when the model is not usable.
func (r *Regression) Predict(x [2]float64) (float64, bool) {
	if ok, _ := r.Fit(); !ok {
		return 0, false
	}
	f := r.fit
	y := f.intercept + f.coef[0]*x[0]
	if r.ndim == 2 {
		y += f.coef[1] * x[1]
	}
	return math.Max(minPrediction, y), true
}

func (r *Regression) solve() *fitResult {
	n, p := r.total, r.ndim
	if n < r.opts.MinObservations {
		return &fitResult{reason: fmt.Sprintf("%d of %d samples needed to fit", n, r.opts.MinObservations)}
	}
	// Centre X and y, solve the centred least-squares problem by SVD with scipy's default
	// rank cut-off (singular values below eps*max(n, p)*s_max are zero: the minimum-norm
	// solution for collinear features), then recover the intercept (scikit-learn's way).
	var xMean [2]float64
	var yMean float64
	for _, b := range r.buckets {
		for _, s := range b.samples {
			for j := 0; j < p; j++ {
				xMean[j] += s[j]
			}
			yMean += s[2]
		}
	}
	for j := 0; j < p; j++ {
		xMean[j] /= float64(n)
	}
	yMean /= float64(n)
	xc := mat.NewDense(n, p, nil)
	yc := mat.NewVecDense(n, nil)
	i := 0
	for _, b := range r.buckets {
		for _, s := range b.samples {
			for j := 0; j < p; j++ {
				xc.Set(i, j, s[j]-xMean[j])
			}
			yc.SetVec(i, s[2]-yMean)
			i++
		}
	}
	var coef [2]float64
	var svd mat.SVD
	if !svd.Factorize(xc, mat.SVDThin) {
		return &fitResult{reason: "least-squares factorisation did not converge"}
	}
	values := svd.Values(nil)
	rank := 0
	if len(values) > 0 && values[0] > 0 {
		cut := math.Nextafter(1, 2) - 1 // machine epsilon
		cut *= float64(max(n, p)) * values[0]
		for _, s := range values {
			if s > cut {
				rank++
			}
		}
	}
	if rank > 0 {
		var sol mat.VecDense
		svd.SolveVecTo(&sol, yc, rank)
		for j := 0; j < p; j++ {
			coef[j] = sol.AtVec(j)
		}
	}
	intercept := yMean
	for j := 0; j < p; j++ {
		intercept -= coef[j] * xMean[j]
	}
	for j := 0; j < p; j++ {
		if coef[j] >= 0 {
			continue
		}
		if j == r.relaxable {
			if coef[j] < relaxTolerance {
				coef[j] = 0 // clamped; the intercept is not refitted (as Dynamo)
			}
			continue
		}
		return &fitResult{reason: fmt.Sprintf("fit rejected: negative coefficient %g on feature %d (more load cannot take less time)", coef[j], j)}
	}
	return &fitResult{ok: true, coef: coef, intercept: intercept}
}

// MovingAverage is a fixed-window mean that ignores values until the first positive one
// (the idle period before traffic), then keeps the last Window values, clamping negatives to
// 0 (Dynamo's _MovingAverage / add_after_first_nonzero).
type MovingAverage struct {
	// Values are the retained values, oldest first.
	Values []float64 `json:"v,omitempty"`
	// Seen is set once a positive value arrived.
	Seen bool `json:"seen,omitempty"`
}

// Add records a value with the given window.
func (m *MovingAverage) Add(v float64, window int) {
	if v > 0 {
		m.Seen = true
	}
	if !m.Seen || math.IsNaN(v) {
		return
	}
	m.Values = append(m.Values, math.Max(0, v))
	if over := len(m.Values) - max(1, window); over > 0 {
		m.Values = append(m.Values[:0], m.Values[over:]...)
	}
}

// Mean is the average of the retained values, 0 when there are none.
func (m *MovingAverage) Mean() float64 {
	if len(m.Values) == 0 {
		return 0
	}
	var s float64
	for _, v := range m.Values {
		s += v
	}
	return s / float64(len(m.Values))
}

func (m MovingAverage) clone() MovingAverage {
	return MovingAverage{Values: append([]float64(nil), m.Values...), Seen: m.Seen}
}
