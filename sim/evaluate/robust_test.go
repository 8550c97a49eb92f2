package evaluate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

func TestMedian(t *testing.T) {
	require.Zero(t, median(nil))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
}
