package evaluate

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// oracleGPUHours is the oracle's GPU-hours in targetRows (a variable: 1.15 times it is then
// the product the check computes, not a constant folded exactly).
var oracleGPUHours = 2.69

// targetRows is a scenario's rows: the policy, Dynamo's SLA planner, the oracle, a listed
// static and the best static.
func targetRows(goodput, gpu float64) []Row {
	return []Row{
		{Name: "ahead", Kind: KindPolicy, Goodput: goodput, GPUHours: gpu},
		{Name: "dynamo-sla", Kind: KindPolicy, Goodput: 0.4, GPUHours: 2.7},
		{Name: "oracle", Kind: KindOracle, Goodput: 0.984, GPUHours: oracleGPUHours},
		{Name: "static 1P 1D", Kind: KindStatic, Deployment: "1P 1D", Goodput: 0.1, GPUHours: 1},
		{Name: "best-static", Kind: KindStatic, Deployment: "3P 3D", Goodput: 0.925, GPUHours: 2.9},
	}
}

// withoutOracle is rows less the oracle's.
func withoutOracle(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Kind != KindOracle {
			out = append(out, r)
		}
	}
	return out
}

// TestScenarioTargets: each target met or missed at its edge, and what the table says of it.
func TestScenarioTargets(t *testing.T) {
	tests := []struct {
		name                                   string
		goodput, gpu                           float64
		goodputMet, oracleMet, staticMet, beat bool
		cells                                  []string
	}{
		{"rr-5-45 as measured: only the goodput", 0.983, 3.17, true, false, false, false,
			[]string{"98.3% at 3.17 GPU-h", "met (≥ 95%)", "1.18× (oracle 98.4% at 2.69): 0.08 GPU-h over", "9.3% over 3P 3D 92.5% at 2.90", "40.0% at 2.70: 17% more GPU-h"}},
		{"at 1.15× the oracle exactly: met; over the static's and Dynamo's GPU-hours", 0.95, TargetOracleRatio * oracleGPUHours, true, true, false, false,
			[]string{"met: 1.15×", "6.7% over 3P 3D"}},
		{"under everything", 0.96, 2.5, true, true, true, true,
			[]string{"met: 0.93×", "met: 13.8% under 3P 3D 92.5% at 2.90", "met: 40.0% at 2.70"}},
		{"short of the goodput", 0.938, 2.5, false, true, true, true,
			[]string{"1.2 points short of 95%"}},
		{"short of the goodput by less than a tenth of a point", 0.9496, 2.5, false, true, true, true,
			[]string{"95.0% at 2.50 GPU-h", "0.04 points short of 95%"}},
		{"short of the goodput by less than a hundredth of a point", 0.94999, 2.5, false, true, true, true,
			[]string{"under 0.01 points short of 95%"}},
		{"no more goodput than Dynamo", 0.39, 2.5, false, true, true, false,
			[]string{"40.0% at 2.70: no more goodput"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{Scenario: "rr", SLOGoodput: 0.95, Rows: targetRows(tc.goodput, tc.gpu)}
			scores, notRun := ScenarioTargets([]*Report{rep}, "ahead", "dynamo-sla")
			require.Empty(t, notRun)
			require.Len(t, scores, 1)
			s := scores[0]
			require.Equal(t, "3P 3D", s.BestStatic.Deployment, "the best static, not a listed one")
			require.Equal(t, tc.goodputMet, s.GoodputMet())
			require.Equal(t, tc.oracleMet, s.OracleMet())
			require.Equal(t, tc.staticMet, s.StaticMet())
			require.Equal(t, tc.beat, s.AgainstMet())
			var b bytes.Buffer
			require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
			for _, c := range tc.cells {
				require.Contains(t, b.String(), c)
			}
		})
	}
	// The oracle's cheapest schedule at the goodput target, against each GPU-hour target.
	slo := func(goodput, gpu float64) *Row {
		return &Row{Name: "slo-oracle", Kind: KindSLOOracle, Goodput: goodput, GPUHours: gpu}
	}
	sloOracle := []struct {
		name string
		row  *Row
		bare bool // the policy's row and the slo-oracle's only
		want string
	}{
		{"no slo-oracle row", nil, false, "| not run |"},
		{"under the static's and Dynamo's", slo(0.955, 2.59), false,
			"| 95.5% at 2.59: 10.7% under the best static's, 0.96× the oracle's, within dynamo-sla's GPU-h |"},
		{"at the goodput target and the static's GPU-hours exactly", slo(0.95, 2.9), false,
			"| 95.0% at 2.90: 0.0% under the best static's, 1.08× the oracle's, 7% over dynamo-sla's |"},
		{"over the static's, 1.15× the oracle's and Dynamo's", slo(0.951, 3.19), false,
			"| 95.1% at 3.19: 10.0% over the best static's, 1.19× the oracle's (over 1.15×), 18% over dynamo-sla's |"},
		{"short of the target", slo(0.94, 3.5), false, "| 94.0% at 3.50: none found reaching the goodput target |"},
		{"nothing to measure it against", slo(0.955, 2.59), true, "| 95.5% at 2.59 |"},
	}
	for _, tc := range sloOracle {
		t.Run(tc.name, func(t *testing.T) {
			rows := targetRows(0.983, 3.17)
			if tc.bare {
				rows = rows[:1]
			}
			if tc.row != nil {
				rows = append(rows, *tc.row)
			}
			scores, _ := ScenarioTargets([]*Report{{Scenario: "rr", SLOGoodput: 0.95, Rows: rows}}, "ahead", "dynamo-sla")
			require.Len(t, scores, 1)
			require.Equal(t, tc.row != nil, scores[0].SLOOracle != nil)
			var b bytes.Buffer
			require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
			require.Contains(t, b.String(), tc.want)
		})
	}
	// Dynamo's planner with as much goodput as the oracle's schedule, or no GPU-hours.
	for _, tc := range []struct {
		against Row
		want    string
	}{
		{Row{Name: "dynamo-sla", Kind: KindPolicy, Goodput: 0.96, GPUHours: 2.7}, "within dynamo-sla's GPU-h, no more goodput than dynamo-sla |"},
		{Row{Name: "dynamo-sla", Kind: KindPolicy, Goodput: 0.4}, "more GPU-h than dynamo-sla (none) |"},
	} {
		rows := append(targetRows(0.983, 3.17), *slo(0.955, 2.59))
		rows[1] = tc.against
		scores, _ := ScenarioTargets([]*Report{{Scenario: "rr", SLOGoodput: 0.95, Rows: rows}}, "ahead", "dynamo-sla")
		var b bytes.Buffer
		require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
		require.Contains(t, b.String(), tc.want)
	}
	// A scenario without the policy is named apart; one without an oracle, a static or
	// Dynamo's planner meets none of those targets.
	bare := &Report{Scenario: "bare", Rows: []Row{{Name: "ahead", Kind: KindPolicy, Goodput: 0.99, GPUHours: 1}}}
	other := &Report{Scenario: "other", Rows: []Row{{Name: "planner-2025", Kind: KindPolicy}}}
	scores, notRun := ScenarioTargets([]*Report{bare, other}, "ahead", "dynamo-sla")
	require.Equal(t, []string{"other"}, notRun)
	require.Len(t, scores, 1)
	s := scores[0]
	require.Equal(t, DefaultSLOGoodput, s.SLOGoodput, "held to 95% when the report does not say")
	require.True(t, s.GoodputMet())
	require.False(t, s.OracleMet())
	require.False(t, s.StaticMet())
	require.False(t, s.AgainstMet())
	var b bytes.Buffer
	require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
	require.Contains(t, b.String(), "| bare | 99.0% at 1.00 GPU-h | met (≥ 95%) | no oracle | no static | dynamo-sla not run | not run |")
}

// TestRobustTargets: a robustness report's cases counted per target, the oracle's column
// left out when it did not run.
func TestRobustTargets(t *testing.T) {
	rep := &RobustReport{Seed: 3, Cases: []RobustCase{
		{Name: "a", Rows: withoutOracle(targetRows(0.96, 2.5))}, // all three
		{Name: "b", Rows: withoutOracle(targetRows(0.94, 2.5))}, // short of the goodput
		{Name: "c", Rows: withoutOracle(targetRows(0.98, 3.1))}, // over the static and Dynamo
		{Name: "d", Rows: []Row{{Name: "dynamo-sla", Kind: KindPolicy}}},
	}}
	scores, notRun := RobustTargets(rep, "ahead", "dynamo-sla")
	require.Len(t, scores, 3, "a case without the policy is not scored")
	require.Equal(t, 1, notRun, "but counted")
	var b bytes.Buffer
	require.NoError(t, WriteRobustTargets(&b, "robustness (seed 3, disagg)", scores, notRun, true, "dynamo-sla"))
	require.Contains(t, b.String(), "| benchmark | cases |")
	require.Contains(t, b.String(), "| robustness (seed 3, disagg) | 3 (1 more without the policy's row) | 2 of 3 | not run | 2 of 3 | 2 of 3 | no oracle; the other three: 1 of 3 |")

	rep.Cases = []RobustCase{{Name: "a", Rows: targetRows(0.96, 2.5)}, {Name: "c", Rows: targetRows(0.98, 3.1)}}
	b.Reset()
	scores, notRun = RobustTargets(rep, "ahead", "dynamo-sla")
	require.Zero(t, notRun)
	require.NoError(t, WriteRobustTargets(&b, "shapes", scores, notRun, false, "dynamo-sla"))
	require.Equal(t, "| shapes | 2 | 2 of 2 | 1 of 2 | 1 of 2 | 1 of 2 | 1 of 2 |\n", b.String(), "no header the second time")
}

// TestTargetCells: the edge cases a cell must still explain — an uneven goodput target, a
// best static over the budget, a policy to beat that used no GPU-hours, a robustness report
// whose cases ran no policy to beat.
func TestTargetCells(t *testing.T) {
	rows := targetRows(0.96, 2.5)
	rows[1].GPUHours = 0 // dynamo-sla
	rows[4].OverBudget = true
	scores, _ := ScenarioTargets([]*Report{{Scenario: "x|y", SLOGoodput: 0.955, Rows: rows}}, "ahead", "dynamo-sla")
	var b bytes.Buffer
	require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
	out := b.String()
	require.Contains(t, out, "| x\\|y |", "a name's pipe escaped")
	require.Contains(t, out, "met (≥ 95.5%)")
	require.Contains(t, out, "3P 3D 92.5% at 2.90 (over the budget: none within it met the target)")
	require.Contains(t, out, "40.0% at 0.00: more GPU-h")

	var noAgainst []RobustCase
	for _, name := range []string{"a", "b"} {
		noAgainst = append(noAgainst, RobustCase{Name: name, Rows: []Row{targetRows(0.96, 2.5)[0], targetRows(0.96, 2.5)[4]}})
	}
	rs, notRun := RobustTargets(&RobustReport{Cases: noAgainst}, "ahead", "dynamo-sla")
	b.Reset()
	require.NoError(t, WriteRobustTargets(&b, "mine|yours", rs, notRun, false, "dynamo-sla"))
	require.Equal(t, "| mine\\|yours | 2 | 2 of 2 | not run | 2 of 2 | not run | no oracle; the other three: 0 of 2 |\n", b.String())
}

// TestScenarioTargets_Summary: over several scenarios (or draws of one), a line counts those
// meeting each target and gives the goodput's range; one scenario gets no such line.
func TestScenarioTargets_Summary(t *testing.T) {
	reports := []*Report{
		{Scenario: "rr-seed2", SLOGoodput: 0.95, Rows: targetRows(0.96, 2.5)},  // all four
		{Scenario: "rr-seed3", SLOGoodput: 0.95, Rows: targetRows(0.938, 2.5)}, // short of the goodput only
		{Scenario: "rr-seed4", SLOGoodput: 0.95, Rows: targetRows(0.983, 3.17)},
	}
	scores, _ := ScenarioTargets(reports, "ahead", "dynamo-sla")
	var b bytes.Buffer
	require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
	require.Contains(t, b.String(), "\nOf these 3, ahead gets 93.8–98.3% and meets the goodput target on 2 of 3; "+
		"at most 1.15× the oracle's GPU-hours on 2 of 3; at most the best static's on 2 of 3; "+
		"more goodput than dynamo-sla at no more GPU-hours on 2 of 3; all four on 1 of 3.\n")

	b.Reset()
	require.NoError(t, WriteScenarioTargets(&b, scores[:1], "ahead", "dynamo-sla"))
	require.NotContains(t, b.String(), "Of these")

	// A scenario without an oracle is counted apart from the oracle's target; with none at
	// all, the other three are counted.
	reports[2].Rows = withoutOracle(reports[2].Rows)
	scores, _ = ScenarioTargets(reports, "ahead", "dynamo-sla")
	b.Reset()
	require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
	require.Contains(t, b.String(), "; at most 1.15× the oracle's GPU-hours on 2 of 2 (1 without an oracle); ")
	require.Contains(t, b.String(), "; all four on 1 of 3.\n")
	for _, r := range reports {
		r.Rows = withoutOracle(r.Rows)
	}
	scores, _ = ScenarioTargets(reports, "ahead", "dynamo-sla")
	b.Reset()
	require.NoError(t, WriteScenarioTargets(&b, scores, "ahead", "dynamo-sla"))
	require.Contains(t, b.String(), "meets the goodput target on 2 of 3; no oracle ran; at most the best static's on 2 of 3; "+
		"more goodput than dynamo-sla at no more GPU-hours on 2 of 3; the other three on 1 of 3.\n")
}
