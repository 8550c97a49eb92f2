// Package planner_test holds repository-wide checks of the layout rules in DESIGN.md.
package planner_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pureDirs are the packages that must never depend on Temporal (DESIGN.md, "Layout").
var pureDirs = []string{"config", "perf", "predict", "scaling", "observe", "connectors", "sim", "profiler"}

func TestPurePackagesDoNotImportTemporal(t *testing.T) {
	var patterns []string
	for _, d := range pureDirs {
		if out, err := exec.Command("go", "list", "./"+d+"/...").CombinedOutput(); err == nil && len(out) > 0 {
			patterns = append(patterns, "./"+d+"/...")
		}
	}
	require.NotEmpty(t, patterns, "no pure package found: is the test running at the module root?")
	args := append([]string{"list", "-deps", "-test"}, patterns...)
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, string(out))
	var bad []string
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "go.temporal.io") {
			bad = append(bad, dep)
		}
	}
	require.Empty(t, bad, "pure packages %v must not import Temporal", patterns)
}
