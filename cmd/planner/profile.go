package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/llmplanner/planner/profiler"
)

func init() {
	register(command{
		name:    "profile",
		summary: "pre-deployment profiling of OpenAI-compatible endpoints: writes the profile, a report and a recommended config",
		run:     runProfile,
	})
}

// optionFlag collects repeated --endpoint or --engine-cmd values.
type optionFlag struct {
	opts    *[]profiler.Option
	command bool
}

func (f optionFlag) String() string { return "" }

// Set parses name=NAME,url=URL,gpus=N (--endpoint; the URL may also be given bare, as
// name=URL) or name=NAME,gpus=N,cmd=COMMAND (--engine-cmd; cmd= takes the rest of the value).
func (f optionFlag) Set(v string) error {
	var o profiler.Option
	rest := v
	if f.command {
		i := strings.Index(v, "cmd=")
		if i < 0 {
			return fmt.Errorf("%q: want name=NAME,gpus=N,cmd=COMMAND", v)
		}
		o.Command = v[i+len("cmd="):]
		rest = strings.TrimSuffix(v[:i], ",")
	}
	o.GPUs = 1
	for _, kv := range strings.Split(rest, ",") {
		if kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q: %q is not key=value", v, kv)
		}
		switch {
		case k == "name" && !f.command && (strings.HasPrefix(val, "http://") || strings.HasPrefix(val, "https://")):
			return fmt.Errorf("%q: give the name and the URL as NAME=URL or name=NAME,url=URL", v)
		case k == "name":
			o.Name = val
		case k == "url":
			o.URL = val
		case k == "gpus":
			n, err := strconv.Atoi(val)
			if err != nil {
				return fmt.Errorf("%q: gpus: %w", v, err)
			}
			o.GPUs = n
		case !f.command && o.Name == "" && o.URL == "":
			o.Name, o.URL = k, val // NAME=URL
		default:
			return fmt.Errorf("%q: unknown key %q (want name, url, gpus%s)", v, k, map[bool]string{true: ", cmd", false: ""}[f.command])
		}
	}
	*f.opts = append(*f.opts, o)
	return nil
}

// intList parses a comma-separated list of integers.
func intList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func runProfile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg profiler.Config
	fs.Var(optionFlag{opts: &cfg.Options}, "endpoint", "an option: NAME=URL,gpus=N or name=NAME,url=URL,gpus=N (repeat for several options)")
	fs.Var(optionFlag{opts: &cfg.Options, command: true}, "engine-cmd",
		"an option started by the profiler: name=NAME,gpus=N,cmd=COMMAND; {port} in COMMAND is replaced by a free port (repeatable)")
	fs.StringVar(&cfg.Model, "model", "", "served model name (default: the endpoint's only model)")
	fs.BoolVar(&cfg.Chat, "chat", false, "measure /v1/chat/completions instead of /v1/completions")
	fs.IntVar(&cfg.ISL, "isl", 3000, "target input sequence length (tokens)")
	fs.IntVar(&cfg.OSL, "osl", 500, "target output sequence length (tokens)")
	fs.Float64Var(&cfg.TTFTMs, "ttft", 200, "TTFT target (ms)")
	fs.Float64Var(&cfg.ITLMs, "itl", 20, "ITL target (ms)")
	fs.IntVar(&cfg.MaxContextLength, "max-context-length", 0, "largest context to profile (default: the endpoint's max_model_len)")
	fs.Int64Var(&cfg.MaxKVTokens, "max-kv-tokens", 0, "KV capacity of one engine in tokens (default: read vllm:cache_config_info from /metrics)")
	fs.IntVar(&cfg.PrefillGranularity, "prefill-granularity", 16, "ISL steps of the prefill sweep")
	fs.IntVar(&cfg.DecodeGranularity, "decode-granularity", 6, "context lengths and in-flight steps of the decode sweep")
	fs.IntVar(&cfg.DecodeTokens, "decode-tokens", 80, "output tokens of each decode-sweep request (the measurement window)")
	fs.IntVar(&cfg.Warmup, "warmup", 1, "unmeasured requests before each prefill point")
	fs.IntVar(&cfg.Repetitions, "repetitions", 5, "measured requests of each prefill point (the median is kept; up to 3x more while they spread over 10%)")
	fs.IntVar(&cfg.StreamSample, "stream-sample", 16, "streamed (measured) requests of each decode point; the others run non-streamed")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", profiler.MaxInFlight, "cap on the in-flight requests of a decode point")
	fs.StringVar(&cfg.Dir, "out", "profiling_results", "output directory (measured points in out/raw are reused by a restarted run)")
	isls := fs.String("prefill-isls", "", "explicit prefill ISLs, comma-separated (replaces the computed grid)")
	ctxs := fs.String("decode-contexts", "", "explicit decode contexts (ISL + OSL/2), comma-separated (replaces the computed grid)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner profile --endpoint tp1=http://127.0.0.1:8000,gpus=1 [--endpoint tp2=URL,gpus=2] --isl N --osl N --ttft MS --itl MS [flags]")
		fmt.Fprintln(stderr, "\nMeasures prefill (TTFT vs ISL) and decode (ITL vs in-flight requests and context) on each option,")
		fmt.Fprintln(stderr, "picks the options meeting the SLA with the best throughput per GPU and writes, in --out, the profile")
		fmt.Fprintln(stderr, "profile_results_dir loads, report.html and planner-config.yaml. Progress goes to stderr. See docs/profiling.md.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 || len(cfg.Options) == 0 {
		fs.Usage()
		return errUsage
	}
	var err error
	if cfg.PrefillISLs, err = intList(*isls); err != nil {
		return fmt.Errorf("--prefill-isls %w", err)
	}
	if cfg.DecodeContexts, err = intList(*ctxs); err != nil {
		return fmt.Errorf("--decode-contexts %w", err)
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = -1 // the flag's 0 means none; the library's 0 means its default
	}
	cfg.Progress = stderr
	res, err := profiler.Run(ctx, cfg)
	if res != nil {
		printRecommendation(stdout, cfg, res)
	}
	return err
}

func printRecommendation(w io.Writer, cfg profiler.Config, res *profiler.Result) {
	rec := res.Recommendation
	for _, s := range rec.Scores {
		fmt.Fprintf(w, "%-8s %d GPU(s): TTFT %.1f ms at ISL %d (%.0f tok/s/GPU, meets %v); ITL %.2f ms at %.1f%% KV (%.0f tok/s/GPU, meets %v)\n",
			s.Name, s.GPUs, s.TTFTMs, cfg.ISL, s.PrefillThroughputPerGPU, s.PrefillMeets, s.ITLMs, 100*s.KVUsage, s.DecodeThroughputPerGPU, s.DecodeMeets)
	}
	if rec.PrefillOption != "" && rec.DecodeOption != "" {
		fmt.Fprintf(w, "recommended: prefill %s (%.2f req/s per engine), decode %s (%.2f req/s, %.0f in flight per engine)\n",
			rec.PrefillOption, rec.PrefillEngineRPS, rec.DecodeOption, rec.DecodeEngineRPS, rec.DecodeEngineConcurrency)
	}
	for _, f := range res.Files {
		fmt.Fprintln(w, "wrote", f)
	}
}
