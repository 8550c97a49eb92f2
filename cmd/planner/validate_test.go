package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidateCommand(t *testing.T) {
	code, out, errOut := runCLI("validate", "-f", "../../config/testdata/good/dynamo_disagg_sla.yaml")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "dynamo_disagg_sla.yaml: valid")
	require.Contains(t, out, "throughput loop every 60s (floor), load loop every 5s")
	require.Contains(t, out, "GPU budget [none, 16], min endpoints prefill 2 / decode 1")

	code, out, errOut = runCLI("validate", "-f", `{"optimization_target": "sla", "scaling_policy": "ahead", "expected_startup_seconds": 90}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "scaling policy ahead every 5s (docs/policy.md), startup assumed 90s until measured")
	require.NotContains(t, out, "throughput loop every")

	code, _, errOut = runCLI("validate", "-f", `{"min_endpoint": 5, "max_gpu_budget": 8}`)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "the minimum endpoints (prefill 5 × 1 GPUs, decode 5 × 1 GPUs) need 10 GPUs, over max_gpu_budget 8")

	code, _, errOut = runCLI("validate", "-f", "../../config/testdata/bad/unknown_key.yaml")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `line 2: unknown key "ttft_msec" (did you mean "ttft_ms"?)`)

	code, out, errOut = runCLI("validate", "-f", `{"optimization_target": "sla", "log_dir": "/tmp", "profile_results_dir": "../../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1"}`, "--check-profile")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "inline JSON: valid")
	require.Contains(t, out, "profile: prefill ../../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1/prefill_raw_data.npz")
	require.Contains(t, errOut, "warning: line 1: log_dir is accepted for compatibility with Dynamo and ignored")

	// The older load planner's options: mapped, ignored with a warning, or refused.
	code, out, errOut = runCLI("validate", "-f", "../../config/testdata/good/dynamo_load_planner.yaml")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "dynamo_load_planner.yaml: valid")
	require.Contains(t, errOut, "warning: line 11: metric-pulling-interval: ignored")
	require.Contains(t, errOut, "warning: line 13: decode-kv-scale-up-threshold: Dynamo's older load planner's KV-cache utilisation fraction 0.9 is read as decode_scale_up_kv_rate 90 (percent)")
	code, _, errOut = runCLI("validate", "-f", "../../config/testdata/bad/legacy_refused.yaml")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "line 2: min-gpu-budget: Dynamo's older load planner's minimum GPUs per worker type has no equivalent here")

	// --check-profile also reads the warm-up trace, as the Init activity does.
	trace := filepath.Join(t.TempDir(), "warmup.jsonl")
	require.NoError(t, os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 3000, "output_length": 300}
{"timestamp": 90000, "input_length": 3000, "output_length": 300}
`), 0o600))
	warm := fmt.Sprintf(`{"optimization_target": "sla", "scaling_policy": "ahead", "profile_results_dir": "../../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1", "load_predictor_warmup_trace": %q}`, trace)
	code, out, errOut = runCLI("validate", "-f", warm, "--check-profile")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "warm-up: ahead's traffic history warmed with the last 90 s of "+trace+" (90 s, 2 requests)")
	code, _, errOut = runCLI("validate", "-f", strings.Replace(warm, trace, trace+".missing", 1), "--check-profile")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "load_predictor_warmup_trace: predict: read trace")

	code, _, errOut = runCLI("validate", "-f", `{"optimization_target": "sla", "profile_results_dir": "/nonexistent"}`, "--check-profile")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `profile_results_dir "/nonexistent"`)
	require.Contains(t, errOut, "SLA-Planner requires pre-deployment profiling results to run")

	code, _, errOut = runCLI("validate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "usage: planner validate -f config.yaml")

	code, _, errOut = runCLI("no-such-command")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "no-such-command"`)
	code, out, _ = runCLI("help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "validate")
	require.Contains(t, out, "eval-predictors")
}
