package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/report"
	"github.com/llmplanner/planner/workflows"
)

// demoHeader heads the tick lines. req/s is the load generator's sent rate since the line
// before, then the rate the tick read (its traffic window, what it decided on).
const demoHeader = "  time   tick  req/s sent/read  prefill    decode     TTFT est/obs (SLA)    ITL est/obs (SLA)   decision"

// demoRecorder collects the load generator's results and the deployment's replica counts.
type demoRecorder struct {
	cfg     config.Config
	speedup float64
	start   time.Time

	mu      sync.Mutex
	sent    []time.Time
	results []loadgen.Result
	pools   []poolSample
	end     time.Time
}

// poolSample is the deployment's processes at one moment.
type poolSample struct {
	At      time.Time
	Prefill poolCounts
	Decode  poolCounts
}

func newDemoRecorder(cfg config.Config, speedup float64) *demoRecorder {
	return &demoRecorder{cfg: cfg, speedup: speedup, start: time.Now()}
}

func (r *demoRecorder) addSent(_ predict.Request, at time.Time) {
	r.mu.Lock()
	r.sent = append(r.sent, at)
	r.mu.Unlock()
}

func (r *demoRecorder) add(res loadgen.Result) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
}

func (r *demoRecorder) addPools(p poolSample) {
	r.mu.Lock()
	r.pools = append(r.pools, p)
	r.mu.Unlock()
}

func (r *demoRecorder) finish() {
	r.mu.Lock()
	r.end = time.Now()
	r.mu.Unlock()
}

// itlMs is a request's mean inter-token latency (Dynamo's goodput definition).
func itlMs(res loadgen.Result) (float64, bool) {
	if res.OSL <= 1 {
		return 0, false
	}
	return (res.Response.DurationMs - res.Response.TTFTMs) / float64(res.OSL-1), true
}

// window summarises the requests that finished in [from, to).
type window struct {
	sent, done, failed int
	ttft, itl          []float64
}

func (r *demoRecorder) window(from, to time.Time) window {
	r.mu.Lock()
	defer r.mu.Unlock()
	var w window
	i := sort.Search(len(r.sent), func(i int) bool { return !r.sent[i].Before(from) })
	for ; i < len(r.sent) && r.sent[i].Before(to); i++ {
		w.sent++
	}
	for _, res := range r.results {
		finished := res.Sent.Add(res.Elapsed)
		if finished.Before(from) || !finished.Before(to) {
			continue
		}
		if res.Err != "" {
			w.failed++
			continue
		}
		w.done++
		w.ttft = append(w.ttft, res.Response.TTFTMs)
		if v, ok := itlMs(res); ok {
			w.itl = append(w.itl, v)
		}
	}
	return w
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// demoMonitor polls the planner and the deployment every second and prints a line per tick.
type demoMonitor struct {
	d    *demo
	c    client.Client
	dep  workflows.Deployment
	rec  *demoRecorder
	host demoPools

	lastTick  int64
	lastAt    time.Time
	ticks     []tickSample
	decisions int
}

// tickSample is one planner tick as the report plots it.
type tickSample struct {
	At               time.Time
	Tick             int64
	EstTTFT, EstITL  float64
	ObsTTFT, ObsITL  float64
	RequestRate      float64
	ReadRate         float64 // the rate the tick read (NaN: none read)
	Decision         string
	ReadyPrefill     int
	ReadyDecode      int
	ExpectedPrefill  float64
	ExpectedDecode   float64
	PredictedRequest float64
}

func (m *demoMonitor) run(ctx context.Context) {
	m.lastAt = time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.rec.addPools(poolSample{At: time.Now(), Prefill: m.host.Counts("prefill"), Decode: m.host.Counts("decode")})
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := m.c.QueryWorkflow(qctx, m.dep.WorkflowID(), "", workflows.QueryState)
		cancel()
		if err != nil {
			continue
		}
		var v workflows.StateView
		if err := resp.Get(&v); err != nil || v.LastTick == nil || v.LastTick.Tick == m.lastTick {
			continue
		}
		m.lastTick = v.LastTick.Tick
		m.line(v)
	}
}

func (m *demoMonitor) line(v workflows.StateView) {
	now := time.Now()
	w := m.rec.window(m.lastAt, now)
	elapsed := now.Sub(m.lastAt).Seconds()
	m.lastAt = now
	tk := v.LastTick
	diag := tk.Diagnostics
	s := tickSample{At: now, Tick: tk.Tick, EstTTFT: math.NaN(), EstITL: math.NaN(), ObsTTFT: mean(w.ttft), ObsITL: mean(w.itl),
		RequestRate: float64(w.sent) / elapsed, ReadRate: math.NaN(), ExpectedPrefill: math.NaN(), ExpectedDecode: math.NaN(), PredictedRequest: math.NaN()}
	if tk.ObservedRequestsPerSecond != nil {
		s.ReadRate = *tk.ObservedRequestsPerSecond
	}
	if diag != nil {
		if diag.EstimatedTTFTMs != nil {
			s.EstTTFT = *diag.EstimatedTTFTMs
		}
		if diag.EstimatedITLMs != nil {
			s.EstITL = *diag.EstimatedITLMs
		}
	}
	if v.Inventory != nil {
		if e := v.Inventory.ExpectedPrefill; e != nil {
			s.ExpectedPrefill = float64(*e)
		}
		if e := v.Inventory.ExpectedDecode; e != nil {
			s.ExpectedDecode = float64(*e)
		}
	}
	s.Decision = describeTick(tk)
	if tk.Applied.Prefill != nil || tk.Applied.Decode != nil {
		m.decisions++
	}
	p, d := m.host.Counts("prefill"), m.host.Counts("decode")
	s.ReadyPrefill, s.ReadyDecode = p.Ready, d.Ready
	m.ticks = append(m.ticks, s)
	notes := slices.Clone(tk.Notes)
	if diag != nil {
		notes = append(notes, diag.Notes...)
	}
	m.d.logger.Info("planner tick", "tick", tk.Tick, "decision", s.Decision, "notes", notes)
	fmt.Fprintf(m.d.stdout, "%s %5d %7.1f/%-6s   %-9s  %-9s  %5s/%-5s (%3.0f ms)   %5s/%-5s (%2.0f ms)  %s\n",
		now.Format("15:04:05"), tk.Tick, s.RequestRate, num(s.ReadRate), p.String(), d.String(),
		num(s.EstTTFT), num(s.ObsTTFT), v.TTFTMs, num(s.EstITL), num(s.ObsITL), v.ITLMs, s.Decision)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// describeTick says what a tick decided and why, in a few words: the load loop's reasons and
// the throughput loop's, each once, but not "disabled" — a loop that does not run (the ahead
// policy's throughput loop, or a loop the config turns off) says nothing about this tick.
func describeTick(tk *workflows.TickRecord) string {
	d := tk.Diagnostics
	var parts []string
	if tk.Applied.Prefill != nil || tk.Applied.Decode != nil {
		parts = append(parts, "→ "+tk.Applied.String())
	} else {
		parts = append(parts, "hold")
	}
	if d != nil {
		var reasons []string
		for _, r := range []scaling.Reason{d.LoadReasonPrefill, d.LoadReasonDecode, d.LoadReason, d.ThroughputReason} {
			if r != "" && r != scaling.ReasonDisabled && !slices.Contains(reasons, string(r)) {
				reasons = append(reasons, string(r))
			}
		}
		if len(reasons) > 0 {
			parts = append(parts, "("+strings.Join(reasons, ", ")+")")
		}
	}
	return strings.Join(parts, " ")
}

// demoSummary is the machine-readable outcome of a demo run (summary.json), which the
// end-to-end test reads.
type demoSummary struct {
	Requests       int          `json:"requests"`
	Failed         int          `json:"failed"`
	GoodputPercent float64      `json:"goodput_percent"`
	TTFTP50Ms      float64      `json:"ttft_p50_ms"`
	TTFTP90Ms      float64      `json:"ttft_p90_ms"`
	TTFTP99Ms      float64      `json:"ttft_p99_ms"`
	ITLP50Ms       float64      `json:"itl_p50_ms"`
	ITLP90Ms       float64      `json:"itl_p90_ms"`
	ITLP99Ms       float64      `json:"itl_p99_ms"`
	Ticks          int          `json:"ticks"`
	Actions        int          `json:"scaling_actions"`
	PeakPrefill    int          `json:"peak_prefill"`
	PeakDecode     int          `json:"peak_decode"`
	GPUSeconds     float64      `json:"gpu_seconds"`
	Timeline       []tickRecord `json:"timeline"`
	// Simulated are the same replay's scores in the simulator (sim/evaluate), for the
	// demo's config, Dynamo's SLA planner and the best static deployment.
	Simulated []demoSimulated `json:"simulated,omitempty"`
}

// demoSimulated is one run of the offline comparison.
type demoSimulated struct {
	Name           string  `json:"name"`
	GoodputPercent float64 `json:"goodput_percent"`
	GPUMinutes     float64 `json:"gpu_minutes"`
	// Note qualifies the row (the best static deployment when none within the budget meets
	// the goodput target).
	Note string `json:"note,omitempty"`
}

// tickRecord is one tick of the summary's timeline.
type tickRecord struct {
	Second       float64 `json:"second"`
	Tick         int64   `json:"tick"`
	ReadyPrefill int     `json:"ready_prefill"`
	ReadyDecode  int     `json:"ready_decode"`
	RequestRate  float64 `json:"request_rate"`
	// ReadRate is the rate the tick read over its traffic window (absent: none read).
	ReadRate *float64 `json:"read_request_rate,omitempty"`
	Decision string   `json:"decision"`
}

// finiteOrNil is v, or nil when it is NaN (nothing measured) or infinite.
func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func nanToZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// machineSummary builds summary.json's content.
func (r *demoRecorder) machineSummary(ticks []tickSample, decisions int) demoSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s demoSummary
	var ttft, itl []float64
	good := 0
	for _, res := range r.results {
		s.Requests++
		if res.Err != "" {
			s.Failed++
			continue
		}
		ttft = append(ttft, res.Response.TTFTMs)
		v, has := itlMs(res)
		if has {
			itl = append(itl, v)
		}
		if res.Response.TTFTMs <= r.cfg.TTFTMs && (!has || v <= r.cfg.ITLMs) {
			good++
		}
	}
	s.GoodputPercent = 100 * float64(good) / math.Max(1, float64(s.Requests))
	s.TTFTP50Ms, s.TTFTP90Ms, s.TTFTP99Ms = nanToZero(percentile(ttft, 50)), nanToZero(percentile(ttft, 90)), nanToZero(percentile(ttft, 99))
	s.ITLP50Ms, s.ITLP90Ms, s.ITLP99Ms = nanToZero(percentile(itl, 50)), nanToZero(percentile(itl, 90)), nanToZero(percentile(itl, 99))
	s.Ticks, s.Actions = len(ticks), decisions
	s.GPUSeconds, s.PeakPrefill, s.PeakDecode = r.gpuSeconds()
	for _, t := range ticks {
		s.Timeline = append(s.Timeline, tickRecord{Second: t.At.Sub(r.start).Seconds(), Tick: t.Tick, ReadyPrefill: t.ReadyPrefill,
			ReadyDecode: t.ReadyDecode, RequestRate: t.RequestRate, ReadRate: finiteOrNil(t.ReadRate), Decision: t.Decision})
	}
	return s
}

// lines is the end-of-run summary, line by line.
func (s demoSummary) lines(cfg config.Config) []string {
	out := []string{
		fmt.Sprintf("requests: %d finished, %d failed; goodput (TTFT ≤ %.0f ms and ITL ≤ %.0f ms): %.1f%%",
			s.Requests-s.Failed, s.Failed, cfg.TTFTMs, cfg.ITLMs, s.GoodputPercent),
		fmt.Sprintf("TTFT ms p50 %s, p90 %s, p99 %s; ITL ms p50 %s, p90 %s, p99 %s",
			num(s.TTFTP50Ms), num(s.TTFTP90Ms), num(s.TTFTP99Ms), num(s.ITLP50Ms), num(s.ITLP90Ms), num(s.ITLP99Ms)),
		fmt.Sprintf("planner: %d ticks, %d scaling actions; peak replicas prefill %d, decode %d", s.Ticks, s.Actions, s.PeakPrefill, s.PeakDecode),
		fmt.Sprintf("provisioned GPU time (starting + ready + draining engines): %.1f GPU-minutes", s.GPUSeconds/60),
	}
	if len(s.Simulated) > 0 {
		out = append(out, "the same replay in the simulator (scored after the first start-up window):")
		for _, r := range s.Simulated {
			line := fmt.Sprintf("  %-22s goodput %5.1f%%, %5.1f GPU-minutes", r.Name, r.GoodputPercent, r.GPUMinutes)
			if r.Note != "" {
				line += " (" + r.Note + ")"
			}
			out = append(out, line)
		}
	}
	return out
}

// gpuSeconds integrates the provisioned GPUs (one per simulated engine) over the samples.
func (r *demoRecorder) gpuSeconds() (total float64, maxP, maxD int) {
	for i, p := range r.pools {
		maxP, maxD = max(maxP, p.Prefill.Total()), max(maxD, p.Decode.Total())
		if i == 0 {
			continue
		}
		dt := p.At.Sub(r.pools[i-1].At).Seconds()
		total += dt * float64(r.pools[i-1].Prefill.Total()+r.pools[i-1].Decode.Total())
	}
	return total, maxP, maxD
}

// writeReport writes the HTML report.
func (r *demoRecorder) writeReport(path, traceName string, m *demoMonitor, summary []string) error {
	r.mu.Lock()
	start := r.start
	var ready, expected [2][]report.Point
	for _, p := range r.pools {
		x := p.At.Sub(start).Seconds()
		ready[0] = append(ready[0], report.Point{X: x, Y: float64(p.Prefill.Ready)})
		ready[1] = append(ready[1], report.Point{X: x, Y: float64(p.Decode.Ready)})
	}
	r.mu.Unlock()
	var rate, read, estT, obsT, estI, obsI []report.Point
	for _, t := range m.ticks {
		x := t.At.Sub(start).Seconds()
		expected[0] = append(expected[0], report.Point{X: x, Y: t.ExpectedPrefill})
		expected[1] = append(expected[1], report.Point{X: x, Y: t.ExpectedDecode})
		rate = append(rate, report.Point{X: x, Y: t.RequestRate})
		read = append(read, report.Point{X: x, Y: t.ReadRate})
		estT = append(estT, report.Point{X: x, Y: t.EstTTFT})
		obsT = append(obsT, report.Point{X: x, Y: t.ObsTTFT})
		estI = append(estI, report.Point{X: x, Y: t.EstITL})
		obsI = append(obsI, report.Point{X: x, Y: t.ObsITL})
	}
	page := report.Page{
		Title: "planner demo",
		Intro: fmt.Sprintf("Trace: %s, replayed at %.1fx. Deployment demo/llama: simulated H200 engines (Llama-3.1-8B-FP8 profile), "+
			"disaggregated, on the local connector. SLA: TTFT %.0f ms, ITL %.0f ms. Time axis: seconds of wall time since the demo started.",
			traceName, r.speedup, r.cfg.TTFTMs, r.cfg.ITLMs),
		Tables: []report.Table{{Title: "Summary", Header: []string{"result"}, Rows: rowsOf(summary)}},
		Charts: []report.Chart{
			{Title: "Replicas", XLabel: "s", YLabel: "replicas", Series: []report.Series{
				{Name: "prefill ready", Points: ready[0], Step: true}, {Name: "decode ready", Points: ready[1], Step: true},
				{Name: "prefill target", Points: expected[0], Step: true, Dashed: true, Color: "#1f77b4"},
				{Name: "decode target", Points: expected[1], Step: true, Dashed: true, Color: "#d62728"}}},
			{Title: "Request rate", XLabel: "s", YLabel: "req/s", Series: []report.Series{
				{Name: "sent since the tick before", Points: rate}, {Name: "read by the tick (its traffic window)", Points: read, Dashed: true}}},
			{Title: "TTFT", XLabel: "s", YLabel: "ms", Series: []report.Series{{Name: "observed mean", Points: obsT}, {Name: "planner estimate", Points: estT, Dashed: true}},
				HLines: []report.HLine{{Name: "SLA", Y: r.cfg.TTFTMs}}},
			{Title: "ITL", XLabel: "s", YLabel: "ms", Series: []report.Series{{Name: "observed mean", Points: obsI}, {Name: "planner estimate", Points: estI, Dashed: true}},
				HLines: []report.HLine{{Name: "SLA", Y: r.cfg.ITLMs}}},
		},
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := page.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func rowsOf(lines []string) [][]string {
	out := make([][]string, len(lines))
	for i, l := range lines {
		out[i] = []string{l}
	}
	return out
}
