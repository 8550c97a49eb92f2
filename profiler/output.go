package profiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sbinet/npyio/npz"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/report"
)

// Output file names in Config.Dir.
const (
	// ReportFile is the HTML report.
	ReportFile = "report.html"
	// ConfigFile is the recommended planner config.
	ConfigFile = "planner-config.yaml"
	// SummaryFile is the machine-readable recommendation.
	SummaryFile = "recommendation.json"
)

// WriteProfile writes a prefill and a decode profile to dir in both layouts Dynamo's
// planner (and perf.LoadProfile) reads: selected_{prefill,decode}_interpolation/raw_data.npz
// and the JSON fallback {prefill,decode}_raw_data.json. Either may be nil.
func WriteProfile(dir string, p *perf.PrefillProfile, d *perf.DecodeProfile) ([]string, error) {
	var files []string
	write := func(kind string, arrays map[string]any) error {
		sub := filepath.Join(dir, "selected_"+kind+"_interpolation")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		npzFile := filepath.Join(sub, "raw_data.npz")
		named := map[string]any{}
		for k, v := range arrays {
			named[k+".npy"] = v // numpy's member names
		}
		if err := npz.Write(npzFile, named); err != nil {
			return fmt.Errorf("write %s: %w", npzFile, err)
		}
		js := map[string]any{}
		for k, v := range arrays {
			if s, ok := v.([]int64); ok && k == "max_kv_tokens" {
				js[k] = s[0] // a scalar in Dynamo's JSON
				continue
			}
			js[k] = v
		}
		data, err := json.MarshalIndent(js, "", " ")
		if err != nil {
			return err
		}
		jsonFile := filepath.Join(dir, kind+"_raw_data.json")
		if err := os.WriteFile(jsonFile, data, 0o644); err != nil {
			return err
		}
		files = append(files, npzFile, jsonFile)
		return nil
	}
	if p != nil {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("profiler: measured prefill profile: %w", err)
		}
		if err := write("prefill", map[string]any{"prefill_isl": p.ISL, "prefill_ttft": p.TTFTMs, "prefill_thpt_per_gpu": p.ThroughputPerGPU}); err != nil {
			return files, fmt.Errorf("profiler: %w", err)
		}
	}
	if d != nil {
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("profiler: measured decode profile: %w", err)
		}
		if err := write("decode", map[string]any{"x_kv_usage": d.KVUsage, "y_context_length": d.ContextLength, "z_itl": d.ITLMs,
			"z_thpt_per_gpu": d.ThroughputPerGPU, "max_kv_tokens": []int64{d.MaxKVTokens}}); err != nil {
			return files, fmt.Errorf("profiler: %w", err)
		}
	}
	return files, nil
}

// writeOutputs writes every option's profile under Dir/options/<name>, the selected
// profile at Dir's top level (checked by loading it back with perf.LoadProfile), the
// report, the recommendation and the planner config (only when both a prefill and a decode
// option meet the SLA).
func writeOutputs(cfg Config, res *Result, selErr error) ([]string, error) {
	var files []string
	for i := range res.Options {
		o := &res.Options[i]
		fs, err := WriteProfile(filepath.Join(cfg.Dir, "options", o.Option.Name), o.prefillProfile(), o.decodeProfile())
		files = append(files, fs...)
		if err != nil {
			return files, err
		}
	}
	rec := res.Recommendation
	if rec.Prefill >= 0 && rec.Decode >= 0 {
		fs, err := WriteProfile(cfg.Dir, res.Options[rec.Prefill].prefillProfile(), res.Options[rec.Decode].decodeProfile())
		files = append(files, fs...)
		if err != nil {
			return files, err
		}
		if _, err := perf.LoadProfile(cfg.Dir); err != nil {
			return files, fmt.Errorf("profiler: the written profile does not load: %w", err)
		}
		f := filepath.Join(cfg.Dir, ConfigFile)
		if err := os.WriteFile(f, []byte(plannerConfig(cfg, res)), 0o644); err != nil {
			return files, fmt.Errorf("profiler: %w", err)
		}
		files = append(files, f)
		_, warnings, err := config.Load(f, func(string) (string, bool) { return "", false })
		if err != nil {
			return files, fmt.Errorf("profiler: the recommended config %s does not validate: %w", f, err)
		}
		if len(warnings) > 0 {
			return files, fmt.Errorf("profiler: the recommended config %s loads with warnings: %s", f, strings.Join(warnings, "; "))
		}
	}
	sum, err := json.MarshalIndent(map[string]any{"recommendation": finiteScores(rec), "options": res.Options,
		"sla":             map[string]any{"isl": cfg.ISL, "osl": cfg.OSL, "ttft_ms": cfg.TTFTMs, "itl_ms": cfg.ITLMs},
		"elapsed_seconds": res.Elapsed.Seconds()}, "", " ")
	if err != nil {
		return files, fmt.Errorf("profiler: %w", err)
	}
	f := filepath.Join(cfg.Dir, SummaryFile)
	if err := os.WriteFile(f, sum, 0o644); err != nil {
		return files, fmt.Errorf("profiler: %w", err)
	}
	files = append(files, f)
	var buf bytes.Buffer
	if err := reportPage(cfg, res, selErr).Write(&buf); err != nil {
		return files, fmt.Errorf("profiler: report: %w", err)
	}
	f = filepath.Join(cfg.Dir, ReportFile)
	if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
		return files, fmt.Errorf("profiler: %w", err)
	}
	return append(files, f), nil
}

// finiteScores replaces NaN scores (an option whose profile could not be interpolated) by
// -1 so the recommendation encodes as JSON.
func finiteScores(rec Recommendation) Recommendation {
	out := rec
	out.Scores = append([]OptionScore(nil), rec.Scores...)
	for i := range out.Scores {
		s := &out.Scores[i]
		for _, v := range []*float64{&s.TTFTMs, &s.PrefillThroughputPerGPU, &s.ITLMs, &s.DecodeThroughputPerGPU, &s.KVUsage} {
			if math.IsNaN(*v) || math.IsInf(*v, 0) {
				*v = -1
			}
		}
	}
	return out
}

// plannerConfig renders the recommended planner config (YAML).
func plannerConfig(cfg Config, res *Result) string {
	rec := res.Recommendation
	p, d := rec.Scores[rec.Prefill], rec.Scores[rec.Decode]
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		dir = cfg.Dir
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Recommended by `planner profile` on %s for ISL %d, OSL %d, TTFT %g ms, ITL %g ms.\n",
		time.Now().UTC().Format(time.RFC3339), cfg.ISL, cfg.OSL, cfg.TTFTMs, cfg.ITLMs)
	fmt.Fprintf(&b, "# Prefill: option %q (%d GPU(s) per engine): TTFT %.1f ms, %.0f tokens/s/GPU, %.2f requests/s per engine.\n",
		p.Name, p.GPUs, p.TTFTMs, p.PrefillThroughputPerGPU, rec.PrefillEngineRPS)
	fmt.Fprintf(&b, "# Decode: option %q (%d GPU(s) per engine): ITL %.2f ms at %.1f%% KV usage, %.0f tokens/s/GPU,\n",
		d.Name, d.GPUs, d.ITLMs, 100*d.KVUsage, d.DecodeThroughputPerGPU)
	fmt.Fprintf(&b, "#   %.2f requests/s and %.0f requests in flight per engine.\n", rec.DecodeEngineRPS, rec.DecodeEngineConcurrency)
	fmt.Fprintf(&b, "# Review environment, budgets and the metrics source before use (docs/profiling.md).\n")
	fmt.Fprintf(&b, "mode: disagg\noptimization_target: sla\n")
	fmt.Fprintf(&b, "ttft_ms: %g\nitl_ms: %g\n", cfg.TTFTMs, cfg.ITLMs)
	fmt.Fprintf(&b, "prefill_engine_num_gpu: %d\ndecode_engine_num_gpu: %d\n", p.GPUs, d.GPUs)
	fmt.Fprintf(&b, "profile_results_dir: %q\n", dir)
	if res.Options[rec.Decode].Model != "" {
		fmt.Fprintf(&b, "model_name: %q\n", res.Options[rec.Decode].Model)
	}
	fmt.Fprintf(&b, "# Threshold bounds for optimization_target: load (queued prompt tokens one prefill\n")
	fmt.Fprintf(&b, "# engine clears within the TTFT headroom; KV usage percent at which ITL reaches the target).\n")
	fmt.Fprintf(&b, "prefill_scale_up_queue_tokens: %d\nprefill_scale_down_queue_tokens: %d\n", rec.PrefillScaleUpQueueTokens, rec.PrefillScaleDownQueueTokens)
	fmt.Fprintf(&b, "decode_scale_up_kv_rate: %g\ndecode_scale_down_kv_rate: %g\n", rec.DecodeScaleUpKVRate, rec.DecodeScaleDownKVRate)
	return b.String()
}

// reportPage builds the HTML report: the recommendation, TTFT vs ISL per option with the
// SLA line, ITL vs KV usage per context (one chart per option) with the SLA line, and
// throughput per GPU.
func reportPage(cfg Config, res *Result, selErr error) report.Page {
	rec := res.Recommendation
	intro := fmt.Sprintf("Target: ISL %d, OSL %d tokens; SLA TTFT %g ms, ITL %g ms. %d option(s) profiled in %s (%d points measured, %d reused from an earlier run).",
		cfg.ISL, cfg.OSL, cfg.TTFTMs, cfg.ITLMs, len(res.Options), res.Elapsed.Round(time.Second), res.Measured, res.Reused)
	if selErr != nil {
		intro += "\n\n" + selErr.Error()
	} else {
		intro += fmt.Sprintf("\n\nRecommended: prefill on %q, decode on %q; the profile and %s are in the same directory.",
			rec.PrefillOption, rec.DecodeOption, ConfigFile)
	}
	tbl := report.Table{Title: "Options at the target request", Header: []string{"option", "GPUs/engine", "TTFT at ISL (ms)",
		"prefill tok/s/GPU", "meets TTFT", "ITL at SLA (ms)", "KV usage at SLA", "decode tok/s/GPU", "meets ITL", "chosen"}}
	for i, s := range rec.Scores {
		var chosen []string
		if i == rec.Prefill {
			chosen = append(chosen, "prefill")
		}
		if i == rec.Decode {
			chosen = append(chosen, "decode")
		}
		tbl.Rows = append(tbl.Rows, []string{s.Name, fmt.Sprint(s.GPUs), fmt.Sprintf("%.1f", s.TTFTMs), fmt.Sprintf("%.0f", s.PrefillThroughputPerGPU),
			fmt.Sprint(s.PrefillMeets), fmt.Sprintf("%.2f", s.ITLMs), fmt.Sprintf("%.1f%%", 100*s.KVUsage),
			fmt.Sprintf("%.0f", s.DecodeThroughputPerGPU), fmt.Sprint(s.DecodeMeets), strings.Join(chosen, ", ")})
	}
	page := report.Page{Title: "Pre-deployment profile", Intro: intro, Tables: []report.Table{tbl}}
	ttft := report.Chart{Title: "TTFT vs ISL (single request)", XLabel: "ISL (tokens)", YLabel: "TTFT (ms)",
		HLines: []report.HLine{{Name: "TTFT SLA", Y: cfg.TTFTMs, Color: "#000"}}}
	pthpt := report.Chart{Title: "Prefill throughput per GPU vs ISL", XLabel: "ISL (tokens)", YLabel: "tokens/s/GPU"}
	for _, o := range res.Options {
		var a, b []report.Point
		for _, p := range o.Prefill {
			a = append(a, report.Point{X: float64(p.ISL), Y: p.TTFTMs})
			b = append(b, report.Point{X: float64(p.ISL), Y: p.ThroughputPerGPU})
		}
		sortPoints(a)
		sortPoints(b)
		ttft.Series = append(ttft.Series, report.Series{Name: o.Option.Name, Points: a})
		pthpt.Series = append(pthpt.Series, report.Series{Name: o.Option.Name, Points: b})
	}
	page.Charts = append(page.Charts, ttft, pthpt)
	for _, o := range res.Options {
		itl := report.Chart{Title: fmt.Sprintf("ITL vs KV usage per context (%s)", o.Option.Name), XLabel: "KV usage (fraction)", YLabel: "ITL (ms)",
			HLines: []report.HLine{{Name: "ITL SLA", Y: cfg.ITLMs, Color: "#000"}}}
		thpt := report.Chart{Title: fmt.Sprintf("Decode throughput per GPU vs KV usage (%s)", o.Option.Name), XLabel: "KV usage (fraction)", YLabel: "tokens/s/GPU"}
		byCtx := map[int][]DecodeResult{}
		var ctxs []int
		for _, d := range o.Decode {
			if _, ok := byCtx[d.Nominal]; !ok {
				ctxs = append(ctxs, d.Nominal)
			}
			byCtx[d.Nominal] = append(byCtx[d.Nominal], d)
		}
		sort.Ints(ctxs)
		for _, c := range ctxs {
			var a, b []report.Point
			for _, d := range byCtx[c] {
				a = append(a, report.Point{X: d.KVUsage, Y: d.ITLMs})
				b = append(b, report.Point{X: d.KVUsage, Y: d.ThroughputPerGPU})
			}
			sortPoints(a)
			sortPoints(b)
			name := fmt.Sprintf("context %d", c)
			itl.Series = append(itl.Series, report.Series{Name: name, Points: a})
			thpt.Series = append(thpt.Series, report.Series{Name: name, Points: b})
		}
		page.Charts = append(page.Charts, itl, thpt)
	}
	return page
}

func sortPoints(p []report.Point) { sort.Slice(p, func(i, j int) bool { return p[i].X < p[j].X }) }
