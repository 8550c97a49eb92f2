// Package loadgen drives a simulated (or real) frontend with a request trace: a recorded trace
// (Mooncake JSONL, Azure CSV or BurstGPT CSV, read by predict.ReadTrace) or Dynamo's sinusoidal synthetic
// load. Arrivals are open-loop — each request is sent at its own time whatever the previous ones
// are doing — and the trace clock can be compressed by a speed-up factor, which multiplies the
// request rate (Dynamo's --arrival-speedup-ratio): a 57-minute trace at 19× is replayed in
// 3 minutes at 19 times its rate.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmplanner/planner/predict"
)

// SinusoidOptions describe Dynamo's sinusoidal load (benchmarks/sin_load_generator): the rate
// at second t is (Min+Max)/2 + (Max−Min)/2·sin(2πt/Period − π/2), so it starts at its minimum;
// the number of requests in each 1 s step is Poisson with that mean, spread evenly inside the
// second; lengths are fixed.
type SinusoidOptions struct {
	DurationS float64
	MinRPS    float64
	MaxRPS    float64
	PeriodS   float64
	ISL, OSL  int
	Seed      uint64
}

// Validate reports the first invalid option.
func (o SinusoidOptions) Validate() error {
	switch {
	case !(o.DurationS > 0):
		return fmt.Errorf("sinusoid: duration %gs must be > 0", o.DurationS)
	case o.MinRPS < 0 || o.MaxRPS < o.MinRPS:
		return fmt.Errorf("sinusoid: want 0 <= min rate (%g) <= max rate (%g)", o.MinRPS, o.MaxRPS)
	case !(o.PeriodS > 0):
		return fmt.Errorf("sinusoid: period %gs must be > 0", o.PeriodS)
	case o.ISL <= 0 || o.OSL <= 0:
		return fmt.Errorf("sinusoid: ISL (%d) and OSL (%d) must be > 0", o.ISL, o.OSL)
	}
	return nil
}

// Sinusoid generates the sinusoidal load; the same options and seed give the same requests.
func Sinusoid(o SinusoidOptions) ([]predict.Request, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	var out []predict.Request
	for s := 0; float64(s) < o.DurationS; s++ {
		t := float64(s)
		rate := (o.MinRPS+o.MaxRPS)/2 + (o.MaxRPS-o.MinRPS)/2*math.Sin(2*math.Pi*t/o.PeriodS-math.Pi/2)
		n := poisson(rng, rate)
		for i := 0; i < n; i++ {
			out = append(out, predict.Request{Arrival: t + float64(i)/float64(n), InputTokens: o.ISL, OutputTokens: o.OSL})
		}
	}
	return out, nil
}

// poisson draws a Poisson variate (Knuth for small means, a rounded normal for large ones).
func poisson(rng *rand.Rand, mean float64) int {
	if mean <= 0 {
		return 0
	}
	if mean > 500 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// Window cuts a trace to the requests arriving in [from, from+length) seconds and shifts them
// to start at 0 (length <= 0: to the end).
func Window(reqs []predict.Request, from, length float64) []predict.Request {
	var out []predict.Request
	for _, r := range reqs {
		if r.Arrival < from || (length > 0 && r.Arrival >= from+length) {
			continue
		}
		r.Arrival -= from
		out = append(out, r)
	}
	return out
}

// CompletionRequest is the body of the frontend's POST /v1/completions: a request of ISL
// prompt tokens asking for OSL output tokens (token contents do not matter to a simulator).
type CompletionRequest struct {
	ISL int `json:"isl"`
	OSL int `json:"osl"`
	// HashIDs are the prompt's 512-token block hashes (the trace's; none for synthetic
	// loads), for KV-aware routing and the engines' prefix caches.
	HashIDs []uint64 `json:"hash_ids,omitempty"`
}

// CompletionResponse is the frontend's answer once the request finished.
type CompletionResponse struct {
	// TTFTMs is the time to the first token and DurationMs the whole request, both measured
	// by the frontend.
	TTFTMs     float64 `json:"ttft_ms"`
	DurationMs float64 `json:"duration_ms"`
	// PrefillWorker and DecodeWorker name the engines that served it.
	PrefillWorker string `json:"prefill_worker,omitempty"`
	DecodeWorker  string `json:"decode_worker,omitempty"`
}

// Result is one request's outcome as the load generator saw it.
type Result struct {
	// Sent is the wall time the request was sent; TraceAt its trace arrival time (s).
	Sent    time.Time
	TraceAt float64
	ISL     int
	OSL     int
	// Response is the frontend's answer (zero when Err is set).
	Response CompletionResponse
	// Err is why the request failed ("" on success).
	Err string
	// Elapsed is how long the request took as the load generator saw it.
	Elapsed time.Duration
}

// Options configure a Runner.
type Options struct {
	// URL is the frontend base URL (http://127.0.0.1:8000).
	URL string
	// Speedup divides the trace's arrival times (1 = real time).
	Speedup float64
	// Timeout bounds one request (default 5 minutes).
	Timeout time.Duration
	// OnSent, when set, is called as each request is sent (from the pacing goroutine).
	OnSent func(r predict.Request, at time.Time)
	// OnResult, when set, receives every result (from many goroutines at once).
	OnResult func(Result)
}

// Summary counts a run's outcome.
type Summary struct {
	Sent, Succeeded, Failed int64
	// Late counts requests sent more than 100 ms after their scheduled time (the generator
	// could not keep up).
	Late int64
	// Wall is how long the run took.
	Wall time.Duration
}

// Run replays the requests against the frontend, open-loop, and waits for all of them (or for
// ctx). It returns an error only for invalid options; request failures are counted.
func Run(ctx context.Context, reqs []predict.Request, o Options) (Summary, error) {
	if o.URL == "" {
		return Summary{}, errors.New("loadgen: no frontend URL")
	}
	if !(o.Speedup > 0) || math.IsInf(o.Speedup, 0) {
		return Summary{}, fmt.Errorf("loadgen: speed-up %g must be a positive number", o.Speedup)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	reqs = append([]predict.Request(nil), reqs...)
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].Arrival < reqs[j].Arrival })
	client := &http.Client{Timeout: o.Timeout, Transport: &http.Transport{
		MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second,
	}}
	defer client.CloseIdleConnections()
	var sum Summary
	var sent, ok, failed, late atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
loop:
	for _, r := range reqs {
		due := start.Add(time.Duration(r.Arrival / o.Speedup * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break loop
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		if time.Since(due) > 100*time.Millisecond {
			late.Add(1)
		}
		sent.Add(1)
		if o.OnSent != nil {
			o.OnSent(r, time.Now())
		}
		wg.Add(1)
		go func(r predict.Request) {
			defer wg.Done()
			res := send(ctx, client, o.URL, r)
			res.Elapsed = time.Since(res.Sent)
			if res.Err == "" {
				ok.Add(1)
			} else {
				failed.Add(1)
			}
			if o.OnResult != nil {
				o.OnResult(res)
			}
		}(r)
	}
	wg.Wait()
	sum.Sent, sum.Succeeded, sum.Failed, sum.Late = sent.Load(), ok.Load(), failed.Load(), late.Load()
	sum.Wall = time.Since(start)
	return sum, nil
}

func send(ctx context.Context, client *http.Client, url string, r predict.Request) Result {
	res := Result{Sent: time.Now(), TraceAt: r.Arrival, ISL: r.InputTokens, OSL: r.OutputTokens}
	body, _ := json.Marshal(CompletionRequest{ISL: r.InputTokens, OSL: r.OutputTokens, HashIDs: r.HashIDs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if resp.StatusCode != http.StatusOK {
		res.Err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
		return res
	}
	if err := json.Unmarshal(data, &res.Response); err != nil {
		res.Err = fmt.Sprintf("bad response: %v", err)
	}
	return res
}

// RatesOptions describe a load that follows a rate series: the rate moves linearly from one
// point to the next (StepS apart), each second's request count is Poisson with that mean
// (spread evenly inside the second), and the lengths are drawn from exponential
// distributions with the given means (at least 1 token, at most MaxTokens in all).
type RatesOptions struct {
	Rates            []float64
	StepS, DurationS float64
	MeanISL, MeanOSL float64
	MaxTokens        int
	Seed             uint64
}

// exponentialLengths draws a request's prompt and output lengths from exponential
// distributions of means meanISL and meanOSL: each at least 1 token, at most maxTokens in all.
func exponentialLengths(rng *rand.Rand, meanISL, meanOSL float64, maxTokens int) (isl, osl int) {
	draw := func(mean float64, most int) int {
		return max(1, min(most, int(math.Round(rng.ExpFloat64()*mean))))
	}
	isl = draw(meanISL, maxTokens-1)
	return isl, draw(meanOSL, maxTokens-isl)
}

// FromRates generates the load of o.
func FromRates(o RatesOptions) ([]predict.Request, error) {
	switch {
	case len(o.Rates) == 0 || !(o.StepS > 0) || !(o.DurationS > 0) || o.DurationS > 7*24*3600:
		return nil, fmt.Errorf("loadgen: rates: need rates, a step > 0 and a duration in (0, 1 week]")
	case !(o.MeanISL >= 1) || !(o.MeanOSL >= 1) || o.MaxTokens < 2:
		return nil, fmt.Errorf("loadgen: rates: mean lengths must be >= 1 and max tokens >= 2")
	}
	for _, r := range o.Rates {
		if !(r >= 0) || math.IsInf(r, 0) || r > 1e5 {
			return nil, fmt.Errorf("loadgen: rates: rate %v not in [0, 1e5]", r)
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	var out []predict.Request
	for s := 0; float64(s) < o.DurationS; s++ {
		x := float64(s) / o.StepS
		i := min(int(x), len(o.Rates)-1)
		rate := o.Rates[i]
		if i+1 < len(o.Rates) {
			rate += (o.Rates[i+1] - o.Rates[i]) * (x - float64(i))
		}
		n := poisson(rng, rate)
		for k := 0; k < n; k++ {
			isl, osl := exponentialLengths(rng, o.MeanISL, o.MeanOSL, o.MaxTokens)
			out = append(out, predict.Request{Arrival: float64(s) + float64(k)/float64(n), InputTokens: isl, OutputTokens: osl})
		}
	}
	return out, nil
}
