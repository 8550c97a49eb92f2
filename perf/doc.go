// Package perf holds the performance models the planner sizes replicas with.
//
// # Profile interpolators
//
// A pre-deployment profile (Dynamo's profiler output: NPZ or JSON) gives prefill TTFT and
// throughput against input length, and decode ITL and throughput against KV usage and
// context length. The interpolators answer the classic ("G1") sizing questions.
//
// # Online regression
//
// Forward Pass Metrics (FPM) from the engines feed small linear models of one iteration's
// wall time (prefill: tokens; decode: requests and KV tokens; aggregated: prefill tokens and
// KV tokens), kept in bucketed sample sets so one load level cannot crowd out the others.
// On top of the forward-pass model sit the TTFT and ITL estimators and the engine capacity
// searches the load and throughput loops use.
//
// The package is pure: no I/O beyond reading profile files, no clock, no Temporal.
package perf
