package perf

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
)

// This file holds a small planar Delaunay triangulation (Bowyer–Watson) for the decode
// interpolator. Dynamo hands its scattered decode points to scipy's griddata, which
// triangulates them with Qhull; the Go module proxy available here refuses the usual Go
// package (github.com/fogleman/delaunay), and the point sets are tiny (tens of points), so
// a short, exact implementation is preferable to a fast, clever one.
//
// Method. Points are inserted one at a time into a triangulation that carries "ghost"
// triangles: every convex-hull edge u→v (stored clockwise, so the outside lies to its left)
// has a ghost triangle (u, v, ∞). A real triangle conflicts with a new point p when p lies
// strictly inside its circumcircle; a ghost triangle conflicts when p lies strictly outside
// its hull edge, or on the edge's line strictly between u and v (the ghost's "circumcircle"
// is the open outer half-plane plus the open edge, as in Cheng, Dey and Shewchuk, Delaunay
// Mesh Generation, ch. 3). The conflicting triangles form a cavity that is star-shaped from
// p; it is removed and every cavity boundary edge x→y is joined to p as the triangle
// (x, y, p), which is a ghost when x or y is ∞. Ghosts remove the classic Bowyer–Watson
// weakness of a finite super-triangle (missing or spurious hull triangles) and make points
// outside the current hull need no special case.
//
// Robustness. Both predicates (orientation and in-circle) are evaluated with Shewchuk's
// floating-point error bounds and, when the floating-point sign is not certain, exactly
// with math/big rationals, so the result is the exact Delaunay triangulation of the given
// float64 coordinates (for co-circular points, one of the valid ones). The cost is
// O(n²) (each insertion scans every triangle), fine for the few hundred points a profile
// can hold.

// Errors of the triangulation. They are wrapped with the offending indices or coordinates.
var (
	// errTooFewPoints: fewer than three points.
	errTooFewPoints = errors.New("fewer than 3 points")
	// errDuplicatePoint: two points have identical coordinates.
	errDuplicatePoint = errors.New("duplicate point")
	// errCollinear: all points lie on one line, so there is no triangle.
	errCollinear = errors.New("all points are collinear")
	// errNonFinite: a coordinate is NaN or infinite.
	errNonFinite = errors.New("non-finite coordinate")
)

// ghost is the vertex index of the point at infinity shared by all ghost triangles.
const ghost = -1

// triangulation is a Delaunay triangulation of a set of distinct points, not all collinear.
type triangulation struct {
	xs, ys []float64
	// tris are the real triangles, counter-clockwise vertex indices into xs/ys.
	tris [][3]int
	// hull is the convex hull, counter-clockwise, including points lying on hull edges.
	hull []int
	// boxes are the bounding boxes of tris (minX, minY, maxX, maxY), for point location.
	boxes [][4]float64
	// longestEdge2 are the squared lengths of the longest edge of each of tris.
	longestEdge2 []float64
}

// triangulate builds the Delaunay triangulation of the points (xs[i], ys[i]). It returns an
// error (never panics) for fewer than three points, non-finite coordinates, duplicate points
// or points that are all collinear.
func triangulate(xs, ys []float64) (*triangulation, error) {
	n := len(xs)
	if len(ys) != n {
		return nil, fmt.Errorf("delaunay: %d x coordinates but %d y coordinates", n, len(ys))
	}
	if n < 3 {
		return nil, fmt.Errorf("delaunay: %w (got %d)", errTooFewPoints, n)
	}
	for i := range n {
		if !isFinite(xs[i]) || !isFinite(ys[i]) {
			return nil, fmt.Errorf("delaunay: %w: point %d is (%g, %g)", errNonFinite, i, xs[i], ys[i])
		}
	}
	if i, j, ok := findDuplicate(xs, ys); ok {
		return nil, fmt.Errorf("delaunay: %w: points %d and %d are both (%g, %g)", errDuplicatePoint, i, j, xs[i], ys[i])
	}

	// The first triangle: point 0, point 1 and the first point off their line.
	c := -1
	for k := 2; k < n; k++ {
		if orient2d(xs[0], ys[0], xs[1], ys[1], xs[k], ys[k]) != 0 {
			c = k
			break
		}
	}
	if c < 0 {
		return nil, fmt.Errorf("delaunay: %w (%d points)", errCollinear, n)
	}
	b := &builder{xs: xs, ys: ys}
	a, bb := 0, 1
	if orient2d(xs[a], ys[a], xs[bb], ys[bb], xs[c], ys[c]) < 0 {
		a, bb = bb, a
	}
	b.add([3]int{a, bb, c})
	b.add([3]int{bb, a, ghost})
	b.add([3]int{c, bb, ghost})
	b.add([3]int{a, c, ghost})

	for p := 2; p < n; p++ {
		if p == c {
			continue
		}
		if err := b.insert(p); err != nil {
			return nil, err
		}
	}
	return b.finish(), nil
}

// builder holds the triangles (real and ghost) while points are inserted.
type builder struct {
	xs, ys []float64
	tris   [][3]int // ghost triangles have ghost at index 2
}

// add appends a triangle, rotating a ghost vertex to position 2 (orientation preserved).
func (b *builder) add(t [3]int) {
	if t[0] == ghost {
		t = [3]int{t[1], t[2], t[0]}
	} else if t[1] == ghost {
		t = [3]int{t[2], t[0], t[1]}
	}
	b.tris = append(b.tris, t)
}

// conflicts reports whether point p lies in the (open) circumcircle of triangle t.
func (b *builder) conflicts(t [3]int, p int) bool {
	px, py := b.xs[p], b.ys[p]
	ux, uy := b.xs[t[0]], b.ys[t[0]]
	vx, vy := b.xs[t[1]], b.ys[t[1]]
	if t[2] == ghost {
		switch o := orient2d(ux, uy, vx, vy, px, py); {
		case o > 0:
			return true
		case o < 0:
			return false
		}
		// On the hull edge's line: a conflict only strictly between u and v.
		if ux != vx {
			return math.Min(ux, vx) < px && px < math.Max(ux, vx)
		}
		return math.Min(uy, vy) < py && py < math.Max(uy, vy)
	}
	return incircle(ux, uy, vx, vy, b.xs[t[2]], b.ys[t[2]], px, py) > 0
}

// insert adds point p: it removes the triangles p conflicts with and joins the boundary of
// the cavity they leave to p.
func (b *builder) insert(p int) error {
	type edge struct{ from, to int }
	cavity := map[edge]bool{}
	var edges []edge // the cavity's edges in order: no map iteration (Decide runs in workflow code)
	kept := b.tris[:0:0]
	for _, t := range b.tris {
		if !b.conflicts(t, p) {
			kept = append(kept, t)
			continue
		}
		for k := range 3 {
			e := edge{t[k], t[(k+1)%3]}
			if !cavity[e] {
				cavity[e] = true
				edges = append(edges, e)
			}
		}
	}
	if len(cavity) == 0 {
		// Cannot happen with exact predicates and distinct points; never panic on it.
		return fmt.Errorf("delaunay: internal error: point %d (%g, %g) conflicts with no triangle", p, b.xs[p], b.ys[p])
	}
	b.tris = kept
	// Boundary edges are the cavity edges whose reverse is not in the cavity. Sort them so the
	// triangle order does not depend on map iteration.
	var boundary []edge
	for _, e := range edges {
		if !cavity[edge{e.to, e.from}] {
			boundary = append(boundary, e)
		}
	}
	slices.SortFunc(boundary, func(a, c edge) int {
		if a.from != c.from {
			return a.from - c.from
		}
		return a.to - c.to
	})
	for _, e := range boundary {
		b.add([3]int{e.from, e.to, p})
	}
	return nil
}

// finish drops the ghost triangles and extracts the hull.
func (b *builder) finish() *triangulation {
	tr := &triangulation{xs: b.xs, ys: b.ys}
	// Ghost (u, v, ∞) means hull edge u→v clockwise, that is v→u counter-clockwise.
	next := map[int]int{}
	start := -1
	for _, t := range b.tris {
		if t[2] == ghost {
			next[t[1]] = t[0]
			if start < 0 || t[1] < start {
				start = t[1]
			}
			continue
		}
		tr.tris = append(tr.tris, t)
		var l2 float64
		for k := range 3 {
			dx, dy := b.xs[t[(k+1)%3]]-b.xs[t[k]], b.ys[t[(k+1)%3]]-b.ys[t[k]]
			l2 = max(l2, dx*dx+dy*dy)
		}
		tr.longestEdge2 = append(tr.longestEdge2, l2)
		tr.boxes = append(tr.boxes, [4]float64{
			min(b.xs[t[0]], b.xs[t[1]], b.xs[t[2]]), min(b.ys[t[0]], b.ys[t[1]], b.ys[t[2]]),
			max(b.xs[t[0]], b.xs[t[1]], b.xs[t[2]]), max(b.ys[t[0]], b.ys[t[1]], b.ys[t[2]]),
		})
	}
	for v := start; ; {
		tr.hull = append(tr.hull, v)
		v = next[v]
		if v == start || len(tr.hull) > len(next) {
			break
		}
	}
	return tr
}

// locate returns the index of a triangle that contains (x, y), boundary included, and the
// interpolation weights of its three vertices; ok is false when (x, y) lies outside the
// hull. Containment is decided with exact predicates. The weights are the barycentric
// coordinates, computed in floating point so that at a vertex its own weight is exactly 1
// and the others exactly 0. In a sliver (a triangle whose height is below sliverRatio times
// its longest edge, which nearly collinear hull points produce) barycentric coordinates are
// dominated by round-off, so the point is instead projected on the nearest edge and
// interpolated linearly along it.
func (tr *triangulation) locate(x, y float64) (tri int, w [3]float64, ok bool) {
	for i, t := range tr.tris {
		bx := tr.boxes[i]
		if x < bx[0] || x > bx[2] || y < bx[1] || y > bx[3] {
			continue
		}
		ax, ay := tr.xs[t[0]], tr.ys[t[0]]
		bbx, bby := tr.xs[t[1]], tr.ys[t[1]]
		cx, cy := tr.xs[t[2]], tr.ys[t[2]]
		if orient2d(ax, ay, bbx, bby, x, y) < 0 || orient2d(bbx, bby, cx, cy, x, y) < 0 || orient2d(cx, cy, ax, ay, x, y) < 0 {
			continue
		}
		area := det2(ax, ay, bbx, bby, cx, cy)
		if area <= sliverRatio*tr.longestEdge2[i] {
			return i, edgeWeights(x, y, [3]float64{ax, bbx, cx}, [3]float64{ay, bby, cy}), true
		}
		w[0] = det2(x, y, bbx, bby, cx, cy) / area
		w[1] = det2(ax, ay, x, y, cx, cy) / area
		w[2] = det2(ax, ay, bbx, bby, x, y) / area
		return i, w, true
	}
	return -1, w, false
}

// sliverRatio is the height / longest-edge ratio under which a triangle is treated as a
// sliver by locate: round-off in barycentric coordinates grows as its inverse, so 1e-9
// keeps them accurate to about 1e-7 in well-shaped triangles.
const sliverRatio = 1e-9

// edgeWeights projects (x, y) on the nearest edge of the triangle with vertices (xs[k],
// ys[k]) and returns the linear-interpolation weights along that edge (0 for the third
// vertex).
func edgeWeights(x, y float64, xs, ys [3]float64) [3]float64 {
	var best [3]float64
	bestD := math.Inf(1)
	for k := range 3 {
		j := (k + 1) % 3
		ex, ey := xs[j]-xs[k], ys[j]-ys[k]
		t := ((x-xs[k])*ex + (y-ys[k])*ey) / (ex*ex + ey*ey)
		t = math.Max(0, math.Min(1, t))
		dx, dy := xs[k]+t*ex-x, ys[k]+t*ey-y
		if d := dx*dx + dy*dy; d < bestD {
			bestD = d
			best = [3]float64{}
			best[k], best[j] = 1-t, t
		}
	}
	return best
}

// det2 is twice the signed area of triangle (a, b, c), written so that det2(a, b, c) with
// one vertex substituted by the query reproduces the same floating-point expression.
func det2(ax, ay, bx, by, cx, cy float64) float64 {
	return (bx-ax)*(cy-ay) - (by-ay)*(cx-ax)
}

// findDuplicate reports two indices with identical coordinates, if any.
func findDuplicate(xs, ys []float64) (i, j int, ok bool) {
	idx := make([]int, len(xs))
	for k := range idx {
		idx[k] = k
	}
	cmp := func(a, b int) int {
		if c := compareFloat(xs[a], xs[b]); c != 0 {
			return c
		}
		return compareFloat(ys[a], ys[b])
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp(a, b); c != 0 {
			return c
		}
		return a - b
	})
	for k := 1; k < len(idx); k++ {
		if cmp(idx[k-1], idx[k]) == 0 {
			return idx[k-1], idx[k], true
		}
	}
	return 0, 0, false
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Error-bound constants of Shewchuk's adaptive predicates ("Adaptive Precision
// Floating-Point Arithmetic and Fast Robust Geometric Predicates", 1997): if the magnitude of
// the floating-point determinant exceeds bound × permanent, its sign is exact.
const (
	epsilon      = 1.0 / (1 << 53) // half an ulp of 1
	ccwErrBoundA = (3 + 16*epsilon) * epsilon
	iccErrBoundA = (10 + 96*epsilon) * epsilon
)

// orient2d returns +1 if a, b, c turn counter-clockwise, -1 if clockwise and 0 if they are
// collinear, exactly.
func orient2d(ax, ay, bx, by, cx, cy float64) int {
	acx, bcy := ax-cx, by-cy
	acy, bcx := ay-cy, bx-cx
	// The determinant is L - R with L = acx·bcy and R = acy·bcx. A floating-point
	// difference has the sign of the exact one (it is zero only for equal operands), so the
	// signs of the exact L and R are known; when they differ, so is the sign of L - R. This
	// settles points sharing a coordinate (the decode profile's rows) without big numbers.
	sl, sr := sign(acx)*sign(bcy), sign(acy)*sign(bcx)
	if sl != sr || sl == 0 {
		return sign(float64(sl - sr))
	}
	detL, detR := acx*bcy, acy*bcx
	det := detL - detR
	bound := ccwErrBoundA * (math.Abs(detL) + math.Abs(detR))
	if det > bound {
		return 1
	}
	if -det > bound {
		return -1
	}
	return orient2dExact(ax, ay, bx, by, cx, cy)
}

func sign(v float64) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func orient2dExact(ax, ay, bx, by, cx, cy float64) int {
	acx, bcy := ratSub(ax, cx), ratSub(by, cy)
	acy, bcx := ratSub(ay, cy), ratSub(bx, cx)
	l := new(big.Rat).Mul(acx, bcy)
	r := new(big.Rat).Mul(acy, bcx)
	return l.Cmp(r)
}

// incircle returns +1 if d lies strictly inside the circle through a, b, c (given
// counter-clockwise), -1 if strictly outside and 0 if on it, exactly.
func incircle(ax, ay, bx, by, cx, cy, dx, dy float64) int {
	adx, ady := ax-dx, ay-dy
	bdx, bdy := bx-dx, by-dy
	cdx, cdy := cx-dx, cy-dy
	bdxcdy, cdxbdy := bdx*cdy, cdx*bdy
	cdxady, adxcdy := cdx*ady, adx*cdy
	adxbdy, bdxady := adx*bdy, bdx*ady
	aLift := adx*adx + ady*ady
	bLift := bdx*bdx + bdy*bdy
	cLift := cdx*cdx + cdy*cdy
	det := aLift*(bdxcdy-cdxbdy) + bLift*(cdxady-adxcdy) + cLift*(adxbdy-bdxady)
	permanent := (math.Abs(bdxcdy)+math.Abs(cdxbdy))*aLift +
		(math.Abs(cdxady)+math.Abs(adxcdy))*bLift +
		(math.Abs(adxbdy)+math.Abs(bdxady))*cLift
	bound := iccErrBoundA * permanent
	if det > bound {
		return 1
	}
	if -det > bound {
		return -1
	}
	return incircleExact(ax, ay, bx, by, cx, cy, dx, dy)
}

func incircleExact(ax, ay, bx, by, cx, cy, dx, dy float64) int {
	adx, ady := ratSub(ax, dx), ratSub(ay, dy)
	bdx, bdy := ratSub(bx, dx), ratSub(by, dy)
	cdx, cdy := ratSub(cx, dx), ratSub(cy, dy)
	lift := func(x, y *big.Rat) *big.Rat {
		s := new(big.Rat).Mul(x, x)
		return s.Add(s, new(big.Rat).Mul(y, y))
	}
	cross := func(x1, y1, x2, y2 *big.Rat) *big.Rat {
		s := new(big.Rat).Mul(x1, y2)
		return s.Sub(s, new(big.Rat).Mul(y1, x2))
	}
	det := new(big.Rat).Mul(lift(adx, ady), cross(bdx, bdy, cdx, cdy))
	det.Add(det, new(big.Rat).Mul(lift(bdx, bdy), cross(cdx, cdy, adx, ady)))
	det.Add(det, new(big.Rat).Mul(lift(cdx, cdy), cross(adx, ady, bdx, bdy)))
	return det.Sign()
}

// ratSub returns a - b exactly.
func ratSub(a, b float64) *big.Rat {
	r := new(big.Rat).SetFloat64(a)
	return r.Sub(r, new(big.Rat).SetFloat64(b))
}
