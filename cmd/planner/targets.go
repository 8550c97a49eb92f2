package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/llmplanner/planner/sim/evaluate"
)

func init() {
	register(command{
		name:    "targets",
		summary: "score a policy against the targets (goodput, the oracle, the best static deployment, Dynamo's SLA planner) from planner simulate's and planner robustness's JSON reports",
		run:     runTargets,
	})
}

// Bounds of planner targets' inputs.
const (
	maxTargetFiles     = 64
	maxTargetFileBytes = 64 << 20
)

func runTargets(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("targets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policy := fs.String("policy", "ahead", "the policy scored (a row name of the reports)")
	against := fs.String("against", "dynamo-sla", "the policy it must get more goodput than at no more GPU-hours")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner targets [--policy ahead] [--against dynamo-sla] REPORT.json...")
		fmt.Fprintln(stderr, "\nReads the JSON reports planner simulate --out and planner robustness --out write, and prints")
		fmt.Fprintf(stderr, "Markdown tables of how the policy stands against each target: the goodput it is held to (95%%),\n")
		fmt.Fprintf(stderr, "at most %.2f× the hindsight oracle's GPU-hours, no more than the best static deployment's, and\n", evaluate.TargetOracleRatio)
		fmt.Fprintln(stderr, "more goodput than --against at no more GPU-hours: per scenario, with how far it is from each")
		fmt.Fprintln(stderr, "target it misses and what the oracle's cheapest schedule at the goodput target (slo-oracle)")
		fmt.Fprintln(stderr, "costs against the best static's, the oracle's and --against's GPU-hours (with several scenarios,")
		fmt.Fprintln(stderr, "a line counting those that meet each target), then per robustness report, how many of its")
		fmt.Fprintln(stderr, "cases meet each.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if fs.NArg() > maxTargetFiles {
		return fmt.Errorf("targets: %d reports: at most %d", fs.NArg(), maxTargetFiles)
	}
	if strings.TrimSpace(*policy) == "" || strings.TrimSpace(*against) == "" {
		return errors.New("targets: --policy and --against must name a policy")
	}
	var scenarios []*evaluate.Report
	type robust struct {
		name string
		rep  *evaluate.RobustReport
	}
	var robusts []robust
	for _, path := range fs.Args() {
		sc, rb, err := readTargetReport(path)
		if err != nil {
			return err
		}
		if sc != nil {
			scenarios = append(scenarios, sc)
		} else {
			name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			robusts = append(robusts, robust{fmt.Sprintf("%s (seed %d, %s)", name, rb.Seed, rb.Mode), rb})
		}
	}
	found := false
	if len(scenarios) > 0 {
		scores, notRun := evaluate.ScenarioTargets(scenarios, *policy, *against)
		if len(scores) > 0 {
			found = true
			if err := evaluate.WriteScenarioTargets(stdout, scores, *policy, *against); err != nil {
				return err
			}
		}
		if len(notRun) > 0 {
			fmt.Fprintf(stdout, "Not run on %s (no %s row).\n\n", strings.Join(notRun, ", "), *policy)
		}
	}
	for i, r := range robusts {
		scores, notRun := evaluate.RobustTargets(r.rep, *policy, *against)
		if len(scores) > 0 {
			found = true
		}
		if err := evaluate.WriteRobustTargets(stdout, r.name, scores, notRun, i == 0, *against); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("targets: no report has a %s row", *policy)
	}
	return nil
}

// readTargetReport reads a planner simulate report (its rows) or a planner robustness report
// (its cases), whichever the file holds.
func readTargetReport(path string) (*evaluate.Report, *evaluate.RobustReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("targets: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTargetFileBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("targets: %s: %w", path, err)
	}
	if len(data) > maxTargetFileBytes {
		return nil, nil, fmt.Errorf("targets: %s: over %d MiB", path, maxTargetFileBytes>>20)
	}
	var probe struct {
		Rows  json.RawMessage `json:"rows"`
		Cases json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, nil, fmt.Errorf("targets: %s: not a JSON report: %w", path, err)
	}
	switch {
	case probe.Cases != nil:
		var rb evaluate.RobustReport
		if err := json.Unmarshal(data, &rb); err != nil {
			return nil, nil, fmt.Errorf("targets: %s: %w", path, err)
		}
		return nil, &rb, nil
	case probe.Rows != nil:
		var sc evaluate.Report
		if err := json.Unmarshal(data, &sc); err != nil {
			return nil, nil, fmt.Errorf("targets: %s: %w", path, err)
		}
		return &sc, nil, nil
	}
	return nil, nil, fmt.Errorf("targets: %s: neither a planner simulate report (rows) nor a planner robustness report (cases)", path)
}
