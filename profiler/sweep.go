package profiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Bounds of a sweep.
const (
	// MaxOptions bounds the parallelism options of one run.
	MaxOptions = 16
	// MaxGranularity bounds the prefill and decode granularities.
	MaxGranularity = 64
	// MaxRepetitions bounds the repetitions and warm-up requests of a point.
	MaxRepetitions = 20
	// MaxInFlight bounds the in-flight requests of a decode point.
	MaxInFlight = 8192
	// MaxContext bounds the context length.
	MaxContext = 1 << 20
)

// Option is one parallelism option: an endpoint serving engines of GPUs GPUs each.
type Option struct {
	// Name labels the option in the outputs (e.g. "tp1").
	Name string
	// URL is the endpoint's base URL (with or without /v1).
	URL string
	// GPUs is the number of GPUs of one engine (tensor × pipeline parallelism).
	GPUs int
	// Command, if set, is a shell command that starts the engine; {port} in it is replaced
	// with a free port and URL, if empty, becomes http://127.0.0.1:{port}. The engine is
	// stopped (SIGTERM) after the option is profiled.
	Command string
}

// Config is what to profile and against which targets.
type Config struct {
	// Options are the parallelism options (1..MaxOptions).
	Options []Option
	// Model is the served model name; "" accepts an endpoint's only model.
	Model string
	// Chat uses /v1/chat/completions instead of /v1/completions.
	Chat bool
	// ISL and OSL are the target request's input and output lengths in tokens.
	ISL, OSL int
	// TTFTMs and ITLMs are the SLA.
	TTFTMs, ITLMs float64
	// MaxContextLength is the largest context to profile; 0 reads the endpoint's
	// max_model_len.
	MaxContextLength int
	// MaxKVTokens is one engine's KV capacity in tokens; 0 reads it from the endpoint's
	// metrics (vllm:cache_config_info) and fails when they do not have it.
	MaxKVTokens int64
	// PrefillGranularity is the number of ISL steps of the prefill sweep (Dynamo: 16).
	PrefillGranularity int
	// DecodeGranularity is the number of context lengths and of in-flight steps of the
	// decode sweep (Dynamo: 6).
	DecodeGranularity int
	// PrefillISLs and DecodeContexts, if set, replace the computed grids (contexts are
	// the nominal ISL + OSL/2 of Dynamo's grid).
	PrefillISLs, DecodeContexts []int
	// DecodeTokens is the number of output tokens each decode-sweep request generates
	// (the measurement window; default 80).
	DecodeTokens int
	// Warmup is the number of unmeasured requests before each prefill point (0: the
	// default, 1; negative: none).
	Warmup int
	// Repetitions is the number of measured requests of each prefill point, extended up to
	// three times as many while their spread exceeds MaxSpread; the median TTFT is kept
	// (default 5).
	Repetitions int
	// StreamSample is the number of streamed requests of a decode point whose token
	// times are measured; the others run non-streamed (default 16).
	StreamSample int
	// MaxInFlight caps the in-flight requests of a decode point (default MaxInFlight).
	MaxInFlight int
	// Dir is the output directory; measured points are kept in Dir/raw and reused when the
	// run is restarted.
	Dir string
	// Progress receives the progress lines (stderr); nil discards them.
	Progress io.Writer
	// RequestTimeout bounds one request (default 10 minutes).
	RequestTimeout time.Duration
}

// withDefaults fills the defaults and validates.
func (c Config) withDefaults() (Config, error) {
	if c.PrefillGranularity == 0 {
		c.PrefillGranularity = 16
	}
	if c.DecodeGranularity == 0 {
		c.DecodeGranularity = 6
	}
	if c.DecodeTokens == 0 {
		c.DecodeTokens = 80
	}
	switch {
	case c.Warmup == 0:
		c.Warmup = 1
	case c.Warmup < 0:
		c.Warmup = 0
	}
	if c.Repetitions == 0 {
		c.Repetitions = 5
	}
	if c.StreamSample == 0 {
		c.StreamSample = 16
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = MaxInFlight
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Minute
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Options) == 0 || len(c.Options) > MaxOptions {
		bad("%d options: want 1 to %d", len(c.Options), MaxOptions)
	}
	names := map[string]bool{}
	for i, o := range c.Options {
		switch {
		case o.Name == "" || len(o.Name) > 64 || strings.ContainsAny(o.Name, "/\\ ,=\n"):
			bad("option %d: name %q must be 1 to 64 characters without / \\ , = or spaces", i, o.Name)
		case names[o.Name]:
			bad("option %d: name %q used twice", i, o.Name)
		}
		names[o.Name] = true
		if o.URL == "" && o.Command == "" {
			bad("option %q: needs a URL or a command", o.Name)
		}
		if o.GPUs < 1 || o.GPUs > 1024 {
			bad("option %q: gpus %d must be in [1, 1024]", o.Name, o.GPUs)
		}
	}
	if c.ISL < 1 || c.OSL < 1 || c.ISL > MaxContext || c.OSL > MaxContext {
		bad("isl %d and osl %d must be in [1, %d]", c.ISL, c.OSL, MaxContext)
	}
	if !(c.TTFTMs > 0) || !(c.ITLMs > 0) || math.IsInf(c.TTFTMs, 0) || math.IsInf(c.ITLMs, 0) {
		bad("ttft %v ms and itl %v ms must be finite and > 0", c.TTFTMs, c.ITLMs)
	}
	if c.MaxContextLength < 0 || c.MaxContextLength > MaxContext {
		bad("max context length %d must be in [0, %d]", c.MaxContextLength, MaxContext)
	}
	if c.MaxKVTokens < 0 || c.MaxKVTokens > 1<<40 {
		bad("max kv tokens %d must be in [0, 2^40]", c.MaxKVTokens)
	}
	for _, g := range []struct {
		name string
		v    int
		lo   int
		hi   int
	}{{"prefill granularity", c.PrefillGranularity, 3, MaxGranularity}, {"decode granularity", c.DecodeGranularity, 1, MaxGranularity},
		{"decode tokens", c.DecodeTokens, 8, 4096}, {"warm-up", c.Warmup, 0, MaxRepetitions}, {"repetitions", c.Repetitions, 1, MaxRepetitions},
		{"stream sample", c.StreamSample, 1, 256}, {"max in-flight", c.MaxInFlight, 1, MaxInFlight}} {
		if g.v < g.lo || g.v > g.hi {
			bad("%s %d must be in [%d, %d]", g.name, g.v, g.lo, g.hi)
		}
	}
	if len(c.PrefillISLs) > MaxGranularity+1 || len(c.DecodeContexts) > MaxGranularity+1 {
		bad("at most %d explicit ISLs or contexts", MaxGranularity+1)
	}
	if c.Dir == "" {
		bad("an output directory is required")
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("profiler: invalid config: %w", errors.Join(errs...))
	}
	return c, nil
}

// prefillGrid is Dynamo's prefill ISL sweep: from 100 up to the context limit in steps of
// (limit − 100) / granularity (17 points for 16384 and 16), each leaving room for one
// output token.
func prefillGrid(maxCtx, granularity int) []int {
	step := max(1, (maxCtx-100)/granularity)
	var out []int
	for isl := 100; isl < maxCtx; isl += step {
		out = append(out, isl)
	}
	return out
}

// decodePoint is one point of the decode sweep: n requests of isl prompt tokens, at the
// nominal context isl + osl/2 of Dynamo's grid.
type decodePoint struct {
	Context, N int
}

// decodeGrid is Dynamo's decode sweep: prompt lengths from 100 in steps of
// (limit − OSL) / granularity, context = ISL + OSL/2, in-flight counts from 1 to the KV
// capacity over ISL + OSL in steps of that capacity / granularity.
func decodeGrid(maxCtx, osl, granularity int, maxKV int64, contexts []int, maxInFlight int) []decodePoint {
	var isls []int
	if len(contexts) > 0 {
		for _, c := range contexts {
			isls = append(isls, c-osl/2)
		}
	} else {
		step := max(1, (maxCtx-osl)/granularity)
		for isl := 100; isl < maxCtx-osl; isl += step {
			isls = append(isls, isl)
		}
	}
	var out []decodePoint
	for _, isl := range isls {
		if isl < 1 {
			continue
		}
		maxConc := int(maxKV / int64(isl+osl))
		step := max(1, maxConc/granularity)
		for n := 1; n < maxConc || n == 1; n += step {
			if n > maxInFlight {
				break
			}
			out = append(out, decodePoint{Context: isl + osl/2, N: n})
		}
	}
	return out
}

// PrefillResult is one measured prefill point.
type PrefillResult struct {
	// ISL is the prompt length in tokens (the endpoint's usage.prompt_tokens when reported).
	ISL int `json:"isl"`
	// Requested is the ISL the sweep asked for (the key of the point).
	Requested int `json:"requested"`
	// TTFTMs is the median TTFT; TTFTsMs every measured one.
	TTFTMs  float64   `json:"ttft_ms"`
	TTFTsMs []float64 `json:"ttfts_ms"`
	// ThroughputPerGPU is ISL / TTFT / GPUs in tokens per second.
	ThroughputPerGPU float64 `json:"thpt_per_gpu"`
}

// DecodeResult is one measured decode point.
type DecodeResult struct {
	// Nominal is the grid context; N the in-flight requests.
	Nominal int `json:"nominal_context"`
	N       int `json:"n"`
	// ISL is the prompt length sent.
	ISL int `json:"isl"`
	// Context is the mean context length over the measured tokens (informational: it is
	// within a few tokens of Nominal, since the prompt is Nominal − OSL/2 tokens long);
	// KVUsage is N × Nominal / max KV tokens. The profile is labelled with Nominal and
	// KVUsage, as Dynamo's: every point of a context row has the same context, which the
	// planner's nearest-point fill outside the points' hull relies on.
	Context float64 `json:"context"`
	KVUsage float64 `json:"kv_usage"`
	// ITLMs is the median, over the streamed requests, of the Theil–Sen slope of their
	// token arrival times in the steady window (every request decoding, none finished);
	// Gaps is the number of token gaps measured.
	ITLMs float64 `json:"itl_ms"`
	Gaps  int     `json:"gaps"`
	// ThroughputPerGPU is N / ITL / GPUs in output tokens per second.
	ThroughputPerGPU float64 `json:"thpt_per_gpu"`
}

// OptionResult is the measured profile of one option.
type OptionResult struct {
	Option      Option          `json:"option"`
	Model       string          `json:"model"`
	MaxContext  int             `json:"max_context"`
	MaxKVTokens int64           `json:"max_kv_tokens"`
	Prefill     []PrefillResult `json:"prefill"`
	Decode      []DecodeResult  `json:"decode"`
}

// theilSen is the Theil–Sen slope of token arrival times against token index, in ms per
// token: the median of (t_j − t_i)/(j − i) over every pair of tokens. A token delivered
// late (a stalled client or server) only ever adds time and makes the next ones arrive in
// a burst; the mean gap between the window's ends is off by the delay of its first token,
// the median of the pairwise slopes is not (it tolerates 29 % of disturbed tokens).
func theilSen(ts []time.Time) float64 {
	var slopes []float64
	for i := range ts {
		for j := i + 1; j < len(ts); j++ {
			slopes = append(slopes, ms(ts[j].Sub(ts[i]))/float64(j-i))
		}
	}
	return median(slopes)
}

// median returns the median of v (NaN if empty).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// prompt returns a prompt of n words, unique to tag (its first word) so that no two tags
// share a cached prefix. Each filler word is one token for common tokenizers.
func prompt(tag string, n int) string {
	var b strings.Builder
	b.Grow(4*n + len(tag))
	b.WriteString(tag)
	for range n - 1 {
		b.WriteString(" the")
	}
	return b.String()
}

// measurePrefill measures one prefill point: warm-up requests, then repetitions of a
// single streamed request with a unique prompt and one output token; TTFT is the time
// from the request written to the first token.
func (r *runner) measurePrefill(ctx context.Context, c *client, isl, gpus int) (PrefillResult, error) {
	res := PrefillResult{Requested: isl}
	var islSeen []float64
	for i := 0; i < r.cfg.Warmup+r.cfg.Repetitions || r.noisy(res.TTFTsMs); i++ {
		out, err := c.complete(ctx, prompt(r.nonce(), isl), 1, true, nil)
		if err != nil {
			return res, fmt.Errorf("prefill isl %d: %w", isl, err)
		}
		if len(out.Tokens) == 0 {
			return res, fmt.Errorf("prefill isl %d: the stream carried no token", isl)
		}
		if i < r.cfg.Warmup {
			continue
		}
		res.TTFTsMs = append(res.TTFTsMs, ms(out.Tokens[0].Sub(out.Sent)))
		if out.PromptTokens > 0 {
			islSeen = append(islSeen, float64(out.PromptTokens))
		}
	}
	res.ISL = isl
	if len(islSeen) > 0 {
		res.ISL = int(median(islSeen))
	}
	res.TTFTMs = median(res.TTFTsMs)
	res.ThroughputPerGPU = float64(res.ISL) / (res.TTFTMs / 1000) / float64(gpus)
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MaxSpread is the spread, (max − min) / median, above which a prefill point's repetitions
// are extended (up to three times as many) before the median is taken: a loaded client or
// server only ever adds time, so a wide spread means some repetitions were disturbed.
const MaxSpread = 0.1

// noisy reports whether the prefill repetitions so far are spread more than MaxSpread and
// may be extended.
func (r *runner) noisy(v []float64) bool {
	if len(v) < r.cfg.Repetitions || len(v) >= 3*r.cfg.Repetitions {
		return false
	}
	m := median(v)
	return (slices.Max(v)-slices.Min(v))/m > MaxSpread
}

// measureDecode measures one decode point: a warm-up request puts the shared prompt in the
// prefix cache, then n requests with that prompt run together, so they decode without
// piggy-backed prefill. The first n − s run non-streamed; once they are all written, s
// streamed ones follow. The steady window runs from the last streamed first token to the
// first completion of any request; a streamed request's ITL is the Theil–Sen slope of its token times in the window.
//
// When the window is empty (the requests took longer to send than the first ones took to
// finish) the point is measured again with twice the output tokens, up to three times.
func (r *runner) measureDecode(ctx context.Context, c *client, p decodePoint, maxKV int64, gpus int) (DecodeResult, error) {
	osl := r.cfg.DecodeTokens
	for attempt := 0; ; attempt++ {
		res, err := r.measureDecodeOnce(ctx, c, p, maxKV, gpus, osl)
		if !errors.Is(err, errNoWindow) || attempt == 2 {
			return res, err
		}
		osl *= 2
		fmt.Fprintf(r.cfg.Progress, "decode context %d, %d in flight: no steady window, measuring again with %d output tokens\n", p.Context, p.N, osl)
	}
}

// errNoWindow: no streamed request had tokens while every request was decoding.
var errNoWindow = errors.New("no steady window (every request decoding)")

func (r *runner) measureDecodeOnce(ctx context.Context, c *client, p decodePoint, maxKV int64, gpus, osl int) (DecodeResult, error) {
	res := DecodeResult{Nominal: p.Context, N: p.N}
	isl := max(1, p.Context-osl/2)
	res.ISL = isl
	text := prompt(r.nonce(), isl)
	if _, err := c.complete(ctx, text, 1, false, nil); err != nil {
		return res, fmt.Errorf("decode context %d: warm-up: %w", p.Context, err)
	}
	s := min(p.N, r.cfg.StreamSample)
	outs := make([]completion, p.N)
	errs := make([]error, p.N)
	var wg, written sync.WaitGroup
	launch := func(i int, stream bool) {
		wg.Add(1)
		written.Add(1)
		go func() {
			defer wg.Done()
			once := sync.OnceFunc(written.Done)
			defer once()
			outs[i], errs[i] = c.complete(ctx, text, osl, stream, once)
		}()
	}
	for i := s; i < p.N; i++ {
		launch(i, false)
	}
	written.Wait()
	// Written is not yet admitted: wait until the engine reports the non-streamed requests
	// running (when its metrics say), so the streamed ones are the last to join.
	c.waitRunning(ctx, p.N-s, time.Minute)
	for i := range s {
		launch(i, true)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("decode context %d, %d in flight: %w", p.Context, p.N, err)
	}
	var start, end time.Time
	for i, o := range outs {
		if i < s {
			if len(o.Tokens) == 0 {
				return res, fmt.Errorf("decode context %d: a stream carried no token", p.Context)
			}
			if o.Tokens[0].After(start) {
				start = o.Tokens[0]
			}
		}
		if end.IsZero() || o.Done.Before(end) {
			end = o.Done
		}
	}
	var all, idx []float64
	for _, o := range outs[:s] {
		first, last := -1, -1
		for k, t := range o.Tokens {
			if t.Before(start) || t.After(end) {
				continue
			}
			if first < 0 {
				first = k
			}
			last = k
		}
		if first < 0 || last-first < 2 {
			continue
		}
		all = append(all, theilSen(o.Tokens[first:last+1]))
		res.Gaps += last - first
		// The gap from token k to token k+1 (0-based) is the pass over a sequence of
		// isl + k + 1 tokens, so the gaps' mean context is isl + (first + last + 1)/2.
		idx = append(idx, float64(first+last+1)/2)
	}
	if len(all) == 0 {
		return res, fmt.Errorf("decode context %d, %d in flight: %w with %d output tokens: raise --decode-tokens",
			p.Context, p.N, errNoWindow, osl)
	}
	res.ITLMs = median(all)
	res.Context = float64(isl) + median(idx)
	res.KVUsage = math.Min(1, float64(p.N)*float64(p.Context)/float64(maxKV))
	res.ThroughputPerGPU = float64(p.N) / (res.ITLMs / 1000) / float64(gpus)
	return res, nil
}
