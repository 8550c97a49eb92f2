package frontend

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// histogramOf returns the sample count and sum of the histogram name in reg.
func histogramOf(t *testing.T, reg *prometheus.Registry, name string) (count uint64, sum float64, labels map[string]string) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		require.Len(t, mf.GetMetric(), 1, name)
		m := mf.GetMetric()[0]
		require.Equal(t, "HISTOGRAM", mf.GetType().String(), name)
		labels = map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), labels
	}
	t.Fatalf("histogram %s is not registered", name)
	return 0, 0, nil
}

func TestMetricsRecordRequests(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		requests []Completed
		// want: started, success, error counts; inflight left; ttft/isl/osl observation counts
		// and sums; ITL observation count and mean; duration count and sum.
		started, success, failed    float64
		inflight                    float64
		tokenCount                  uint64
		ttftSum, islSum, oslSum     float64
		itlCount                    uint64
		itlMean                     float64
		durationCount               uint64
		durationSum                 float64
		stillInflightAfterFinishing int
	}{
		{
			name:     "one request spreads the decode time over OSL-1 tokens",
			requests: []Completed{{ISL: 3000, OSL: 301, TTFT: 200 * ms, Duration: 200*ms + 300*20*ms}},
			started:  1, success: 1,
			tokenCount: 1, ttftSum: 0.2, islSum: 3000, oslSum: 301,
			itlCount: 300, itlMean: 0.020,
			durationCount: 1, durationSum: 6.2,
		},
		{
			name: "the ITL mean is the per-token mean across requests of different lengths",
			requests: []Completed{
				{ISL: 100, OSL: 11, TTFT: 50 * ms, Duration: 50*ms + 10*10*ms}, // 10 gaps of 10 ms
				{ISL: 300, OSL: 31, TTFT: 70 * ms, Duration: 70*ms + 30*30*ms}, // 30 gaps of 30 ms
			},
			started: 2, success: 2,
			tokenCount: 2, ttftSum: 0.12, islSum: 400, oslSum: 42,
			itlCount: 40, itlMean: (10*0.010 + 30*0.030) / 40,
			durationCount: 2, durationSum: 0.15 + 0.97,
		},
		{
			name:     "OSL of 1 has no inter-token latency",
			requests: []Completed{{ISL: 10, OSL: 1, TTFT: 30 * ms, Duration: 30 * ms}},
			started:  1, success: 1,
			tokenCount: 1, ttftSum: 0.03, islSum: 10, oslSum: 1,
			durationCount: 1, durationSum: 0.03,
		},
		{
			name:     "a failed request counts as error and observes only its duration",
			requests: []Completed{{ISL: 10, OSL: 50, Duration: 5 * ms, Err: true}},
			started:  1, failed: 1,
			durationCount: 1, durationSum: 0.005,
		},
		{
			name:     "a decode faster than the first token clamps the ITL at zero",
			requests: []Completed{{ISL: 10, OSL: 3, TTFT: 100 * ms, Duration: 90 * ms}},
			started:  1, success: 1,
			tokenCount: 1, ttftSum: 0.1, islSum: 10, oslSum: 3,
			itlCount: 2, itlMean: 0,
			durationCount: 1, durationSum: 0.09,
		},
		{
			name:                        "unfinished requests stay in flight",
			requests:                    []Completed{{ISL: 10, OSL: 2, TTFT: 10 * ms, Duration: 20 * ms}},
			stillInflightAfterFinishing: 2,
			started:                     3, success: 1, inflight: 2,
			tokenCount: 1, ttftSum: 0.01, islSum: 10, oslSum: 2,
			itlCount: 1, itlMean: 0.01,
			durationCount: 1, durationSum: 0.02,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg, "Qwen/Qwen3-0.6B", "dynamo-ns")
			require.NoError(t, err)
			for range tc.stillInflightAfterFinishing {
				m.RequestStarted()
			}
			for _, r := range tc.requests {
				m.RequestStarted()
				m.RequestFinished(r)
			}
			require.InDelta(t, tc.started, testutil.ToFloat64(m.started), 1e-9)
			require.InDelta(t, tc.success, testutil.ToFloat64(m.success), 1e-9)
			require.InDelta(t, tc.failed, testutil.ToFloat64(m.failed), 1e-9)
			require.InDelta(t, tc.inflight, testutil.ToFloat64(m.inflight), 1e-9)

			for _, name := range []string{MetricTTFT, MetricInputTokens, MetricOutputTokens} {
				n, _, _ := histogramOf(t, reg, name)
				require.Equal(t, tc.tokenCount, n, name)
			}
			_, s, _ := histogramOf(t, reg, MetricTTFT)
			require.InDelta(t, tc.ttftSum, s, 1e-9)
			_, s, _ = histogramOf(t, reg, MetricInputTokens)
			require.InDelta(t, tc.islSum, s, 1e-9)
			_, s, _ = histogramOf(t, reg, MetricOutputTokens)
			require.InDelta(t, tc.oslSum, s, 1e-9)
			n, s, _ := histogramOf(t, reg, MetricITL)
			require.Equal(t, tc.itlCount, n)
			if n > 0 {
				require.InDelta(t, tc.itlMean, s/float64(n), 1e-9)
			}
			n, s, _ = histogramOf(t, reg, MetricRequestDuration)
			require.Equal(t, tc.durationCount, n)
			require.InDelta(t, tc.durationSum, s, 1e-9)
		})
	}
}

func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewMetrics(reg, "Qwen/Qwen3-0.6B", "dynamo-ns")
	require.NoError(t, err)

	// Every series exists before the first request, at 0, with the lower-cased model label
	// and the namespace label; only requests_total has a status label.
	want := `
# HELP dynamo_frontend_inflight_requests Number of inflight requests
# TYPE dynamo_frontend_inflight_requests gauge
dynamo_frontend_inflight_requests{dynamo_namespace="dynamo-ns",model="qwen/qwen3-0.6b"} 0
# HELP dynamo_frontend_requests_started_total Total number of LLM requests started
# TYPE dynamo_frontend_requests_started_total counter
dynamo_frontend_requests_started_total{dynamo_namespace="dynamo-ns",model="qwen/qwen3-0.6b"} 0
# HELP dynamo_frontend_requests_total Total number of LLM requests processed
# TYPE dynamo_frontend_requests_total counter
dynamo_frontend_requests_total{dynamo_namespace="dynamo-ns",model="qwen/qwen3-0.6b",status="error"} 0
dynamo_frontend_requests_total{dynamo_namespace="dynamo-ns",model="qwen/qwen3-0.6b",status="success"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		MetricInflightRequests, MetricRequestsStarted, MetricRequestsTotal))

	for _, name := range []string{MetricTTFT, MetricITL, MetricRequestDuration, MetricInputTokens, MetricOutputTokens} {
		n, s, labels := histogramOf(t, reg, name)
		require.Zero(t, n, name)
		require.Zero(t, s, name)
		require.Equal(t, map[string]string{"model": "qwen/qwen3-0.6b", "dynamo_namespace": "dynamo-ns"}, labels, name)
	}
	lint, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, lint)
}

func TestNewMetricsErrors(t *testing.T) {
	tests := []struct {
		name, model, namespace string
		reg                    func() prometheus.Registerer
		wantErr                string
	}{
		{name: "missing model", namespace: "ns", reg: func() prometheus.Registerer { return prometheus.NewRegistry() }, wantErr: "model"},
		{name: "missing namespace", model: "m", reg: func() prometheus.Registerer { return prometheus.NewRegistry() }, wantErr: "namespace"},
		{name: "registered twice", model: "m", namespace: "ns", reg: func() prometheus.Registerer {
			r := prometheus.NewRegistry()
			_, err := NewMetrics(r, "m", "ns")
			require.NoError(t, err)
			return r
		}, wantErr: "register"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMetrics(tc.reg(), tc.model, tc.namespace)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestLogBucketsMatchDynamo(t *testing.T) {
	tests := []struct {
		name        string
		lo, hi      float64
		count       int
		want        []float64
		wantLen     int
		first, last float64
	}{
		{name: "request duration", lo: 1, hi: 256, count: 10,
			want: []float64{0, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260}},
		{name: "TTFT", lo: 0.001, hi: 480, count: 18, wantLen: 18, first: 0, last: 480},
		{name: "zero buckets", lo: 1, hi: 2, count: 0, wantLen: 0},
		{name: "rounding collapses duplicates", lo: 1, hi: 1.01, count: 5, want: []float64{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := LogBuckets(tc.lo, tc.hi, tc.count)
			if tc.want != nil {
				require.InDeltaSlice(t, tc.want, got, 1e-12)
				return
			}
			require.Len(t, got, tc.wantLen)
			if tc.wantLen > 0 {
				require.Equal(t, tc.first, got[0])
				require.Equal(t, tc.last, got[len(got)-1])
				for i := 1; i < len(got); i++ {
					require.Greater(t, got[i], got[i-1])
				}
			}
		})
	}
}

// TestMetrics_LengthsWhenDynamoObservesThem: the ISL (with the TTFT) is observed at the first
// token and the OSL at completion, as Dynamo's frontend does; a request whose first token was
// observed is not observed twice, and one that fails after its first token keeps its ISL and
// TTFT but observes no OSL.
func TestMetrics_LengthsWhenDynamoObservesThem(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name                   string
		finish                 *Completed // nil: still running
		wantISL, wantOSL       uint64
		wantISLSum, wantOSLSum float64
	}{
		{"first token only: the ISL, no OSL yet", nil, 1, 0, 3000, 0},
		{"then finished: the OSL, the ISL once", &Completed{ISL: 3000, OSL: 40, TTFT: 90 * ms, Duration: 500 * ms, FirstTokenObserved: true}, 1, 1, 3000, 40},
		{"failed after the first token", &Completed{ISL: 3000, OSL: 40, Duration: 200 * ms, Err: true, FirstTokenObserved: true}, 1, 0, 3000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg, "m", "ns")
			require.NoError(t, err)
			m.RequestStarted()
			m.FirstToken(3000, 90*ms)
			if tc.finish != nil {
				m.RequestFinished(*tc.finish)
			}
			n, s, _ := histogramOf(t, reg, MetricInputTokens)
			require.Equal(t, tc.wantISL, n)
			require.InDelta(t, tc.wantISLSum, s, 1e-9)
			n, s, _ = histogramOf(t, reg, MetricOutputTokens)
			require.Equal(t, tc.wantOSL, n)
			require.InDelta(t, tc.wantOSLSum, s, 1e-9)
			n, _, _ = histogramOf(t, reg, MetricTTFT)
			require.Equal(t, uint64(1), n, "the TTFT with the ISL")
		})
	}
}
