package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/llmplanner/planner/predict"
)

func init() {
	register(command{
		name:    "eval-predictors",
		summary: "next-interval MAPE/MAE of every load predictor on the shared request traces",
		run:     runEvalPredictors,
	})
}

// evalPredictor is one predictor configuration of the evaluation.
type evalPredictor struct {
	name string
	opts predict.Options
}

// evalPredictors are the configurations compared, in table order.
var evalPredictors = []evalPredictor{
	{"constant", predict.Options{Kind: predict.Constant}},
	{"arima", predict.Options{Kind: predict.ARIMA}},
	{"kalman", predict.Options{Kind: predict.Kalman}},
	{"prophet", predict.Options{Kind: predict.Prophet}},
	{"arima+log1p", predict.Options{Kind: predict.ARIMA, Log1p: true}},
	{"kalman+log1p", predict.Options{Kind: predict.Kalman, Log1p: true}},
}

// evalSeries is one request-count series to forecast.
type evalSeries struct {
	trace    string  // file name
	series   string  // "requests", or the model for ServeGen rows
	interval float64 // seconds
	counts   []float64
}

// evalResult is one row of the report.
type evalResult struct {
	Trace     string   `json:"trace"`
	Series    string   `json:"series"`
	Interval  float64  `json:"interval_seconds"`
	Predictor string   `json:"predictor"`
	Intervals int      `json:"intervals"` // forecasts made (every interval after the first)
	Scored    int      `json:"scored"`    // forecasts whose actual count is > 0 (the MAPE's)
	MAPE      *float64 `json:"mape_pct"`  // null when nothing was scored
	MAE       float64  `json:"mae"`       // over every forecast
	Fallbacks int      `json:"fallbacks"` // forecasts that were the last value (see Forecast.Fallback)
	Best      bool     `json:"best"`      // lowest MAPE of its series
}

type evalReport struct {
	Results []evalResult `json:"results"`
	Skipped []string     `json:"skipped,omitempty"`
}

func runEvalPredictors(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval-predictors", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", filepath.Join("..", "shared", "data", "traces"), "directory of traces (Mooncake .jsonl[.gz], Azure or BurstGPT .csv, ServeGen servegen_aggregate*.csv)")
	intervals := fs.String("intervals", "60,180", "comma-separated bucket lengths in seconds")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	serveGen := fs.Bool("servegen", true, "also evaluate the ServeGen aggregate per model at its native 600 s")
	trace := fs.String("trace", "", "evaluate this one request trace (Mooncake .jsonl[.gz], Azure or BurstGPT .csv) rather than the files of --data")
	traceModel := fs.String("trace-model", "", "with --trace: one model's requests of a BurstGPT trace (its Model column, e.g. GPT-4)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner eval-predictors [flags]")
		fmt.Fprintln(stderr, "\nOnline one-step-ahead forecasts of the request count of every interval from the intervals")
		fmt.Fprintln(stderr, "before it, for every predictor and trace. MAPE is over intervals whose actual count is > 0.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "eval-predictors: unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	ivs, err := parseIntervals(*intervals)
	if err != nil {
		fmt.Fprintf(stderr, "eval-predictors: -intervals: %v\n", err)
		return errUsage
	}
	set := givenFlags(fs)
	var series []evalSeries
	var skipped []string
	switch {
	case set["trace-model"] && *trace == "":
		return errors.New("eval-predictors: --trace-model selects a --trace's requests, and no --trace is given")
	case *trace != "" && (set["data"] || set["servegen"]):
		return errors.New("eval-predictors: --trace evaluates one file: --data (a folder of traces) and --servegen (its ServeGen aggregate) do not apply")
	case *trace != "":
		series, err = loadEvalTrace(*trace, *traceModel, ivs)
	default:
		series, skipped, err = loadEvalSeries(*data, ivs, *serveGen)
	}
	if err != nil {
		return err
	}
	if len(series) == 0 {
		return fmt.Errorf("no trace found in %s", *data)
	}
	var rep evalReport
	rep.Skipped = skipped
	if !*asJSON {
		for _, s := range skipped {
			fmt.Fprintf(stderr, "eval-predictors: skipped %s\n", s)
		}
	}
	for _, s := range series {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows, err := evaluateSeries(s)
		if err != nil {
			return err
		}
		rep.Results = append(rep.Results, rows...)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printEvalTable(stdout, rep.Results)
}

func parseIntervals(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%q is not a positive number of seconds", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// loadEvalSeries reads every file of dir (sorted by name): request traces bucketed at each
// interval, and the ServeGen aggregate (one series per model, without the gaps in its
// recording) when serveGen is set. Files of another format, and the gap windows left out,
// are reported as skipped.
func loadEvalSeries(dir string, intervals []float64, serveGen bool) (series []evalSeries, skipped []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read trace directory: %w", err)
	}
	for _, e := range entries { // os.ReadDir sorts by name
		if e.IsDir() {
			continue
		}
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, "servegen_aggregate") && strings.HasSuffix(name, ".csv") {
			if !serveGen {
				continue
			}
			rs, err := predict.ReadServeGenAggregate(path)
			if err != nil {
				return nil, nil, err
			}
			for _, r := range rs {
				// A gap in ServeGen's recording is missing data, not a quiet spell: the series is
				// forecast over the windows either side of it, back to back.
				var counts []float64
				gaps := r.Gaps()
				for w, c := range r.Counts {
					if !gaps[w] {
						counts = append(counts, c)
					}
				}
				if n := len(r.Counts) - len(counts); n > 0 {
					skipped = append(skipped, fmt.Sprintf("%s %s: %d of %d windows (gaps in the recording: under %.0f%% of the series' median)",
						name, r.Model, n, len(r.Counts), 100*predict.RecordingGapShare))
				}
				series = append(series, evalSeries{trace: name, series: r.Model, interval: r.StepSeconds, counts: counts})
			}
			continue
		}
		reqs, err := predict.ReadTrace(path)
		if errors.Is(err, predict.ErrUnknownTraceFormat) {
			skipped = append(skipped, name+" (not a request trace)")
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		rs, err := requestSeries(name, "requests", reqs, intervals)
		if err != nil {
			return nil, nil, err
		}
		series = append(series, rs...)
	}
	return series, skipped, nil
}

// loadEvalTrace reads one request trace (one model's requests of a BurstGPT trace when model
// is set; the series is then named after it), bucketed at each interval. A file that is not
// a request trace, or has no request, is an error.
func loadEvalTrace(path, model string, intervals []float64) ([]evalSeries, error) {
	reqs, err := predict.ReadTraceOf(path, predict.TraceFilter{Model: model})
	if err != nil {
		return nil, fmt.Errorf("eval-predictors: %w", err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("eval-predictors: %s has no request", path)
	}
	name := "requests"
	if m := strings.TrimSpace(model); m != "" {
		name = m
	}
	return requestSeries(filepath.Base(path), name, reqs, intervals)
}

// maxEvalIntervals bounds a series' intervals (its span over the interval): a trace whose
// requests are years apart is refused, not bucketed into billions of windows (and forecast
// online over each).
const maxEvalIntervals = 200_000

// requestSeries is a request trace's count series at each interval; an error when one would
// hold more than maxEvalIntervals intervals.
func requestSeries(trace, name string, reqs []predict.Request, intervals []float64) ([]evalSeries, error) {
	var out []evalSeries
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range reqs {
		lo, hi = math.Min(lo, r.Arrival), math.Max(hi, r.Arrival)
	}
	for _, iv := range intervals {
		if n := (hi - lo) / iv; len(reqs) > 0 && !(n < maxEvalIntervals) {
			return nil, fmt.Errorf("eval-predictors: %s spans %.0f s: %.0f intervals of %v s, %d or more", trace, hi-lo, math.Floor(n), iv, maxEvalIntervals)
		}
		wins := predict.Bucket(reqs, iv)
		counts := make([]float64, len(wins))
		for i, w := range wins {
			counts[i] = float64(w.Count)
		}
		out = append(out, evalSeries{trace: trace, series: name, interval: iv, counts: counts})
	}
	return out, nil
}

// evaluateSeries runs every predictor online over s: the forecast for interval i is made
// from intervals 0..i-1.
func evaluateSeries(s evalSeries) ([]evalResult, error) {
	rows := make([]evalResult, 0, len(evalPredictors))
	for _, ep := range evalPredictors {
		o := ep.opts
		o.StepSeconds = s.interval
		bt, err := predict.Backtest(o, s.counts)
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", ep.name, s.trace, err)
		}
		r := evalResult{Trace: s.trace, Series: s.series, Interval: s.interval, Predictor: ep.name,
			Intervals: bt.Intervals, Scored: bt.Scored, MAPE: bt.MAPEPct, MAE: bt.MAE, Fallbacks: bt.Fallbacks}
		rows = append(rows, r)
	}
	best := -1
	for i, r := range rows {
		if r.MAPE != nil && (best < 0 || *r.MAPE < *rows[best].MAPE) {
			best = i
		}
	}
	if best >= 0 {
		rows[best].Best = true
	}
	return rows, nil
}

func printEvalTable(w io.Writer, rows []evalResult) error {
	header := []string{"trace", "series", "interval", "predictor", "forecasts", "scored", "MAPE %", "MAE", "fallbacks"}
	rightAligned := []bool{false, false, true, false, true, true, true, true, true}
	cells := [][]string{header}
	var breaks []bool // a blank line before this row
	breaks = append(breaks, false)
	prev := ""
	for _, r := range rows {
		key := fmt.Sprintf("%s/%s/%v", r.Trace, r.Series, r.Interval)
		breaks = append(breaks, prev != "" && key != prev)
		prev = key
		mape := "-"
		if r.MAPE != nil {
			mape = strconv.FormatFloat(*r.MAPE, 'f', 1, 64)
			if r.Best {
				mape = "*" + mape
			}
		}
		cells = append(cells, []string{
			shortTrace(r.Trace), r.Series, strconv.FormatFloat(r.Interval, 'f', -1, 64) + "s", r.Predictor,
			strconv.Itoa(r.Intervals), strconv.Itoa(r.Scored), mape, strconv.FormatFloat(r.MAE, 'f', 1, 64),
			strconv.Itoa(r.Fallbacks),
		})
	}
	widths := make([]int, len(header))
	for _, row := range cells {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	for n, row := range cells {
		if breaks[n] {
			b.WriteByte('\n')
		}
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len(c))
			if rightAligned[i] {
				b.WriteString(pad + c)
			} else if i < len(row)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		b.WriteByte('\n')
	}
	b.WriteString("\n* lowest MAPE of the series. forecasts: intervals after the first; scored: those with\n")
	b.WriteString("requests (the MAPE's); MAE over all forecasts; fallbacks: forecasts that were the last value.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// shortTrace trims the file name's extensions for the table.
func shortTrace(name string) string {
	for _, ext := range []string{".gz", ".jsonl", ".csv"} {
		name = strings.TrimSuffix(name, ext)
	}
	return name
}
