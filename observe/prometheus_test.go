package observe

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/internal/promtest"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/frontend"
)

// specQueries reads the §9.1 query templates from testdata.
func specQueries(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "traffic", "spec-9.1-queries.txt"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		require.True(t, ok, line)
		out[k] = v
	}
	require.NoError(t, sc.Err())
	require.Contains(t, out, "mean")
	require.Contains(t, out, "count")
	return out
}

func TestPrometheusQueriesMatchSpec(t *testing.T) {
	spec := specQueries(t)
	const sel = `{model="qwen/qwen3-0.6b",dynamo_namespace="dynamo-ns"}`
	fromSpec := func(tmpl, metric, window string) string {
		r := strings.NewReplacer("X_sum", metric+"_sum", "X_count", metric+"_count", "{…}", sel, "[W]", "["+window+"]",
			metricRequestsStarted, metric)
		return r.Replace(tmpl)
	}
	tests := []struct {
		name   string
		got    string
		want   string
		window string
	}{
		{name: "TTFT mean", got: meanQuery(metricTTFT, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: fromSpec(spec["mean"], "dynamo_frontend_time_to_first_token_seconds", "180s")},
		{name: "ITL mean", got: meanQuery(metricITL, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: fromSpec(spec["mean"], "dynamo_frontend_inter_token_latency_seconds", "180s")},
		{name: "request duration mean", got: meanQuery(metricRequestDuration, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: fromSpec(spec["mean"], "dynamo_frontend_request_duration_seconds", "180s")},
		{name: "ISL mean, fractional window truncated", got: meanQuery(metricInputTokens, "Qwen/Qwen3-0.6B", "dynamo-ns", 59900*time.Millisecond),
			want: fromSpec(spec["mean"], "dynamo_frontend_input_sequence_tokens", "59s")},
		{name: "OSL mean", got: meanQuery(metricOutputTokens, "Qwen/Qwen3-0.6B", "dynamo-ns", 60*time.Second),
			want: fromSpec(spec["mean"], "dynamo_frontend_output_sequence_tokens", "60s")},
		{name: "started count", got: countQuery(metricRequestsStarted, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: fromSpec(spec["count"], "dynamo_frontend_requests_started_total", "180s")},
		{name: "fallback count", got: countQuery(metricRequestsTotal, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: fromSpec(spec["count"], "dynamo_frontend_requests_total", "180s")},
		// The literal strings, so that a broken template file cannot hide a broken builder.
		{name: "literal TTFT mean", got: meanQuery(metricTTFT, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: `sum by (model, dynamo_namespace) (increase(dynamo_frontend_time_to_first_token_seconds_sum{model="qwen/qwen3-0.6b",dynamo_namespace="dynamo-ns"}[180s])) / ` +
				`sum by (model, dynamo_namespace) (increase(dynamo_frontend_time_to_first_token_seconds_count{model="qwen/qwen3-0.6b",dynamo_namespace="dynamo-ns"}[180s]))`},
		{name: "literal count", got: countQuery(metricRequestsStarted, "Qwen/Qwen3-0.6B", "dynamo-ns", 180*time.Second),
			want: `sum(increase(dynamo_frontend_requests_started_total{model="qwen/qwen3-0.6b",dynamo_namespace="dynamo-ns"}[180s]))`},
		{name: "label values are escaped", got: countQuery(metricRequestsStarted, `a"b\c`, "ns", time.Minute),
			want: `sum(increase(dynamo_frontend_requests_started_total{model="a\"b\\c",dynamo_namespace="ns"}[60s]))`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.got)
		})
	}
}

func TestNewPrometheusTrafficValidates(t *testing.T) {
	tests := []struct {
		name    string
		opts    PrometheusOptions
		wantErr string
	}{
		{name: "no scheme", opts: PrometheusOptions{URL: "prometheus:9090", Model: "m", Namespace: "ns"}, wantErr: "want http(s)://"},
		{name: "bad scheme", opts: PrometheusOptions{URL: "ftp://p", Model: "m", Namespace: "ns"}, wantErr: "want http(s)://"},
		{name: "unparsable", opts: PrometheusOptions{URL: "http://[::1", Model: "m", Namespace: "ns"}, wantErr: "url"},
		{name: "no model", opts: PrometheusOptions{URL: "http://p:9090", Namespace: "ns"}, wantErr: "model"},
		{name: "no namespace", opts: PrometheusOptions{URL: "http://p:9090", Model: "m"}, wantErr: "namespace"},
		{name: "valid", opts: PrometheusOptions{URL: "https://p:9090/prefix", Model: "m", Namespace: "ns"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPrometheusTraffic(tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, DefaultPrometheusTimeout, p.o.Timeout)
		})
	}
}

// fakePrometheus answers /api/v1/query from a table: query → raw JSON response; unknown queries
// get an empty vector. It records every request.
type fakePrometheus struct {
	mu        sync.Mutex
	responses map[string]string
	queries   []string
	auth      []string
	params    []string
}

func vectorJSON(v string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"` + v + `"]}]}}`
}

const emptyVectorJSON = `{"status":"success","data":{"resultType":"vector","result":[]}}`

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.FormValue("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.params = append(f.params, r.URL.Query().Get("dedup"))
	body, ok := f.responses[q]
	f.mu.Unlock()
	if !ok {
		body = emptyVectorJSON
	}
	if strings.Contains(body, `"status":"error"`) {
		w.WriteHeader(http.StatusBadRequest)
	}
	_, _ = w.Write([]byte(body))
}

func TestPrometheusTrafficSemantics(t *testing.T) {
	const m, ns = "Model-A", "ns"
	w := 60 * time.Second
	started, total := countQuery(metricRequestsStarted, m, ns, w), countQuery(metricRequestsTotal, m, ns, w)
	mean := func(metric string) string { return meanQuery(metric, m, ns, w) }
	tests := []struct {
		name        string
		responses   map[string]string
		wantNumReq  *float64
		wantErr     []string
		check       func(t *testing.T, o *scaling.TrafficObservation)
		wantQueries int
	}{
		{
			name: "busy window: count and means, seconds to milliseconds",
			responses: map[string]string{started: vectorJSON("42"), mean(metricTTFT): vectorJSON("0.25"),
				mean(metricITL): vectorJSON("0.02"), mean(metricRequestDuration): vectorJSON("6.2"),
				mean(metricInputTokens): vectorJSON("3000"), mean(metricOutputTokens): vectorJSON("300"),
				namespaceMeanQuery(metricKVHitRate, ns, w): vectorJSON("0.3")},
			wantNumReq: ptrTo(42.0), wantQueries: 7,
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 0.3, *o.KVHitRate, 1e-9, "the router's hit rate, by namespace only")
				require.InDelta(t, 250, *o.TTFTMs, 1e-9)
				require.InDelta(t, 20, *o.ITLMs, 1e-9)
				require.InDelta(t, 6.2, *o.RequestDurationS, 1e-9)
				require.InDelta(t, 3000, *o.ISL, 1e-9)
				require.InDelta(t, 300, *o.OSL, 1e-9)
			},
		},
		{
			name: "no started series falls back to requests_total; NaN and missing means are nil",
			responses: map[string]string{total: vectorJSON("7"), mean(metricTTFT): vectorJSON("NaN"),
				mean(metricInputTokens): vectorJSON("1000")},
			wantNumReq: ptrTo(7.0), wantQueries: 8,
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.KVHitRate, "no KV router: unknown, not 0")
				require.Nil(t, o.TTFTMs)
				require.Nil(t, o.ITLMs)
				require.Nil(t, o.OSL)
				require.InDelta(t, 1000, *o.ISL, 1e-9)
			},
		},
		{
			name:       "idle window: a real zero, means nil and not even queried",
			responses:  map[string]string{started: vectorJSON("0"), mean(metricInputTokens): vectorJSON("1000")},
			wantNumReq: ptrTo(0.0), wantQueries: 1,
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.ISL)
				require.Nil(t, o.OSL)
				require.Nil(t, o.TTFTMs)
			},
		},
		{
			name:        "no count series at all is unreadable, not zero",
			responses:   map[string]string{mean(metricInputTokens): vectorJSON("1000")},
			wantErr:     []string{"neither", metricRequestsStarted, metricRequestsTotal, `model="model-a"`},
			wantQueries: 2,
		},
		{
			name:        "a NaN count is unreadable",
			responses:   map[string]string{started: vectorJSON("NaN"), total: vectorJSON("NaN")},
			wantErr:     []string{"neither"},
			wantQueries: 2,
		},
		{
			name:        "a query error is wrapped with the query text and does not fall back",
			responses:   map[string]string{started: `{"status":"error","errorType":"bad_data","error":"parse error"}`, total: vectorJSON("3")},
			wantErr:     []string{"request count unreadable", started, "bad_data", "parse error"},
			wantQueries: 1,
		},
		{
			name:        "a matrix result is an error",
			responses:   map[string]string{started: `{"status":"success","data":{"resultType":"matrix","result":[]}}`},
			wantErr:     []string{"want a vector"},
			wantQueries: 1,
		},
		{
			name:        "garbage is an error",
			responses:   map[string]string{started: `<html>`},
			wantErr:     []string{"bad_response"},
			wantQueries: 1,
		},
		// Found by FuzzPrometheusTraffic: a success without data left the client's value nil,
		// and instantQuery panicked on it (in a mean query's goroutine: the whole worker).
		{
			name: "a response without data is an error, in a count or a mean query",
			responses: map[string]string{started: `{"status":"success"}`, total: vectorJSON("3"),
				mean(metricTTFT): `{"status":"success","data":null}`, mean(metricInputTokens): vectorJSON("1000")},
			wantErr:     []string{"request count unreadable", "no data"},
			wantQueries: 1,
		},
		{
			name: "a mean response without data is a nil mean",
			responses: map[string]string{started: vectorJSON("5"), mean(metricTTFT): `{"status":"success"}`,
				mean(metricInputTokens): vectorJSON("1000")},
			wantNumReq: ptrTo(5.0), wantQueries: 7,
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.TTFTMs)
				require.InDelta(t, 1000, *o.ISL, 1e-9)
			},
		},
		// The client decodes a sample without a float value as the value 0: an idle window
		// that was never observed.
		{
			name:        "a native histogram sample is an error, not a count of 0",
			responses:   map[string]string{started: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1700000000,{"count":"3","sum":"6"}]}]}}`},
			wantErr:     []string{"request count unreadable", "histogram, want a float"},
			wantQueries: 1,
		},
		{
			name:        "a sample without a value is an error, not a count of 0",
			responses:   map[string]string{started: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}`, total: vectorJSON("3")},
			wantErr:     []string{"request count unreadable", "value missing", `want [timestamp, "value"]`},
			wantQueries: 1,
		},
		{
			name:        "a value pair without the value is an error, not a count of 0",
			responses:   map[string]string{started: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000]}]}}`},
			wantErr:     []string{"request count unreadable", "value [1700000000]"},
			wantQueries: 1,
		},
		{
			name:        "a null value is an error, not a count of 0",
			responses:   map[string]string{started: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,null]}]}}`},
			wantErr:     []string{"request count unreadable", "value [1700000000,null]"},
			wantQueries: 1,
		},
		{
			name:        "a string result is an error",
			responses:   map[string]string{started: `{"status":"success","data":{"resultType":"string","result":[1700000000,"5"]}}`},
			wantErr:     []string{"request count unreadable", `unexpected value type "string"`},
			wantQueries: 1,
		},
		{
			name:        "a negative count is an error",
			responses:   map[string]string{started: vectorJSON("-3"), total: vectorJSON("3")},
			wantErr:     []string{"request count unreadable", "value -3, want a non-negative increase"},
			wantQueries: 1,
		},
		{
			name: "a negative mean is nil",
			responses: map[string]string{started: vectorJSON("4"), mean(metricITL): vectorJSON("-0.02"),
				mean(metricOutputTokens): vectorJSON("300")},
			wantNumReq: ptrTo(4.0), wantQueries: 7,
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.ITLMs)
				require.InDelta(t, 300, *o.OSL, 1e-9)
			},
		},
		{
			name:       "a count of -0 is 0",
			responses:  map[string]string{started: vectorJSON("-0")},
			wantNumReq: ptrTo(0.0), wantQueries: 1,
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.False(t, math.Signbit(*o.NumReq))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakePrometheus{responses: tc.responses}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			p, err := NewPrometheusTraffic(PrometheusOptions{URL: srv.URL, Model: m, Namespace: ns})
			require.NoError(t, err)
			obs, err := p.Traffic(context.Background(), w)
			require.NotNil(t, obs)
			require.Equal(t, 60.0, obs.DurationS)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				require.Nil(t, obs.NumReq)
			} else {
				require.NoError(t, err)
				require.NotNil(t, obs.NumReq)
				require.Equal(t, *tc.wantNumReq, *obs.NumReq)
			}
			if tc.check != nil {
				tc.check(t, obs)
			}
			require.Len(t, fake.queries, tc.wantQueries, "%q", fake.queries)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestPrometheusTrafficAuthRereadsTokenFile(t *testing.T) {
	fake := &fakePrometheus{responses: map[string]string{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("first\n"), 0o600))

	p, err := NewPrometheusTraffic(PrometheusOptions{URL: srv.URL, Model: "m", Namespace: "ns", BearerToken: "static",
		BearerTokenFile: tokenFile, ExtraQueryParams: map[string]string{"dedup": "true"}})
	require.NoError(t, err)
	_, err = p.Traffic(context.Background(), time.Minute)
	require.ErrorContains(t, err, "neither")
	require.NoError(t, os.WriteFile(tokenFile, []byte("second"), 0o600))
	_, err = p.Traffic(context.Background(), time.Minute)
	require.ErrorContains(t, err, "neither")
	require.Equal(t, []string{"Bearer first", "Bearer first", "Bearer second", "Bearer second"}, fake.auth)
	require.Equal(t, []string{"true", "true", "true", "true"}, fake.params)

	require.NoError(t, os.Remove(tokenFile))
	obs, err := p.Traffic(context.Background(), time.Minute)
	require.ErrorContains(t, err, "bearer token file")
	require.Nil(t, obs.NumReq)

	static, err := NewPrometheusTraffic(PrometheusOptions{URL: srv.URL, Model: "m", Namespace: "ns", BearerToken: "static"})
	require.NoError(t, err)
	_, _ = static.Traffic(context.Background(), time.Minute)
	require.Equal(t, "Bearer static", fake.auth[len(fake.auth)-1])
}

func TestPrometheusTrafficDeadServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	p, err := NewPrometheusTraffic(PrometheusOptions{URL: url, Model: "m", Namespace: "ns", Timeout: 2 * time.Second})
	require.NoError(t, err)
	obs, err := p.Traffic(context.Background(), 30*time.Second)
	require.ErrorContains(t, err, "request count unreadable")
	require.ErrorContains(t, err, countQuery(metricRequestsStarted, "m", "ns", 30*time.Second))
	require.ErrorContains(t, err, "connection refused")
	require.NotNil(t, obs)
	require.Nil(t, obs.NumReq)
	require.Equal(t, 30.0, obs.DurationS)

	_, err = p.Traffic(context.Background(), 500*time.Millisecond)
	require.ErrorContains(t, err, "at least 1s")
}

// TestPrometheusTrafficRealServer runs the real Prometheus against real frontend metrics.
//
// increase() extrapolates, so the test pins the evaluation time to make the expected values
// exact: every series is exposed at 0 before the first request (the frontend creates them
// eagerly) and the 120 s window covers the whole series, so Prometheus's extrapolation toward
// the window start stops at the counter's zero; evaluating at the timestamp of the last
// scrape leaves nothing to extrapolate toward the end. The count is then exactly the number of
// requests. At an unpinned "now", extrapolation only ever adds (at most ~1.1 scrape intervals
// over the sampled span), and the means are unaffected because each _sum and _count come from
// the same scrapes and are scaled by the same factor.
func TestPrometheusTrafficRealServer(t *testing.T) {
	const (
		modelName, ns   = "Qwen/Qwen3-0.6B", "dynamo-test"
		legacyNS        = "legacy"
		requests        = 40
		isl, osl        = 3000, 300
		ttft            = 250 * time.Millisecond
		itl             = 20 * time.Millisecond
		legacySuccesses = 10
		legacyErrors    = 2
	)
	duration := ttft + (osl-1)*itl

	// Frontend A: the simulated frontend's metrics, plus an idle model on the same registry.
	regA := prometheus.NewRegistry()
	fm, err := frontend.NewMetrics(regA, modelName, ns)
	require.NoError(t, err)
	_, err = frontend.NewMetrics(regA, "Idle-Model", ns)
	require.NoError(t, err)
	srvA := httptest.NewServer(promhttp.HandlerFor(regA, promhttp.HandlerOpts{}))
	defer srvA.Close()

	// Frontend B: an older frontend without requests_started_total.
	regB := prometheus.NewRegistry()
	legacy := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricRequestsTotal, Help: "completed",
		ConstLabels: prometheus.Labels{"model": "legacy-model", "dynamo_namespace": legacyNS}}, []string{"status"})
	regB.MustRegister(legacy)
	legacy.WithLabelValues("success")
	legacy.WithLabelValues("error")
	srvB := httptest.NewServer(promhttp.HandlerFor(regB, promhttp.HandlerOpts{}))
	defer srvB.Close()

	prom := promtest.Start(t, srvA.Listener.Addr().String(), srvB.URL+"/metrics")

	startedSel := fmt.Sprintf(`%s{model="qwen/qwen3-0.6b",dynamo_namespace=%q}`, metricRequestsStarted, ns)
	legacySel := fmt.Sprintf(`%s{dynamo_namespace=%q}`, metricRequestsTotal, legacyNS)
	hasValue := func(want float64) func(model.Vector) bool {
		return func(v model.Vector) bool { return len(v) == 1 && float64(v[0].Value) == want }
	}
	// The first scrape (~5 s after start) must see the zeros, so the window holds the start.
	prom.WaitFor(t, startedSel, 30*time.Second, hasValue(0))
	prom.WaitFor(t, "sum("+legacySel+")", 30*time.Second, hasValue(0))

	for range requests {
		fm.RequestStarted()
		fm.RequestFinished(frontend.Completed{ISL: isl, OSL: osl, TTFT: ttft, Duration: duration})
	}
	legacy.WithLabelValues("success").Add(legacySuccesses)
	legacy.WithLabelValues("error").Add(legacyErrors)
	prom.WaitFor(t, startedSel, 30*time.Second, hasValue(requests))
	prom.WaitFor(t, "sum("+legacySel+")", 30*time.Second, hasValue(legacySuccesses+legacyErrors))

	// timestamp() of a plain selector is the sample's time (of an aggregate it would be the
	// evaluation time).
	lastScrape := func(selector string) time.Time {
		v := prom.WaitFor(t, "max(timestamp("+selector+"))", 10*time.Second, func(v model.Vector) bool { return len(v) == 1 })
		return time.UnixMilli(int64(math.Round(float64(v[0].Value) * 1000)))
	}
	atA, atB := lastScrape(startedSel), lastScrape(legacySel)
	window := 120 * time.Second
	ctx := context.Background()
	traffic := func(m, namespace string, at time.Time) (*scaling.TrafficObservation, error) {
		opts := PrometheusOptions{URL: prom.URL, Model: m, Namespace: namespace}
		if !at.IsZero() {
			opts.Now = func() time.Time { return at }
		}
		p, err := NewPrometheusTraffic(opts)
		require.NoError(t, err)
		return p.Traffic(ctx, window)
	}

	t.Run("exact at the last scrape", func(t *testing.T) {
		obs, err := traffic(modelName, ns, atA)
		require.NoError(t, err)
		require.Equal(t, window.Seconds(), obs.DurationS)
		require.NotNil(t, obs.NumReq)
		require.InDelta(t, requests, *obs.NumReq, 1e-9)
		require.InDelta(t, isl, *obs.ISL, 1e-9)
		require.InDelta(t, osl, *obs.OSL, 1e-9)
		require.InDelta(t, 250, *obs.TTFTMs, 1e-6)
		require.InDelta(t, 20, *obs.ITLMs, 1e-6)
		require.InDelta(t, duration.Seconds(), *obs.RequestDurationS, 1e-9)
	})
	t.Run("now: the count extrapolates up, the means stay exact", func(t *testing.T) {
		obs, err := traffic("qwen/QWEN3-0.6b", ns, time.Time{}) // the model compares lower-case
		require.NoError(t, err)
		require.NotNil(t, obs.NumReq)
		require.GreaterOrEqual(t, *obs.NumReq, float64(requests))
		require.LessOrEqual(t, *obs.NumReq, 2.1*requests)
		require.InDelta(t, isl, *obs.ISL, 1e-6)
		require.InDelta(t, 20, *obs.ITLMs, 1e-6)
	})
	t.Run("an idle model with live series reads zero", func(t *testing.T) {
		obs, err := traffic("idle-model", ns, atA)
		require.NoError(t, err)
		require.NotNil(t, obs.NumReq)
		require.Zero(t, *obs.NumReq)
		require.Nil(t, obs.ISL)
		require.Nil(t, obs.TTFTMs)
	})
	t.Run("an unknown model has no series: unreadable, not zero", func(t *testing.T) {
		obs, err := traffic("no-such-model", ns, atA)
		require.ErrorContains(t, err, "neither")
		require.Nil(t, obs.NumReq)
	})
	t.Run("the wrong namespace has no series", func(t *testing.T) {
		obs, err := traffic(modelName, "other-ns", atA)
		require.ErrorContains(t, err, "neither")
		require.Nil(t, obs.NumReq)
	})
	t.Run("requests_total fallback counts successes and errors", func(t *testing.T) {
		obs, err := traffic("legacy-model", legacyNS, atB)
		require.NoError(t, err)
		require.NotNil(t, obs.NumReq)
		require.InDelta(t, legacySuccesses+legacyErrors, *obs.NumReq, 1e-9)
		require.Nil(t, obs.ISL, "the legacy frontend has no histograms")
	})
}
