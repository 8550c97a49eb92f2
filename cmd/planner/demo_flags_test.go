package main

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/router"
	"github.com/llmplanner/planner/worker"
)

// TestDemoPrefixCachingAndRouter checks that --prefix-caching reaches the prefill (or
// aggregated) engines' command in the demo's deployments file and not the decode engines',
// and that --router and --prefix-caching reach the simulated comparison's scenario.
func TestDemoPrefixCachingAndRouter(t *testing.T) {
	for _, tc := range []struct {
		name         string
		agg, caching bool
		prefill      bool // whether the prefill pool's command caches
		decode       bool // whether the decode (or aggregated) pool's command caches
	}{
		{name: "disagg off"},
		{name: "disagg on", caching: true, prefill: true},
		{name: "agg on", agg: true, caching: true, decode: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, err := writeDemoDeployments(demoDeploymentsOptions{out: dir, self: "/bin/planner", frontendURL: "http://127.0.0.1:1",
				profileDir: dir, plannerConfig: "planner.json", gpus: 4, startupDelay: time.Second, initialPrefill: 1, initialDecode: 1,
				agg: tc.agg, prefixCaching: tc.caching})
			require.NoError(t, err)
			require.Equal(t, filepath.Join(dir, "deployments.yaml"), path)
			var df worker.DeploymentsFile
			require.NoError(t, yaml.Unmarshal([]byte(readFile(t, path)), &df))
			spec := df.Deployments[0].Connector.Local
			if tc.agg {
				require.Nil(t, spec.Prefill)
			} else {
				require.Equal(t, tc.prefill, slices.Contains(spec.Prefill.Command, "--prefix-caching"))
			}
			require.Equal(t, tc.decode, slices.Contains(spec.Decode.Command, "--prefix-caching"))
		})
	}

	out := t.TempDir()
	d := &demo{o: demoOptions{out: out, startupDelay: 10 * time.Second, router: string(router.KV), prefixCache: true, gpus: 16}}
	profileDir := filepath.Join(out, "profile")
	require.NoError(t, writeEmbedded("demodata/profile", profileDir))
	cfg, err := d.plannerConfig(profileDir)
	require.NoError(t, err)
	plan, err := d.simulationPlan([]predict.Request{{Arrival: 0, InputTokens: 1024, OutputTokens: 8, HashIDs: []uint64{1, 2}}}, 1, cfg, d.configSource())
	require.NoError(t, err)
	require.Equal(t, router.KV, plan.Scenario.Router)
	require.True(t, plan.Scenario.PrefixCache)
}

// TestDemoSummaryOverBudgetNote checks the simulated comparison's lines: the best static row
// keeps the others' alignment and says after its numbers when no deployment within the
// budget meets the target.
func TestDemoSummaryOverBudgetNote(t *testing.T) {
	s := demoSummary{Simulated: []demoSimulated{
		{Name: "this config", GoodputPercent: 84.5, GPUMinutes: 33.4},
		{Name: "best static 9P 3D", GoodputPercent: 89.4, GPUMinutes: 34.4, Note: "no deployment within the GPU budget meets the goodput target"},
	}}
	lines := s.lines(config.Default())
	require.Contains(t, lines, "  this config            goodput  84.5%,  33.4 GPU-minutes")
	require.Contains(t, lines, "  best static 9P 3D      goodput  89.4%,  34.4 GPU-minutes (no deployment within the GPU budget meets the goodput target)")
}
