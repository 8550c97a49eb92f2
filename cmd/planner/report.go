package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/sim/report"
	"github.com/llmplanner/planner/workflows"
)

func init() {
	register(command{
		name:    "report",
		summary: "write a running planner's HTML report (replicas, load, estimated vs observed latency, decisions) from its diagnostics",
		run:     runReport,
	})
}

// Bounds of planner report's --timeout.
const (
	minReportTimeout     = time.Second
	maxReportTimeout     = 5 * time.Minute
	defaultReportTimeout = 15 * time.Second
)

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dep := fs.String("deployment", "", "the deployment, as <namespace>/<name> (required)")
	out := fs.String("out", "", "the HTML file to write (default planner-report-<namespace>-<name>.html)")
	timeout := fs.Duration("timeout", defaultReportTimeout, "give up when the planner's worker has not answered the queries within this long (1s..5m)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner report --deployment <namespace>/<name> [--out report.html] [--timeout 15s]")
		fmt.Fprintln(stderr, "\nQueries the running planner planner/<namespace>/<name> (its state, configuration and diagnostics)")
		fmt.Fprintln(stderr, "and writes the same self-contained HTML report as planner simulate: replicas, request rate,")
		fmt.Fprintln(stderr, "estimated and observed TTFT and ITL against the SLA, engine capacity, and the decisions.")
		fmt.Fprintln(stderr, "The Temporal connection comes from the TEMPORAL_* environment and profile, as for planner start.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *dep == "" {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	d, err := parseDeployment(*dep)
	if err != nil {
		return err
	}
	if *timeout < minReportTimeout || *timeout > maxReportTimeout {
		return fmt.Errorf("--timeout %s: want %s..%s", *timeout, minReportTimeout, maxReportTimeout)
	}
	path := *out
	if path == "" {
		path = fmt.Sprintf("planner-report-%s-%s.html", d.Namespace, d.Name)
	}
	c, namespace, err := dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	snap, err := fetchLive(ctx, plannerclient.New(c, d), namespace, *timeout)
	if err != nil {
		return err
	}
	if err := writeReportFile(path, livePage(snap)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d recent ticks, %d decisions (as of %s)\n", path, snap.State.WorkflowID, len(snap.Ticks), len(snap.State.Decisions), snap.State.AsOf)
	return nil
}

// liveSnapshot is what planner report reads from a running planner.
type liveSnapshot struct {
	State  workflows.StateView
	Config config.Config
	Ticks  []workflows.TickRecord
}

// fetchLive queries the planner's state, configuration and diagnostics, each within timeout.
func fetchLive(ctx context.Context, p *plannerclient.Client, namespace string, timeout time.Duration) (liveSnapshot, error) {
	var snap liveSnapshot
	queries := []struct {
		name string
		run  func(context.Context) error
	}{
		{workflows.QueryState, func(ctx context.Context) (err error) { snap.State, err = p.State(ctx); return }},
		{workflows.QueryConfig, func(ctx context.Context) (err error) { snap.Config, err = p.Config(ctx); return }},
		{workflows.QueryDiagnostics, func(ctx context.Context) (err error) { snap.Ticks, err = p.Diagnostics(ctx); return }},
	}
	for _, q := range queries {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		err := q.run(qctx)
		// The server may answer DeadlineExceeded itself a little before the context ends.
		var deadline *serviceerror.DeadlineExceeded
		expired := qctx.Err() != nil || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded)
		cancel()
		var notFound *serviceerror.NotFound
		switch {
		case err == nil:
		case errors.As(err, &notFound):
			return snap, fmt.Errorf("no planner for this deployment: workflow %s not found in namespace %q (list the planners with: temporal workflow list --query \"WorkflowType='%s'\")",
				p.WorkflowID(), namespace, workflows.WorkflowName)
		case expired && ctx.Err() == nil:
			return snap, fmt.Errorf("no worker answered the %s query of %s within %s: is a planner worker (planner worker) polling the planner's task queue?",
				q.name, p.WorkflowID(), timeout)
		default:
			return snap, err
		}
	}
	return snap, nil
}

// writeReportFile renders the page to path through a temporary file, so a failed write
// leaves no half report.
func writeReportFile(path string, page report.Page) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".planner-report-*.html")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(f.Name())
	if err := page.Write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// livePage lays a running planner's diagnostics out as Dynamo's report does (replica counts,
// request rate observed vs predicted, observed and estimated TTFT and ITL against the SLA,
// engine capacity, sequence lengths, decisions), for the simulator's renderer.
func livePage(s liveSnapshot) report.Page {
	v := s.State
	var t0 float64
	if len(s.Ticks) > 0 {
		t0 = s.Ticks[0].At
	}
	xLabel := "s"
	if t0 > 0 {
		xLabel = "s since " + unixUTC(t0)
	}
	var (
		ready, expected, floor [2][]report.Point
		obsReq, predReq        []report.Point
		estT, obsT, estI, obsI []report.Point
		capP, capD, isl, osl   []report.Point
	)
	add := func(pts *[]report.Point, x float64, y *float64) {
		if y != nil {
			*pts = append(*pts, report.Point{X: x, Y: *y})
		}
	}
	addInt := func(pts *[]report.Point, x float64, y *int) {
		if y != nil {
			*pts = append(*pts, report.Point{X: x, Y: float64(*y)})
		}
	}
	for _, tk := range s.Ticks {
		x := tk.At - t0
		add(&obsT, x, tk.ObservedTTFTMs)
		add(&obsI, x, tk.ObservedITLMs)
		d := tk.Diagnostics
		if d == nil {
			continue
		}
		addInt(&ready[0], x, d.ReadyPrefill)
		addInt(&ready[1], x, d.ReadyDecode)
		addInt(&expected[0], x, d.ExpectedPrefill)
		addInt(&expected[1], x, d.ExpectedDecode)
		if d.RanThroughput {
			floor[0] = append(floor[0], report.Point{X: x, Y: float64(d.ThroughputLowerBoundPrefill)})
			floor[1] = append(floor[1], report.Point{X: x, Y: float64(d.ThroughputLowerBoundDecode)})
		}
		add(&obsReq, x, d.ObservedNumReq)
		add(&predReq, x, d.PredictedNumReq)
		add(&estT, x, d.EstimatedTTFTMs)
		add(&estI, x, d.EstimatedITLMs)
		add(&capP, x, d.EngineRPSPrefill)
		add(&capD, x, d.EngineRPSDecode)
		add(&isl, x, d.PredictedISL)
		add(&osl, x, d.PredictedOSL)
	}
	title := "planner report: " + v.Deployment.Namespace + "/" + v.Deployment.Name
	intro := fmt.Sprintf("Live report of %s as of %s, from its state, config and diagnostics queries: the last %d ticks the workflow keeps "+
		"(at most %d) and its last %d decisions. Mode %s, optimization target %s, environment %s. SLA: TTFT %g ms, ITL %g ms.",
		v.WorkflowID, v.AsOf, len(s.Ticks), workflows.MaxTickRecords, len(v.Decisions), v.Mode, v.Target, v.Environment, v.TTFTMs, v.ITLMs)
	if v.Advisory {
		intro += " Advisory: decisions are recorded, never applied."
	}
	return report.Page{
		Title: title,
		Intro: intro,
		Tables: []report.Table{
			{Title: "Summary", Header: []string{"setting", "value"}, Rows: summaryRows(s)},
			{Title: "Decisions (oldest first)", Header: []string{"id", "time (UTC)", "tick", "source", "targets", "status", "error"}, Rows: decisionRows(v.Decisions)},
			{Title: "Recent ticks (oldest first)", Header: []string{"tick", "time (UTC)", "kind", "ready", "decided", "load reason", "throughput reason", "req/s read", "TTFT ms est / obs", "ITL ms est / obs", "notes"}, Rows: tickRows(s.Ticks)},
		},
		Charts: []report.Chart{
			{Title: "Replica counts", XLabel: xLabel, YLabel: "replicas", Series: []report.Series{
				{Name: "prefill ready", Points: ready[0], Step: true}, {Name: "decode ready", Points: ready[1], Step: true},
				{Name: "prefill expected", Points: expected[0], Step: true, Dashed: true, Color: "#1f77b4"},
				{Name: "decode expected", Points: expected[1], Step: true, Dashed: true, Color: "#d62728"},
				{Name: "prefill throughput floor", Points: floor[0], Step: true, Dashed: true, Color: "#9467bd"},
				{Name: "decode throughput floor", Points: floor[1], Step: true, Dashed: true, Color: "#8c564b"}}},
			{Title: "Requests per traffic window the ticks read (observed vs predicted; the ahead policy: per load interval)", XLabel: xLabel, YLabel: "requests", Series: []report.Series{
				{Name: "observed", Points: obsReq}, {Name: "predicted", Points: predReq, Dashed: true}}},
			{Title: "TTFT vs SLA (observed: the frontend's mean over the traffic window)", XLabel: xLabel, YLabel: "ms", Series: []report.Series{
				{Name: "observed", Points: obsT}, {Name: "estimated", Points: estT, Dashed: true}}, HLines: []report.HLine{{Name: "SLA", Y: v.TTFTMs}}},
			{Title: "ITL vs SLA (observed: the frontend's mean over the traffic window)", XLabel: xLabel, YLabel: "ms", Series: []report.Series{
				{Name: "observed", Points: obsI}, {Name: "estimated", Points: estI, Dashed: true}}, HLines: []report.HLine{{Name: "SLA", Y: v.ITLMs}}},
			{Title: "Engine capacity", XLabel: xLabel, YLabel: "req/s per engine", Series: []report.Series{
				{Name: "prefill", Points: capP}, {Name: "decode", Points: capD}}},
			{Title: "Predicted sequence lengths", XLabel: xLabel, YLabel: "tokens", Series: []report.Series{
				{Name: "ISL", Points: isl}, {Name: "OSL", Points: osl}}},
		},
	}
}

func summaryRows(s liveSnapshot) [][]string {
	v := s.State
	rows := [][]string{
		{"workflow", v.WorkflowID},
		{"as of", v.AsOf},
		{"mode / target / environment", fmt.Sprintf("%s / %s / %s", v.Mode, v.Target, v.Environment)},
		{"SLA", fmt.Sprintf("TTFT %g ms, ITL %g ms", v.TTFTMs, v.ITLMs)},
		{"loops", loopsOf(s.Config)},
		{"GPU budget, min endpoints", fmt.Sprintf("%s, prefill %d / decode %d", budget(s.Config), s.Config.PrefillMinEndpoints(), s.Config.DecodeMinEndpoints())},
		{"ticks / runs", fmt.Sprintf("%d / %d", v.Ticks, v.Runs)},
		{"next tick", v.NextTick},
		{"initialized", fmt.Sprint(v.Initialized)},
	}
	if v.InitError != "" {
		rows = append(rows, []string{"initialisation error", v.InitError})
	}
	if inv := v.Inventory; inv != nil {
		c := inv.Counts()
		rows = append(rows, []string{"deployment (last observed, ready)", connectors.Targets{Prefill: c.ReadyPrefill, Decode: c.ReadyDecode}.String()})
	}
	rows = append(rows, []string{"throughput floors", fmt.Sprintf("prefill %d, decode %d", v.LowerBoundPrefill, v.LowerBoundDecode)})
	o := v.Overrides
	var ov []string
	for _, r := range []struct {
		name string
		o    *workflows.ReplicaOverride
	}{{"prefill", o.Prefill}, {"decode", o.Decode}} {
		if r.o != nil {
			ov = append(ov, fmt.Sprintf("%s pinned to %d until %s", r.name, r.o.Replicas, unixUTC(r.o.ExpiresAt)))
		}
	}
	if o.PauseScaleUp {
		ov = append(ov, "scale-up paused")
	}
	if o.PauseScaleDown {
		ov = append(ov, "scale-down paused")
	}
	if len(ov) == 0 {
		ov = []string{"none"}
	}
	rows = append(rows, []string{"overrides", strings.Join(ov, "; ")})
	for _, m := range v.Models {
		rows = append(rows, []string{"perf model " + m.Pool, fmt.Sprintf("%d samples", m.Samples)})
	}
	for _, r := range v.Rejected {
		rows = append(rows, []string{"rejected " + r.Name + " at " + unixUTC(r.At), r.Error})
	}
	return rows
}

func loopsOf(c config.Config) string {
	switch {
	case c.Ahead():
		return fmt.Sprintf("scaling policy ahead every %ds", c.LoadAdjustmentIntervalSeconds)
	case c.EnableThroughputScaling && c.EnableLoadScaling:
		return fmt.Sprintf("throughput every %ds, load every %ds", c.ThroughputAdjustmentIntervalSeconds, c.LoadAdjustmentIntervalSeconds)
	case c.EnableThroughputScaling:
		return fmt.Sprintf("throughput every %ds", c.ThroughputAdjustmentIntervalSeconds)
	}
	return fmt.Sprintf("load every %ds", c.LoadAdjustmentIntervalSeconds)
}

func decisionRows(ds []workflows.DecisionRecord) [][]string {
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, []string{fmt.Sprint(d.ID), unixUTC(d.At), fmt.Sprint(d.Tick), d.Source, d.Targets.String(), d.Status, d.Error})
	}
	return rows
}

func tickRows(ticks []workflows.TickRecord) [][]string {
	rows := make([][]string, 0, len(ticks))
	for _, tk := range ticks {
		ready, decided, load, thr := "", "", "", ""
		var estT, estI *float64
		if d := tk.Diagnostics; d != nil {
			estT, estI = d.EstimatedTTFTMs, d.EstimatedITLMs
			ready = connectors.Targets{Prefill: d.ReadyPrefill, Decode: d.ReadyDecode}.String()
			decided = connectors.Targets{Prefill: d.Decision.Prefill, Decode: d.Decision.Decode}.String()
			load, thr = string(d.LoadReason), string(d.ThroughputReason)
		}
		if decided == "" {
			decided = tk.Applied.String()
		}
		notes := strings.Join(tk.Notes, "; ")
		if len(notes) > 300 {
			notes = notes[:300] + "…"
		}
		rate := ""
		if r := tk.ObservedRequestsPerSecond; r != nil {
			rate = strconv.FormatFloat(math.Round(*r*100)/100, 'f', -1, 64)
		}
		rows = append(rows, []string{fmt.Sprint(tk.Tick), unixUTC(tk.At), tk.Kind, ready, decided, load, thr, rate,
			msPair(estT, tk.ObservedTTFTMs), msPair(estI, tk.ObservedITLMs), notes})
	}
	return rows
}

// msPair renders an estimate and an observation in milliseconds ("-" for none).
func msPair(est, obs *float64) string {
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatFloat(math.Round(*v*100)/100, 'f', -1, 64)
	}
	if est == nil && obs == nil {
		return ""
	}
	return f(est) + " / " + f(obs)
}

// unixUTC renders Unix seconds as a UTC time of day with its date.
func unixUTC(s float64) string {
	if s <= 0 {
		return ""
	}
	return time.Unix(0, int64(s*1e9)).UTC().Format("2006-01-02 15:04:05")
}
