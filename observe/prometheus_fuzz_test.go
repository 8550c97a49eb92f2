package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/llmplanner/planner/scaling"
)

// Prometheus responses used as fuzz seeds and in the regression tests.
const (
	promVector42   = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.123,"42"]}]}}`
	promVectorMean = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"dynamo_namespace":"ns","model":"model-a"},"value":[1700000000.123,"0.25"]}]}}`
	promVectorZero = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0"]}]}}`
	promEmpty      = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	promError      = `{"status":"error","errorType":"bad_data","error":"1:1: parse error: unexpected end of input"}`
)

// promBodies is an in-memory Prometheus: the two count queries and the mean queries each get
// a fixed body, all with the same HTTP status.
type promBodies struct {
	started, total          string // the count queries' texts; any other query is a mean's
	bStarted, bTotal, bMean []byte
	status                  int
}

// RoundTrip implements http.RoundTripper (the client POSTs the query as a form, and falls
// back to GET on some statuses).
func (p *promBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		if form, err := url.ParseQuery(string(b)); err == nil && form.Has("query") {
			q = form
		}
	}
	body := p.bMean
	switch q.Get("query") {
	case p.started:
		body = p.bStarted
	case p.total:
		body = p.bTotal
	}
	return &http.Response{StatusCode: p.status, Status: strconv.Itoa(p.status) + " " + http.StatusText(p.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

// promFuzzStatuses are the HTTP statuses the fuzzer picks from: success, the API's error
// statuses, a no-content success and generic failures.
var promFuzzStatuses = []int{http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity,
	http.StatusServiceUnavailable, http.StatusNoContent, http.StatusInternalServerError}

// promTraffic runs one Traffic call against the fixed bodies.
func promTraffic(t *testing.T, started, total, mean []byte, status int) (*scaling.TrafficObservation, error) {
	t.Helper()
	const m, ns, w = "Model-A", "ns", time.Minute
	rt := &promBodies{started: countQuery(metricRequestsStarted, m, ns, w), total: countQuery(metricRequestsTotal, m, ns, w),
		bStarted: started, bTotal: total, bMean: mean, status: status}
	p, err := NewPrometheusTraffic(PrometheusOptions{URL: "http://prometheus.invalid:9090", Model: m, Namespace: ns,
		Transport: rt, Now: func() time.Time { return time.Unix(1_700_000_000, 123_000_000) },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p.Traffic(context.Background(), w)
}

// promOracle decodes a response independently of the client: the status, the result type and,
// for a vector of one float sample with a well-formed [timestamp, "value"] pair, its value.
type promOracle struct {
	decoded    bool
	status     string
	resultType string
	single     bool
	value      float64
}

func oracleDecode(body []byte) promOracle {
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &r) != nil {
		var loose struct {
			Status string `json:"status"`
			Data   struct {
				ResultType string `json:"resultType"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &loose) != nil {
			return promOracle{}
		}
		return promOracle{decoded: true, status: loose.Status, resultType: loose.Data.ResultType}
	}
	o := promOracle{decoded: true, status: r.Status, resultType: r.Data.ResultType}
	if o.resultType != "vector" || len(r.Data.Result) != 1 {
		return o
	}
	var s struct {
		Value     []json.RawMessage `json:"value"`
		Histogram json.RawMessage   `json:"histogram"`
	}
	if json.Unmarshal(r.Data.Result[0], &s) != nil || len(s.Value) != 2 || len(s.Histogram) > 0 {
		return o
	}
	var str string
	if json.Unmarshal(s.Value[1], &str) != nil {
		return o
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return o
	}
	o.single, o.value = true, v
	return o
}

// usable is a count or mean the client may return: a single finite, non-negative value.
func (o promOracle) usable() bool {
	return o.single && !math.IsNaN(o.value) && !math.IsInf(o.value, 0) && o.value >= 0
}

// FuzzPrometheusTraffic serves arbitrary bodies to PrometheusTraffic.Traffic: one for the
// requests_started_total count query, one for the requests_total fallback, one for all five
// mean queries, under one of a few HTTP statuses. Invariants:
//   - no panic; the observation is never nil and its DurationS is the window;
//   - an error leaves the count and every mean nil;
//   - a count is finite, non-negative and is the single sample of a well-formed vector
//     response (the started one when that holds one, else the fallback): a missing, malformed
//     or mismatched result is never read as zero demand;
//   - a zero count has nil means; each mean is nil or finite, non-negative and is the mean
//     body's single sample (scaled to milliseconds for the latencies);
//   - a started response of another result type (matrix, scalar, string) is an error.
func FuzzPrometheusTraffic(f *testing.F) {
	seeds := []struct {
		started, total, mean string
		status               int
	}{
		{promVector42, promEmpty, promVectorMean, 0},
		{promEmpty, promVector42, promVectorMean, 0},
		{promVectorZero, promVector42, promVectorMean, 0},
		{promEmpty, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"NaN"]}]}}`, promVector42, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"+Inf"]}]}}`, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"-3"]}]}}`, promEmpty, promVectorMean, 0},
		{promVector42, promEmpty, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"-0.5"]}]}}`, 0},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]}}`, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"1"],[1700000015,"2"]]}]}}`, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"5"]}}`, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"string","result":[1700000000,"5"]}}`, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1700000000,{"count":"3","sum":"6","buckets":[[0,"0","1","3"]]}]}]}}`, promEmpty, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}`, promVector42, promVectorMean, 0},
		{`{"status":"success","data":{"resultType":"vector","result":null}}`, promVector42, promVectorMean, 0},
		{`{"status":"success","warnings":["partial response"],"infos":["x"],"data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"7"]}]}}`, promEmpty, promVectorMean, 0},
		{promError, promVector42, promVectorMean, 1},
		{promError, promVector42, promVectorMean, 2},
		{`{"status":"error","errorType":"timeout","error":"query timed out"}`, promVector42, promVectorMean, 3},
		{`{"status":"success"}`, promVector42, promVectorMean, 0},
		{`{}`, promEmpty, promVectorMean, 0},
		{`null`, promEmpty, promVectorMean, 0},
		{promVector42, promEmpty, promVectorMean, 4},
		{`<html>bad gateway</html>`, promVector42, promVectorMean, 5},
		{``, promEmpty, ``, 0},
	}
	for _, s := range seeds {
		f.Add([]byte(s.started), []byte(s.total), []byte(s.mean), uint8(s.status))
	}
	f.Fuzz(func(t *testing.T, started, total, mean []byte, statusIndex uint8) {
		status := promFuzzStatuses[int(statusIndex)%len(promFuzzStatuses)]
		obs, err := promTraffic(t, started, total, mean, status)
		if obs == nil {
			t.Fatalf("nil observation (err %v)", err)
		}
		if obs.DurationS != 60 {
			t.Fatalf("DurationS %v, want 60", obs.DurationS)
		}
		means := []*float64{obs.TTFTMs, obs.ITLMs, obs.RequestDurationS, obs.ISL, obs.OSL}
		oStarted, oTotal, oMean := oracleDecode(started), oracleDecode(total), oracleDecode(mean)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			if obs.NumReq != nil {
				t.Fatalf("error %v with a count %v", err, *obs.NumReq)
			}
			for i, m := range means {
				if m != nil {
					t.Fatalf("error %v with mean %d = %v", err, i, *m)
				}
			}
			return
		}
		if obs.NumReq == nil {
			t.Fatal("no error and no count")
		}
		n := *obs.NumReq
		if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
			t.Fatalf("count %v: not a finite non-negative number", n)
		}
		if status/100 != 2 {
			t.Fatalf("HTTP %d read as a count of %v", status, n)
		}
		if oStarted.decoded && oStarted.status == "success" && oStarted.resultType != "vector" {
			t.Fatalf("a %q result read as a count of %v", oStarted.resultType, n)
		}
		switch {
		case oStarted.usable():
			if n != oStarted.value {
				t.Fatalf("count %v, but the started response holds %v", n, oStarted.value)
			}
		case oTotal.usable():
			if n != oTotal.value {
				t.Fatalf("count %v, but the started response holds no usable value and the fallback holds %v", n, oTotal.value)
			}
		default:
			t.Fatalf("count %v from responses holding no usable single value:\nstarted %q\ntotal %q", n, started, total)
		}
		for i, m := range means {
			switch {
			case m == nil:
			case n == 0:
				t.Fatalf("idle window with mean %d = %v", i, *m)
			case math.IsNaN(*m) || math.IsInf(*m, 0) || *m < 0:
				t.Fatalf("mean %d = %v: not a finite non-negative number", i, *m)
			case !oMean.usable():
				t.Fatalf("mean %d = %v from a response holding no usable single value: %q", i, *m, mean)
			case *m != finiteOr(oMean.value*trafficMeans[i].scale, -1):
				t.Fatalf("mean %d = %v, but the response holds %v", i, *m, oMean.value)
			}
		}
	})
}

// finiteOr is *finite(v), or alt when v is not finite.
func finiteOr(v, alt float64) float64 {
	if f := finite(v); f != nil {
		return *f
	}
	return alt
}
