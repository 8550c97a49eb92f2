package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"

	"github.com/llmplanner/planner/internal/tracing"
	"github.com/llmplanner/planner/scaling"
)

// DefaultPrometheusTimeout bounds one Prometheus query (Dynamo's request_timeout_seconds).
const DefaultPrometheusTimeout = 10 * time.Second

// PrometheusOptions configure PrometheusTraffic.
type PrometheusOptions struct {
	// URL is the Prometheus server's base URL (http or https), e.g. http://prometheus:9090.
	URL string
	// Model is the served model; it is compared lower-case (Dynamo's frontend lower-cases its
	// model label).
	Model string
	// Namespace is the Dynamo namespace (the dynamo_namespace label), compared as is.
	Namespace string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// BearerTokenFile, when set, is read before every query (rotating Kubernetes service
	// account tokens) and takes precedence over BearerToken.
	BearerTokenFile string
	// ExtraQueryParams are added to every query request's URL (e.g. Thanos' dedup=true).
	ExtraQueryParams map[string]string
	// Timeout bounds each query (default DefaultPrometheusTimeout).
	Timeout time.Duration
	// Transport is the base HTTP transport, for a custom CA bundle or TLS settings (default
	// api.DefaultRoundTripper).
	Transport http.RoundTripper
	// Now is the evaluation time of the queries (default time.Now); tests and replays pin it.
	Now func() time.Time
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
}

// PrometheusTraffic reads the frontend traffic from Prometheus with Dynamo's frontend queries
// (§9.1). It is safe for concurrent use.
type PrometheusTraffic struct {
	o              PrometheusOptions
	client         api.Client
	warnedFallback atomic.Bool
}

var _ TrafficSource = (*PrometheusTraffic)(nil)

// NewPrometheusTraffic validates opts and builds the client; it does not contact the server.
func NewPrometheusTraffic(opts PrometheusOptions) (*PrometheusTraffic, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("prometheus traffic: url %q: %w", opts.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus traffic: url %q: want http(s)://host[:port]", opts.URL)
	}
	if opts.Model == "" || opts.Namespace == "" {
		return nil, fmt.Errorf("prometheus traffic: model (%q) and namespace (%q) are required", opts.Model, opts.Namespace)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultPrometheusTimeout
	}
	if opts.Transport == nil {
		opts.Transport = api.DefaultRoundTripper
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// The HTTP span wraps the credentials transport: it records the URL without the extra
	// query parameters (API keys travel there) and never sees the token.
	rt := tracing.Transport("prometheus", &authTransport{base: opts.Transport, token: opts.BearerToken, tokenFile: opts.BearerTokenFile, params: opts.ExtraQueryParams})
	client, err := api.NewClient(api.Config{Address: opts.URL, Client: &http.Client{Transport: rt, Timeout: opts.Timeout}})
	if err != nil {
		return nil, fmt.Errorf("prometheus traffic: client for %s: %w", opts.URL, err)
	}
	return &PrometheusTraffic{o: opts, client: client}, nil
}

// Traffic reads the window's request count and, unless it is unreadable or zero, the six
// histogram means (see TrafficSource). The window is truncated to whole seconds, as in
// Dynamo's "{int(seconds)}s"; DurationS is the truncated window.
//
// The count is sum(increase(dynamo_frontend_requests_started_total{…}[W])), falling back to
// dynamo_frontend_requests_total (completed requests, which under-counts a queueing
// deployment) when the former has no series. Both missing (e.g. a wrong model or namespace,
// or Prometheus not scraping the frontend) is an error with NumReq nil: an absent series is
// not evidence of zero demand.
func (p *PrometheusTraffic) Traffic(ctx context.Context, window time.Duration) (*scaling.TrafficObservation, error) {
	if err := validWindow(window); err != nil {
		return &scaling.TrafficObservation{DurationS: window.Seconds()}, fmt.Errorf("prometheus traffic: %w", err)
	}
	window = window.Truncate(time.Second)
	obs := &scaling.TrafficObservation{DurationS: window.Seconds()}
	at := p.o.Now()

	n, err := p.count(ctx, window, at)
	if err != nil {
		return obs, err
	}
	obs.NumReq = &n
	if n == 0 {
		return obs, nil
	}

	var wg sync.WaitGroup
	for _, m := range trafficMeans {
		wg.Go(func() {
			q := meanQuery(m.metric, p.o.Model, p.o.Namespace, window)
			if m.anyModel {
				q = namespaceMeanQuery(m.metric, p.o.Namespace, window)
			}
			v, ok, err := p.scalar(ctx, q, at)
			switch {
			case err != nil:
				p.o.Logger.Warn("prometheus traffic: mean unreadable", "metric", m.metric, "err", err)
			case !ok:
				p.o.Logger.Debug("prometheus traffic: no data for mean", "metric", m.metric, "query", q)
			default:
				if f := finite(v * m.scale); f != nil {
					*m.field(obs) = f
				}
			}
		})
	}
	wg.Wait()
	return obs, nil
}

// count reads the request count: requests_started_total, else requests_total.
func (p *PrometheusTraffic) count(ctx context.Context, window time.Duration, at time.Time) (float64, error) {
	for i, counter := range []string{metricRequestsStarted, metricRequestsTotal} {
		q := countQuery(counter, p.o.Model, p.o.Namespace, window)
		v, ok, err := p.scalar(ctx, q, at)
		if err != nil {
			return 0, fmt.Errorf("prometheus traffic: request count unreadable: %w", err)
		}
		if ok {
			if i > 0 && !p.warnedFallback.Swap(true) {
				p.o.Logger.Warn("prometheus traffic: no "+metricRequestsStarted+" series; counting completed requests from "+
					metricRequestsTotal+", which under-counts demand while requests queue", "model", p.o.Model, "namespace", p.o.Namespace)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("prometheus traffic: request count unreadable: neither %s nor %s has a series with model=%q dynamo_namespace=%q in %s at %s "+
		"(is Prometheus scraping the frontend, are the model and namespace right, has the window at least two samples?)",
		metricRequestsStarted, metricRequestsTotal, strings.ToLower(p.o.Model), p.o.Namespace, p.o.URL, windowString(window))
}

// scalar evaluates q at at and returns its single value; ok is false when the result has no
// series or its value is NaN or infinite. A negative value is an error: the queries are
// increases of counters and ratios of them, never negative.
func (p *PrometheusTraffic) scalar(ctx context.Context, q string, at time.Time) (v float64, ok bool, err error) {
	ctx, span := tracing.Start(ctx, "prometheus query", attribute.String("db.system.name", "prometheus"), attribute.String("db.query.text", q))
	defer func() { tracing.End(span, err) }()
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	vec, warnings, err := instantQuery(ctx, p.client, q, at, p.o.Timeout)
	if err != nil {
		return 0, false, fmt.Errorf("query `%s` on %s: %w", q, p.o.URL, err)
	}
	if len(warnings) > 0 {
		p.o.Logger.Warn("prometheus traffic: query warnings", "query", q, "warnings", warnings)
	}
	switch len(vec) {
	case 0:
		return 0, false, nil
	case 1:
		f := finite(float64(vec[0].Value))
		switch {
		case f == nil:
			return 0, false, nil
		case *f < 0:
			return 0, false, fmt.Errorf("query `%s` on %s: value %v, want a non-negative increase", q, p.o.URL, *f)
		}
		return *f + 0, true, nil // + 0 turns a -0 into 0
	default:
		return 0, false, fmt.Errorf("query `%s` on %s: %d series, want at most 1: %v", q, p.o.URL, len(vec), vec)
	}
}

// selector is the frontend label matcher: the model lower-cased, the namespace as is.
func selector(model, namespace string) string {
	return fmt.Sprintf(`{model="%s",dynamo_namespace="%s"}`, escapeLabelValue(strings.ToLower(model)), escapeLabelValue(namespace))
}

// escapeLabelValue escapes a PromQL double-quoted string.
func escapeLabelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// meanQuery is §9.1's histogram mean over the window:
//
//	sum by (model, dynamo_namespace) (increase(X_sum{…}[W])) /
//	sum by (model, dynamo_namespace) (increase(X_count{…}[W]))
func meanQuery(metric, model, namespace string, window time.Duration) string {
	sel, w := selector(model, namespace), windowString(window)
	return fmt.Sprintf("sum by (model, dynamo_namespace) (increase(%s_sum%s[%s])) / sum by (model, dynamo_namespace) (increase(%s_count%s[%s]))",
		metric, sel, w, metric, sel, w)
}

// namespaceMeanQuery is §9.1's KV hit rate: the router histogram's mean over the window,
// selected by namespace only.
func namespaceMeanQuery(metric, namespace string, window time.Duration) string {
	sel, w := fmt.Sprintf(`{dynamo_namespace="%s"}`, escapeLabelValue(namespace)), windowString(window)
	return fmt.Sprintf("sum(increase(%s_sum%s[%s])) / sum(increase(%s_count%s[%s]))", metric, sel, w, metric, sel, w)
}

// countQuery is §9.1's request count over the window: sum(increase(C{…}[W])).
func countQuery(counter, model, namespace string, window time.Duration) string {
	return fmt.Sprintf("sum(increase(%s%s[%s]))", counter, selector(model, namespace), windowString(window))
}

// authTransport adds the bearer token (re-reading the token file on every request) and the
// extra query parameters.
type authTransport struct {
	base      http.RoundTripper
	token     string
	tokenFile string
	params    map[string]string
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	token := t.token
	if t.tokenFile != "" {
		b, err := os.ReadFile(t.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("read bearer token file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, errors.New("bearer token file " + t.tokenFile + " is empty")
		}
	}
	if token == "" && len(t.params) == 0 {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if len(t.params) > 0 {
		q := r.URL.Query()
		for k, v := range t.params {
			q.Set(k, v)
		}
		r.URL.RawQuery = q.Encode()
	}
	return t.base.RoundTrip(r)
}

// instantQuery evaluates q at at through client_golang's Prometheus API client and returns
// its vector result.
//
// The client handles the exchange: the request, the HTTP status, the error envelope, the
// warnings. The values are then read from the response body by decodeVector, which is
// stricter than the client's decoding: that reads a response without data as no value at all
// (a nil result), and a sample without a float value (a native histogram, a missing or short
// "value" pair) as the value 0, an idle window that was never observed.
func instantQuery(ctx context.Context, c api.Client, q string, at time.Time, timeout time.Duration) (model.Vector, []string, error) {
	body := &bodyClient{Client: c}
	_, warnings, _, err := promv1.NewAPI(body).Query(ctx, q, at, promv1.WithTimeout(timeout))
	if err != nil {
		return nil, warnings, err
	}
	vec, err := decodeVector(body.body)
	return vec, warnings, err
}

// bodyClient keeps the body of the last response it received (the API client may retry a
// POST as a GET; the last body is the one it decoded).
type bodyClient struct {
	api.Client
	body []byte
}

// Do implements api.Client.
func (c *bodyClient) Do(ctx context.Context, r *http.Request) (*http.Response, []byte, error) {
	resp, body, err := c.Client.Do(ctx, r)
	c.body = body
	return resp, body, err
}

// decodeVector reads a successful query response's vector result: each sample must have its
// float value as a [timestamp, "value"] pair. A response without data or of another result
// type is an error.
func decodeVector(body []byte) (model.Vector, error) {
	var resp struct {
		Data *struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode the response: %w", err)
	}
	if resp.Data == nil {
		return nil, errors.New("the response has no data")
	}
	if resp.Data.ResultType != model.ValVector.String() {
		return nil, fmt.Errorf("got a %q result, want a vector", resp.Data.ResultType)
	}
	var samples []struct {
		Metric    map[string]string `json:"metric"`
		Value     []json.RawMessage `json:"value"`
		Histogram json.RawMessage   `json:"histogram"`
	}
	if err := json.Unmarshal(resp.Data.Result, &samples); err != nil {
		return nil, fmt.Errorf("decode the vector: %w", err)
	}
	vec := make(model.Vector, 0, len(samples))
	for i, s := range samples {
		if len(s.Histogram) > 0 && string(s.Histogram) != "null" {
			return nil, fmt.Errorf("sample %d is a histogram, want a float", i)
		}
		var ts json.Number
		var v string
		if len(s.Value) != 2 || json.Unmarshal(s.Value[0], &ts) != nil || ts == "" ||
			!bytes.HasPrefix(s.Value[1], []byte(`"`)) || json.Unmarshal(s.Value[1], &v) != nil {
			return nil, fmt.Errorf("sample %d: value %s, want [timestamp, \"value\"]", i, compactJSON(s.Value))
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("sample %d: value %q: %w", i, v, err)
		}
		metric := make(model.Metric, len(s.Metric))
		for k, lv := range s.Metric {
			metric[model.LabelName(k)] = model.LabelValue(lv)
		}
		vec = append(vec, &model.Sample{Metric: metric, Value: model.SampleValue(f)})
	}
	return vec, nil
}

// compactJSON renders a sample's value array for an error message, at most 100 bytes of it.
func compactJSON(parts []json.RawMessage) string {
	if parts == nil {
		return "missing"
	}
	b, _ := json.Marshal(parts)
	if len(b) > 100 {
		return string(b[:100]) + "…"
	}
	return string(b)
}
