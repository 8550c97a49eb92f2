// Package profiler is the pre-deployment profiler behind `planner profile`: it measures
// one or more OpenAI-compatible endpoints (one per parallelism option, each labelled with
// its GPUs per engine, or engines it starts from a command template), and writes the
// profile in the layout the planner's profile_results_dir loads (and Dynamo's planner
// would load), a self-contained HTML report and a recommended planner config.
//
// The sweeps follow Dynamo's pre-deployment profiler (reference/dynamo-planner.md §6.3):
//
//   - prefill: the TTFT of single streamed requests at ISLs from 100 up to the context
//     limit in steps of (limit − 100)/16; each point has warm-up requests and repetitions
//     with unique prompts (no prefix-cache hit), and keeps the median;
//   - decode: at 6 prompt lengths (context = ISL + OSL/2), in-flight counts from 1 up to
//     the KV capacity (read from the engine's vllm:cache_config_info metric) over ISL +
//     OSL. All requests of a point share one prompt that a warm-up request put in the
//     prefix cache, so they decode without piggy-backed prefill; the ITL is measured on a
//     sample of streamed requests in the steady window (every request decoding, none
//     finished) and the median over the sample is kept. Prompts are context − OSL/2
//     tokens long (OSL here: the decode-sweep output tokens), so the measured tokens'
//     mean context is within a few tokens of the point's context; points are labelled,
//     as Dynamo's, with the grid context and KV usage = in-flight × context / capacity.
//
// Each option's points are saved in Dir/raw as they are measured, so a run that is
// interrupted and started again measures only the missing points. Selection is Dynamo's:
// separately for prefill and decode, the option that meets the SLA with the highest
// throughput per GPU.
//
// The package is pure (no Temporal); it only does HTTP and, for command options, starts
// and stops processes.
package profiler
