package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/evaluate"
)

// writeMooncake writes a Mooncake JSONL trace: 1 req/s for 2 minutes, 20 req/s for a
// minute, 1 req/s for 2 minutes; ISL 3000, OSL 50.
func writeMooncake(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	add := func(from, to, rate float64) {
		for i := 0; i < int((to-from)*rate); i++ {
			fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 3000, "output_length": 50, "hash_ids": []}`+"\n", int((from+float64(i)/rate)*1000))
		}
	}
	add(0, 120, 1)
	add(120, 180, 20)
	add(180, 300, 1)
	p := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

func TestSimulate_TraceAndConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("optimization_target: sla\nenable_load_scaling: true\nenable_throughput_scaling: false\n"+
		"load_predictor: constant\nttft: 300\nitl: 20\nmax_gpu_budget: 6\n"), 0o644))
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	err := runSimulate(context.Background(), []string{"--trace", writeMooncake(t), "--config", cfg, "--out", out,
		"--startup", "20s", "--startup-sweep", "0,1m", "--json", "--ticks"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var rep evaluate.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	for _, r := range rep.Rows {
		switch r.Kind {
		case evaluate.KindPolicy, evaluate.KindSweep:
			require.NotEmpty(t, r.Ticks, "%s: --ticks keeps the planner's ticks", r.Name)
		default:
			require.Empty(t, r.Ticks, "%s runs no planner", r.Name)
		}
	}
	require.Equal(t, 300.0, rep.TTFTMs, "the config's SLA")
	require.Equal(t, 6, rep.MaxGPUBudget)
	require.Equal(t, 20.0, rep.StartupS)
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"mine", "ahead", "dynamo-sla", "dynamo-default", "oracle", "slo-oracle", "best-static", "slo-static", "mine @0s", "mine @60s"},
		names, "the oracle and the static search run again at the 95% the policies are held to")
	require.Equal(t, evaluate.DefaultSLOGoodput, rep.SLOGoodput)
	require.FileExists(t, filepath.Join(out, "trace-startup-20s.html"), "another startup than --trace's 60 s is named apart")
	require.FileExists(t, filepath.Join(out, "trace-startup-20s.json"))
	require.Contains(t, stderr.String(), "replays done", "progress on stderr")
}

func TestSimulate_Scenario(t *testing.T) {
	var stdout, stderr bytes.Buffer
	sc := filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml")
	err := runSimulate(context.Background(), []string{"--scenario", sc, "--out", "", "--baselines", "static", "--policies", "dynamo-default",
		"--quiet", "--markdown"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	md := stdout.String()
	require.Contains(t, md, "### sinusoid-rr-5-45")
	require.Contains(t, md, "| dynamo-default | policy |")
	require.Contains(t, md, "| best-static | static |")
	require.NotContains(t, md, "dynamo-sla", "left out by --baselines")
	require.NotContains(t, md, "| ahead |", "left out by --baselines")
}

// TestSimulate_Seed: --seed draws a generated scenario's arrivals again with another seed.
func TestSimulate_Seed(t *testing.T) {
	sc := filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml")
	run := func(args ...string) evaluate.Report {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := runSimulate(context.Background(), append([]string{"--scenario", sc, "--out", "", "--baselines", "none",
			"--policies", "dynamo-default", "--quiet", "--json"}, args...), &stdout, &stderr)
		require.NoError(t, err, stderr.String())
		var rep evaluate.Report
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
		return rep
	}
	own, again := run(), run("--seed", "2")
	require.Contains(t, own.Trace, "seed 1", "the scenario's own seed")
	require.Contains(t, again.Trace, "seed 2")
	require.NotEqual(t, own.Requests, again.Requests, "other arrivals")
	require.InDelta(t, own.Requests, again.Requests, 0.02*float64(own.Requests), "the same load")
	require.Equal(t, "sinusoid-rr-5-45", own.Scenario)
	require.Equal(t, "sinusoid-rr-5-45-seed2", again.Scenario, "a draw's report does not take the scenario's name (nor its file in --out)")
	require.Equal(t, "sinusoid-rr-5-45", run("--mode", "disagg").Scenario, "the scenario's own shape keeps its name")
	require.Equal(t, "sinusoid-rr-5-45-as-agg-seed2", run("--seed", "2", "--mode", "agg").Scenario)
}

// TestSimulate_SeedOfPhases: --seed draws a load in phases again too.
func TestSimulate_SeedOfPhases(t *testing.T) {
	o := simulateOptions{scenario: filepath.Join("..", "..", "scenarios", "traffic-stop.yaml"), baselines: "none", policies: "ahead", seed: "2"}
	plan, err := o.plan()
	require.NoError(t, err)
	require.Equal(t, "traffic-stop-seed2", plan.Scenario.Name)
	require.Equal(t, uint64(2), plan.Scenario.Trace.Phases.Seed)
}

// TestSimulate_VariantNames checks that every flag simulating another deployment or load than
// the scenario's names the report apart, and that the scenario's own settings keep its name.
func TestSimulate_VariantNames(t *testing.T) {
	sc := filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml")
	profile := filepath.Join(t.TempDir(), "h200")
	require.NoError(t, os.Mkdir(profile, 0o755))
	require.NoError(t, writeEmbedded("demodata/profile", profile))
	for name, tc := range map[string]struct {
		flags simulateOptions
		want  string
	}{
		"the scenario's own":        {simulateOptions{}, "sinusoid-rr-5-45"},
		"its own shape":             {simulateOptions{mode: "disagg"}, "sinusoid-rr-5-45"},
		"its own seed":              {simulateOptions{seed: "1"}, "sinusoid-rr-5-45"},
		"its own router":            {simulateOptions{router: "least-loaded"}, "sinusoid-rr-5-45"},
		"its own startup":           {simulateOptions{startup: "60"}, "sinusoid-rr-5-45"},
		"its own prefix cache":      {simulateOptions{prefixCache: "off"}, "sinusoid-rr-5-45"},
		"another router":            {simulateOptions{router: "round-robin"}, "sinusoid-rr-5-45-router-round_robin"},
		"another startup":           {simulateOptions{startup: "2m"}, "sinusoid-rr-5-45-startup-120s"},
		"a fractional startup":      {simulateOptions{startup: "30.5"}, "sinusoid-rr-5-45-startup-30.5s"},
		"the prefix cache on":       {simulateOptions{prefixCache: "on"}, "sinusoid-rr-5-45-prefix-cache-on"},
		"a profile":                 {simulateOptions{profile: profile}, "sinusoid-rr-5-45-profile-h200"},
		"all of them, in one order": {simulateOptions{seed: "3", profile: profile, prefixCache: "true", startup: "90s", router: "kv", mode: "agg"}, "sinusoid-rr-5-45-as-agg-router-kv-startup-90s-prefix-cache-on-profile-h200-seed3"},
		"a startup of tenths":       {simulateOptions{startup: "32.8"}, "sinusoid-rr-5-45-startup-32.8s"},
		"a startup of hundredths":   {simulateOptions{startup: "1.61s"}, "sinusoid-rr-5-45-startup-1.61s"},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.flags
			o.scenario, o.baselines, o.policies = sc, "none", "dynamo-default"
			plan, err := o.plan()
			require.NoError(t, err)
			require.Equal(t, tc.want, plan.Scenario.Name)
		})
	}

	t.Run("a trace and a config: the trace's file name, and the config's own startup of 60 s", func(t *testing.T) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "mine.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte("optimization_target: sla\nttft: 300\nitl: 20\nmax_gpu_budget: 6\n"), 0o644))
		trace := writeMooncake(t)
		for startup, want := range map[string]string{"1m": "trace", "45": "trace-startup-45s"} {
			o := simulateOptions{trace: trace, configFile: cfg, baselines: "none", startup: startup}
			plan, err := o.plan()
			require.NoError(t, err)
			require.Equal(t, want, plan.Scenario.Name, "--startup %s", startup)
		}
	})
	for name, tc := range map[string]struct {
		flags simulateOptions
		want  string
	}{
		"a report's name over the bound": {simulateOptions{profile: filepath.Join(t.TempDir(), strings.Repeat("p", 190))},
			"is over 200 bytes: shorten the scenario's name"},
		"the root as a profile": {simulateOptions{profile: string(filepath.Separator)}, "not the file system's root"},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.flags
			o.scenario, o.baselines, o.policies = sc, "none", "dynamo-default"
			_, err := o.plan()
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSimulate_Errors(t *testing.T) {
	trace := writeMooncake(t)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"nothing":          {nil, "give --scenario"},
		"trace only":       {[]string{"--trace", trace}, "give --scenario"},
		"both":             {[]string{"--scenario", "x.yaml", "--trace", trace, "--config", "c.yaml"}, "not both"},
		"missing scenario": {[]string{"--scenario", "nope.yaml"}, "nope.yaml"},
		"bad baseline": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml"), "--baselines", "magic"},
			"unknown \"magic\""},
		"bad startup": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml"), "--startup", "soon"},
			"--startup"},
		"unknown policy": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml"), "--policies", "mine"},
			"no policy \"mine\""},
		"json and markdown":     {[]string{"--json", "--markdown"}, "exclude"},
		"ticks, no report":      {[]string{"--ticks", "--out", ""}, "--ticks keeps the ticks in the JSON report: give --json or --out"},
		"trace model, no trace": {[]string{"--scenario", "x.yaml", "--trace-model", "GPT-4"}, "--trace-model selects a --trace's requests"},
		"bad router": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml"), "--router", "random"},
			`router mode "random"`},
		"bad prefix cache": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml"), "--prefix-cache", "maybe"},
			`--prefix-cache "maybe"`},
		"bad seed": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "sinusoid-rr-5-45.yaml"), "--seed", "-1"},
			`--seed "-1": want a whole number`},
		"seed of a trace file": {[]string{"--scenario", filepath.Join("..", "..", "scenarios", "azure-code-2023.yaml"), "--seed", "2"},
			"--seed: scenario azure-code-2023 replays a trace file"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runSimulate(context.Background(), tc.args, &stdout, &stderr)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSimulate_AggMode(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("optimization_target: sla\nenable_load_scaling: true\nenable_throughput_scaling: false\n"+
		"load_predictor: constant\nttft: 500\nitl: 50\nmax_gpu_budget: 6\n"), 0o644))
	trace := writeMooncake(t)
	var stdout, stderr bytes.Buffer
	err := runSimulate(context.Background(), []string{"--trace", trace, "--config", cfg, "--mode", "agg", "--out", "",
		"--baselines", "static,ahead,dynamo-default", "--slo-goodput", "0.9", "--quiet", "--json"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var rep evaluate.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	require.Equal(t, "agg", rep.Mode)
	require.True(t, strings.HasSuffix(rep.Scenario, "-as-agg"), "another shape than the config's is named apart: %s", rep.Scenario)
	require.Equal(t, 0.9, rep.SLOGoodput, "--slo-goodput at the goodput target: one static search")
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
		require.Zero(t, r.PrefillGPUHours, r.Name)
	}
	require.Equal(t, []string{"mine", "ahead", "dynamo-default", "best-static"}, names, "ahead sizes aggregated deployments too")
	require.Positive(t, rep.Rows[1].GPUHours)
	require.Regexp(t, `^\d+ agg$`, rep.Rows[3].Deployment)

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown mode": {[]string{"--trace", trace, "--config", cfg, "--mode", "prefill"}, `--mode "prefill"`},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runSimulate(context.Background(), append(tc.args, "--out", "", "--quiet"), &stdout, &stderr)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSimulate_PrefixReuse(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 240 { // 2 req/s for 2 minutes, every prompt starting with the same 3 blocks
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 2000, "output_length": 20, "hash_ids": [0, 1, 2, %d]}`+"\n", i*500, 10+i)
	}
	trace := filepath.Join(dir, "shared.jsonl")
	require.NoError(t, os.WriteFile(trace, []byte(b.String()), 0o644))
	cfg := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("optimization_target: sla\nttft: 300\nitl: 20\nmax_gpu_budget: 4\n"), 0o644))
	run := func(args ...string) evaluate.Report {
		var stdout, stderr bytes.Buffer
		err := runSimulate(context.Background(), append([]string{"--trace", trace, "--config", cfg, "--out", "", "--baselines", "none",
			"--quiet", "--json"}, args...), &stdout, &stderr)
		require.NoError(t, err, stderr.String())
		var rep evaluate.Report
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
		require.Len(t, rep.Rows, 1)
		return rep
	}
	on := run("--router", "kv", "--prefix-cache", "on")
	require.Equal(t, "kv", on.Router)
	require.True(t, on.PrefixCache)
	require.Greater(t, on.Rows[0].KVHitRate, 0.5, "3 of every request's 4 blocks are shared")
	require.Greater(t, on.Rows[0].PrefixHitShare, 0.5)
	off := run()
	require.Equal(t, "least_loaded", off.Router)
	require.Zero(t, off.Rows[0].KVHitRate)
	require.Zero(t, off.Rows[0].PrefixHitShare)
	require.Less(t, on.Rows[0].TTFT.P50, off.Rows[0].TTFT.P50)
}

// TestRobustness_OwnTrace: --trace draws every case from the user's trace (its source alone
// unless --sources lists others), scored at --ttft-ms and --itl-ms, within --scales.
func TestRobustness_OwnTrace(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for s := 0; s < 1800; s += 2 {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": 50, "hash_ids": []}`+"\n", s*1000, 800+s%400)
	}
	path := filepath.Join(dir, "mine.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	var stdout, stderr bytes.Buffer
	scenarios := filepath.Join(dir, "scenarios")
	err := runRobustness(context.Background(), []string{"--trace", path, "--ttft-ms", "400", "--itl-ms", "15", "--scales", "1-1.5",
		"--cases", "2", "--policies", "ahead", "--static=false", "--json", "--quiet", "--scenarios", scenarios, "--ticks", scenarios}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	require.Contains(t, stderr.String(), "wrote 2 scenario files to "+scenarios)
	require.Contains(t, stderr.String(), "robustness: wrote 2 per-tick timelines to "+scenarios, "beside the scenario files they replay")
	for _, name := range []string{"case-00-trace-ahead.ticks.jsonl", "case-01-trace-ahead.ticks.jsonl"} {
		require.FileExists(t, filepath.Join(scenarios, name))
	}
	for _, name := range []string{"case-00-trace.yaml", "case-01-trace.yaml"} {
		require.FileExists(t, filepath.Join(scenarios, name))
	}
	var rep evaluate.RobustReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	require.Len(t, rep.Cases, 2)
	require.Equal(t, []evaluate.RobustTrace{{Path: path, SLA: evaluate.SLA{TTFTMs: 400, ITLMs: 15}}}, rep.Traces, "the report says what it drew from")
	require.Contains(t, stdout.String(), `"sla": {
        "ttft_ms": 400,`)
	for _, c := range rep.Cases {
		require.Equal(t, evaluate.SourceTrace, c.Source)
		require.Equal(t, 400.0, c.TTFTMs)
		require.Equal(t, 15.0, c.ITLMs)
		require.Contains(t, c.Detail, "mine.jsonl from")
		require.True(t, c.Scale >= 1 && c.Scale <= 1.5, "scale %v", c.Scale)
		require.Len(t, c.Rows, 1)
		require.Positive(t, c.Rows[0].Goodput)
	}

	// A folder of traces and a file beside it: the trace files drawn in turn (the folder's
	// by name, other files left out), each with its own row in the per-source table.
	folder := filepath.Join(dir, "fleet")
	require.NoError(t, os.MkdirAll(filepath.Join(folder, "nested.csv"), 0o755))
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		require.NoError(t, os.WriteFile(filepath.Join(folder, name), []byte(b.String()), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(folder, "README.md"), []byte("not a trace"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(folder, "rates.csv"), []byte("window,count\n0,5\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(folder, "blank.csv"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(folder, "blank.jsonl.gz"), nil, 0o644))
	var gz bytes.Buffer // a.jsonl compressed beside it: drawn once
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write([]byte(b.String()))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(folder, "a.jsonl.gz"), gz.Bytes(), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(folder, "nested.csv"), filepath.Join(folder, "link.csv")))
	stdout.Reset()
	stderr.Reset()
	err = runRobustness(context.Background(), []string{"--trace", folder, "--trace", path, "--ttft-ms", "400", "--itl-ms", "15", "--scales", "1-1.5",
		"--cases", "3", "--policies", "ahead", "--static=false", "--quiet"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	for _, want := range []string{"| trace: a.jsonl | ahead | 1 |", "| trace: b.jsonl | ahead | 1 |", "| trace: mine.jsonl | ahead | 1 |",
		"| case-00-trace | a.jsonl from", "| case-01-trace | b.jsonl from", "| case-02-trace | mine.jsonl from",
		"Trace files of your own, drawn in turn: a.jsonl (TTFT 400 ms, ITL 15 ms); b.jsonl (TTFT 400 ms, ITL 15 ms); mine.jsonl (TTFT 400 ms, ITL 15 ms).\n"} {
		require.Contains(t, stdout.String(), want)
	}
	require.Contains(t, stderr.String(), "--trace "+folder+": left out a.jsonl.gz (a.jsonl is drawn: the same trace compressed, as a rule; give both as files to draw both), "+
		"blank.csv (empty), blank.jsonl.gz (empty), rates.csv (not a request trace)\n",
		"the subfolder, the link to it and README.md are not traces by name")

	// More files than the cases drawing them, or than 64 in all: refused before any case.
	stdout.Reset()
	err = runRobustness(context.Background(), []string{"--trace", folder, "--trace", path, "--ttft-ms", "400", "--itl-ms", "15", "--cases", "2"}, &stdout, &stderr)
	require.ErrorContains(t, err, "trace files: 3; cases drawing the trace source: 2 of 2")
	many := filepath.Join(dir, "many")
	require.NoError(t, os.Mkdir(many, 0o755))
	for k := range 65 {
		require.NoError(t, os.WriteFile(filepath.Join(many, fmt.Sprintf("t%02d.jsonl", k)), []byte(b.String()), 0o644))
	}
	err = runRobustness(context.Background(), []string{"--trace", many, "--ttft-ms", "400", "--itl-ms", "15", "--cases", "100"}, &stdout, &stderr)
	require.ErrorContains(t, err, "--trace "+many+": more than 64 trace files in all")
	// 63 files after the first folder's two: the 64th in all is the folder's 62nd, and its
	// 63rd is refused (without the first folder's count, the plan would refuse 65 files).
	require.NoError(t, os.Remove(filepath.Join(many, "t64.jsonl")))
	require.NoError(t, os.Remove(filepath.Join(many, "t63.jsonl")))
	err = runRobustness(context.Background(), []string{"--trace", folder, "--trace", many, "--ttft-ms", "400", "--itl-ms", "15", "--cases", "100"}, &stdout, &stderr)
	require.ErrorContains(t, err, "--trace "+many+": more than 64 trace files in all", "the first folder's two count")
	require.Empty(t, stdout.String())
}

// TestRobustness_FlagErrors: a bad --sources or --policies is refused before any case runs.
func TestRobustness_FlagErrors(t *testing.T) {
	unknownOnly := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(unknownOnly, "rates.csv"), []byte("window,count\n0,5\n"), 0o644))
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown source":  {[]string{"--sources", "azure-code,spiky"}, `unknown source "spiky"`},
		"no source":       {[]string{"--sources", " , "}, "none given"},
		"unknown policy":  {[]string{"--sources", "shapes", "--policies", "mine"}, `"mine" is not a built-in policy`},
		"arguments":       {[]string{"extra"}, "unexpected arguments"},
		"trace, no SLA":   {[]string{"--trace", "mine.csv", "--ttft-ms", "300"}, "--trace needs --ttft-ms and --itl-ms"},
		"SLA, no trace":   {[]string{"--itl-ms", "10"}, "--itl-ms applies to the cases of --trace"},
		"model, no trace": {[]string{"--trace-model", "GPT-4"}, "--trace-model applies to the cases of --trace"},
		"trace not listed": {[]string{"--trace", "mine.csv", "--ttft-ms", "300", "--itl-ms", "10", "--sources", "shapes"},
			`do not list "trace"`},
		"missing trace":      {[]string{"--trace", "no-such-trace.csv", "--ttft-ms", "300", "--itl-ms", "10"}, "no-such-trace.csv"},
		"empty trace folder": {[]string{"--trace", t.TempDir(), "--ttft-ms", "300", "--itl-ms", "10"}, "a folder with no request trace (.jsonl, .jsonl.gz, .csv, .csv.gz files"},
		"empty trace path":   {[]string{"--trace", " ", "--ttft-ms", "300", "--itl-ms", "10"}, "--trace: an empty path"},
		"no trace in folder": {[]string{"--trace", unknownOnly, "--ttft-ms", "300", "--itl-ms", "10"}, "a folder with no request trace (.jsonl, .jsonl.gz, .csv, .csv.gz files of a trace format); left out: rates.csv (not a request trace)"},
		"a trace twice":      {[]string{"--trace", "x/mine.csv", "--trace", "y/mine.csv", "--ttft-ms", "300", "--itl-ms", "10"}, "two traces are named mine.csv"},
		"bad scales":         {[]string{"--scales", "8"}, "want MIN-MAX"},
		"scales not numbers": {[]string{"--scales", "one-two"}, "want MIN-MAX"},
		"budget too small":   {[]string{"--sources", "shapes", "--budget", "1"}, "GPU budget 1: want 2..256"},
		"startup negative":   {[]string{"--sources", "shapes", "--startup", "-1s"}, `--startup: "-1s" is negative`},
		"startup too long":   {[]string{"--sources", "shapes", "--startup", "10m"}, "startup 600 s: want 0..300"},
		"startup a word":     {[]string{"--sources", "shapes", "--startup", "ninety"}, "neither a duration nor a number of seconds"},
		"startup infinite":   {[]string{"--sources", "shapes", "--startup", "inf"}, "more than 31536000 seconds"},
		"budget 0":           {[]string{"--sources", "shapes", "--budget", "0"}, "--budget 0: want 2..256"},
		"mode unknown":       {[]string{"--sources", "shapes", "--mode", "prefill"}, `--mode "prefill": want disagg or agg`},
		"scales 0-0":         {[]string{"--sources", "shapes", "--scales", "0-0"}, "want MIN-MAX within 0.01-100"},
		"nothing to write":   {[]string{"--sources", "shapes", "--scenarios", filepath.Join(t.TempDir(), "s")}, "no case can be written"},
		"scales reversed":    {[]string{"--sources", "shapes", "--scales", "8-1"}, "0.01 ≤ min ≤ max ≤ 100"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runRobustness(context.Background(), tc.args, &stdout, &stderr)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, stdout.String(), "nothing run")
		})
	}
}
