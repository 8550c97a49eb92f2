// Package perf holds the performance models the planner sizes replicas with.
//
// # Profile interpolators
//
// A pre-deployment profile (Dynamo's profiler output) gives prefill TTFT and throughput
// against input length, and decode ITL and throughput against KV usage and context length.
// LoadProfile reads it from Dynamo's layout (selected_<kind>_interpolation/raw_data.npz),
// this repository's bundled layout (<kind>_raw_data.npz) or Dynamo's JSON fallback
// (<kind>_raw_data.json), in that order; a directory with none of them is ErrNoProfile,
// malformed arrays are ErrInvalidProfile with the file and array named.
//
// The prefill curves are not-a-knot cubic splines (what scipy's interp1d(kind="cubic")
// builds). Dynamo grids the scattered decode points with scipy's griddata (cubic
// Clough–Tocher, nearest-neighbour fill); scipy is not available to a Go program, so the
// decode surface here is linear (barycentric) interpolation on a Delaunay triangulation
// built in normalised coordinates (KV usage, context / max context), with nearest-neighbour
// fill (Dynamo's, in raw coordinates) outside the hull, sampled on Dynamo's 100×100 lookup
// grid. On the H200 profile the direct interpolation reproduces all 41 profiled points
// exactly; against Dynamo's own grid (computed with scipy, testdata/dynamo_reference_h200.json)
// the best decode throughput per GPU differs by a median of 1.4 % (4613 vs 4556
// tokens/s/GPU at ITL 10 ms and context 3150); the prefill splines equal scipy's.
// The optional encoder curve is linear and clamped, as np.interp.
//
// # Online regression and the engine model
//
// Forward Pass Metrics (FPM) from the engines feed small linear models of one iteration's
// wall time (prefill: tokens; decode: requests and KV tokens; aggregated: prefill tokens and
// KV tokens), fitted by ordinary least squares with intercept on bucketed sample sets so one
// load level cannot crowd out the others (Regression). Dynamo's G2 models and formulas sit
// on top of it (PrefillRegressionModel, DecodeRegressionModel, AggRegressionModel), and so
// does the G3 query layer the planner decides with (EngineModel): the queued-prefill TTFT
// and scheduled-decode ITL estimates, and the engine capacity search. Dynamo takes its
// forward-pass estimates from its Python-only AI Configurator wheel, whose fallback is this
// regression; here the regression is the forward-pass model.
//
// Profile points become bootstrap samples with PrefillBootstrapFPMs and
// DecodeBootstrapFPMs (Dynamo §6.1).
//
// The package is pure: no I/O beyond reading profile files, no clock, no Temporal.
package perf
