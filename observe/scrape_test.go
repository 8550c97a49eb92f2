package observe

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/frontend"
)

// fakeClock is an injectable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// scrapeFixture is a frontend served over HTTP whose registry can be swapped (a restart) or
// replaced by a raw body (a broken or foreign exporter).
type scrapeFixture struct {
	t       *testing.T
	clock   *fakeClock
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	metrics *frontend.Metrics
	src     *ScrapeTraffic
}

const (
	scrapeModel = "Qwen/Qwen3-0.6B"
	scrapeNS    = "dynamo-ns"
)

func newScrapeFixture(t *testing.T, opts ScrapeOptions) *scrapeFixture {
	t.Helper()
	f := &scrapeFixture{t: t, clock: &fakeClock{t: time.Unix(1_700_000_000, 0)}}
	f.restart()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*f.handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	if opts.URL == "" {
		opts.URL = f.srv.URL + "/metrics"
	}
	if opts.Model == "" {
		opts.Model = scrapeModel
	}
	if opts.Namespace == "" {
		opts.Namespace = scrapeNS
	}
	opts.Now = f.clock.Now
	src, err := NewScrapeTraffic(opts)
	require.NoError(t, err)
	f.src = src
	return f
}

// restart replaces the frontend by a fresh one: every counter starts over at 0.
func (f *scrapeFixture) restart() {
	reg := prometheus.NewRegistry()
	m, err := frontend.NewMetrics(reg, scrapeModel, scrapeNS)
	require.NoError(f.t, err)
	f.metrics = m
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	f.handler.Store(&h)
}

// serve replaces the endpoint by a fixed response.
func (f *scrapeFixture) serve(status int, body string) {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
	f.handler.Store(&h)
}

// requests records n successful requests with the given lengths (TTFT 100 ms, ITL 10 ms).
func (f *scrapeFixture) requests(n, isl, osl int) {
	for range n {
		f.metrics.RequestStarted()
		f.metrics.RequestFinished(frontend.Completed{ISL: isl, OSL: osl, TTFT: 100 * time.Millisecond,
			Duration: 100*time.Millisecond + time.Duration(osl-1)*10*time.Millisecond})
	}
}

// scrape advances the clock by d, then scrapes and requires success.
func (f *scrapeFixture) scrape(d time.Duration) {
	f.clock.Advance(d)
	require.NoError(f.t, f.src.ScrapeOnce(context.Background()))
}

func TestScrapeTraffic(t *testing.T) {
	const w = 60 * time.Second
	tests := []struct {
		name   string
		opts   ScrapeOptions
		window time.Duration
		// steps drive the fixture and end at the time of the Traffic call.
		steps      func(f *scrapeFixture)
		wantNumReq *float64
		wantErr    []string
		check      func(t *testing.T, o *scaling.TrafficObservation)
	}{
		{
			name: "steady traffic over a fully covered window",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(10, 3000, 301)
				f.scrape(30 * time.Second)
				f.requests(10, 1000, 101)
				f.scrape(30 * time.Second)
			},
			wantNumReq: ptrTo(20.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 2000, *o.ISL, 1e-9)
				require.InDelta(t, 201, *o.OSL, 1e-9)
				require.InDelta(t, 100, *o.TTFTMs, 1e-9)
				require.InDelta(t, 10, *o.ITLMs, 1e-9)
				require.InDelta(t, (10*3.1+10*1.1)/20, *o.RequestDurationS, 1e-9)
			},
		},
		{
			name: "the KV router's hit rate: the window's mean, unknown without a KV router",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(2, 3000, 2)
				f.metrics.ObserveKVHitRate(0.9) // before the window: excluded
				f.scrape(30 * time.Second)
				f.scrape(30 * time.Second)
				f.requests(4, 3000, 2)
				for _, r := range []float64{0, 0.5, 0.75, 1} {
					f.metrics.ObserveKVHitRate(r)
				}
				f.scrape(30 * time.Second)
			},
			wantNumReq: ptrTo(4.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 0.5625, *o.KVHitRate, 1e-9)
			},
		},
		{
			name: "no KV router: the hit rate is unknown, not 0",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(4, 3000, 2)
				f.scrape(60 * time.Second)
			},
			wantNumReq: ptrTo(4.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.KVHitRate)
			},
		},
		{
			name: "the base is the snapshot closest to now-window",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(100, 50, 2) // before the window: excluded
				for range 6 {
					f.scrape(10 * time.Second)
					f.requests(5, 500, 11)
				}
				f.scrape(10 * time.Second) // t0+70 s: the window starts at t0+10 s
			},
			wantNumReq: ptrTo(30.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 500, *o.ISL, 1e-9)
				require.InDelta(t, 11, *o.OSL, 1e-9)
			},
		},
		{
			name: "partial coverage scales the count up like increase()",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(8, 100, 10)
				f.scrape(40 * time.Second)
			},
			wantNumReq: ptrTo(12.0), // 8 in 40 s, over 60 s
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 100, *o.ISL, 1e-9, "means are not scaled")
			},
		},
		{
			name: "a counter reset counts the new value, as Prometheus does",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(10, 1000, 10)
				f.scrape(20 * time.Second)
				f.restart()
				f.requests(4, 2000, 10)
				f.scrape(20 * time.Second)
				f.requests(3, 2000, 10)
				f.scrape(20 * time.Second)
			},
			wantNumReq: ptrTo(17.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, (10*1000+7*2000)/17.0, *o.ISL, 1e-9)
			},
		},
		{
			name: "an idle window is a real zero with nil means",
			steps: func(f *scrapeFixture) {
				f.requests(5, 100, 10) // before the first scrape: not in any delta
				f.scrape(0)
				f.scrape(30 * time.Second)
				f.scrape(30 * time.Second)
			},
			wantNumReq: ptrTo(0.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.ISL)
				require.Nil(t, o.OSL)
				require.Nil(t, o.TTFTMs)
				require.Nil(t, o.ITLMs)
				require.Nil(t, o.RequestDurationS)
			},
		},
		{
			name:    "no scrape yet",
			steps:   func(*scrapeFixture) {},
			wantErr: []string{"request count unreadable", "no successful scrape"},
		},
		{
			name: "a single snapshot covers nothing",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
			},
			wantErr: []string{"covers 0s of the 1m0s window"},
		},
		{
			name: "history shorter than half the window",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(3, 100, 10)
				f.scrape(2 * time.Second)
				f.scrape(27 * time.Second)
			},
			wantErr: []string{"covers 29s of the 1m0s window, less than half"},
		},
		{
			name: "the last successful scrape is older than 3 intervals",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(3, 100, 10)
				f.scrape(60 * time.Second)
				f.clock.Advance(6*time.Second + time.Millisecond)
			},
			wantErr: []string{"stale", "6.001s old", "3 intervals of 2s"},
		},
		{
			name: "staleness reports the scrape error behind it",
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.scrape(60 * time.Second)
				f.serve(http.StatusInternalServerError, "boom")
				f.clock.Advance(8 * time.Second)
				require.ErrorContains(f.t, f.src.ScrapeOnce(context.Background()), "HTTP 500")
			},
			wantErr: []string{"stale", "last scrape error", "HTTP 500", "boom"},
		},
		{
			name: "an unknown model has no series: unreadable, not zero",
			opts: ScrapeOptions{Model: "other-model"},
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(3, 100, 10)
				f.scrape(60 * time.Second)
			},
			wantErr: []string{"exposes neither", `model="other-model"`, `series seen: model="qwen/qwen3-0.6b" dynamo_namespace="dynamo-ns"`},
		},
		{
			name: "the model compares lower-case",
			opts: ScrapeOptions{Model: "QWEN/qwen3-0.6b"},
			steps: func(f *scrapeFixture) {
				f.scrape(0)
				f.requests(3, 100, 10)
				f.scrape(60 * time.Second)
			},
			wantNumReq: ptrTo(3.0),
		},
		{
			name: "malformed exposition fails the scrape and leaves no data",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, "dynamo_frontend_requests_started_total{model=\"m\" 3\n")
				f.clock.Advance(time.Second)
				require.ErrorContains(f.t, f.src.ScrapeOnce(context.Background()), "parse the text exposition")
			},
			wantErr: []string{"no successful scrape", "last scrape error", "parse the text exposition"},
		},
		// Found by FuzzScrapeSequence and FuzzScrapeTraffic: these values were summed into the
		// count as they were (a NaN or negative count, a negative mean).
		{
			name: "a NaN request counter fails the scrape: unreadable, not NaN",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, string(exposition("10", "", "")))
				f.scrape(0)
				f.serve(http.StatusOK, string(exposition("NaN", "", "")))
				f.clock.Advance(60 * time.Second)
				require.ErrorContains(f.t, f.src.ScrapeOnce(context.Background()), "is NaN, not a count")
			},
			wantErr: []string{"stale", "last scrape error", "dynamo_frontend_requests_started_total{", "is NaN, not a count"},
		},
		{
			name: "a negative or infinite request counter fails the scrape; the window is read from the others",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, string(exposition("10", "", "")))
				f.scrape(0)
				f.serve(http.StatusOK, string(exposition("-5", "", "")))
				f.clock.Advance(20 * time.Second)
				require.ErrorContains(f.t, f.src.ScrapeOnce(context.Background()), "is -5, not a count")
				f.serve(http.StatusOK, string(exposition("+Inf", "", "")))
				f.clock.Advance(20 * time.Second)
				require.ErrorContains(f.t, f.src.ScrapeOnce(context.Background()), "is +Inf, not a count")
				f.serve(http.StatusOK, string(exposition("16", "", "")))
				f.scrape(20 * time.Second)
			},
			wantNumReq: ptrTo(6.0),
		},
		{
			name: "series summing past the largest float fail the scrape",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, "dynamo_frontend_requests_total{model=\"qwen/qwen3-0.6b\",dynamo_namespace=\"dynamo-ns\",status=\"success\"} 1.7e308\n"+
					"dynamo_frontend_requests_total{model=\"qwen/qwen3-0.6b\",dynamo_namespace=\"dynamo-ns\",status=\"error\"} 1.7e308\n")
				f.clock.Advance(time.Second)
				require.ErrorContains(f.t, f.src.ScrapeOnce(context.Background()), "sums to +Inf, not a count")
			},
			wantErr: []string{"no successful scrape", "sums to +Inf"},
		},
		{
			name: "an increase past the largest float is unreadable, not infinite",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, string(exposition("0", "", "")))
				f.scrape(0)
				f.serve(http.StatusOK, string(exposition("1.7e308", "", "")))
				f.scrape(30 * time.Second) // half the window: the increase scales up twice
			},
			wantErr: []string{"request count unreadable", "overflows"},
		},
		{
			name: "a histogram with a NaN or negative sum is a gap in its mean, not in the count",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, string(exposition("10", "1000", "10")))
				f.scrape(0)
				f.serve(http.StatusOK, string(exposition("15", "NaN", "15")))
				f.scrape(20 * time.Second)
				f.serve(http.StatusOK, string(exposition("18", "-1", "18")))
				f.scrape(20 * time.Second)
				f.serve(http.StatusOK, string(exposition("20", "2000", "20")))
				f.scrape(20 * time.Second)
			},
			wantNumReq: ptrTo(10.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 100, *o.ISL, 1e-9)
			},
		},
		{
			name: "a fractional histogram count is read, not taken for 0",
			steps: func(f *scrapeFixture) {
				f.serve(http.StatusOK, string(exposition("10", "1000", "10")))
				f.scrape(0)
				f.serve(http.StatusOK, string(exposition("20", "2000", "12.5")))
				f.scrape(60 * time.Second)
			},
			wantNumReq: ptrTo(10.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.InDelta(t, 1000/2.5, *o.ISL, 1e-9)
			},
		},
		{
			name: "requests_total is the fallback, summed over status; untyped histograms are ignored",
			opts: ScrapeOptions{Model: "legacy", Namespace: "old"},
			steps: func(f *scrapeFixture) {
				body := func(ok, failed int) string {
					return "# TYPE dynamo_frontend_requests_total counter\n" +
						"dynamo_frontend_requests_total{model=\"legacy\",dynamo_namespace=\"old\",status=\"success\"} " + strconv.Itoa(ok) + "\n" +
						"dynamo_frontend_requests_total{model=\"legacy\",dynamo_namespace=\"old\",status=\"error\"} " + strconv.Itoa(failed) + "\n" +
						"dynamo_frontend_input_sequence_tokens_sum{model=\"legacy\",dynamo_namespace=\"old\"} 5\n"
				}
				f.serve(http.StatusOK, body(100, 1))
				f.scrape(0)
				f.serve(http.StatusOK, body(130, 3))
				f.scrape(60 * time.Second)
			},
			wantNumReq: ptrTo(32.0),
			check: func(t *testing.T, o *scaling.TrafficObservation) {
				require.Nil(t, o.ISL)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newScrapeFixture(t, tc.opts)
			tc.steps(f)
			window := tc.window
			if window == 0 {
				window = w
			}
			obs, err := f.src.Traffic(context.Background(), window)
			require.NotNil(t, obs)
			require.Equal(t, window.Seconds(), obs.DurationS)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				require.Nil(t, obs.NumReq, "an unreadable count is nil, never 0")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, obs.NumReq)
			require.InDelta(t, *tc.wantNumReq, *obs.NumReq, 1e-9)
			if tc.check != nil {
				tc.check(t, obs)
			}
		})
	}
}

// serveChunked replaces the endpoint by body sent in two flushed parts: chunked, without a
// Content-Length, so only reading the body tells its size.
func (f *scrapeFixture) serveChunked(body []byte) {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		_, _ = w.Write(body[len(body)/2:])
	})
	f.handler.Store(&h)
}

// padTo puts a comment line before body so that it is n bytes long.
func padTo(t *testing.T, body []byte, n int) []byte {
	t.Helper()
	pad := n - len(body) - len("#\n")
	require.GreaterOrEqual(t, pad, 0, "body of %d bytes longer than %d", len(body), n)
	return []byte("#" + strings.Repeat(" ", pad) + "\n" + string(body))
}

// A /metrics body larger than the limit fails its scrape (a gap in the history) instead of
// being read as far as the limit: a body cut after a line loses the series behind the cut,
// one cut inside a number reads a smaller value, taken for a counter reset.
func TestScrapeTrafficBodyOverTheLimit(t *testing.T) {
	// Each over-limit body ends with the matching request counter at 10010 and is limit+3
	// bytes long: read as far as the limit, it ends "} 100" (a reset from 10000 to 100).
	over := padTo(t, exposition("10010", "", ""), 300)
	const limit = 300 - len("10\n")
	require.True(t, strings.HasSuffix(string(over[:limit]), "} 100"), "the cut falls inside the counter's value")
	// Cut after a line: the matching series is the whole last line, past the limit.
	other := "# TYPE " + metricRequestsStarted + " counter\n" +
		metricRequestsStarted + `{dynamo_namespace="other",model="qwen/qwen3-0.6b"} 7` + "\n"
	counterLine := exposition("10010", "", "")[len("# TYPE "+metricRequestsStarted+" counter\n"):]
	lineCut := padTo(t, []byte(other), limit)
	lineCut = append(lineCut, counterLine...)

	old := maxExpositionBytes
	maxExpositionBytes = int64(limit)
	t.Cleanup(func() { maxExpositionBytes = old })

	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"cut inside a number", over},
		{"cut after a line", lineCut},
	} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, chunked %t", tc.name, chunked), func(t *testing.T) {
				f := newScrapeFixture(t, ScrapeOptions{})
				serve := func(body []byte) {
					if chunked {
						f.serveChunked(body)
					} else {
						f.serve(http.StatusOK, string(body))
					}
				}
				serve(padTo(t, exposition("10000", "", ""), limit)) // exactly the limit: read
				f.scrape(0)
				serve(tc.body)
				f.clock.Advance(20 * time.Second)
				err := f.src.ScrapeOnce(context.Background())
				require.ErrorIs(t, err, errExpositionTooLarge)
				require.ErrorContains(t, err, f.srv.URL+"/metrics")
				require.ErrorContains(t, err, fmt.Sprintf("%d-byte limit", limit))
				if !chunked {
					require.ErrorContains(t, err, fmt.Sprintf("%d bytes (Content-Length)", len(tc.body)), "refused before reading")
				}
				require.Equal(t, 1, f.src.snapshots(), "the over-limit body left no snapshot")
				serve(exposition("10020", "", ""))
				f.scrape(40 * time.Second)

				obs, err := f.src.Traffic(context.Background(), 60*time.Second)
				require.NoError(t, err)
				require.NotNil(t, obs.NumReq)
				require.InDelta(t, 20, *obs.NumReq, 1e-9, "the cut scrape is a gap: neither a reset nor a lost series")
			})
		}
	}
}

func TestScrapeTrafficHistoryIsBounded(t *testing.T) {
	f := newScrapeFixture(t, ScrapeOptions{History: 3})
	for range 5 {
		f.scrape(10 * time.Second)
	}
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	require.Len(t, f.src.snaps, 3)
	require.Equal(t, f.clock.Now().Add(-20*time.Second), f.src.snaps[0].at)
}

func TestScrapeTrafficRunLoop(t *testing.T) {
	f := newScrapeFixture(t, ScrapeOptions{Interval: 20 * time.Millisecond})
	f.src.o.Now = time.Now // the loop runs on the real clock
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()

	count := func() int {
		f.src.mu.Lock()
		defer f.src.mu.Unlock()
		return len(f.src.snaps)
	}
	require.Eventually(t, func() bool { return count() >= 3 }, 5*time.Second, 5*time.Millisecond)
	f.requests(4, 100, 10)
	n := count()
	require.Eventually(t, func() bool { return count() > n }, 5*time.Second, 5*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	f.src.mu.Lock()
	last := f.src.snaps[len(f.src.snaps)-1]
	f.src.mu.Unlock()
	require.True(t, last.started.present)
	require.Equal(t, 4.0, last.started.v)
}

func TestNewScrapeTrafficValidates(t *testing.T) {
	tests := []struct {
		name    string
		opts    ScrapeOptions
		wantErr string
	}{
		{name: "no scheme", opts: ScrapeOptions{URL: "frontend:8000/metrics", Model: "m", Namespace: "ns"}, wantErr: "want http(s)://"},
		{name: "no model", opts: ScrapeOptions{URL: "http://f/metrics", Namespace: "ns"}, wantErr: "model"},
		{name: "no namespace", opts: ScrapeOptions{URL: "http://f/metrics", Model: "m"}, wantErr: "namespace"},
		{name: "history of one", opts: ScrapeOptions{URL: "http://f/metrics", Model: "m", Namespace: "ns", History: 1}, wantErr: "at least 2"},
		{name: "defaults", opts: ScrapeOptions{URL: "http://f/metrics", Model: "m", Namespace: "ns"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewScrapeTraffic(tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, DefaultScrapeInterval, s.o.Interval)
			require.Equal(t, DefaultScrapeHistory, s.o.History)
			require.Equal(t, DefaultScrapeInterval, s.o.Timeout)
		})
	}
}

func TestScrapeTrafficIncreaseRules(t *testing.T) {
	v := func(x float64) scrapeValue { return scrapeValue{present: true, v: x} }
	absent := scrapeValue{}
	tests := []struct {
		name   string
		values []scrapeValue
		want   float64
	}{
		{name: "monotonic", values: []scrapeValue{v(1), v(4), v(10)}, want: 9},
		{name: "reset counts the new value", values: []scrapeValue{v(10), v(15), v(3), v(5)}, want: 5 + 3 + 2},
		{name: "series appearing mid-window counts from zero", values: []scrapeValue{absent, v(4), v(6)}, want: 6},
		{name: "series vanishing then returning lower: a reset", values: []scrapeValue{v(5), absent, v(2)}, want: 2},
		{name: "a missed scrape is a gap, not a reset", values: []scrapeValue{v(10000), v(10010), absent, v(10020)}, want: 20},
		{name: "missing at the end", values: []scrapeValue{v(10), v(12), absent}, want: 2},
		{name: "single value", values: []scrapeValue{v(7)}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, counterIncrease(tc.values))
		})
	}

	sum, count := histogramIncrease([]scrapeHist{{true, 100, 2}, {true, 250, 5}, {true, 40, 1}, {true, 90, 2}})
	require.Equal(t, 150.0+40+50, sum)
	require.Equal(t, 3.0+1+1, count)
	sum, count = histogramIncrease([]scrapeHist{{true, 1000, 20}, {}, {true, 1030, 21}})
	require.Equal(t, 30.0, sum, "a missed scrape of a histogram is a gap, not a reset")
	require.Equal(t, 1.0, count)
	sum, count = histogramIncrease([]scrapeHist{{}, {true, 30, 1}, {true, 50, 2}})
	require.Equal(t, 50.0, sum, "a histogram appearing in the window counts from empty")
	require.Equal(t, 2.0, count)
}
