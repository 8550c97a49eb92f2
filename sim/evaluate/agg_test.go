package evaluate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
)

const aggScenario = validScenario + "mode: agg\n"

func TestLoadScenario_Agg(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, aggScenario+"static: [[3]]\ninitial: [2]\n"))
	require.NoError(t, err)
	require.Equal(t, config.ModeAgg, sc.Mode)
	var names []string
	for _, p := range sc.Policies {
		names = append(names, p.Name)
		cfg, err := sc.PolicyConfig(p)
		require.NoError(t, err)
		require.Equal(t, config.ModeAgg, cfg.Mode, "%s runs aggregated", p.Name)
	}
	require.Equal(t, BuiltinPolicies, names, "every built-in policy runs aggregated, ahead included")
	p, d := sc.Deployment(sc.Initial)
	require.Equal(t, [2]int{0, 2}, [2]int{p, d})
	require.Equal(t, "3 agg", sc.DeploymentName(sc.Deployment(sc.Static[0])))

	def, err := LoadScenario(writeScenario(t, validScenario+"initial: [1, 2]\n"))
	require.NoError(t, err)
	require.Equal(t, config.ModeDisagg, def.Mode, "disagg by default")
	p, d = def.Deployment(def.Initial)
	require.Equal(t, [2]int{1, 2}, [2]int{p, d})

	for name, tc := range map[string]struct{ body, want string }{
		"unknown mode":         {validScenario + "mode: prefill\n", `mode "prefill"`},
		"disagg static in agg": {aggScenario + "static: [[2, 2]]\n", "static[0]: [2 2]: mode agg takes [engines]"},
		"agg static in disagg": {validScenario + "static: [[4]]\n", "static[0]: [4]: mode disagg takes [prefill, decode]"},
		"agg static too big":   {aggScenario + "static: [[9]]\n", "static[0]"},
		"agg initial empty":    {aggScenario + "initial: [0]\n", "initial"},
		"disagg initial size":  {validScenario + "initial: [1]\n", "initial"},
		"agg budget":           {strings.Replace(aggScenario, "max_gpu_budget: 8", "max_gpu_budget: 0", 1), "max_gpu_budget must be ≥ 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadScenario(writeScenario(t, tc.body))
			require.ErrorIs(t, err, ErrInvalidScenario)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRun_AggPoliciesOracleAndStatic(t *testing.T) {
	// slo_goodput at the goodput target: no second oracle or static search.
	sc, err := LoadScenario(writeScenario(t, strings.Replace(aggScenario, "ttft_ms: 200, itl_ms: 10", "ttft_ms: 500, itl_ms: 50", 1)+
		"static: [[6]]\ninitial: [1]\nslo_goodput: 0.9\n"))
	require.NoError(t, err)
	plan := Plan{Scenario: sc, Requests: stepTrace(), TraceDesc: "step", Profile: profile(t), Oracle: true, Static: true, Parallel: 2}
	rep, err := Run(context.Background(), plan)
	require.NoError(t, err)
	require.Equal(t, "agg", rep.Mode)
	require.Equal(t, [2]int{0, 1}, [2]int{rep.InitialPrefill, rep.InitialDecode})
	require.True(t, rep.InitialGiven)
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
		require.Zero(t, r.PrefillGPUHours, "%s: agg has no prefill pool", r.Name)
		require.Zero(t, r.PeakPrefill, r.Name)
		require.Positive(t, r.GPUHours, r.Name)
		require.Less(t, rep.LowerBoundGPUHours, r.GPUHours, "%s: nothing beats the lower bound", r.Name)
	}
	require.Equal(t, []string{"ahead", "dynamo-sla", "dynamo-default", "oracle", "best-static", "static 6 agg"}, names)
	oracle, static := rep.Rows[3], rep.Rows[4]
	require.Regexp(t, `^\d+(–\d+)? agg$`, oracle.Deployment)
	require.Regexp(t, `^\d+ agg$`, static.Deployment)
	require.GreaterOrEqual(t, oracle.Goodput, 0.9)
	require.GreaterOrEqual(t, static.Goodput, 0.9)
	require.Greater(t, static.PeakDecode, 1, "the step needs more than one aggregated engine")
	require.Less(t, oracle.GPUHours, static.GPUHours, "the oracle follows the step")
	require.Greater(t, rep.Rows[1].PeakDecode, 1, "dynamo-sla scales the aggregated pool up for the step")

	// The ahead policy sizes the aggregated pool: up for the step, back down after it.
	ahead := rep.Rows[0]
	require.Greater(t, ahead.PeakDecode, 1, "ahead scales the aggregated pool up for the step")
	var atPeak, after int
	for _, s := range ahead.Replicas {
		n := s.Decode.Ready + s.Decode.Starting
		if s.At <= 240 {
			atPeak = max(atPeak, n)
		} else {
			after = n
		}
	}
	require.Greater(t, atPeak, 1)
	require.Less(t, after, atPeak, "ahead scales back down after the step")
	var table strings.Builder
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "1 aggregated engines")
}

func TestScenarioFiles_Load(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	modes := map[config.Mode]int{}
	for _, p := range paths {
		sc, err := LoadScenario(p)
		require.NoError(t, err, p)
		modes[sc.Mode]++
	}
	require.Positive(t, modes[config.ModeAgg], "agg scenarios ship")
	require.Positive(t, modes[config.ModeDisagg])
}

func TestScenarioStartAt(t *testing.T) {
	for name, tc := range map[string]struct {
		mode    config.Mode
		p, d    int
		want    []int
		wantErr string
	}{
		"disagg":          {config.ModeDisagg, 2, 3, []int{2, 3}, ""},
		"agg":             {config.ModeAgg, 0, 4, []int{4}, ""},
		"disagg no pool":  {config.ModeDisagg, 0, 3, nil, "each pool needs 1"},
		"over the budget": {config.ModeDisagg, 6, 6, nil, "each pool needs 1"},
		"agg too many":    {config.ModeAgg, 0, 9, nil, "mode agg takes [engines]"},
	} {
		t.Run(name, func(t *testing.T) {
			sc, err := NewScenario("s", SLA{TTFTMs: 300, ITLMs: 10}, 0.9, 10, 8, []PolicySpec{{Name: PolicyDynamoSLA, Builtin: PolicyDynamoSLA}})
			require.NoError(t, err)
			sc.Mode = tc.mode
			err = sc.StartAt(tc.p, tc.d)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidScenario)
				require.ErrorContains(t, err, tc.wantErr)
				require.Empty(t, sc.Initial, "a refused start changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, sc.Initial)
		})
	}
}
