package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// evalTestData writes a small Mooncake trace (20 minutes, a rising rate), an Azure trace,
// a ServeGen aggregate and a file of another format.
func evalTestData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var jl strings.Builder
	for m := range 20 {
		for i := range 5 + m {
			fmt.Fprintf(&jl, "{\"timestamp\": %d, \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [1]}\n", m*60000+i*1000)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mc.jsonl"), []byte(jl.String()), 0o644))
	var az strings.Builder
	az.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	for m := range 12 {
		for i := range 3 + m%4 {
			fmt.Fprintf(&az, "2023-11-16 18:%02d:%02d.5000000,2000,20\n", m, i)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "az.csv"), []byte(az.String()), 0o644))
	var sg strings.Builder
	sg.WriteString("category,model,timestamp_s,total_rate_rps,active_clients\n")
	for i := range 12 {
		fmt.Fprintf(&sg, "language,m-test,%d,%d.5,4\n", i*600, 2+i%3)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "servegen_aggregate_10min.csv"), []byte(sg.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.csv"), []byte("a,b\n1,2\n"), 0o644))
	return dir
}

func TestEvalPredictorsTable(t *testing.T) {
	dir := evalTestData(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"eval-predictors", "--data", dir, "--intervals", "60,120"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	text := out.String()
	for _, want := range []string{"predictor", "MAPE %", "constant", "arima", "kalman", "prophet", "arima+log1p", "kalman+log1p", "m-test", "600s", "120s"} {
		require.Contains(t, text, want)
	}
	require.Contains(t, errb.String(), "skipped notes.csv (not a request trace)")
	// 2 traces x 2 intervals + 1 ServeGen model = 5 series of 6 predictors (+ header).
	rows := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "mc ") || strings.HasPrefix(line, "az ") || strings.HasPrefix(line, "servegen") {
			rows++
		}
	}
	require.Equal(t, 30, rows)
}

func TestEvalPredictorsJSON(t *testing.T) {
	dir := evalTestData(t)
	var out, errb bytes.Buffer
	require.NoError(t, runEvalPredictors(context.Background(), []string{"--data", dir, "--intervals", "60", "--json", "--servegen=false"}, &out, &errb))
	var rep evalReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.Results, 2*len(evalPredictors))
	require.Equal(t, []string{"notes.csv (not a request trace)"}, rep.Skipped)
	best := 0
	for _, r := range rep.Results {
		require.Equal(t, 60.0, r.Interval)
		require.Positive(t, r.Intervals)
		require.NotNil(t, r.MAPE)
		require.GreaterOrEqual(t, r.MAE, 0.0)
		if r.Best {
			best++
		}
	}
	require.Equal(t, 2, best, "one best predictor per series")
	// The Mooncake series rises by one request a minute: 19 forecasts, all scored, and the
	// constant predictor is off by exactly one each time.
	for _, r := range rep.Results {
		if r.Trace == "mc.jsonl" && r.Predictor == "constant" {
			require.Equal(t, 19, r.Intervals)
			require.Equal(t, 19, r.Scored)
			require.InDelta(t, 1.0, r.MAE, 1e-12)
		}
	}
}

func TestEvalPredictorsErrors(t *testing.T) {
	var out, errb bytes.Buffer
	ctx := context.Background()
	require.ErrorIs(t, runEvalPredictors(ctx, []string{"--no-such-flag"}, &out, &errb), errUsage)
	require.ErrorIs(t, runEvalPredictors(ctx, []string{"--intervals", "60,-3"}, &out, &errb), errUsage)
	require.ErrorIs(t, runEvalPredictors(ctx, []string{"extra"}, &out, &errb), errUsage)
	err := runEvalPredictors(ctx, []string{"--data", filepath.Join(t.TempDir(), "nope")}, &out, &errb)
	require.ErrorIs(t, err, os.ErrNotExist)
	err = runEvalPredictors(ctx, []string{"--data", t.TempDir()}, &out, &errb)
	require.ErrorContains(t, err, "no trace found")

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "x.jsonl"), []byte("{\"timestamp\": 1}\n"), 0o644))
	err = runEvalPredictors(ctx, []string{"--data", bad}, &out, &errb)
	require.ErrorContains(t, err, "x.jsonl:1:")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = runEvalPredictors(cancelled, []string{"--data", evalTestData(t)}, &out, &errb)
	require.ErrorIs(t, err, context.Canceled)
}

// TestEvalPredictors_Trace: --trace evaluates one file, --trace-model one model's requests of
// a BurstGPT trace (the series is named after it, and counts that model's requests only);
// the flags' misuse, a model the trace lacks and a trace whose requests are years apart are
// errors.
func TestEvalPredictors_Trace(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for s := 0; s < 1200; s += 5 {
		if (s/60)%2 == 1 { // ChatGPT in odd minutes only
			fmt.Fprintf(&b, "%d,ChatGPT,300,100,400,Conversation log\n", s)
		}
		if s%20 == 0 {
			fmt.Fprintf(&b, "%d,GPT-4,900,200,1100,Conversation log\n", s+1)
		}
	}
	path := filepath.Join(dir, "BurstGPT_test.csv")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	years := filepath.Join(dir, "years.jsonl")
	require.NoError(t, os.WriteFile(years, []byte("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 100000000000000, \"input_length\": 10, \"output_length\": 1}\n"), 0o644))

	var out, errb bytes.Buffer
	require.NoError(t, runEvalPredictors(context.Background(), []string{"--trace", path, "--trace-model", "GPT-4", "--intervals", "60", "--json"}, &out, &errb))
	var rep evalReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.Results, len(evalPredictors))
	for _, r := range rep.Results {
		require.Equal(t, "BurstGPT_test.csv", r.Trace)
		require.Equal(t, "GPT-4", r.Series)
		require.Equal(t, 19, r.Intervals, "20 minutes of GPT-4: a forecast for every minute after the first")
		require.InDelta(t, 0, r.MAE, 1e-9, "3 GPT-4 requests every minute: every forecast exact")
	}
	out.Reset()
	require.NoError(t, runEvalPredictors(context.Background(), []string{"--trace", path, "--intervals", "60", "--json"}, &out, &errb))
	rep = evalReport{}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, "requests", rep.Results[0].Series, "every model's requests")
	require.Greater(t, rep.Results[0].MAE, 1.0, "3 and 15 requests in turn: no forecast is exact")

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"model, no trace":    {[]string{"--trace-model", "GPT-4"}, "no --trace is given"},
		"trace and data":     {[]string{"--trace", path, "--data", dir}, "do not apply"},
		"trace and servegen": {[]string{"--trace", path, "--servegen=false"}, "do not apply"},
		"no such model":      {[]string{"--trace", path, "--trace-model", "Claude"}, `no request of model "Claude"`},
		"years apart":        {[]string{"--trace", years, "--intervals", "60"}, "200000 or more"},
		"missing trace":      {[]string{"--trace", filepath.Join(dir, "none.csv")}, "none.csv"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := runEvalPredictors(context.Background(), tc.args, &out, &errb)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, out.String())
		})
	}
}

// TestEvalPredictorsServeGenGaps: windows under 5% of a ServeGen series' median are gaps in
// its recording, left out of the series (and reported), not forecast as a quiet spell.
func TestEvalPredictorsServeGenGaps(t *testing.T) {
	dir := t.TempDir()
	var sg strings.Builder
	sg.WriteString("category,model,timestamp_s,total_rate_rps\n")
	for i := range 12 {
		rate := 100 + 10*(i%3)
		if i == 5 || i == 6 {
			rate = 0
		}
		fmt.Fprintf(&sg, "language,m-test,%d,%d\n", i*600, rate)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "servegen_aggregate_10min.csv"), []byte(sg.String()), 0o644))
	var out, errb bytes.Buffer
	require.NoError(t, runEvalPredictors(context.Background(), []string{"--data", dir, "--json"}, &out, &errb))
	var rep evalReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, []string{"servegen_aggregate_10min.csv m-test: 2 of 12 windows (gaps in the recording: under 5% of the series' median)"}, rep.Skipped)
	require.Len(t, rep.Results, len(evalPredictors))
	for _, r := range rep.Results {
		require.Equal(t, 9, r.Intervals, "%s: 10 windows outside the gap, each after the first forecast", r.Predictor)
		require.Equal(t, 9, r.Scored, r.Predictor)
	}
}
