package evaluate

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/sim/replay"
	"github.com/llmplanner/planner/sim/report"
	"github.com/llmplanner/planner/sim/router"
)

// tableHeader is the comparison table's columns.
var tableHeader = []string{"run", "kind", "startup s", "deployment", "goodput", "goodput once warm", "TTFT p50/p90/p99 ms",
	"ITL p50/p90/p99 ms", "GPU-h", "÷ bound", "GPU-h/1k good", "actions", "reversals", "peak P/D", "note"}

// cells are a row's table cells; bound is the report's lower bound on GPU-hours.
func (r Row) cells(bound float64) []string {
	ratio := "-"
	if bound > 0 {
		ratio = fmt.Sprintf("%.2f", r.GPUHours/bound)
	}
	per := "-"
	if r.GPUHoursPer1kGood != nil {
		per = fmt.Sprintf("%.3f", *r.GPUHoursPer1kGood)
	}
	dep := r.Deployment
	if dep == "" {
		dep = "-"
	}
	warm := "-"
	if r.WarmGoodput != nil {
		warm = fmt.Sprintf("%.1f%%", 100**r.WarmGoodput)
	}
	return []string{r.Name, r.Kind, fmt.Sprintf("%g", r.StartupS), dep, fmt.Sprintf("%.1f%%", 100*r.Goodput), warm,
		fmt.Sprintf("%.0f / %.0f / %.0f", r.TTFT.P50, r.TTFT.P90, r.TTFT.P99),
		fmt.Sprintf("%.1f / %.1f / %.1f", r.ITL.P50, r.ITL.P90, r.ITL.P99),
		fmt.Sprintf("%.2f", r.GPUHours), ratio, per, fmt.Sprint(r.ScaleActions), fmt.Sprint(r.Reversals),
		fmt.Sprintf("%d/%d", r.PeakPrefill, r.PeakDecode), r.note()}
}

// routing says how requests were routed and whether the engines reused prefixes, when that
// is not the default (least-loaded routing, no prefix cache): "" otherwise.
func (rep *Report) routing() string {
	if (rep.Router == "" || rep.Router == string(router.LeastLoaded)) && !rep.PrefixCache {
		return ""
	}
	cache := "off"
	if rep.PrefixCache {
		cache = "on (the trace's 512-token hash blocks, LRU within each prefill engine's KV capacity)"
	}
	return fmt.Sprintf(" Router %s; prefix cache %s.", rep.Router, cache)
}

// note is the row's note with its prefix reuse, when there is some.
func (r Row) note() string {
	var parts []string
	if r.Note != "" {
		parts = append(parts, r.Note)
	}
	if r.KVHitRate > 0 {
		parts = append(parts, fmt.Sprintf("KV hit rate %.1f%%", 100*r.KVHitRate))
	}
	if r.PrefixHitShare > 0 {
		parts = append(parts, fmt.Sprintf("%.1f%% of prompt tokens from the prefix cache", 100*r.PrefixHitShare))
	}
	return strings.Join(parts, "; ")
}

// WriteTable prints the report's comparison as aligned text.
func (rep *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "scenario %s: %s\n", rep.Scenario, rep.Trace)
	fmt.Fprintf(w, "%d requests over %.0f s; SLA TTFT %g ms, ITL %g ms; goodput target %.0f%%; startup %g s; budget %d GPUs\n",
		rep.Requests, rep.TraceSeconds, rep.TTFTMs, rep.ITLMs, 100*rep.GoodputTarget, rep.StartupS, rep.MaxGPUBudget)
	fmt.Fprintf(w, "%s%s\n\n", rep.scoring(), rep.routing())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t"))
	for _, r := range rep.Rows {
		fmt.Fprintln(tw, strings.Join(r.cells(rep.LowerBoundGPUHours), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Predictors) > 0 {
		fmt.Fprintln(w, "\nnext-interval request-count MAPE on this trace:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "predictor\tinterval s\tMAPE %\tMAE\tfallbacks")
		for _, p := range rep.Predictors {
			fmt.Fprintf(tw, "%s\t%g\t%s\t%.1f\t%d\n", p.Predictor, p.IntervalS, mape(p.MAPEPct), p.MAE, p.Fallbacks)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if intro, t := rep.published(); t != nil {
		fmt.Fprintf(w, "\n%s\n", intro)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
		for _, r := range t.Rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if rep.Oracle != "" {
		fmt.Fprintf(w, "\noracle: %s\n", rep.Oracle)
	}
	return nil
}

// scoring says what the rows score and the lower bound they are compared with.
func (rep *Report) scoring() string {
	start := fmt.Sprintf("%dP %dD", rep.InitialPrefill, rep.InitialDecode)
	if rep.Mode == string(config.ModeAgg) {
		start = fmt.Sprintf("%d aggregated engines (shown as D)", rep.InitialDecode)
	}
	why := fmt.Sprintf("the smallest static deployment serving the first %d s at the target", StartWindowSeconds)
	if rep.InitialGiven {
		why = "the scenario's initial deployment"
	}
	from := "the first startup window counts for no run"
	if rep.ScoredFromS != rep.StartupS {
		from = "the scenario's scoring start"
		if rep.ScoredFromS == 0 {
			from = "every request counts, as a benchmark client counts them"
		}
	}
	warm := fmt.Sprintf(" \"Goodput once warm\" counts the requests from %s s, two startups after the scoring start: "+
		"past the cold start a planner pays once in its deployment's life (\"-\": none arrives then).",
		roundedSeconds(warmStart(rep.ScoredFromS, rep.StartupS))) // every row's WarmFromS
	return fmt.Sprintf("Policies start from %s (%s); "+
		"scored from %g s (%s); lower bound %.2f GPU-h "+
		"(every prompt at the best prefill throughput, every request at its decode capacity at the ITL SLA, no queueing "+
		"or idle engine; \"÷ bound\" is GPU-h over it).%s", start, why,
		rep.ScoredFromS, from, rep.LowerBoundGPUHours, warm)
}

// published is the comparison with the published figures: an introduction, and a table
// with one row per startup delay the published policy ran at. The table is nil without
// published figures or without the policy's rows.
func (rep *Report) published() (string, *report.Table) {
	pub := rep.Published
	if pub == nil {
		return "", nil
	}
	var runs []Row
	for _, r := range rep.Rows {
		if r.Policy == pub.Policy && (r.Kind == KindPolicy || r.Kind == KindSweep) &&
			!slices.ContainsFunc(runs, func(o Row) bool { return o.StartupS == r.StartupS }) {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return "", nil
	}
	slices.SortStableFunc(runs, func(a, b Row) int { return cmp.Compare(a.StartupS, b.StartupS) })
	sc := Scenario{Mode: config.Mode(rep.Mode)}
	base := make([]*Row, len(pub.Gains))
	var have []string
	for i, g := range pub.Gains {
		for j := range rep.Rows {
			if rep.Rows[j].Kind == KindStatic && rep.Rows[j].Name == sc.StaticName(g.Static) {
				base[i] = &rep.Rows[j]
				have = append(have, fmt.Sprintf("%s %.1f%% goodput, %.2f GPU-h", sc.StaticName(g.Static), 100*base[i].Goodput, base[i].GPUHours))
			}
		}
	}
	intro := fmt.Sprintf("Published: %s. The %s gains over each static deployment, simulated at each startup delay, beside "+
		"the published ones; goodput is the share of requests within both SLAs, goodput/GPU good requests per GPU-hour. "+
		"Simulated baselines: %s.", strings.TrimSpace(pub.Source), pub.Policy, strings.Join(have, "; "))
	t := &report.Table{Title: "Beside the published figures", Header: []string{"startup s", pub.Policy + " goodput", "GPU-h"}}
	for _, g := range pub.Gains {
		t.Header = append(t.Header, fmt.Sprintf("vs %s goodput (published %s)", sc.DeploymentName(sc.Deployment(g.Static)), pct(g.GoodputPct)))
		if g.GoodputPerGPUPct != nil {
			t.Header = append(t.Header, fmt.Sprintf("vs %s goodput/GPU (published %s)", sc.DeploymentName(sc.Deployment(g.Static)), pct(*g.GoodputPerGPUPct)))
		}
	}
	t.Header = append(t.Header, "ordering as published")
	for _, r := range runs {
		cells := []string{fmt.Sprintf("%g", r.StartupS), fmt.Sprintf("%.1f%%", 100*r.Goodput), fmt.Sprintf("%.2f", r.GPUHours)}
		holds := true
		for i, g := range pub.Gains {
			b := base[i]
			gain, perGPU := "-", "-"
			if b != nil && b.Good > 0 {
				v := 100 * (float64(r.Good)/float64(b.Good) - 1)
				gain = pct(v)
				holds = holds && (v > 0) == (g.GoodputPct > 0)
				if r.GPUHours > 0 && b.GPUHours > 0 {
					perGPU = pct(100 * (float64(r.Good)/r.GPUHours/(float64(b.Good)/b.GPUHours) - 1))
				}
			} else {
				holds = holds && b != nil && r.Good > 0 && g.GoodputPct > 0
			}
			cells = append(cells, gain)
			if g.GoodputPerGPUPct != nil {
				cells = append(cells, perGPU)
			}
		}
		cells = append(cells, map[bool]string{true: "yes", false: "no"}[holds])
		t.Rows = append(t.Rows, cells)
	}
	return intro, t
}

// pct formats a gain in percent with its sign.
func pct(v float64) string { return fmt.Sprintf("%+.0f%%", v) }

func mape(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

// WriteHTML writes the report as a self-contained HTML page: the comparison table, the
// predictor backtests, and per-interval plots of every run.
func (rep *Report) WriteHTML(w io.Writer) error {
	rows := make([][]string, len(rep.Rows))
	for i, r := range rep.Rows {
		rows[i] = r.cells(rep.LowerBoundGPUHours)
	}
	intro := fmt.Sprintf("Scenario %s. Trace: %s; %d requests over %.0f s. SLA: TTFT %g ms, ITL %g ms (per request, "+
		"(e2e − TTFT)/(OSL − 1)); goodput target %.0f%%; engine startup %g s; GPU budget %d. Engines are simulated "+
		"(sim/engine, the measured H200 profile), 1 GPU each; GPU-hours count starting, ready and draining engines. "+
		"Replayed on a virtual clock in %.1f s of wall time. %s",
		rep.Scenario, rep.Trace, rep.Requests, rep.TraceSeconds, rep.TTFTMs, rep.ITLMs, 100*rep.GoodputTarget,
		rep.StartupS, rep.MaxGPUBudget, rep.WallSeconds, rep.scoring()) + rep.routing()
	if rep.Description != "" {
		intro = strings.TrimSpace(rep.Description) + "\n\n" + intro
	}
	if rep.Oracle != "" {
		intro += "\n\nOracle: " + rep.Oracle + "."
	}
	page := report.Page{Title: "planner simulate: " + rep.Scenario, Intro: intro,
		Tables: []report.Table{{Title: "Comparison", Header: tableHeader, Rows: rows}}}
	if len(rep.Predictors) > 0 {
		t := report.Table{Title: "Next-interval request-count MAPE", Header: []string{"predictor", "interval s", "MAPE %", "MAE", "fallbacks"}}
		for _, p := range rep.Predictors {
			t.Rows = append(t.Rows, []string{p.Predictor, fmt.Sprintf("%g", p.IntervalS), mape(p.MAPEPct), fmt.Sprintf("%.1f", p.MAE), fmt.Sprint(p.Fallbacks)})
		}
		page.Tables = append(page.Tables, t)
	}
	if pubIntro, t := rep.published(); t != nil {
		page.Intro += "\n\n" + pubIntro
		page.Tables = append(page.Tables, *t)
	}
	// main are the rows of the main charts; the sweep and predictor rows get their own.
	main := map[string]bool{KindPolicy: true, KindOracle: true, KindSLOOracle: true, KindStatic: true, KindSLOStatic: true}
	series := func(kinds map[string]bool, f func(Row) []report.Point, step bool) []report.Series {
		var out []report.Series
		for _, r := range rep.Rows {
			if !kinds[r.Kind] {
				continue
			}
			out = append(out, report.Series{Name: r.Name, Points: f(r), Step: step})
		}
		return out
	}
	engines := func(prefill bool) func(Row) []report.Point {
		return func(r Row) []report.Point {
			pts := make([]report.Point, 0, len(r.Replicas))
			for _, s := range r.Replicas {
				c := s.Decode
				if prefill {
					c = s.Prefill
				}
				pts = append(pts, report.Point{X: s.At, Y: float64(c.Ready + c.Starting + c.Draining)})
			}
			return pts
		}
	}
	perInterval := func(f func(Interval) float64) func(Row) []report.Point {
		return func(r Row) []report.Point {
			pts := make([]report.Point, len(r.Timeline))
			for i, iv := range r.Timeline {
				pts[i] = report.Point{X: iv.At, Y: f(iv)}
			}
			return pts
		}
	}
	var rate []report.Point
	if len(rep.Rows) > 0 {
		for _, iv := range rep.Rows[0].Timeline {
			rate = append(rate, report.Point{X: iv.At, Y: float64(iv.Requests) / TimelineStepSeconds})
		}
	}
	page.Charts = append(page.Charts,
		report.Chart{Title: "Arrival rate (60 s buckets)", XLabel: "s", YLabel: "req/s", Series: []report.Series{{Name: "req/s", Points: rate}}},
		report.Chart{Title: "Prefill engines provisioned (policies, oracle, static)", XLabel: "s", YLabel: "engines", Series: series(main, engines(true), true)},
		report.Chart{Title: "Decode engines provisioned (policies, oracle, static)", XLabel: "s", YLabel: "engines", Series: series(main, engines(false), true)},
		report.Chart{Title: "Goodput per 60 s of arrivals", XLabel: "s", YLabel: "share", Series: series(main, perInterval(func(iv Interval) float64 { return iv.Goodput }), false),
			HLines: []report.HLine{{Name: "target", Y: rep.GoodputTarget}}},
		report.Chart{Title: "Mean TTFT per 60 s of arrivals", XLabel: "s", YLabel: "ms", Series: series(main, perInterval(func(iv Interval) float64 { return iv.TTFTMs }), false),
			HLines: []report.HLine{{Name: "SLA", Y: rep.TTFTMs}}},
		report.Chart{Title: "Mean ITL per 60 s of arrivals", XLabel: "s", YLabel: "ms", Series: series(main, perInterval(func(iv Interval) float64 { return iv.ITLMs }), false),
			HLines: []report.HLine{{Name: "SLA", Y: rep.ITLMs}}},
		// Which SLA the lost requests missed, and when (a request over both is in both).
		report.Chart{Title: "Finished requests over the TTFT SLA per 60 s of arrivals", XLabel: "s", YLabel: "requests",
			Series: series(main, perInterval(func(iv Interval) float64 { return float64(iv.MissedTTFT + iv.MissedBoth) }), false)},
		report.Chart{Title: "Finished requests over the ITL SLA per 60 s of arrivals", XLabel: "s", YLabel: "requests",
			Series: series(main, perInterval(func(iv Interval) float64 { return float64(iv.MissedITL + iv.MissedBoth) }), false)},
	)
	for _, r := range rep.Rows {
		if t, ok := rep.decisions(r); ok {
			page.Appendix = append(page.Appendix, t)
		}
	}
	for _, kind := range []string{KindSweep, KindPredictor} {
		s := series(map[string]bool{kind: true}, engines(true), true)
		if len(s) == 0 {
			continue
		}
		title := map[string]string{KindSweep: "Startup sweep", KindPredictor: "Predictors"}[kind]
		page.Charts = append(page.Charts,
			report.Chart{Title: title + ": prefill engines", XLabel: "s", YLabel: "engines", Series: s},
			report.Chart{Title: title + ": goodput per 60 s of arrivals", XLabel: "s", YLabel: "share",
				Series: series(map[string]bool{kind: true}, perInterval(func(iv Interval) float64 { return iv.Goodput }), false),
				HLines: []report.HLine{{Name: "target", Y: rep.GoodputTarget}}})
	}
	return page.Write(w)
}

// decisions is the table of a run's ticks that decided a pool size (Row.Ticks: a run kept
// with Plan.Ticks) — a new target, or one already pending that the ready engines do not meet
// yet; in advisory mode, decisions not applied: when, the pools the tick saw, what it decided,
// the traffic window it read and its notes. ok is false for a run without ticks or whose
// ticks never decided one.
func (rep *Report) decisions(r Row) (report.Table, bool) {
	agg := rep.Mode == string(config.ModeAgg)
	t := report.Table{Title: "What " + r.Name + " decided, tick by tick", Text: true,
		Header: []string{"s", "prefill seen", "decode seen", "decided", "window read", "notes"}}
	if agg {
		t.Header = []string{"s", "engines seen", "decided", "window read", "notes"}
	}
	pool := func(c replay.PoolCounts) string {
		out := fmt.Sprint(c.Ready)
		if c.Starting > 0 {
			out += fmt.Sprintf(" +%d starting", c.Starting)
		}
		if c.Draining > 0 {
			out += fmt.Sprintf(" −%d draining", c.Draining)
		}
		return out
	}
	for _, tk := range r.Ticks {
		if tk.Decision.Empty() {
			continue
		}
		var decided []string
		if p := tk.Decision.Prefill; p != nil && !agg {
			decided = append(decided, fmt.Sprintf("prefill %d", *p))
		}
		if d := tk.Decision.Decode; d != nil {
			name := "decode"
			if agg {
				name = "engines"
			}
			decided = append(decided, fmt.Sprintf("%s %d", name, *d))
		}
		window := "-"
		if tr := tk.Traffic; tr != nil && tr.NumReq != nil && tr.DurationS > 0 {
			window = fmt.Sprintf("%.1f req/s", *tr.NumReq/tr.DurationS)
			if tr.TTFTMs != nil {
				window += fmt.Sprintf(", TTFT %.0f ms", *tr.TTFTMs)
			}
			if tr.ITLMs != nil {
				window += fmt.Sprintf(", ITL %.1f ms", *tr.ITLMs)
			}
		}
		row := []string{strconv.FormatFloat(tk.At, 'f', -1, 64), pool(tk.Prefill), pool(tk.Decode), strings.Join(decided, ", "), window, strings.Join(tk.Notes, " · ")}
		if agg {
			row = append(row[:1], row[2:]...)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, len(t.Rows) > 0
}

// WriteMarkdown writes the report as a Markdown section: the scenario, the comparison
// table and the predictor backtests. It leaves out wall times, so the same inputs give the
// same text (docs/benchmarks.md is regenerated from it).
func (rep *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "### %s\n\n", rep.Scenario)
	if rep.Description != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(rep.Description))
	}
	fmt.Fprintf(w, "Trace: %s; %d requests over %.0f s. SLA TTFT %g ms, ITL %g ms; goodput target %.0f%%; "+
		"startup %g s; budget %d GPUs. %s%s\n\n", rep.Trace, rep.Requests, rep.TraceSeconds, rep.TTFTMs, rep.ITLMs,
		100*rep.GoodputTarget, rep.StartupS, rep.MaxGPUBudget, rep.scoring(), rep.routing())
	head := tableHeader
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, r := range rep.Rows {
		cells := r.cells(rep.LowerBoundGPUHours)
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", "\\|")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if len(rep.Predictors) > 0 {
		fmt.Fprintf(w, "\nNext-interval request-count MAPE on this trace:\n\n| predictor | interval s | MAPE %% | MAE | fallbacks |\n|---|---|---|---|---|\n")
		for _, p := range rep.Predictors {
			fmt.Fprintf(w, "| %s | %g | %s | %.1f | %d |\n", p.Predictor, p.IntervalS, mape(p.MAPEPct), p.MAE, p.Fallbacks)
		}
	}
	if intro, t := rep.published(); t != nil {
		fmt.Fprintf(w, "\n%s\n\n| %s |\n|%s\n", intro, strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
		for _, r := range t.Rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// roundedSeconds formats seconds computed from a scenario's as given, without the float noise
// of their arithmetic (3 × 0.7 s prints 2.1, not 2.0999999999999996).
func roundedSeconds(s float64) string {
	return strconv.FormatFloat(math.Round(s*1e6)/1e6, 'f', -1, 64)
}
