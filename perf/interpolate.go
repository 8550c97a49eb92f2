package perf

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/interp"
)

// PrefillInterpolator answers Dynamo's prefill questions (interpolate_ttft and
// interpolate_thpt_per_gpu) from a PrefillProfile: TTFT and throughput per GPU against
// input length, each a not-a-knot cubic spline through the profiled points (what scipy's
// interp1d(kind="cubic") builds), with the query ISL clamped to the profiled range.
// It is immutable and safe for concurrent use.
type PrefillInterpolator struct {
	minISL, maxISL float64
	ttft, thpt     interp.NotAKnotCubic
}

// NewPrefillInterpolator validates the profile and fits the two splines. The profile is
// not modified (the points are sorted by ISL in a copy).
func NewPrefillInterpolator(p *PrefillProfile) (*PrefillInterpolator, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	idx := make([]int, len(p.ISL))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareFloat(p.ISL[a], p.ISL[b]) })
	isl := make([]float64, len(idx))
	ttft := make([]float64, len(idx))
	thpt := make([]float64, len(idx))
	for k, i := range idx {
		isl[k], ttft[k], thpt[k] = p.ISL[i], p.TTFTMs[i], p.ThroughputPerGPU[i]
	}
	pi := &PrefillInterpolator{minISL: isl[0], maxISL: isl[len(isl)-1]}
	if err := pi.ttft.Fit(isl, ttft); err != nil {
		return nil, fmt.Errorf("perf: prefill TTFT spline: %w", err)
	}
	if err := pi.thpt.Fit(isl, thpt); err != nil {
		return nil, fmt.Errorf("perf: prefill throughput spline: %w", err)
	}
	return pi, nil
}

// TTFTMs returns the interpolated time to first token, in milliseconds, of a prefill of
// isl tokens (Dynamo's interpolate_ttft). isl is clamped to the profiled range; NaN gives
// NaN.
func (pi *PrefillInterpolator) TTFTMs(isl float64) float64 {
	if math.IsNaN(isl) {
		return math.NaN()
	}
	return pi.ttft.Predict(pi.clamp(isl))
}

// ThroughputPerGPU returns the interpolated prefill throughput, in prompt tokens per second
// per GPU, at input length isl (Dynamo's interpolate_thpt_per_gpu). isl is clamped to the
// profiled range; NaN gives NaN.
func (pi *PrefillInterpolator) ThroughputPerGPU(isl float64) float64 {
	if math.IsNaN(isl) {
		return math.NaN()
	}
	return pi.thpt.Predict(pi.clamp(isl))
}

// ISLRange returns the smallest and largest profiled ISL, the range queries are clamped to.
func (pi *PrefillInterpolator) ISLRange() (lo, hi float64) { return pi.minISL, pi.maxISL }

func (pi *PrefillInterpolator) clamp(isl float64) float64 {
	return math.Max(pi.minISL, math.Min(isl, pi.maxISL))
}

// DecodeGridSize is the number of cells of Dynamo's decode lookup grid along each axis
// (its DecodeInterpolator resolution).
const DecodeGridSize = 100

// DecodeInterpolator answers Dynamo's decode questions (interpolate_itl,
// interpolate_thpt_per_gpu, find_best_throughput_per_gpu) from a DecodeProfile.
//
// Like Dynamo, it precomputes ITL and throughput on a DecodeGridSize × DecodeGridSize grid,
// KV usage xi = linspace(0, 1, 100) by context length yi = linspace(0, max context, 100),
// indexed [iy][ix], and answers the grid questions by rounding to the nearest node
// (round half to even, as numpy does) with indices clipped to the grid.
//
// How the grid is filled differs from Dynamo, which cannot be reproduced without scipy:
//
//   - Dynamo uses griddata(method="cubic"): a Clough–Tocher C¹ piecewise-cubic interpolant
//     on a Qhull Delaunay triangulation of the points. Here the interpolant is piecewise
//     linear (barycentric) on a Delaunay triangulation built in delaunay.go. Both pass
//     exactly through the profiled points; between them the linear surface cannot
//     overshoot but has kinks along triangle edges. The two differ by the order of the
//     surface's curvature times the squared triangle size (triangles here span about 0.1 of
//     KV usage by one context row, about 2,650 tokens); the profiled ITL is nearly linear
//     in KV usage above 15 % usage and strongly concave below (4.4 ms at zero load, 10 ms
//     at 15 %), so the surfaces differ most in that first KV band.
//   - The triangulation uses normalised coordinates (KV usage as is, context / max
//     context). Dynamo passes raw coordinates (griddata's default rescale=False), where
//     context (0–16k tokens) swamps KV usage (0–1): its triangulation is that of points
//     stretched about 10⁴ times along the context axis, made of slivers. This is a
//     deliberate difference.
//   - Outside the convex hull of the points (below the first profiled context row, beyond
//     the largest profiled KV usage of a row) the grid takes the values of the nearest
//     profiled point in raw coordinates, exactly as Dynamo's griddata(method="nearest")
//     fill: in effect "nearest context row, then nearest KV usage" (ties: the lowest point
//     index). With the H200 profile 1,351 of the 10,000 nodes are outside the hull.
//
// Measured against Dynamo's own grid (scipy 1.10.1 griddata cubic with nearest fill,
// testdata/profiles/h200-llama3.1-8b-fp8-tp1/dynamo_find_best.json), over ITL targets 5–50
// ms and contexts 100–13,100 tokens (216 queries), FindBestThroughputPerGPU differs by a
// median of 1.4 % and a 90th percentile of 15 % (the largest differences are at the 5 ms
// target, where only near-idle cells qualify and throughput is a few hundred tokens/s); at
// ITL 10 ms and context 3150 Dynamo's grid answers 4556 tokens/s/GPU and this one 4613
// (+1.3 %). The prefill splines equal scipy's to 1e-9.
//
// The error that matters for sizing is the grid's: a query is answered with the value at
// the nearest node, up to half a cell (0.5 % of KV usage, max context / 198 tokens) away.
// Asked at the 41 points of the H200 profile, the grid ITL is 0.6 % off the measured ITL
// on average and 3.3 % at most; the grid throughput 1.8 % on average and 36 % at most, at
// the near-zero-load points, where throughput climbs from about 200 to 2,600 tokens/s
// within 15 % of KV usage. At gives the direct, off-grid interpolation, exact at the
// profiled points.
//
// A DecodeInterpolator is immutable and safe for concurrent use.
type DecodeInterpolator struct {
	maxKVTokens float64
	maxContext  float64
	xi, yi      []float64 // grid axes
	itlGrid     []float64 // [iy*DecodeGridSize+ix]
	thptGrid    []float64 // [iy*DecodeGridSize+ix]
	tri         *triangulation
	kv, ctx     []float64 // the profiled points in raw coordinates, for the nearest fill
	itl, thpt   []float64 // values at the triangulation's points
}

// NewDecodeInterpolator validates the profile, triangulates its points and fills the
// lookup grids. The profile is not modified.
func NewDecodeInterpolator(d *DecodeProfile) (*DecodeInterpolator, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	xs, ys := d.normalisedPoints()
	tri, err := triangulate(xs, ys)
	if err != nil {
		return nil, fmt.Errorf("perf: triangulate decode profile: %w", err)
	}
	di := &DecodeInterpolator{
		maxKVTokens: float64(d.MaxKVTokens),
		maxContext:  slices.Max(d.ContextLength),
		tri:         tri,
		kv:          slices.Clone(d.KVUsage),
		ctx:         slices.Clone(d.ContextLength),
		itl:         slices.Clone(d.ITLMs),
		thpt:        slices.Clone(d.ThroughputPerGPU),
	}
	di.xi = linspace(0, 1, DecodeGridSize)
	di.yi = linspace(0, di.maxContext, DecodeGridSize)
	di.itlGrid = make([]float64, DecodeGridSize*DecodeGridSize)
	di.thptGrid = make([]float64, DecodeGridSize*DecodeGridSize)
	for iy, y := range di.yi {
		for ix, x := range di.xi {
			di.itlGrid[iy*DecodeGridSize+ix], di.thptGrid[iy*DecodeGridSize+ix] = di.At(x, y)
		}
	}
	return di, nil
}

// linspace is numpy's linspace(start, stop, num) with the endpoint: start + i*step, the
// last value exactly stop.
func linspace(start, stop float64, num int) []float64 {
	out := make([]float64, num)
	step := (stop - start) / float64(num-1)
	for i := range out {
		out[i] = float64(i)*step + start
	}
	out[num-1] = stop
	return out
}

// At returns the ITL (ms) and throughput per GPU interpolated directly (off the grid) at
// the given KV usage (fraction of MaxKVTokens) and context length (tokens): linear inside
// the triangle containing the point (found in normalised coordinates), the nearest profiled
// point's values outside the convex hull (nearest in raw coordinates, as Dynamo). At a
// profiled point it returns that point's values. In a sliver triangle (the H200 profile's
// zero-load points are collinear up to round-off, which leaves three along that edge) the
// value is interpolated along the sliver's nearest edge. NaN inputs give NaN.
func (di *DecodeInterpolator) At(kvUsage, contextLength float64) (itlMs, thpt float64) {
	if math.IsNaN(kvUsage) || math.IsNaN(contextLength) {
		return math.NaN(), math.NaN()
	}
	x, y := kvUsage, contextLength/di.maxContext
	t, w, ok := di.tri.locate(x, y)
	if !ok {
		i := di.nearestRaw(kvUsage, contextLength)
		return di.itl[i], di.thpt[i]
	}
	v := di.tri.tris[t]
	itlMs = w[0]*di.itl[v[0]] + w[1]*di.itl[v[1]] + w[2]*di.itl[v[2]]
	thpt = w[0]*di.thpt[v[0]] + w[1]*di.thpt[v[1]] + w[2]*di.thpt[v[2]]
	return itlMs, thpt
}

// nearestRaw is the profiled point nearest to (kvUsage, contextLength) in raw coordinates
// (Dynamo's griddata nearest fill); ties go to the lowest index.
func (di *DecodeInterpolator) nearestRaw(kvUsage, contextLength float64) int {
	best, bestD := 0, math.Inf(1)
	for i := range di.kv {
		dx, dy := di.kv[i]-kvUsage, di.ctx[i]-contextLength
		if d := dx*dx + dy*dy; d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// gridIndex is Dynamo's clip(round((v - axis[0]) / (axis[1] - axis[0])), 0, n-1) with
// numpy's round half to even. It must not be given NaN.
func gridIndex(v float64, axis []float64) int {
	f := math.RoundToEven((v - axis[0]) / (axis[1] - axis[0]))
	switch {
	case f <= 0:
		return 0
	case f >= float64(len(axis)-1):
		return len(axis) - 1
	}
	return int(f)
}

// computeIdx is Dynamo's compute_idx: the grid cell of a decode engine running concurrency
// requests of contextLength tokens each.
func (di *DecodeInterpolator) computeIdx(concurrency, contextLength float64) (ix, iy int) {
	kvUsage := concurrency * contextLength / di.maxKVTokens
	return gridIndex(kvUsage, di.xi), gridIndex(contextLength, di.yi)
}

// ITLMs returns the grid ITL, in milliseconds, of a decode engine running concurrency
// requests with contextLength tokens of context each (Dynamo's interpolate_itl): KV usage
// is concurrency × contextLength / MaxKVTokens, and the value is that of the nearest grid
// node. NaN inputs give NaN (Dynamo would raise).
func (di *DecodeInterpolator) ITLMs(concurrency, contextLength float64) float64 {
	if math.IsNaN(concurrency) || math.IsNaN(contextLength) || math.IsNaN(concurrency*contextLength) {
		return math.NaN()
	}
	ix, iy := di.computeIdx(concurrency, contextLength)
	return di.itlGrid[iy*DecodeGridSize+ix]
}

// ThroughputPerGPU returns the grid decode throughput, in output tokens per second per GPU,
// at the same cell as ITLMs (Dynamo's interpolate_thpt_per_gpu). NaN inputs give NaN.
func (di *DecodeInterpolator) ThroughputPerGPU(concurrency, contextLength float64) float64 {
	if math.IsNaN(concurrency) || math.IsNaN(contextLength) || math.IsNaN(concurrency*contextLength) {
		return math.NaN()
	}
	ix, iy := di.computeIdx(concurrency, contextLength)
	return di.thptGrid[iy*DecodeGridSize+ix]
}

// FindBestThroughputPerGPU is Dynamo's find_best_throughput_per_gpu: in the grid row of
// contextLength, it scans KV usage from the highest node down and returns the first node
// whose ITL is at most itlMs, as (throughput per GPU, its ITL in ms, its KV usage). If no
// node meets the target it returns the zero-KV-usage node (whose ITL then exceeds itlMs).
// The scan is linear because the interpolated ITL need not be monotonic in KV usage.
// NaN inputs give NaN values.
func (di *DecodeInterpolator) FindBestThroughputPerGPU(itlMs, contextLength float64) (thpt, itl, kvUsage float64) {
	if math.IsNaN(itlMs) || math.IsNaN(contextLength) {
		return math.NaN(), math.NaN(), math.NaN()
	}
	row := gridIndex(contextLength, di.yi) * DecodeGridSize
	for ix := DecodeGridSize - 1; ix >= 0; ix-- {
		if di.itlGrid[row+ix] <= itlMs {
			return di.thptGrid[row+ix], di.itlGrid[row+ix], di.xi[ix]
		}
	}
	return di.thptGrid[row], di.itlGrid[row], di.xi[0]
}

// MaxKVTokens returns the KV-cache capacity of one engine, in tokens, of the profile.
func (di *DecodeInterpolator) MaxKVTokens() int64 { return int64(di.maxKVTokens) }

// EncodeInterpolator answers Dynamo's encoder question (EncodeInterpolator's
// interpolate_thpt_per_gpu): encoder throughput per GPU against request rate, linear
// between the profiled samples (numpy's interp) and clamped to the profiled range. It is
// immutable and safe for concurrent use.
type EncodeInterpolator struct {
	rate, thpt []float64 // sorted by rate
}

// NewEncodeInterpolator validates the profile and sorts a copy of its samples by rate.
func NewEncodeInterpolator(e *EncodeProfile) (*EncodeInterpolator, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	idx := make([]int, len(e.RequestRate))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareFloat(e.RequestRate[a], e.RequestRate[b]) })
	ei := &EncodeInterpolator{rate: make([]float64, len(idx)), thpt: make([]float64, len(idx))}
	for k, i := range idx {
		ei.rate[k], ei.thpt[k] = e.RequestRate[i], e.ThroughputPerGPU[i]
	}
	return ei, nil
}

// ThroughputPerGPU returns the interpolated encoder throughput per GPU at the given request
// rate, clamped to the profiled range. NaN gives NaN.
func (ei *EncodeInterpolator) ThroughputPerGPU(requestRate float64) float64 {
	if math.IsNaN(requestRate) {
		return math.NaN()
	}
	n := len(ei.rate)
	switch {
	case requestRate <= ei.rate[0]:
		return ei.thpt[0]
	case requestRate >= ei.rate[n-1]:
		return ei.thpt[n-1]
	}
	j, _ := slices.BinarySearch(ei.rate, requestRate) // rate[j-1] < requestRate <= rate[j]
	x0, x1, y0, y1 := ei.rate[j-1], ei.rate[j], ei.thpt[j-1], ei.thpt[j]
	return y0 + (y1-y0)*(requestRate-x0)/(x1-x0)
}
