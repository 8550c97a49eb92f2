package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/evaluate"
)

// writeJSON writes v as JSON to dir/name and returns the path.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// TestTargets reads a planner simulate report and a planner robustness report and prints
// both tables; bad input is refused with the file named.
func TestTargets(t *testing.T) {
	dir := t.TempDir()
	rows := []evaluate.Row{
		{Name: "ahead", Kind: evaluate.KindPolicy, Goodput: 0.983, GPUHours: 3.17},
		{Name: "dynamo-sla", Kind: evaluate.KindPolicy, Goodput: 0.416, GPUHours: 2.70},
		{Name: "oracle", Kind: evaluate.KindOracle, Goodput: 0.984, GPUHours: 2.69},
		{Name: "best-static", Kind: evaluate.KindStatic, Deployment: "3P 3D", Goodput: 0.925, GPUHours: 2.90},
		{Name: "slo-oracle", Kind: evaluate.KindSLOOracle, Goodput: 0.955, GPUHours: 2.59},
	}
	scenario := writeJSON(t, dir, "rr.json", evaluate.Report{Scenario: "sinusoid-rr-5-45", SLOGoodput: 0.95, Rows: rows})
	e2e := writeJSON(t, dir, "e2e.json", evaluate.Report{Scenario: "dynamo-sla-e2e", Rows: []evaluate.Row{{Name: "planner-2025", Kind: evaluate.KindPolicy}}})
	robust := writeJSON(t, dir, "robustness.json", evaluate.RobustReport{Seed: 3, Mode: "disagg", Cases: []evaluate.RobustCase{{Name: "case-00", Rows: rows}}})

	var stdout, stderr bytes.Buffer
	require.NoError(t, runTargets(context.Background(), []string{scenario, e2e, robust}, &stdout, &stderr), stderr.String())
	out := stdout.String()
	require.Contains(t, out, "| sinusoid-rr-5-45 | 98.3% at 3.17 GPU-h | met (≥ 95%) | 1.18× (oracle 98.4% at 2.69): 0.08 GPU-h over | 9.3% over 3P 3D 92.5% at 2.90 | 41.6% at 2.70: 17% more GPU-h | 95.5% at 2.59: 10.7% under the best static's, 0.96× the oracle's, within dynamo-sla's GPU-h |")
	require.Contains(t, out, "Not run on dynamo-sla-e2e (no ahead row).")
	require.Contains(t, out, "| robustness (seed 3, disagg) | 1 | 1 of 1 | 0 of 1 | 0 of 1 | 0 of 1 | 0 of 1 |")

	stdout.Reset()
	require.NoError(t, runTargets(context.Background(), []string{"--policy", "dynamo-sla", "--against", "ahead", scenario}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "| sinusoid-rr-5-45 | 41.6% at 2.70 GPU-h | 53.4 points short of 95% |")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o644))
	other := writeJSON(t, dir, "other.json", map[string]int{"seed": 3})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no report", nil, ""},
		{"a missing file", []string{filepath.Join(dir, "none.json")}, "none.json"},
		{"not JSON", []string{bad}, "bad.json: not a JSON report"},
		{"neither kind of report", []string{other}, "other.json: neither a planner simulate report"},
		{"the policy in no report", []string{"--policy", "mine", scenario, e2e}, "no report has a mine row"},
		{"an empty policy name", []string{"--policy", " ", scenario}, "--policy and --against must name a policy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o, e bytes.Buffer
			err := runTargets(context.Background(), tc.args, &o, &e)
			require.Error(t, err)
			if tc.want == "" {
				require.ErrorIs(t, err, errUsage)
				require.Contains(t, e.String(), "usage: planner targets")
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
