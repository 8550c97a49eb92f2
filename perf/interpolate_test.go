package perf

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func newH200Interpolators(tb testing.TB) (*PrefillInterpolator, *DecodeInterpolator) {
	tb.Helper()
	p := loadH200(tb)
	pi, err := NewPrefillInterpolator(p.Prefill)
	require.NoError(tb, err)
	di, err := NewDecodeInterpolator(p.Decode)
	require.NoError(tb, err)
	return pi, di
}

func TestPrefillInterpolatorH200(t *testing.T) {
	p := loadH200(t).Prefill
	pi, err := NewPrefillInterpolator(p)
	require.NoError(t, err)

	// evaluation.md §5.1: 63.2 ms at ISL 3151 (a profiled point).
	require.InEpsilon(t, 63.2, pi.TTFTMs(3151), 0.02)
	// Sanity figure: about 50k tokens/s/GPU at ISL 3000, i.e. about 16.6 requests/s/GPU.
	require.InEpsilon(t, 50000, pi.ThroughputPerGPU(3000), 0.05)
	require.InEpsilon(t, 16.6, pi.ThroughputPerGPU(3000)/3000, 0.05)
	t.Logf("ISL 3000: TTFT %.3f ms, %.1f tokens/s/GPU; ISL 3151: TTFT %.6f ms",
		pi.TTFTMs(3000), pi.ThroughputPerGPU(3000), pi.TTFTMs(3151))

	// The spline passes through every node.
	for i, isl := range p.ISL {
		require.InEpsilon(t, p.TTFTMs[i], pi.TTFTMs(isl), 1e-12, "TTFT at ISL %v", isl)
		require.InEpsilon(t, p.ThroughputPerGPU[i], pi.ThroughputPerGPU(isl), 1e-12, "throughput at ISL %v", isl)
	}

	// Queries are clamped to [100, 16372].
	lo, hi := pi.ISLRange()
	require.Equal(t, 100.0, lo)
	require.Equal(t, 16372.0, hi)
	for _, isl := range []float64{0, -5, 99.9, math.Inf(-1)} {
		require.Equal(t, 19.525209, pi.TTFTMs(isl), "ISL %v", isl)
		require.Equal(t, 5121.5841018654401, pi.ThroughputPerGPU(isl), "ISL %v", isl)
	}
	for _, isl := range []float64{16372.1, 20000, 1e9, math.Inf(1)} {
		require.InEpsilon(t, 375.482618, pi.TTFTMs(isl), 1e-12, "ISL %v", isl)
		require.InEpsilon(t, 43602.550997447237, pi.ThroughputPerGPU(isl), 1e-12, "ISL %v", isl)
	}
	require.True(t, math.IsNaN(pi.TTFTMs(math.NaN())))
	require.True(t, math.IsNaN(pi.ThroughputPerGPU(math.NaN())))

	// Between nodes the spline stays between neighbouring values here (the data are smooth).
	v := pi.TTFTMs(2642.5)
	require.Greater(t, v, 49.968438)
	require.Less(t, v, 63.214755)
}

// TestPrefillInterpolatorIsNotAKnot checks the boundary condition scipy's
// interp1d(kind="cubic") uses: a not-a-knot spline reproduces any cubic polynomial exactly
// (a natural spline would not, its end second derivatives being forced to zero), and with
// exactly 4 points it is the interpolating cubic.
func TestPrefillInterpolatorIsNotAKnot(t *testing.T) {
	cubic := func(x float64) float64 { return 20 + 0.01*x + 2e-6*x*x + 3e-10*x*x*x }
	for _, isl := range [][]float64{
		{100, 1000, 3000, 8000},
		{100, 1117, 2134, 3151, 4168, 5185, 6202, 7219, 8236},
		{8000, 100, 3000, 1000, 500}, // unsorted
	} {
		p := &PrefillProfile{ISL: isl}
		for _, x := range isl {
			p.TTFTMs = append(p.TTFTMs, cubic(x))
			p.ThroughputPerGPU = append(p.ThroughputPerGPU, 1000+x)
		}
		pi, err := NewPrefillInterpolator(p)
		require.NoError(t, err)
		for x := 100.0; x <= 8000; x += 77 {
			require.InEpsilon(t, cubic(x), pi.TTFTMs(x), 1e-9, "x=%v nodes=%v", x, isl)
			require.InEpsilon(t, 1000+x, pi.ThroughputPerGPU(x), 1e-9, "x=%v nodes=%v", x, isl)
		}
	}
	_, err := NewPrefillInterpolator(&PrefillProfile{ISL: []float64{1, 2, 3}, TTFTMs: []float64{1, 2, 3}, ThroughputPerGPU: []float64{1, 2, 3}})
	require.EqualError(t, err, `perf: array "prefill_isl": has 3 points, want at least 4 (cubic spline)`)
	_, err = NewPrefillInterpolator(nil)
	require.EqualError(t, err, "perf: no prefill profile")
}

// TestDecodeAtReproducesProfile checks the direct interpolation at the profiled points.
func TestDecodeAtReproducesProfile(t *testing.T) {
	d := loadH200(t).Decode
	di, err := NewDecodeInterpolator(d)
	require.NoError(t, err)
	var maxITL, maxThpt float64
	for i := range d.KVUsage {
		itl, thpt := di.At(d.KVUsage[i], d.ContextLength[i])
		require.InDelta(t, d.ITLMs[i], itl, 1e-9, "point %d", i)
		require.InDelta(t, d.ThroughputPerGPU[i], thpt, 1e-9, "point %d", i)
		maxITL = math.Max(maxITL, math.Abs(itl-d.ITLMs[i]))
		maxThpt = math.Max(maxThpt, math.Abs(thpt-d.ThroughputPerGPU[i]))
	}
	t.Logf("direct interpolation at the 41 profiled points: max |ΔITL| %.3g ms, max |Δthroughput| %.3g tokens/s/GPU", maxITL, maxThpt)

	// Inside a triangle the value is a convex combination of its vertices'.
	itl, thpt := di.At(0.25, 2000)
	require.Greater(t, itl, 15.0)
	require.Less(t, itl, 42.5)
	require.Greater(t, thpt, 6000.0)
	require.Less(t, thpt, 18100.0)
	// Outside the hull: the nearest profiled point (here point 6, kv 0.5826 at ctx 350).
	itl, thpt = di.At(0.7, 100)
	require.Equal(t, d.ITLMs[6], itl)
	require.Equal(t, d.ThroughputPerGPU[6], thpt)
	// Nearest in raw coordinates, as Dynamo: at (0.9, 100) the context row wins, point 6
	// (kv 0.5826 at ctx 350), not point 13 (kv 0.9165 at ctx 2997), which is nearer in
	// normalised coordinates.
	itl, _ = di.At(0.9, 100)
	require.Equal(t, d.ITLMs[6], itl)
	itl, thpt = di.At(math.NaN(), 100)
	require.True(t, math.IsNaN(itl) && math.IsNaN(thpt))
}

// TestDecodeGridAtProfiledPoints measures how far Dynamo's grid lookup (interpolate_itl and
// interpolate_thpt_per_gpu) lands from the measured values when asked at the profiled
// points themselves, with the concurrency that gives each point's KV usage.
//
// The bound asserted per point: the lookup answers with the interpolant's value at the
// nearest grid node, which is at most half a cell away. Inside the convex hull the
// interpolant is piecewise linear, so along the straight segment from the point to the
// node (inside the hull, which is convex) it changes by at most Lx·|Δx| + Ly·|Δy|, where
// Lx and Ly are the largest partial derivatives over the triangles, plus the value spread
// of any sliver triangle whose box the segment meets (slivers are interpolated along an
// edge, see locate). A node outside the hull takes the nearest point's value, which must
// be the point itself (half a cell is far less than the spacing of the points).
func TestDecodeGridAtProfiledPoints(t *testing.T) {
	d := loadH200(t).Decode
	di, err := NewDecodeInterpolator(d)
	require.NoError(t, err)
	tr := di.tri
	maxKV := float64(d.MaxKVTokens)

	for _, series := range []struct {
		name   string
		values []float64
		grid   []float64
		lookup func(c, ctx float64) float64
	}{
		{"ITL", d.ITLMs, di.itlGrid, di.ITLMs},
		{"throughput", d.ThroughputPerGPU, di.thptGrid, di.ThroughputPerGPU},
	} {
		lx, ly, slivers := gradientBounds(tr, series.values)
		var maxRel, sumRel, maxAbs float64
		for i := range d.KVUsage {
			kv, ctx, want := d.KVUsage[i], d.ContextLength[i], series.values[i]
			concurrency := kv * maxKV / ctx
			got := series.lookup(concurrency, ctx)
			ix, iy := di.computeIdx(concurrency, ctx)
			require.Equal(t, series.grid[iy*DecodeGridSize+ix], got)
			require.Equal(t, int(math.RoundToEven(kv*99)), ix, "point %d", i)

			nx, ny := di.xi[ix], di.yi[iy]/di.maxContext
			px, py := tr.xs[i], tr.ys[i]
			if _, _, inside := tr.locate(nx, ny); inside {
				bound := lx*math.Abs(nx-px) + ly*math.Abs(ny-py)
				for _, s := range slivers {
					if segmentMeetsBox(px, py, nx, ny, s.box) {
						bound += s.spread
					}
				}
				require.LessOrEqual(t, math.Abs(got-want), bound+1e-9, "%s at point %d (node %d, %d)", series.name, i, ix, iy)
			} else {
				require.Equal(t, i, di.nearestRaw(nx, ny*di.maxContext), "%s at point %d: node outside the hull", series.name, i)
				require.Equal(t, want, got)
			}
			rel := math.Abs(got-want) / want
			maxRel = math.Max(maxRel, rel)
			maxAbs = math.Max(maxAbs, math.Abs(got-want))
			sumRel += rel
		}
		t.Logf("grid %s at the 41 profiled points: max relative error %.2f%%, mean %.2f%%, max absolute %.3f (Lx %.4g, Ly %.4g per unit of normalised coordinate)",
			series.name, 100*maxRel, 100*sumRel/41, maxAbs, lx, ly)
		if series.name == "ITL" {
			// The grid ITL is what the correction factor divides by: a few per cent at most.
			require.Less(t, maxRel, 0.05)
			require.Less(t, sumRel/41, 0.01)
		}
	}
}

type sliverInfo struct {
	box    [4]float64
	spread float64
}

// gradientBounds returns the largest |∂f/∂x| and |∂f/∂y| of the piecewise-linear
// interpolant of values over the non-sliver triangles, and the slivers with the spread of
// their vertex values.
func gradientBounds(tr *triangulation, values []float64) (lx, ly float64, slivers []sliverInfo) {
	for i, t := range tr.tris {
		ax, ay, az := tr.xs[t[0]], tr.ys[t[0]], values[t[0]]
		bx, by, bz := tr.xs[t[1]], tr.ys[t[1]], values[t[1]]
		cx, cy, cz := tr.xs[t[2]], tr.ys[t[2]], values[t[2]]
		area := det2(ax, ay, bx, by, cx, cy)
		if area <= sliverRatio*tr.longestEdge2[i] {
			slivers = append(slivers, sliverInfo{box: tr.boxes[i], spread: max(az, bz, cz) - min(az, bz, cz)})
			continue
		}
		gx := ((bz-az)*(cy-ay) - (cz-az)*(by-ay)) / area
		gy := ((cz-az)*(bx-ax) - (bz-az)*(cx-ax)) / area
		lx, ly = math.Max(lx, math.Abs(gx)), math.Max(ly, math.Abs(gy))
	}
	return lx, ly, slivers
}

// segmentMeetsBox reports whether the bounding box of the segment overlaps box
// (conservative).
func segmentMeetsBox(x0, y0, x1, y1 float64, box [4]float64) bool {
	return math.Max(x0, x1) >= box[0] && math.Min(x0, x1) <= box[2] &&
		math.Max(y0, y1) >= box[1] && math.Min(y0, y1) <= box[3]
}

func TestDecodeGridMatchesDirectInterpolation(t *testing.T) {
	_, di := newH200Interpolators(t)
	require.Len(t, di.xi, DecodeGridSize)
	require.Len(t, di.yi, DecodeGridSize)
	require.Equal(t, 0.0, di.xi[0])
	require.Equal(t, 1.0, di.xi[99])
	require.Equal(t, 13585.0, di.yi[99])
	require.Equal(t, 13585.0/99, di.yi[1]-di.yi[0])
	d := loadH200(t).Decode
	outside := 0
	for iy, y := range di.yi {
		for ix, x := range di.xi {
			itl, thpt := di.At(x, y)
			require.Equal(t, itl, di.itlGrid[iy*DecodeGridSize+ix])
			require.Equal(t, thpt, di.thptGrid[iy*DecodeGridSize+ix])
			require.Positive(t, itl)
			if _, _, ok := di.tri.locate(x, y/di.maxContext); !ok {
				outside++
				j := rawNearest(d, x, y)
				require.Equal(t, [2]float64{d.ITLMs[j], d.ThroughputPerGPU[j]}, [2]float64{itl, thpt},
					"node (%v, %v) outside the hull takes Dynamo's raw-coordinate nearest point", x, y)
			}
		}
	}
	t.Logf("grid nodes outside the hull (nearest-neighbour fill): %d of %d", outside, DecodeGridSize*DecodeGridSize)
	require.Positive(t, outside)
}

// rawNearest is the nearest profiled point in raw (kv usage, context tokens) coordinates,
// as Dynamo's griddata(method="nearest") finds it.
func rawNearest(d *DecodeProfile, kv, ctx float64) int {
	best, bestD := 0, math.Inf(1)
	for i := range d.KVUsage {
		dx, dy := d.KVUsage[i]-kv, d.ContextLength[i]-ctx
		if dd := dx*dx + dy*dy; dd < bestD {
			best, bestD = i, dd
		}
	}
	return best
}

func TestGridIndex(t *testing.T) {
	axis := linspace(0, 99, DecodeGridSize) // step exactly 1
	tests := []struct {
		v    float64
		want int
	}{
		{0, 0}, {0.49, 0}, {0.5, 0}, {1.5, 2}, {2.5, 2}, {3.5, 4}, {98.5, 98}, {98.6, 99},
		{-3, 0}, {1e9, 99}, {math.Inf(1), 99}, {math.Inf(-1), 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, gridIndex(tt.v, axis), "v=%v", tt.v)
	}
}

func TestDecodeLookupsH200(t *testing.T) {
	_, di := newH200Interpolators(t)
	require.Equal(t, int64(945029), di.MaxKVTokens())

	// The sanity figure of evaluation.md §5.1: about 4.8k tokens/s/GPU at ITL 10 ms and
	// context about 3,000 (about 48 concurrent sequences).
	thpt, itl, kv := di.FindBestThroughputPerGPU(10, 3150)
	t.Logf("FindBestThroughputPerGPU(10 ms, 3150) = %.4f tokens/s/GPU at ITL %.4f ms, KV usage %.6f (%.1f sequences)",
		thpt, itl, kv, kv*945029/3150)
	require.InEpsilon(t, 4800, thpt, 0.10)
	require.LessOrEqual(t, itl, 10.0)
	require.InEpsilon(t, 48, kv*945029/3150, 0.10)
	// It is the highest KV-usage node of its row meeting the target.
	ix := int(math.RoundToEven(kv * 99))
	iy := gridIndex(3150, di.yi)
	require.Equal(t, di.xi[ix], kv)
	require.Equal(t, itl, di.itlGrid[iy*DecodeGridSize+ix])
	require.Equal(t, thpt, di.thptGrid[iy*DecodeGridSize+ix])
	for j := ix + 1; j < DecodeGridSize; j++ {
		require.Greater(t, di.itlGrid[iy*DecodeGridSize+j], 10.0)
	}
	// The same cell through the concurrency-based lookups.
	concurrency := kv * 945029 / 3150
	require.Equal(t, itl, di.ITLMs(concurrency, 3150))
	require.Equal(t, thpt, di.ThroughputPerGPU(concurrency, 3150))

	// A looser target never lowers the KV usage chosen (the throughput can drop: the
	// measured throughput at ctx 2997 peaks at 76 % KV usage).
	prev := 0.0
	for _, target := range []float64{5, 10, 15, 20, 30, 40, 50} {
		_, itl, kv := di.FindBestThroughputPerGPU(target, 3150)
		require.LessOrEqual(t, itl, target)
		require.GreaterOrEqual(t, kv, prev, "ITL target %v", target)
		prev = kv
	}

	// An unreachable target returns the zero-KV node, whose ITL exceeds it.
	thpt, itl, kv = di.FindBestThroughputPerGPU(1, 3150)
	require.Equal(t, 0.0, kv)
	require.Greater(t, itl, 1.0)
	require.Equal(t, di.thptGrid[iy*DecodeGridSize], thpt)

	// Context beyond the profiled maximum uses the last row; concurrency beyond capacity the
	// last column (nearest-neighbour filled: point 40, kv 0.9631 at ctx 13585).
	require.Equal(t, 36.168974582089547, di.ITLMs(1e6, 50000))
	require.Equal(t, 1758.2197145433702, di.ThroughputPerGPU(1e6, 50000))
	// Zero concurrency: the zero-KV column, outside the hull: nearest point.
	require.Equal(t, 4.3798709999999996, di.ITLMs(0, 350))

	for _, v := range []float64{di.ITLMs(math.NaN(), 3000), di.ITLMs(10, math.NaN()), di.ThroughputPerGPU(math.NaN(), 1), di.ITLMs(math.Inf(1), 0)} {
		require.True(t, math.IsNaN(v))
	}
	thpt, itl, kv = di.FindBestThroughputPerGPU(math.NaN(), 3000)
	require.True(t, math.IsNaN(thpt) && math.IsNaN(itl) && math.IsNaN(kv))
}

func TestDecodeInterpolatorDoesNotModifyProfile(t *testing.T) {
	d := loadH200(t).Decode
	before := *d
	before.KVUsage = slices.Clone(d.KVUsage)
	before.ContextLength = slices.Clone(d.ContextLength)
	_, err := NewDecodeInterpolator(d)
	require.NoError(t, err)
	require.Equal(t, before.KVUsage, d.KVUsage)
	require.Equal(t, before.ContextLength, d.ContextLength)
	_, err = NewDecodeInterpolator(nil)
	require.EqualError(t, err, "perf: no decode profile")
}

func TestEncodeInterpolator(t *testing.T) {
	p, err := LoadProfile(profilesDir + "/encode")
	require.NoError(t, err)
	ei, err := NewEncodeInterpolator(p.Encode)
	require.NoError(t, err)
	tests := []struct{ rate, want float64 }{
		{2, 2}, {0.1, 1}, {10, 2.5}, {1, 1}, {4, 2.5}, {1.5, 1.5}, {3, 2.25}, {math.Inf(1), 2.5},
	}
	for _, tt := range tests {
		require.InDelta(t, tt.want, ei.ThroughputPerGPU(tt.rate), 1e-12, "rate %v", tt.rate)
	}
	require.True(t, math.IsNaN(ei.ThroughputPerGPU(math.NaN())))
	_, err = NewEncodeInterpolator(&EncodeProfile{RequestRate: []float64{1}, ThroughputPerGPU: []float64{1}})
	require.EqualError(t, err, `perf: array "encode_request_rate": has 1 samples, want at least 2`)
}

func BenchmarkNewDecodeInterpolator(b *testing.B) {
	d := loadH200(b).Decode
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewDecodeInterpolator(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFindBestThroughputPerGPU(b *testing.B) {
	_, di := newH200Interpolators(b)
	b.ReportAllocs()
	for b.Loop() {
		di.FindBestThroughputPerGPU(10, 3150)
	}
}

func BenchmarkDecodeAt(b *testing.B) {
	_, di := newH200Interpolators(b)
	b.ReportAllocs()
	for b.Loop() {
		di.At(0.37, 6000)
	}
}

func BenchmarkPrefillTTFT(b *testing.B) {
	pi, _ := newH200Interpolators(b)
	b.ReportAllocs()
	for b.Loop() {
		pi.TTFTMs(3000)
	}
}

func BenchmarkLoadProfile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadProfile(h200Dir); err != nil {
			b.Fatal(err)
		}
	}
}
