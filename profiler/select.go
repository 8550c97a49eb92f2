package profiler

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/llmplanner/planner/perf"
)

// ErrNoOption is wrapped by Select's error when no option meets the SLA (for prefill, for
// decode, or both).
var ErrNoOption = errors.New("no option meets the SLA")

// OptionScore is how one option does at the target request.
type OptionScore struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
	// TTFTMs and PrefillThroughputPerGPU are interpolated at the target ISL (perf's
	// prefill interpolator, as the planner does); PrefillMeets says TTFTMs ≤ the SLA.
	TTFTMs                  float64 `json:"ttft_ms"`
	PrefillThroughputPerGPU float64 `json:"prefill_thpt_per_gpu"`
	PrefillMeets            bool    `json:"prefill_meets"`
	// ITLMs, DecodeThroughputPerGPU and KVUsage are Dynamo's best decode point at the ITL
	// SLA and context ISL + OSL/2 (perf's FindBestThroughputPerGPU); DecodeMeets says the
	// point's ITL ≤ the SLA.
	ITLMs                  float64 `json:"itl_ms"`
	DecodeThroughputPerGPU float64 `json:"decode_thpt_per_gpu"`
	KVUsage                float64 `json:"kv_usage"`
	DecodeMeets            bool    `json:"decode_meets"`
	// MaxKVTokens is one engine's KV capacity.
	MaxKVTokens int64 `json:"max_kv_tokens"`
}

// Recommendation is the profiler's choice and the planner settings derived from it.
type Recommendation struct {
	// Scores has one entry per option.
	Scores []OptionScore `json:"scores"`
	// Prefill and Decode are the indexes in Scores of the chosen options (-1: none meets
	// the SLA).
	Prefill, Decode int `json:"-"`
	// PrefillOption and DecodeOption are their names ("" when none).
	PrefillOption string `json:"prefill_option"`
	DecodeOption  string `json:"decode_option"`
	// PrefillEngineRPS and DecodeEngineRPS are one engine's capacity at the SLA in target
	// requests per second: prefill throughput per GPU × GPUs / ISL, decode throughput per
	// GPU × GPUs / OSL.
	PrefillEngineRPS float64 `json:"prefill_engine_rps"`
	DecodeEngineRPS  float64 `json:"decode_engine_rps"`
	// DecodeEngineConcurrency is the in-flight requests one decode engine holds at the SLA.
	DecodeEngineConcurrency float64 `json:"decode_engine_concurrency"`
	// Threshold bounds for optimization_target "load" (see docs/profiling.md).
	PrefillScaleUpQueueTokens   int     `json:"prefill_scale_up_queue_tokens"`
	PrefillScaleDownQueueTokens int     `json:"prefill_scale_down_queue_tokens"`
	DecodeScaleUpKVRate         float64 `json:"decode_scale_up_kv_rate"`
	DecodeScaleDownKVRate       float64 `json:"decode_scale_down_kv_rate"`
}

// prefillProfile and decodeProfile convert measured points to perf's profile types.
func (o *OptionResult) prefillProfile() *perf.PrefillProfile {
	p := &perf.PrefillProfile{}
	seen := map[int]bool{}
	for _, r := range o.Prefill {
		if seen[r.ISL] {
			continue // two requested ISLs the tokenizer counted the same: keep the first
		}
		seen[r.ISL] = true
		p.ISL = append(p.ISL, float64(r.ISL))
		p.TTFTMs = append(p.TTFTMs, r.TTFTMs)
		p.ThroughputPerGPU = append(p.ThroughputPerGPU, r.ThroughputPerGPU)
	}
	return p
}

func (o *OptionResult) decodeProfile() *perf.DecodeProfile {
	d := &perf.DecodeProfile{MaxKVTokens: o.MaxKVTokens}
	for _, r := range o.Decode {
		d.KVUsage = append(d.KVUsage, round4(r.KVUsage))
		d.ContextLength = append(d.ContextLength, float64(r.Nominal))
		d.ITLMs = append(d.ITLMs, r.ITLMs)
		d.ThroughputPerGPU = append(d.ThroughputPerGPU, r.ThroughputPerGPU)
	}
	return d
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// Select scores every option at the target request and picks, separately for prefill and
// decode, the option that meets the SLA with the highest throughput per GPU (Dynamo's
// rule). The error wraps ErrNoOption, naming what each option achieves, when no option
// meets the TTFT or the ITL target; the Recommendation is still filled as far as possible.
func Select(cfg Config, results []OptionResult) (Recommendation, error) {
	rec := Recommendation{Prefill: -1, Decode: -1}
	var errs []error
	ctxLen := float64(cfg.ISL) + float64(cfg.OSL)/2
	for i := range results {
		o := &results[i]
		s := OptionScore{Name: o.Option.Name, GPUs: o.Option.GPUs, MaxKVTokens: o.MaxKVTokens,
			TTFTMs: math.NaN(), ITLMs: math.NaN()}
		if pi, err := perf.NewPrefillInterpolator(o.prefillProfile()); err != nil {
			errs = append(errs, fmt.Errorf("option %q: prefill profile: %w", o.Option.Name, err))
		} else {
			s.TTFTMs, s.PrefillThroughputPerGPU = pi.TTFTMs(float64(cfg.ISL)), pi.ThroughputPerGPU(float64(cfg.ISL))
			s.PrefillMeets = s.TTFTMs <= cfg.TTFTMs
		}
		if di, err := perf.NewDecodeInterpolator(o.decodeProfile()); err != nil {
			errs = append(errs, fmt.Errorf("option %q: decode profile: %w", o.Option.Name, err))
		} else {
			s.DecodeThroughputPerGPU, s.ITLMs, s.KVUsage = di.FindBestThroughputPerGPU(cfg.ITLMs, ctxLen)
			s.DecodeMeets = s.ITLMs <= cfg.ITLMs && s.DecodeThroughputPerGPU > 0
		}
		rec.Scores = append(rec.Scores, s)
		if s.PrefillMeets && (rec.Prefill < 0 || s.PrefillThroughputPerGPU > rec.Scores[rec.Prefill].PrefillThroughputPerGPU) {
			rec.Prefill = i
		}
		if s.DecodeMeets && (rec.Decode < 0 || s.DecodeThroughputPerGPU > rec.Scores[rec.Decode].DecodeThroughputPerGPU) {
			rec.Decode = i
		}
	}
	if len(errs) > 0 {
		return rec, errors.Join(errs...)
	}
	var missing []string
	if rec.Prefill < 0 {
		var got []string
		for _, s := range rec.Scores {
			got = append(got, fmt.Sprintf("%s %.1f ms", s.Name, s.TTFTMs))
		}
		missing = append(missing, fmt.Sprintf("TTFT %.0f ms at ISL %d (best: %s)", cfg.TTFTMs, cfg.ISL, strings.Join(got, ", ")))
	}
	if rec.Decode < 0 {
		var got []string
		for _, s := range rec.Scores {
			got = append(got, fmt.Sprintf("%s %.2f ms", s.Name, s.ITLMs))
		}
		missing = append(missing, fmt.Sprintf("ITL %.1f ms at context %.0f (lowest: %s)", cfg.ITLMs, ctxLen, strings.Join(got, ", ")))
	}
	if rec.Prefill >= 0 {
		p := rec.Scores[rec.Prefill]
		rec.PrefillOption = p.Name
		rec.PrefillEngineRPS = p.PrefillThroughputPerGPU * float64(p.GPUs) / float64(cfg.ISL)
		// Queued prompt tokens one engine clears within the TTFT headroom left after its
		// own prefill of a target prompt: more queued means the TTFT target is missed.
		up := (cfg.TTFTMs - p.TTFTMs) / 1000 * p.PrefillThroughputPerGPU * float64(p.GPUs)
		rec.PrefillScaleUpQueueTokens = max(2, int(math.Round(up)))
		rec.PrefillScaleDownQueueTokens = rec.PrefillScaleUpQueueTokens / 4
	}
	if rec.Decode >= 0 {
		d := rec.Scores[rec.Decode]
		rec.DecodeOption = d.Name
		rec.DecodeEngineRPS = d.DecodeThroughputPerGPU * float64(d.GPUs) / float64(cfg.OSL)
		rec.DecodeEngineConcurrency = d.KVUsage * float64(d.MaxKVTokens) / ctxLen
		// The KV usage at which ITL reaches the target; scale down below half of it.
		rec.DecodeScaleUpKVRate = math.Max(2, math.Round(d.KVUsage*1000)/10)
		rec.DecodeScaleDownKVRate = math.Round(rec.DecodeScaleUpKVRate*5) / 10
	}
	if len(missing) > 0 {
		return rec, fmt.Errorf("profiler: %w: %s", ErrNoOption, strings.Join(missing, "; "))
	}
	return rec, nil
}
