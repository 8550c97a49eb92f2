package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/internal/scaletest"
	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/frontend"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/openai"
)

// TestKVRouterReuseEndToEnd runs the live prefix-reuse chain with its real parts, the
// commands' own code in this process: `planner frontend --mode agg --router kv` and two
// `planner engine --role aggregated` registering with it (FPMs over ZeroMQ), a Mooncake
// trace whose requests share a 3-block prefix (hash_ids) sent through the load generator
// one after the other, the frontend's and the engines' /metrics, and observe's direct-scrape
// traffic source reading the frontend. With --prefix-caching, the first request misses and
// each next one finds the 3 shared of its 4 blocks on the engine that served the first: the
// router's mean hit rate, the engines' prompt-token hit share and observe's KV hit rate are
// all 3/4 × 7/8. Without it, nothing is cached, and every one of them is 0 (not a predicted 1).
func TestKVRouterReuseEndToEnd(t *testing.T) {
	const (
		requests = 8
		model    = "m"
		ns       = "reuse"
	)
	dir := t.TempDir()
	trace := filepath.Join(dir, "shared.jsonl")
	var b strings.Builder
	for i := range requests {
		fmt.Fprintf(&b, "{\"timestamp\": %d, \"input_length\": 2048, \"output_length\": 2, \"hash_ids\": [1, 2, 3, %d]}\n", i*100, 100+i)
	}
	require.NoError(t, os.WriteFile(trace, []byte(b.String()), 0o644))
	reqs, err := predict.ReadTrace(trace)
	require.NoError(t, err)
	require.Len(t, reqs, requests)

	tests := []struct {
		name    string
		caching bool
		want    float64
	}{
		{"engines with a prefix cache", true, 0.75 * (requests - 1) / requests},
		{"engines without a prefix cache", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			logs := &syncBuffer{}
			var wg sync.WaitGroup
			start := func(args ...string) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if code := run(ctx, args, io.Discard, logs); code != 0 {
						t.Errorf("planner %s exited with %d", args[0], code)
					}
				}()
			}
			t.Cleanup(func() {
				cancel()
				wg.Wait()
				if t.Failed() {
					t.Logf("logs:\n%s", logs.String())
				}
			})

			feURL := "http://" + freeAddr(t)
			start("frontend", "--listen", strings.TrimPrefix(feURL, "http://"), "--mode", "agg", "--router", "kv",
				"--model", model, "--namespace", ns, "--log-level", "warn")
			var engineURLs []string
			for _, name := range []string{"a0", "a1"} {
				addr := freeAddr(t)
				args := []string{"engine", "--role", "aggregated", "--name", name, "--listen", addr,
					"--fpm-endpoint", "tcp://" + freeAddr(t), "--frontend", feURL, "--speedup", "20", "--log-level", "warn"}
				if tc.caching {
					args = append(args, "--prefix-caching")
				}
				start(args...)
				engineURLs = append(engineURLs, "http://"+addr)
			}
			waitFor(t, 30*time.Second, "both engines are routable", func() bool {
				resp, err := http.Get(feURL + "/v1/engines")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var engines []frontend.EngineStatus
				if json.NewDecoder(resp.Body).Decode(&engines) != nil || len(engines) != 2 {
					return false
				}
				for _, e := range engines {
					if !e.Routable || e.PrefixCaching != tc.caching {
						return false
					}
				}
				return true
			})

			// observe reads the frontend directly; its clock is the test's.
			now := time.Unix(1_700_000_000, 0)
			src, err := observe.NewScrapeTraffic(observe.ScrapeOptions{URL: feURL + "/metrics", Model: model, Namespace: ns,
				Now: func() time.Time { return now }})
			require.NoError(t, err)
			require.NoError(t, src.ScrapeOnce(ctx))

			// The trace's requests, one after the other (each waits for the previous).
			for _, r := range reqs {
				r.Arrival = 0
				sum, err := loadgen.Run(ctx, []predict.Request{r}, loadgen.Options{URL: feURL, Speedup: 1})
				require.NoError(t, err)
				require.EqualValues(t, 1, sum.Succeeded, "request %v", r.HashIDs)
			}

			fe, err := scaletest.Scrape(ctx, feURL+"/metrics")
			require.NoError(t, err)
			h, ok := fe.Hists[frontend.MetricKVHitRate]
			require.True(t, ok, "the frontend exposes %s", frontend.MetricKVHitRate)
			require.EqualValues(t, requests, h.Count, "one observation per request")
			require.InDelta(t, tc.want, h.Sum/h.Count, 1e-9, "the router's mean hit rate")

			var queries, hits float64
			for _, u := range engineURLs {
				m, err := scaletest.Scrape(ctx, u+"/metrics")
				require.NoError(t, err)
				queries += m.Values[openai.MetricPrefixCacheQueries]
				hits += m.Values[openai.MetricPrefixCacheHits]
			}
			if tc.caching {
				require.Equal(t, float64(requests*2048), queries)
				require.Greater(t, hits, 0.0)
				require.InDelta(t, tc.want, hits/queries, 1e-9, "the engines' hit share is the router's: its prediction held")
			} else {
				require.Zero(t, hits, "an engine without a prefix cache finds nothing")
			}

			now = now.Add(30 * time.Second)
			require.NoError(t, src.ScrapeOnce(ctx))
			obs, err := src.Traffic(ctx, 30*time.Second)
			require.NoError(t, err)
			require.NotNil(t, obs.KVHitRate, "a KV router's hit rate is observed, even when it is 0")
			require.InDelta(t, tc.want, *obs.KVHitRate, 1e-9)
			require.InDelta(t, requests, *obs.NumReq, 1e-9)
		})
	}
}
