package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/loadgen"
)

func init() {
	register(command{
		name:    "loadgen",
		summary: "replay a trace (Mooncake JSONL, Azure CSV, BurstGPT CSV) or Dynamo's sinusoidal load against a frontend",
		run:     runLoadgen,
	})
}

func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8000", "frontend base URL (POST /v1/completions)")
	trace := fs.String("trace", "", "trace file (Mooncake JSONL, Azure CSV or BurstGPT CSV); empty: the sinusoidal load")
	traceModel := fs.String("trace-model", "", "replay one model's requests of a BurstGPT --trace (its Model column, e.g. GPT-4)")
	from := fs.Duration("from", 0, "start this far into the trace")
	length := fs.Duration("length", 0, "replay this much of the trace (0: to its end)")
	speedup := fs.Float64("speedup", 1, "divide arrival times by this (the request rate rises by the same factor)")
	sinDur := fs.Duration("sin-duration", 1800*time.Second, "sinusoidal load: duration")
	sinMin := fs.Float64("sin-min-rps", 5, "sinusoidal load: minimum request rate")
	sinMax := fs.Float64("sin-max-rps", 45, "sinusoidal load: maximum request rate")
	sinPeriod := fs.Duration("sin-period", 600*time.Second, "sinusoidal load: period")
	isl := fs.Int("isl", 3000, "sinusoidal load: input tokens")
	osl := fs.Int("osl", 300, "sinusoidal load: output tokens")
	seed := fs.Uint64("seed", 1, "sinusoidal load: random seed")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner loadgen [--trace FILE] [flags]")
		fmt.Fprintln(stderr, "\nOpen-loop replay: each request is sent at its (scaled) arrival time. Prints progress every 10 s")
		fmt.Fprintln(stderr, "and a summary. Default load: Dynamo's rr-5-45 i3000o300 sinusoid (1800 s, period 600 s).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	var reqs []predict.Request
	var err error
	if *traceModel != "" && *trace == "" {
		return fmt.Errorf("loadgen: --trace-model selects a --trace's requests")
	}
	if *trace != "" {
		if reqs, err = predict.ReadTraceOf(*trace, predict.TraceFilter{Model: *traceModel}); err != nil {
			return err
		}
		reqs = loadgen.Window(reqs, from.Seconds(), length.Seconds())
	} else if reqs, err = loadgen.Sinusoid(loadgen.SinusoidOptions{DurationS: sinDur.Seconds(), MinRPS: *sinMin, MaxRPS: *sinMax,
		PeriodS: sinPeriod.Seconds(), ISL: *isl, OSL: *osl, Seed: *seed}); err != nil {
		return err
	}
	if len(reqs) == 0 {
		return fmt.Errorf("no requests to send")
	}
	var mu sync.Mutex
	var done, failed int
	var ttftSum float64
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
				mu.Lock()
				mean := ttftSum / float64(max(1, done-failed))
				fmt.Fprintf(stdout, "%s  %d/%d finished, %d failed, mean TTFT %.0f ms\n", time.Now().Format("15:04:05"), done, len(reqs), failed, mean)
				mu.Unlock()
			}
		}
	}()
	fmt.Fprintf(stdout, "sending %d requests over %.0f s (%.1fx)\n", len(reqs), reqs[len(reqs)-1].Arrival/(*speedup), *speedup)
	sum, err := loadgen.Run(ctx, reqs, loadgen.Options{URL: *url, Speedup: *speedup, OnResult: func(r loadgen.Result) {
		mu.Lock()
		defer mu.Unlock()
		done++
		if r.Err != "" {
			failed++
			return
		}
		ttftSum += r.Response.TTFTMs
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "done: %d sent, %d succeeded, %d failed, %d sent late, in %s\n", sum.Sent, sum.Succeeded, sum.Failed, sum.Late, sum.Wall.Round(time.Millisecond))
	return nil
}
