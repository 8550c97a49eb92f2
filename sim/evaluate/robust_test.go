package evaluate

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/sim/replay"
)

// robustData writes small stand-ins of the shared traces: an hour of each at a low rate.
func robustData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var az strings.Builder
	az.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	start := time.Date(2023, 11, 16, 18, 0, 0, 0, time.UTC)
	for s := 0; s < 3600; s += 4 {
		fmt.Fprintf(&az, "%s,%d,%d\n", start.Add(time.Duration(s)*time.Second).Format("2006-01-02 15:04:05"), 1500+s%700, 20)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "AzureLLMInferenceTrace_code_2023.csv"), []byte(az.String()), 0o644))
	var mc strings.Builder
	for s := 0; s < 3600; s += 5 {
		fmt.Fprintf(&mc, `{"timestamp": %d, "input_length": %d, "output_length": 100, "hash_ids": []}`+"\n", s*1000, 2000+s%3000)
	}
	mc.WriteString(`{"timestamp": 3601000, "input_length": 20000, "output_length": 100, "hash_ids": []}` + "\n") // too long: dropped
	for _, f := range []string{"mooncake_fast25_conversation_trace.jsonl", "mooncake_fast25_synthetic_trace.jsonl"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(mc.String()), 0o644))
	}
	var sg strings.Builder
	sg.WriteString("category,model,timestamp_s,total_rate_rps\n")
	for w := 0; w < 60; w++ {
		fmt.Fprintf(&sg, "language,m-small,%d,%d\n", w*600, 100+10*(w%7))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "servegen_aggregate_10min.csv"), []byte(sg.String()), 0o644))
	// ServeGen's clients: a steady one and, from window 10, a bursty one (the rows need not be
	// in time order); nobody sends in the first 40 windows of the reasoning model (a span drawn there is drawn again).
	var cl bytes.Buffer
	zw := gzip.NewWriter(&cl)
	fmt.Fprintln(zw, "category,model,client_id,timestamp_s,rate_rps,iat_cv,iat_dist,iat_param1,iat_param2")
	for w := 0; w < 60; w++ {
		fmt.Fprintf(zw, "language,m-small,0,%d,%d,1.1,Gamma,0.8,0.01\n", w*600, 80+10*(w%5))
	}
	for w := 10; w < 60; w++ {
		fmt.Fprintf(zw, "language,m-small,1,%d,30,6,Weibull,0.4,0.3\n", w*600)
	}
	for w := 0; w < 60; w++ {
		fmt.Fprintf(zw, "reason,r1,0,%d,%d,2,Gamma,0.25,40\n", w*600, min(1, max(0, w-39)))
	}
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "servegen_client_windows_10min.csv.gz"), cl.Bytes(), 0o644))
	return dir
}

func TestRobustCases_SeededAndBounded(t *testing.T) {
	dir := robustData(t)
	rp := RobustPlan{Cases: 10, Seed: 7, DataDir: dir}
	a, err := rp.cases()
	require.NoError(t, err)
	b, err := rp.cases()
	require.NoError(t, err)
	require.Equal(t, a, b, "the same seed draws the same cases")
	rp.Seed = 8
	c, err := rp.cases()
	require.NoError(t, err)
	require.NotEqual(t, a[0].detail, c[0].detail, "another seed draws others")

	require.Len(t, a, 10)
	for i, in := range a {
		require.Equal(t, RobustSources[i%len(RobustSources)], in.source)
		require.NotEmpty(t, in.reqs, in.detail)
		last := in.reqs[len(in.reqs)-1].Arrival
		require.LessOrEqual(t, last, 1800.0, "%s: at most 30 minutes replayed", in.detail)
		require.GreaterOrEqual(t, in.scale, 1.0)
		require.LessOrEqual(t, in.scale, 8.0)
		for _, r := range in.reqs {
			require.LessOrEqual(t, r.InputTokens+r.OutputTokens, robustMaxContext, in.detail)
		}
	}
	_, err = RobustPlan{Cases: 0, DataDir: dir}.cases()
	require.ErrorContains(t, err, "cases")
	_, err = RobustPlan{Cases: 1, DataDir: t.TempDir()}.cases()
	require.Error(t, err, "no traces")
}

// TestRobustCases_Shapes: the synthetic shapes are a source of their own, asked for by name;
// each case's rate series has the shape its description names, and an unknown source is an
// error before any case is drawn.
func TestRobustCases_Shapes(t *testing.T) {
	rp := RobustPlan{Cases: 40, Seed: 3, DataDir: t.TempDir(), Sources: []string{SourceShapes}}
	cases, err := rp.cases()
	require.NoError(t, err, "the shapes need no trace file")
	kinds := map[string]int{}
	for _, in := range cases {
		require.Equal(t, SourceShapes, in.source)
		kind := strings.Fields(in.detail)[0]
		kinds[kind]++
		// The arrivals' rate over the first and the last 20% of the window and its middle,
		// and the highest and lowest over 30 s windows: a step is low-high-low, a ramp
		// monotone, a flash crowd and an on/off wave at least twice as fast at their highest.
		end := in.reqs[len(in.reqs)-1].Arrival
		rate := func(from, to float64) float64 {
			var n float64
			for _, r := range in.reqs {
				if r.Arrival >= from && r.Arrival < to {
					n++
				}
			}
			return n / (to - from)
		}
		first, middle, last := rate(0, 0.2*end), rate(0.4*end, 0.6*end), rate(0.8*end, end)
		highest, lowest := 0.0, math.Inf(1)
		for from := 0.0; from+30 <= end; from += 10 {
			r := rate(from, from+30)
			highest, lowest = math.Max(highest, r), math.Min(lowest, r)
		}
		switch kind {
		case "step":
			require.Greater(t, middle, 2*first, in.detail)
			require.Greater(t, middle, 2*last, in.detail)
		case "ramp":
			require.True(t, (first < middle && middle < last) || (first > middle && middle > last), "%s: %.1f %.1f %.1f", in.detail, first, middle, last)
		case "flash":
			require.Greater(t, highest, 2*first, in.detail)
		case "on/off":
			require.Greater(t, highest, 2*lowest, in.detail)
		default:
			t.Fatalf("unknown shape %q", in.detail)
		}
		for _, r := range in.reqs {
			require.LessOrEqual(t, r.InputTokens+r.OutputTokens, robustMaxContext, in.detail)
		}
	}
	require.Len(t, kinds, 4, "every shape is drawn in 40 cases: %v", kinds)

	again, err := rp.cases()
	require.NoError(t, err)
	require.Equal(t, cases, again, "the same seed draws the same shapes")

	// A list of sources is cycled in its order; one repeated is drawn more often.
	mixed, err := RobustPlan{Cases: 6, Seed: 3, DataDir: robustData(t), Sources: []string{SourceShapes, SourceSinusoid, SourceShapes}}.cases()
	require.NoError(t, err)
	for i, in := range mixed {
		require.Equal(t, []string{SourceShapes, SourceSinusoid, SourceShapes}[i%3], in.source)
	}

	_, err = RobustPlan{Cases: 1, DataDir: t.TempDir(), Sources: []string{"spiky"}}.cases()
	require.ErrorContains(t, err, `unknown source "spiky"`)
}

// TestRobustCases_ServeGenClients: ServeGen's clients are a source of their own; the cases
// hold the drawn mean rates, and their arrivals are burstier than Poisson's within each
// replayed window.
func TestRobustCases_ServeGenClients(t *testing.T) {
	dir := robustData(t)
	rp := RobustPlan{Cases: 12, Seed: 5, DataDir: dir, Sources: []string{SourceServeGenClients}}
	cases, err := rp.cases()
	require.NoError(t, err)
	var drawn, played float64
	var dispersion []float64
	for _, in := range cases {
		require.Equal(t, SourceServeGenClients, in.source)
		require.Contains(t, in.detail, "clients, windows")
		var mean, length float64
		_, err := fmt.Sscanf(in.detail[strings.Index(in.detail, "mean "):], "mean %f req/s, %f s", &mean, &length)
		require.NoError(t, err, in.detail)
		drawn += mean * length
		played += float64(len(in.reqs))
		perSecond := make([]float64, int(length)+1)
		for _, r := range in.reqs {
			require.Less(t, r.Arrival, length, in.detail)
			require.LessOrEqual(t, r.InputTokens+r.OutputTokens, robustMaxContext, in.detail)
			perSecond[int(r.Arrival)]++
		}
		// Within each replayed minute the clients' rates are constant: Poisson arrivals would
		// have per-second counts whose variance is their mean.
		for from := 0; from+60 <= len(perSecond); from += 60 {
			if m, v := stat.MeanVariance(perSecond[from:from+60], nil); m > 1 {
				dispersion = append(dispersion, v/m)
			}
		}
	}
	require.InEpsilon(t, drawn, played, 0.2, "the cases' requests against their drawn means")
	require.Greater(t, stat.Quantile(0.5, stat.Empirical, sorted(dispersion), nil), 2.0, "the median minute is over-dispersed")
	again, err := rp.cases()
	require.NoError(t, err)
	require.Equal(t, cases, again, "the same seed draws the same cases")

	_, err = RobustPlan{Cases: 1, DataDir: t.TempDir(), Sources: []string{SourceServeGenClients}}.cases()
	require.ErrorContains(t, err, "servegen_client_windows_10min.csv.gz")
}

// sorted returns xs sorted.
func sorted(xs []float64) []float64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

func TestRobustness_EndToEnd(t *testing.T) {
	rep, err := Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t), Parallel: 1})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 1)
	c := rep.Cases[0]
	require.Equal(t, SourceAzureCode, c.Source)
	var names []string
	for _, r := range c.Rows {
		names = append(names, r.Name)
		require.Nil(t, r.Timeline, "the summary keeps no timeline")
	}
	require.Equal(t, []string{"ahead", "dynamo-sla", "best-static", "slo-static"}, names)
	require.Positive(t, c.LowerBoundGPUHours)
	require.NotEmpty(t, c.BestStatic)
	require.NotEmpty(t, c.SLOStatic)
	require.GreaterOrEqual(t, c.Rows[3].GPUHours, c.Rows[2].GPUHours, "95% never needs less than 90%")

	sums := rep.Summaries()
	require.Len(t, sums, 4)
	require.InDelta(t, c.Rows[0].GPUHours/c.Rows[3].GPUHours, sums[0].MedianVsSLOStatic, 1e-12)
	require.Equal(t, c.Rows[0].Goodput, sums[0].MinGoodput, "one case: min = median")
	require.InDelta(t, c.Rows[0].GPUHours/c.LowerBoundGPUHours, sums[0].MedianVsBound, 1e-12)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| ahead |")
	require.Contains(t, md.String(), "case-00-azure-code")
}

func TestRobustness_NoStatic(t *testing.T) {
	rep, err := Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 1)
	c := rep.Cases[0]
	require.Len(t, c.Rows, 1, "the policy only: no best static deployment searched")
	require.Equal(t, "ahead", c.Rows[0].Name)
	require.Empty(t, c.BestStatic)
	sums := rep.Summaries()
	require.Len(t, sums, 1)
	require.Zero(t, sums[0].MedianVsStatic)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| - | - |", "the ratios to the static and the oracle are not made up")
	require.Contains(t, md.String(), fmt.Sprintf("| %.2f | - |", c.LowerBoundGPUHours), "the case has no best static")
}

// TestRobustness_Ticks: with TicksDir every case's planner runs' per-tick timelines are
// written there, one tick a line, and left out of the report's rows; a folder holding
// anything is refused before any case runs.
func TestRobustness_Ticks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ticks")
	rep, err := Robustness(context.Background(), RobustPlan{Cases: 2, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead, PolicyDynamoSLA}, NoStatic: true, Parallel: 2, TicksDir: dir})
	require.NoError(t, err)
	var want []string
	for _, c := range rep.Cases {
		for _, r := range c.Rows {
			require.Nil(t, r.Ticks, "the report's rows are the summary")
			want = append(want, filepath.Join(dir, c.Name+"-"+r.Name+".ticks.jsonl"))
		}
	}
	require.Equal(t, want, rep.TickFiles, "one file per case and policy, in case order")
	for _, path := range rep.TickFiles {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Greater(t, len(lines), 10, path)
		ticks := make([]replay.TimelineEntry, len(lines))
		observed := 0
		for i, l := range lines {
			require.NoError(t, json.Unmarshal([]byte(l), &ticks[i]), path)
			if i > 0 {
				require.Greater(t, ticks[i].At, ticks[i-1].At, path)
			}
			if ticks[i].Traffic != nil {
				observed++
			}
		}
		require.Positive(t, observed, "%s: the windows the ticks saw", path)
		if strings.HasSuffix(path, "-ahead.ticks.jsonl") {
			require.NotEmpty(t, ticks[len(ticks)-1].Notes, "%s: what the policy said", path)
		}
	}

	_, err = Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1, TicksDir: dir})
	require.ErrorContains(t, err, "tick timeline folder "+dir+" is not empty: give a new one")

	// The timelines in a folder of the scenario files': both are checked before either is made.
	scenarios := filepath.Join(t.TempDir(), "cases")
	rep, err = Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1, ScenarioDir: scenarios, TicksDir: filepath.Join(scenarios, "ticks")})
	require.NoError(t, err)
	require.Len(t, rep.ScenarioFiles, 1)
	require.Equal(t, []string{filepath.Join(scenarios, "ticks", rep.Cases[0].Name+"-ahead.ticks.jsonl")}, rep.TickFiles)
}

func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{
		"ahead":               "ahead",
		"ahead @30s":          "ahead__30s",
		"dynamo-sla/constant": "dynamo-sla_constant",
		"static 2P 2D":        "static_2P_2D",
		"a\u00e9b":            "a_b", // ASCII only
		"../up":               ".._up",
	} {
		require.Equal(t, want, fileSafe(in), in)
	}
}

// TestRobustness_Agg: with Mode agg every case runs aggregated deployments — the policies'
// pools and the static deployments searched are one pool of engines — and the report says
// so; a mode other than disagg or agg is refused before any case runs.
func TestRobustness_Agg(t *testing.T) {
	rep, err := Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead}, Mode: config.ModeAgg, Parallel: 1})
	require.NoError(t, err)
	require.Equal(t, config.ModeAgg, rep.Mode)
	c := rep.Cases[0]
	require.Equal(t, "ahead", c.Rows[0].Name)
	require.Zero(t, c.Rows[0].PrefillGPUHours, "no prefill pool")
	require.Positive(t, c.Rows[0].DecodeGPUHours)
	require.Contains(t, c.BestStatic, "agg", "the static deployments are aggregated")
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "startup 60 s; aggregated deployments (mode agg")

	disagg, err := Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1})
	require.NoError(t, err)
	require.Equal(t, config.ModeDisagg, disagg.Mode, "the default")
	require.Positive(t, disagg.Cases[0].Rows[0].PrefillGPUHours)

	_, err = Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t), Mode: "prefill"})
	require.ErrorContains(t, err, `mode "prefill": want "disagg" or "agg"`)
}

func TestMedian(t *testing.T) {
	require.Zero(t, median(nil))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
}

// TestRobustCases_OwnTrace: a trace file of the user's own is a source of its own — windows
// and rate scales of it within the plan's scales, at its own SLA, one model's requests of a
// BurstGPT file when asked — and the plan refuses a trace without its source, the source
// without a trace, a bad SLA, a bad model name and bad scales before drawing any case.
func TestRobustCases_OwnTrace(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for s := 0; s < 7200; s += 3 {
		model := "ChatGPT"
		if s%2 == 1 {
			model = "GPT-4"
		}
		fmt.Fprintf(&b, "%d,%s,%d,%d,%d,Conversation log\n", s, model, 500+s%900, 100, 600+s%900)
	}
	b.WriteString("7300,GPT-4,20000,100,20100,Conversation log\n") // too long: dropped
	path := filepath.Join(dir, "BurstGPT_mine.csv")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	sla := SLA{TTFTMs: 500, ITLMs: 20}

	rp := RobustPlan{Cases: 6, Seed: 11, Sources: []string{SourceTrace, SourceSinusoid},
		Traces: []RobustTrace{{Path: path, Model: " GPT-4 ", SLA: sla}}, ScaleMin: 0.5, ScaleMax: 2}
	cases, err := rp.cases()
	require.NoError(t, err)
	require.Len(t, cases, 6)
	for i, in := range cases {
		if i%2 == 1 {
			require.Equal(t, SourceSinusoid, in.source)
			require.Equal(t, robustSLA[SourceSinusoid], in.sla, "a shared source keeps its SLA")
			continue
		}
		require.Equal(t, SourceTrace, in.source)
		require.Equal(t, fmt.Sprintf("case-%02d-trace", i), in.name)
		require.Equal(t, sla, in.sla, "scored at the trace's own SLA")
		require.Contains(t, in.detail, "BurstGPT_mine.csv, model GPT-4 from")
		require.GreaterOrEqual(t, in.scale, 0.5)
		require.LessOrEqual(t, in.scale, 2.0)
		require.NotEmpty(t, in.reqs)
		for _, r := range in.reqs {
			require.LessOrEqual(t, r.InputTokens+r.OutputTokens, robustMaxContext)
			require.Equal(t, 1, (r.InputTokens-500)%2, "GPT-4's requests only (odd seconds, odd lengths)")
		}
	}
	again, err := rp.cases()
	require.NoError(t, err)
	require.Equal(t, cases, again, "the same seed draws the same cases")

	// Several traces: the source's cases draw them in turn, each at its own SLA and named by
	// it, and adding a second trace leaves the first one's cases as they were.
	other := filepath.Join(dir, "sub", "BurstGPT_other.csv")
	require.NoError(t, os.MkdirAll(filepath.Dir(other), 0o755))
	require.NoError(t, os.WriteFile(other, []byte(b.String()), 0o644))
	slaOther := SLA{TTFTMs: 900, ITLMs: 40}
	two := rp
	two.Traces = []RobustTrace{rp.Traces[0], {Path: other, SLA: slaOther}}
	twoCases, err := two.cases()
	require.NoError(t, err)
	require.Len(t, twoCases, 6)
	for i, want := range []struct {
		trace string
		sla   SLA
	}{{"BurstGPT_mine.csv, model GPT-4", sla}, {"BurstGPT_other.csv", slaOther}, {"BurstGPT_mine.csv, model GPT-4", sla}} {
		in := twoCases[2*i]
		require.Equal(t, want.trace, in.trace, "case %d", 2*i)
		require.Equal(t, want.sla, in.sla, "case %d", 2*i)
		require.Contains(t, in.detail, want.trace+" from")
	}
	require.Equal(t, cases[0], twoCases[0], "the first trace's first case is drawn as with it alone")
	require.Equal(t, cases[1], twoCases[1], "the other sources' cases are unchanged")
	require.Equal(t, cases[3], twoCases[3])
	require.Equal(t, other, twoCases[2].spec.File, "its scenario file replays the other trace")
	require.Empty(t, twoCases[2].spec.Model)

	tooMany := make([]RobustTrace, MaxRobustTraces+1)
	for k := range tooMany {
		tooMany[k] = RobustTrace{Path: filepath.Join(dir, fmt.Sprintf("t%d.csv", k)), SLA: sla}
	}

	for name, tc := range map[string]struct {
		plan RobustPlan
		want string
	}{
		"source without a trace":   {RobustPlan{Cases: 1, Sources: []string{SourceTrace}}, "needs a trace file"},
		"trace without its source": {RobustPlan{Cases: 1, Sources: []string{SourceSinusoid}, Traces: []RobustTrace{{Path: path, SLA: sla}}}, `do not list "trace"`},
		"no SLA":                   {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path}}}, "must be > 0"},
		"absurd SLA":               {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, SLA: SLA{TTFTMs: math.Inf(1), ITLMs: 10}}}}, "must be > 0"},
		"blank model":              {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, Model: "  ", SLA: sla}}}, "blank"},
		"no such model":            {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, Model: "Claude", SLA: sla}}}, "GPT-4"},
		"missing file":             {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: filepath.Join(dir, "none.csv"), SLA: sla}}}, "none.csv"},
		"empty path":               {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: " ", SLA: sla}}}, "path is empty"},
		"a trace twice":            {RobustPlan{Cases: 2, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, Model: "GPT-4", SLA: sla}, {Path: path, Model: " GPT-4", SLA: sla}}}, "two traces are named BurstGPT_mine.csv, model GPT-4"},
		"same name elsewhere":      {RobustPlan{Cases: 2, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, SLA: sla}, {Path: filepath.Join(dir, "sub", "BurstGPT_mine.csv"), SLA: sla}}}, "files of the same name in two folders"},
		"too many traces":          {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: tooMany}, "at most 64"},
		"a trace never drawn":      {RobustPlan{Cases: 3, Sources: []string{SourceTrace, SourceSinusoid}, Traces: []RobustTrace{{Path: path, SLA: sla}, {Path: other, SLA: sla}, {Path: filepath.Join(dir, "third.csv"), SLA: sla}}}, "trace files: 3; cases drawing the trace source: 2 of 3: each file needs one"},
		"second trace's SLA":       {RobustPlan{Cases: 2, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, SLA: sla}, {Path: other}}}, "BurstGPT_other.csv: SLA TTFT 0 ms"},
		"scales reversed":          {RobustPlan{Cases: 1, Sources: []string{SourceSinusoid}, ScaleMin: 4, ScaleMax: 2}, "0.01 ≤ min ≤ max ≤ 100"},
		"scale too large":          {RobustPlan{Cases: 1, Sources: []string{SourceSinusoid}, ScaleMin: 1, ScaleMax: 1000}, "0.01 ≤ min ≤ max ≤ 100"},
		"one scale only":           {RobustPlan{Cases: 1, Sources: []string{SourceSinusoid}, ScaleMax: 3}, "0.01 ≤ min ≤ max ≤ 100"},
		"too short a replay":       {RobustPlan{Cases: 1, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, SLA: sla}}, ScaleMin: 100, ScaleMax: 100}, "less than twice the 60 s startup"},
		"scale too small":          {RobustPlan{Cases: 1, Sources: []string{SourceSinusoid}, ScaleMin: 1e-9, ScaleMax: 1}, "0.01 ≤ min ≤ max ≤ 100"},
		// Every trace is read before any case is drawn: drawn one by one, the first case (too
		// short a replay at 100×) would fail before the second trace is read.
		"missing file drawn later":  {RobustPlan{Cases: 2, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, SLA: sla}, {Path: filepath.Join(dir, "none.csv"), SLA: sla}}, ScaleMin: 100, ScaleMax: 100}, "none.csv"},
		"no such model drawn later": {RobustPlan{Cases: 2, Sources: []string{SourceTrace}, Traces: []RobustTrace{{Path: path, SLA: sla}, {Path: path, Model: "Claude", SLA: sla}}, ScaleMin: 100, ScaleMax: 100}, "Claude"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.plan.cases()
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestRobustCases_DefaultScales: the default scales draw what the benchmark always drew (its
// cases, and docs/benchmarks.md, stay those of earlier editions).
func TestRobustCases_DefaultScales(t *testing.T) {
	dir := robustData(t)
	def, err := RobustPlan{Cases: 5, Seed: 3, DataDir: dir}.cases()
	require.NoError(t, err)
	explicit, err := RobustPlan{Cases: 5, Seed: 3, DataDir: dir, ScaleMin: DefaultRobustScaleMin, ScaleMax: DefaultRobustScaleMax}.cases()
	require.NoError(t, err)
	require.Equal(t, def, explicit)
	for i, in := range def {
		u := rand.New(rand.NewPCG(3, uint64(i))) // the case's generator: its second draw is the scale
		u.Float64()
		if in.source == SourceSinusoid {
			continue // draws its own rates: scale 1
		}
		require.Equal(t, 1+7*u.Float64(), in.scale, in.detail)
	}
}

// TestRobustness_BudgetAndStartup: a plan's budget and startup delay are every case's (the
// replays start that late and are scored from then; the header says so), within their bounds.
func TestRobustness_BudgetAndStartup(t *testing.T) {
	dir := robustData(t)
	startup := 120.0
	rep, err := Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: dir, Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1, Budget: 4, StartupS: &startup})
	require.NoError(t, err)
	require.Equal(t, 4, rep.Budget)
	require.Equal(t, 120.0, rep.StartupS)
	row := rep.Cases[0].Rows[0]
	require.Equal(t, 120.0, row.StartupS)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "each scored from 120 s; budget 4 GPUs; startup 120 s.")

	def, err := Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: dir, Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1})
	require.NoError(t, err)
	md.Reset()
	require.NoError(t, def.WriteMarkdown(&md))
	require.Contains(t, md.String(), "each scored from 60 s; budget 48 GPUs; startup 60 s.", "the benchmark's header unchanged")

	neg, long := -1.0, 7200.0
	for name, rp := range map[string]RobustPlan{
		"budget 1":     {Budget: 1},
		"budget 1000":  {Budget: 1000},
		"startup -1 s": {StartupS: &neg},
		"startup 2 h":  {StartupS: &long},
	} {
		t.Run(name, func(t *testing.T) {
			rp.Cases, rp.Seed, rp.DataDir, rp.Profile = 1, 3, dir, profile(t)
			_, err := Robustness(context.Background(), rp)
			require.ErrorContains(t, err, "want ")
		})
	}
}

// TestRobustPlan_ScenarioFiles: every case of a trace or a sinusoid is written as a scenario
// file that replays the same requests at the same SLA, budget and startup with the plan's
// policies; the shapes' cases, which no scenario key describes, are listed as left out; a
// scenario that would not load, a folder holding files already and a plan with nothing to
// write are errors.
func TestRobustPlan_ScenarioFiles(t *testing.T) {
	dir := robustData(t)
	var bg strings.Builder // BurstGPT: ChatGPT every 2 s, GPT-4 every 3 s with other lengths
	bg.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for s := 0; s < 3000; s++ {
		if s%2 == 0 {
			fmt.Fprintf(&bg, "%d,ChatGPT,%d,40,0,Conversation log\n", s, 300+s%500)
		}
		if s%3 == 0 {
			fmt.Fprintf(&bg, "%d,GPT-4,%d,80,0,Conversation log\n", s, 900+s%700)
		}
	}
	own := filepath.Join(t.TempDir(), "BurstGPT_own.csv")
	require.NoError(t, os.WriteFile(own, []byte(bg.String()), 0o644))
	startup := 90.0
	rp := RobustPlan{Cases: 8, Seed: 5, DataDir: dir, Sources: []string{SourceAzureCode, SourceSinusoid, SourceShapes, SourceTrace},
		Traces: []RobustTrace{{Path: own, Model: "GPT-4", SLA: SLA{TTFTMs: 700, ITLMs: 30}}}, Policies: []string{PolicyAhead}, Budget: 12, StartupS: &startup}
	out := filepath.Join(t.TempDir(), "scenarios")
	cases, err := rp.cases()
	require.NoError(t, err)
	files, skipped, err := rp.scenarioFiles(cases, rp.policies(), 12, startup, config.ModeAgg)
	require.NoError(t, err)
	require.Equal(t, []string{"case-02-shapes", "case-06-shapes"}, skipped)
	require.Equal(t, "2 shapes", skippedBySource(cases, skipped))
	written, err := writeScenarios(out, " --profile p", rp.Seed, files, skipped)
	require.NoError(t, err)
	require.Len(t, written, 6)
	head, err := os.ReadFile(written[0])
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(head), "# Written by planner robustness (seed 5): replay with planner simulate --scenario "+written[0]+" --profile p\n"))

	require.ErrorContains(t, emptyFolder(out, "scenario"), "scenario folder "+out+" is not empty: give a new one",
		"files of another run are not mixed in: Robustness refuses the folder before any case runs")
	_, err = Robustness(context.Background(), RobustPlan{Cases: 1, Seed: 3, DataDir: robustData(t), Profile: profile(t),
		Policies: []string{PolicyAhead}, NoStatic: true, Parallel: 1, ScenarioDir: out})
	require.ErrorContains(t, err, "scenario folder "+out+" is not empty")
	_, err = writeScenarios(filepath.Join(t.TempDir(), "none"), "", rp.Seed, nil, skipped)
	require.ErrorContains(t, err, "no case can be written")
	_, _, err = rp.scenarioFiles(cases, []string{PolicyAhead, PolicyAhead}, 12, startup, config.ModeAgg)
	require.ErrorContains(t, err, "twice", "a scenario simulate would refuse is not written")
	for _, in := range cases {
		if in.source == SourceShapes {
			continue
		}
		path := filepath.Join(out, in.name+".yaml")
		require.Contains(t, written, path)
		sc, err := LoadScenario(path)
		require.NoError(t, err, in.name)
		require.Equal(t, in.sla, sc.SLA)
		require.Equal(t, 90.0, sc.StartupSeconds)
		require.Equal(t, 90.0, sc.ScoredFrom(), "scored from the same second")
		require.Equal(t, 12, sc.MaxGPUBudget)
		require.Equal(t, config.ModeAgg, sc.Mode, "the cases' deployment shape")
		require.Equal(t, []PolicySpec{{Name: PolicyAhead, Builtin: PolicyAhead}}, sc.Policies)
		reqs, _, err := sc.Requests(t.TempDir()) // trace files by absolute path: no data folder needed
		require.NoError(t, err, in.name)
		require.Equal(t, in.reqs, reqs, "%s: the scenario replays the case's requests", in.name)
		if in.source == SourceTrace {
			require.Equal(t, "GPT-4", sc.Trace.Model)
			for _, r := range reqs {
				require.Equal(t, 80, r.OutputTokens, "GPT-4's requests only")
			}
		}
	}
}

// TestRobustReport_BySource: cases of more than one source get a table per source of the
// policies' distributions (the static rows are their yardstick, not a run of their own); a
// report of one source has none.
func TestRobustReport_BySource(t *testing.T) {
	row := func(name, kind string, goodput, gpuh float64) Row {
		return Row{Name: name, Kind: kind, Goodput: goodput, GPUHours: gpuh}
	}
	c := func(name, src string, ahead, aheadH, static, staticH float64) RobustCase {
		return RobustCase{Name: name, Source: src, LowerBoundGPUHours: 1,
			Rows: []Row{row("ahead", KindPolicy, ahead, aheadH), row("slo-static", KindSLOStatic, static, staticH)}}
	}
	warm := func(c RobustCase, ahead float64) RobustCase {
		c.Rows[0].WarmGoodput = &ahead
		return c
	}
	rep := &RobustReport{Seed: 1, Budget: 48, StartupS: 60, Cases: []RobustCase{
		// Cold, then 96% from the warm start; 99% throughout; no request after the warm start.
		warm(c("case-00-azure-code", SourceAzureCode, 0.90, 2, 0.96, 1), 0.96),
		warm(c("case-01-sinusoid", SourceSinusoid, 0.99, 3, 0.97, 2), 0.99),
		c("case-02-azure-code", SourceAzureCode, 0.97, 4, 0.98, 1),
	}}
	sums := rep.SourceSummaries()
	require.Len(t, sums, 2)
	require.Equal(t, SourceAzureCode, sums[0].Source)
	require.Equal(t, 2, sums[0].Cases)
	require.Equal(t, "ahead", sums[0].Runs[0].Name)
	require.Equal(t, 0.90, sums[0].Runs[0].MinGoodput)
	require.InDelta(t, 0.935, sums[0].Runs[0].MedianGoodput, 1e-12)
	require.Equal(t, 1, sums[0].Runs[0].Meets95)
	require.InDelta(t, 3, sums[0].Runs[0].MedianVsSLOStatic, 1e-12, "2× and 4× the static's")
	require.Equal(t, SourceSinusoid, sums[1].Source)
	require.InDelta(t, 1.5, sums[1].Runs[0].MedianVsSLOStatic, 1e-12)

	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Equal(t, 1, sums[0].Runs[0].WarmCases, "case 02 has no request after the warm start")
	require.Equal(t, 1, sums[0].Runs[0].WarmMeets95, "case 00 meets 95% once warm")
	require.Contains(t, md.String(), "| cases ≥ 95% | cases ≥ 95% from 180 s |", "warm from the scoring start (60 s) plus two startups")
	require.Contains(t, md.String(), "| ahead | 90.0% | 97.0% | 3 of 3 | 2 of 3 | 2 of 2 | 3.00 / 4.00 |")
	require.Contains(t, md.String(), "| slo-static | 96.0% | 97.0% | 3 of 3 | 3 of 3 | - | 1.00 / 2.00 |", "no warm goodput: -")
	require.Contains(t, md.String(), "| azure-code | ahead | 2 | 90.0% | 93.5% | 1 of 2 | 1 of 1 | - | 3.00 | - |")
	require.Contains(t, md.String(), "| sinusoid | ahead | 1 | 99.0% | 99.0% | 1 of 1 | 1 of 1 | - | 1.50 | - |")
	require.NotContains(t, md.String(), "| azure-code | slo-static |", "the policies only")

	// A fractional startup prints its triple as given, not with float noise (3 × 0.7).
	frac := *rep
	frac.StartupS = 0.7
	md.Reset()
	require.NoError(t, frac.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| cases ≥ 95% from 2.1 s |")

	// Trace files of the user's own: one summary per file, named by it.
	mine, other := c("case-03-trace", SourceTrace, 0.95, 1, 0.95, 1), c("case-04-trace", SourceTrace, 0.80, 1, 0.95, 1)
	mine.Trace, other.Trace = "mine.csv", "other.csv, model GPT-4"
	rep.Cases = append(rep.Cases, mine, other)
	sums = rep.SourceSummaries()
	require.Len(t, sums, 4)
	require.Equal(t, SourceTrace, sums[3].Source)
	require.Equal(t, "other.csv, model GPT-4", sums[3].Trace)
	require.Equal(t, 1, sums[3].Cases)
	require.Equal(t, 0.80, sums[3].Runs[0].MinGoodput)
	md.Reset()
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| trace: mine.csv | ahead | 1 | 95.0% |")
	require.Contains(t, md.String(), "| trace: other.csv, model GPT-4 | ahead | 1 | 80.0% |")

	rep.Cases = rep.Cases[:1]
	md.Reset()
	require.NoError(t, rep.WriteMarkdown(&md))
	require.NotContains(t, md.String(), "By source", "one source: the summary says it all")
}

// TestRobustCases_ServeGenGapsSkipped: a ServeGen window under 5% of its series' median is a
// gap in the recording (predict.RecordingGaps), not a quiet spell: a case replays the windows
// either side of it back to back, says how many it skipped, and has arrivals in every minute.
func TestRobustCases_ServeGenGapsSkipped(t *testing.T) {
	dir := t.TempDir()
	rate := func(w int) float64 { // windows 20–29 unrecorded, 30 recorded in part
		switch {
		case w >= 20 && w < 30:
			return 0
		case w == 30:
			return 1
		}
		return 100 + float64(10*(w%7))
	}
	writeServeGen(t, dir, 60, rate)

	rp := RobustPlan{Cases: 24, Seed: 1, DataDir: dir, Sources: []string{SourceServeGen, SourceServeGenClients}}
	cases, err := rp.cases()
	require.NoError(t, err)
	crossed := 0
	for _, in := range cases {
		var first, last int
		_, err := fmt.Sscanf(in.detail[strings.Index(in.detail, "windows ")+len("windows "):], "%d–%d", &first, &last)
		require.NoError(t, err, in.detail)
		gaps := 0
		for w := first; w <= last; w++ {
			if w >= 20 && w <= 30 {
				gaps++
			}
		}
		if gaps > 0 {
			crossed++
			require.Contains(t, in.detail, fmt.Sprintf("; %d windows skipped, gaps in the recording)", gaps))
		} else {
			require.NotContains(t, in.detail, "skipped")
		}
		var length float64
		_, err = fmt.Sscanf(in.detail[strings.Index(in.detail, "req/s, ")+len("req/s, "):], "%f s", &length)
		require.NoError(t, err, in.detail)
		perMinute := make([]int, int(length)/60)
		for _, r := range in.reqs {
			if m := int(r.Arrival) / 60; m < len(perMinute) {
				perMinute[m]++
			}
		}
		require.NotContains(t, perMinute, 0, "%s: a minute with no arrival", in.detail)
	}
	require.Positive(t, crossed, "some span was drawn across the gap")
}

func TestSpanOutsideGaps(t *testing.T) {
	gaps := func(at ...int) []bool {
		g := make([]bool, 10)
		for _, w := range at {
			g[w] = true
		}
		return g
	}
	for name, tc := range map[string]struct {
		gaps        []bool
		from, steps int
		want        []int
	}{
		"no gap":                    {gaps(), 2, 3, []int{2, 3, 4}},
		"a gap inside":              {gaps(3, 4), 2, 3, []int{2, 5, 6}},
		"a start in a gap":          {gaps(2, 3), 2, 3, []int{4, 5, 6}},
		"up to the end":             {gaps(), 7, 3, []int{7, 8, 9}},
		"past the end: the last":    {gaps(8), 7, 3, []int{6, 7, 9}},
		"a start in the final gaps": {gaps(8, 9), 8, 3, []int{5, 6, 7}},
		"too few outside the gaps":  {gaps(0, 1, 2, 3, 4, 5, 6, 7), 0, 3, nil},
	} {
		require.Equal(t, tc.want, spanOutsideGaps(tc.gaps, tc.from, tc.steps), name)
	}
}

// TestRobustCases_ServeGenGapFreeSpansUnchanged: a span that meets no gap in the recording
// draws the windows, and so the case, it drew before the gaps were skipped — the same as on
// a series with no gap at all.
func TestRobustCases_ServeGenGapFreeSpansUnchanged(t *testing.T) {
	write := func(gapFrom int) string { // windows from gapFrom on unrecorded
		dir := t.TempDir()
		writeServeGen(t, dir, 120, func(w int) float64 {
			if w >= gapFrom {
				return 0
			}
			return 100 + float64(10*(w%7))
		})
		return dir
	}
	sources := []string{SourceServeGen, SourceServeGenClients}
	whole, err := RobustPlan{Cases: 30, Seed: 2, DataDir: write(120), Sources: sources}.cases()
	require.NoError(t, err)
	gapped, err := RobustPlan{Cases: 30, Seed: 2, DataDir: write(100), Sources: sources}.cases()
	require.NoError(t, err)
	same, moved := 0, 0
	for i := range whole {
		var first, last int
		_, err := fmt.Sscanf(whole[i].detail[strings.Index(whole[i].detail, "windows ")+len("windows "):], "%d–%d", &first, &last)
		require.NoError(t, err, whole[i].detail)
		if last < 100 {
			same++
			require.Equal(t, whole[i], gapped[i], "case %d meets no gap", i)
		} else {
			moved++
			require.NotEqual(t, whole[i].detail, gapped[i].detail, "case %d ran into the gap", i)
		}
	}
	require.Positive(t, same)
	require.Positive(t, moved)
}

// writeServeGen writes a ServeGen aggregate and client file of one series (language/m-mid)
// of the given windows into dir, each window at rate(w) req/s, sent by two clients alike.
func writeServeGen(t *testing.T, dir string, windows int, rate func(w int) float64) {
	t.Helper()
	var sg strings.Builder
	sg.WriteString("category,model,timestamp_s,total_rate_rps\n")
	var cl bytes.Buffer
	zw := gzip.NewWriter(&cl)
	fmt.Fprintln(zw, "category,model,client_id,timestamp_s,rate_rps,iat_cv,iat_dist,iat_param1,iat_param2")
	for w := range windows {
		fmt.Fprintf(&sg, "language,m-mid,%d,%g\n", w*600, rate(w))
		fmt.Fprintf(zw, "language,m-mid,0,%d,%g,1.5,Gamma,0.4,0.1\n", w*600, rate(w)/2)
		fmt.Fprintf(zw, "language,m-mid,1,%d,%g,1,Gamma,1,0.1\n", w*600, rate(w)/2)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "servegen_aggregate_10min.csv"), []byte(sg.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "servegen_client_windows_10min.csv.gz"), cl.Bytes(), 0o644))
}
