package openai

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmplanner/planner/sim/engine"
)

// vLLM's prefix-cache counters as it exposes them (its Python counters
// vllm:prefix_cache_queries and vllm:prefix_cache_hits, which the Prometheus client
// exposes with the _total suffix; client_golang does not add it in the text format, so the
// names carry it here).
const (
	MetricPrefixCacheQueries = "vllm:prefix_cache_queries_total"
	MetricPrefixCacheHits    = "vllm:prefix_cache_hits_total"
)

// MetricsHandler serves vLLM-style engine metrics for live, an engine built with cfg (its
// resolved Config): vllm:cache_config_info (block_size and num_gpu_blocks labels, the KV
// capacity `planner profile` reads), vllm:num_requests_running, vllm:num_requests_waiting
// and vllm:kv_cache_usage_perc, and vLLM's prefix-cache counters MetricPrefixCacheQueries
// and MetricPrefixCacheHits (prompt tokens looked up and found; their rates' ratio is the
// engine's hit rate).
func MetricsHandler(live *engine.Live, cfg engine.Config) http.Handler {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the KV cache config."},
		[]string{"block_size", "num_gpu_blocks"})
	info.WithLabelValues(fmt.Sprint(cfg.BlockSize), fmt.Sprint(cfg.NumGPUBlocks)).Set(1)
	reg.MustRegister(info,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Requests running."},
			func() float64 { return float64(live.Load().Running) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vllm:num_requests_waiting", Help: "Requests waiting."},
			func() float64 { return float64(live.Load().Waiting) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vllm:kv_cache_usage_perc", Help: "KV cache usage (1 = full)."},
			func() float64 {
				l := live.Load()
				return float64(l.KVBlocksUsed) / float64(max(1, l.KVBlocksTotal))
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricPrefixCacheQueries, Help: "Prompt tokens looked up in the prefix cache."},
			func() float64 { return float64(live.PrefixStats().PromptTokens) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricPrefixCacheHits, Help: "Prompt tokens found in the prefix cache."},
			func() float64 { return float64(live.PrefixStats().HitTokens) }))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
