package perf

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkDelaunay asserts the properties of a valid Delaunay triangulation of (xs, ys):
// counter-clockwise triangles, empty circumcircles (exact predicate), a conforming mesh
// (every edge in at most two triangles, hull edges in exactly one), the triangles covering
// the convex hull exactly (area and Euler count 2n - 2 - h, h counting every point on the
// hull boundary) and every point used.
func checkDelaunay(t *testing.T, tr *triangulation, xs, ys []float64) {
	t.Helper()
	n := len(xs)
	type edge struct{ a, b int }
	edges := map[edge]int{}
	used := make([]bool, n)
	area := 0.0
	for _, tri := range tr.tris {
		a, b, c := tri[0], tri[1], tri[2]
		require.Equal(t, 1, orient2d(xs[a], ys[a], xs[b], ys[b], xs[c], ys[c]), "triangle %v is not counter-clockwise", tri)
		area += det2(xs[a], ys[a], xs[b], ys[b], xs[c], ys[c]) / 2
		for k := range 3 {
			used[tri[k]] = true
			edges[edge{tri[k], tri[(k+1)%3]}]++
		}
		for p := range n {
			if p == a || p == b || p == c {
				continue
			}
			require.LessOrEqual(t, incircle(xs[a], ys[a], xs[b], ys[b], xs[c], ys[c], xs[p], ys[p]), 0,
				"point %d lies inside the circumcircle of %v", p, tri)
		}
	}
	for e, k := range edges {
		require.Equal(t, 1, k, "directed edge %v appears %d times", e, k)
	}
	for p := range n {
		require.True(t, used[p], "point %d is in no triangle", p)
	}

	// The hull: counter-clockwise, convex (collinear boundary points allowed), every hull
	// edge in exactly one triangle, every other edge in two.
	h := len(tr.hull)
	require.GreaterOrEqual(t, h, 3)
	hullEdges := map[edge]bool{}
	hullArea := 0.0
	for i, v := range tr.hull {
		w, u := tr.hull[(i+1)%h], tr.hull[(i+2)%h]
		require.GreaterOrEqual(t, orient2d(xs[v], ys[v], xs[w], ys[w], xs[u], ys[u]), 0, "hull turns clockwise at %d", w)
		hullEdges[edge{v, w}] = true
		require.Equal(t, 1, edges[edge{v, w}], "hull edge %d→%d is not a triangle edge", v, w)
		require.Zero(t, edges[edge{w, v}], "hull edge %d→%d has a triangle outside", v, w)
		hullArea += (xs[v]*ys[w] - xs[w]*ys[v]) / 2
	}
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(tr.hull))), h, "hull repeats a vertex")
	for e := range edges {
		if !hullEdges[e] {
			require.Equal(t, 1, edges[edge{e.b, e.a}], "interior edge %v has no twin", e)
		}
	}
	// No point lies outside the hull.
	for p := range n {
		for i, v := range tr.hull {
			w := tr.hull[(i+1)%h]
			require.GreaterOrEqual(t, orient2d(xs[v], ys[v], xs[w], ys[w], xs[p], ys[p]), 0, "point %d is outside hull edge %d→%d", p, v, w)
		}
	}
	require.Len(t, tr.tris, 2*n-2-h, "Euler count")
	require.InEpsilon(t, hullArea, area, 1e-9, "triangles do not cover the hull")
}

func randomPoints(seed uint64, n int) (xs, ys []float64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	xs, ys = make([]float64, n), make([]float64, n)
	for i := range n {
		xs[i], ys[i] = rng.Float64(), rng.Float64()
	}
	return xs, ys
}

func TestTriangulateRandom(t *testing.T) {
	for _, tc := range []struct {
		seed uint64
		n    int
	}{{1, 3}, {2, 4}, {3, 5}, {4, 10}, {5, 41}, {6, 100}, {7, 300}} {
		xs, ys := randomPoints(tc.seed, tc.n)
		tr, err := triangulate(xs, ys)
		require.NoError(t, err)
		checkDelaunay(t, tr, xs, ys)
		// Points in general position: the hull is exactly the monotone-chain hull.
		require.ElementsMatch(t, monotoneChainHull(xs, ys), tr.hull, "seed %d", tc.seed)
	}
}

func TestTriangulateDegenerateButValid(t *testing.T) {
	type validCase struct {
		name     string
		xs, ys   []float64
		wantHull int // points on the hull boundary; -1: not checked
	}
	var tests []validCase
	// A 7×7 grid: every cell's four corners are co-circular, 24 points on the boundary.
	var gx, gy []float64
	for i := range 7 {
		for j := range 7 {
			gx, gy = append(gx, float64(i)), append(gy, float64(j))
		}
	}
	tests = append(tests, validCase{"grid", gx, gy, 24})
	// 16 points on a circle (co-circular up to round-off) and the centre.
	var cx, cy []float64
	for k := range 16 {
		a := 2 * math.Pi * float64(k) / 16
		cx, cy = append(cx, math.Cos(a)), append(cy, math.Sin(a))
	}
	cx, cy = append(cx, 0), append(cy, 0)
	tests = append(tests, validCase{"circle and centre", cx, cy, 16})
	// Ten collinear points first (dyadic coordinates, so exactly collinear), then one point off the line: the first triangle is
	// built from points 0, 1 and 10, the others are inserted on or beyond hull edges.
	var lx, ly []float64
	for i := range 10 {
		lx, ly = append(lx, float64(i)*0.125), append(ly, float64(i)*0.375)
	}
	lx, ly = append(lx, 0.5), append(ly, -1)
	tests = append(tests, validCase{"collinear then one off", lx, ly, 11})
	// Nearly collinear points, as the decode profile's zero-load column: y = x × c computed
	// in floating point, so the points are collinear only up to round-off.
	var nx, ny []float64
	for _, ctx := range []float64{350, 2997, 5644, 8291, 10938, 13585} {
		nx, ny = append(nx, ctx/945029), append(ny, ctx/13585)
	}
	nx, ny = append(nx, 0.5, 0.9), append(ny, 0.3, 0.8)
	tests = append(tests, validCase{"nearly collinear", nx, ny, -1})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := triangulate(tt.xs, tt.ys)
			require.NoError(t, err)
			checkDelaunay(t, tr, tt.xs, tt.ys)
			if tt.wantHull > 0 {
				require.Len(t, tr.hull, tt.wantHull)
			}
		})
	}
}

func TestTriangulateShuffledDecodeProfile(t *testing.T) {
	d := loadH200(t).Decode
	xs, ys := d.normalisedPoints()
	tr, err := triangulate(xs, ys)
	require.NoError(t, err)
	checkDelaunay(t, tr, xs, ys)
	// Insertion order changes the triangles only where points are co-circular; the
	// properties hold for every order.
	rng := rand.New(rand.NewPCG(11, 12))
	for range 5 {
		perm := rng.Perm(len(xs))
		px, py := make([]float64, len(xs)), make([]float64, len(xs))
		for i, j := range perm {
			px[i], py[i] = xs[j], ys[j]
		}
		tr, err := triangulate(px, py)
		require.NoError(t, err)
		checkDelaunay(t, tr, px, py)
	}
}

func TestTriangulateErrors(t *testing.T) {
	rx, ry := randomPoints(9, 20)
	dupX, dupY := append(slices.Clone(rx), rx[7]), append(slices.Clone(ry), ry[7])
	var lineX, lineY, vertX, vertY []float64
	for i := range 100 {
		// Dyadic coordinates: exactly collinear (i/7 would be collinear only up to
		// round-off, and the exact predicates would rightly triangulate it).
		lineX, lineY = append(lineX, float64(i)/8), append(lineY, 2*float64(i)/8+1)
		vertX, vertY = append(vertX, 3), append(vertY, float64(i))
	}
	tests := []struct {
		name   string
		xs, ys []float64
		want   error
		msg    string
	}{
		{"none", nil, nil, errTooFewPoints, "delaunay: fewer than 3 points (got 0)"},
		{"two", []float64{0, 1}, []float64{0, 1}, errTooFewPoints, "delaunay: fewer than 3 points (got 2)"},
		{"three collinear", []float64{0, 1, 2}, []float64{0, 1, 2}, errCollinear, "delaunay: all points are collinear (3 points)"},
		{"hundred collinear", lineX, lineY, errCollinear, "delaunay: all points are collinear (100 points)"},
		{"vertical line", vertX, vertY, errCollinear, "delaunay: all points are collinear (100 points)"},
		{"duplicate", dupX, dupY, errDuplicatePoint, ""},
		{"all the same", []float64{1, 1, 1}, []float64{2, 2, 2}, errDuplicatePoint, "delaunay: duplicate point: points 0 and 1 are both (1, 2)"},
		{"NaN", []float64{0, 1, math.NaN()}, []float64{0, 1, 0}, errNonFinite, "delaunay: non-finite coordinate: point 2 is (NaN, 0)"},
		{"Inf", []float64{0, 1, 0}, []float64{0, 1, math.Inf(-1)}, errNonFinite, "delaunay: non-finite coordinate: point 2 is (0, -Inf)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = triangulate(tt.xs, tt.ys) })
			require.ErrorIs(t, err, tt.want)
			if tt.msg != "" {
				require.EqualError(t, err, tt.msg)
			}
		})
	}
	_, err := triangulate([]float64{0, 1, 2}, []float64{0, 1})
	require.EqualError(t, err, "delaunay: 3 x coordinates but 2 y coordinates")
}

// TestPredicatesExact compares the filtered predicates with exact rational arithmetic on
// Shewchuk's classic near-degenerate configuration: points a few ulps around (0.5, 0.5),
// tested against the line through (12, 12) and (24, 24), where naive floating point gets
// the sign wrong.
func TestPredicatesExact(t *testing.T) {
	ulp := math.Nextafter(0.5, 1) - 0.5
	wrongNaive := 0
	for i := range 64 {
		for j := range 64 {
			px, py := 0.5+float64(i)*ulp, 0.5+float64(j)*ulp
			got := orient2d(px, py, 12, 12, 24, 24)
			want := orient2dExact(px, py, 12, 12, 24, 24)
			require.Equal(t, want, got, "orient2d(%d, %d)", i, j)
			naive := (12-px)*(24-py) - (12-py)*(24-px)
			if (naive > 0) != (want > 0) || (naive == 0) != (want == 0) {
				wrongNaive++
			}
			gotC := incircle(px, py, 12, 12, 24, 24.5, 0, 1)
			require.Equal(t, incircleExact(px, py, 12, 12, 24, 24.5, 0, 1), gotC)
		}
	}
	require.Positive(t, wrongNaive, "the configuration should defeat naive arithmetic")
	// Co-circular: the four corners of a square.
	require.Zero(t, incircle(0, 0, 1, 0, 1, 1, 0, 1))
	require.Equal(t, 1, incircle(0, 0, 1, 0, 1, 1, 0.5, 0.5))
	require.Equal(t, -1, incircle(0, 0, 1, 0, 1, 1, 2, 2))
}

func TestLocate(t *testing.T) {
	xs := []float64{0, 1, 0, 1}
	ys := []float64{0, 0, 1, 1}
	tr, err := triangulate(xs, ys)
	require.NoError(t, err)
	// Inside: weights are non-negative, sum to 1 and reproduce the point.
	for _, q := range [][2]float64{{0.25, 0.25}, {0.5, 0.5}, {0.9, 0.1}, {0, 0}, {1, 1}, {0.5, 0}} {
		i, w, ok := tr.locate(q[0], q[1])
		require.True(t, ok, "%v", q)
		v := tr.tris[i]
		require.InDelta(t, 1, w[0]+w[1]+w[2], 1e-15)
		require.InDelta(t, q[0], w[0]*xs[v[0]]+w[1]*xs[v[1]]+w[2]*xs[v[2]], 1e-15)
		require.InDelta(t, q[1], w[0]*ys[v[0]]+w[1]*ys[v[1]]+w[2]*ys[v[2]], 1e-15)
		for _, x := range w {
			require.GreaterOrEqual(t, x, 0.0)
		}
	}
	_, _, ok := tr.locate(1.0000001, 0.5)
	require.False(t, ok)

	// A sliver: the query is projected on the nearest edge.
	w := edgeWeights(0.5, 1e-20, [3]float64{0, 0.5, 1}, [3]float64{0, 1e-19, 0})
	require.InDelta(t, 1, w[0]+w[1]+w[2], 1e-15)
	for _, x := range w {
		require.GreaterOrEqual(t, x, 0.0)
		require.LessOrEqual(t, x, 1.0)
	}
}

// monotoneChainHull is Andrew's convex hull (strict: collinear points dropped), an
// independent check of the triangulation's hull for points in general position.
func monotoneChainHull(xs, ys []float64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := compareFloat(xs[a], xs[b]); c != 0 {
			return c
		}
		return compareFloat(ys[a], ys[b])
	})
	var hull []int
	for pass := range 2 {
		start := len(hull)
		for _, p := range idx {
			for len(hull) >= start+2 {
				a, b := hull[len(hull)-2], hull[len(hull)-1]
				if orient2d(xs[a], ys[a], xs[b], ys[b], xs[p], ys[p]) > 0 {
					break
				}
				hull = hull[:len(hull)-1]
			}
			hull = append(hull, p)
		}
		hull = hull[:len(hull)-1]
		if pass == 0 {
			slices.Reverse(idx)
		}
	}
	return hull
}
