package observe

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/frontend"
)

// seqTransport serves its bodies in order, one per request, as HTTP 200 text expositions.
type seqTransport struct {
	bodies [][]byte
	next   int
}

// RoundTrip implements http.RoundTripper.
func (s *seqTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b := s.bodies[s.next%len(s.bodies)]
	s.next++
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain; version=0.0.4"}},
		Body:   io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: r}, nil
}

// newSeqScrape is a ScrapeTraffic for scrapeModel and scrapeNS reading the bodies in order, on
// a fake clock.
func newSeqScrape(t *testing.T, interval time.Duration, bodies ...[]byte) (*ScrapeTraffic, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s, err := NewScrapeTraffic(ScrapeOptions{URL: "http://frontend.invalid:8000/metrics", Model: scrapeModel, Namespace: scrapeNS,
		Interval: interval, Client: &http.Client{Transport: &seqTransport{bodies: bodies}}, Now: clock.Now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

// snapshots is the number of snapshots s holds.
func (s *ScrapeTraffic) snapshots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.snaps)
}

// frontendExpositions are realistic /metrics bodies: the simulated frontend's registry after
// each batch of requests; a negative batch restarts the frontend (its counters start over).
// The HELP lines and histogram buckets, which the planner does not read, are left out: the
// fuzzer minimizes every new interesting input, and a 30 KB one takes its whole minimization
// time (60 s by default), during which it runs nothing else.
func frontendExpositions(t testing.TB, batches ...int) [][]byte {
	t.Helper()
	var out [][]byte
	var m *frontend.Metrics
	var h http.Handler
	restart := func() {
		reg := prometheus.NewRegistry()
		var err error
		if m, err = frontend.NewMetrics(reg, scrapeModel, scrapeNS); err != nil {
			t.Fatal(err)
		}
		h = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	restart()
	for i, n := range batches {
		if n < 0 {
			restart()
			n = -n
		}
		for range n {
			m.RequestStarted()
			m.RequestFinished(frontend.Completed{ISL: 1000 + 100*i, OSL: 100 + i, TTFT: 120 * time.Millisecond, Duration: 2 * time.Second})
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		var kept []byte
		for line := range strings.Lines(rec.Body.String()) {
			if !strings.HasPrefix(line, "# HELP ") && !strings.Contains(line, "_bucket{") {
				kept = append(kept, line...)
			}
		}
		out = append(out, kept)
	}
	return out
}

// exposition is a small hand-written body: the started counter (omitted when empty) and the
// ISL histogram (omitted when count is empty), for scrapeModel and scrapeNS.
func exposition(started, sum, count string) []byte {
	const labels = `{dynamo_namespace="dynamo-ns",model="qwen/qwen3-0.6b"`
	var b strings.Builder
	if started != "" {
		b.WriteString("# TYPE " + metricRequestsStarted + " counter\n")
		b.WriteString(metricRequestsStarted + labels + "} " + started + "\n")
	}
	if count != "" {
		b.WriteString("# TYPE " + metricInputTokens + " histogram\n")
		b.WriteString(metricInputTokens + "_bucket" + labels + `,le="+Inf"} ` + count + "\n")
		b.WriteString(metricInputTokens + "_sum" + labels + "} " + sum + "\n")
		b.WriteString(metricInputTokens + "_count" + labels + "} " + count + "\n")
	}
	return []byte(b.String())
}

// scrapeOracle reads a body independently of extract: whether it parses, and the sums of the
// started and total counters of scrapeModel and scrapeNS (counter or untyped samples).
type scrapeOracle struct {
	parses                 bool
	started, total         float64
	hasStarted, hasTotal   bool
	startedSane, totalSane bool // finite and non-negative
}

func oracleScrape(body []byte) scrapeOracle {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return scrapeOracle{}
	}
	o := scrapeOracle{parses: true, startedSane: true, totalSane: true}
	lowerModel := strings.ToLower(scrapeModel)
	sum := func(name string, v *float64, has, sane *bool) {
		for _, m := range mfs[name].GetMetric() {
			var mdl, ns string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "model":
					mdl = l.GetValue()
				case "dynamo_namespace":
					ns = l.GetValue()
				}
			}
			if strings.ToLower(mdl) != lowerModel || ns != scrapeNS { // as extract compares
				continue
			}
			var x float64
			switch {
			case m.Counter != nil:
				x = m.GetCounter().GetValue()
			case m.Untyped != nil:
				x = m.GetUntyped().GetValue()
			default:
				continue
			}
			*has = true
			*v += x
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				*sane = false
			}
		}
		if math.IsInf(*v, 0) {
			*sane = false
		}
	}
	sum(metricRequestsStarted, &o.started, &o.hasStarted, &o.startedSane)
	sum(metricRequestsTotal, &o.total, &o.hasTotal, &o.totalSane)
	return o
}

// checkObservation checks the TrafficSource contract on one Traffic result: never nil, the
// window's duration; an error with a nil count and nil means; otherwise a finite non-negative
// count, nil means when it is 0 and each mean nil or finite and non-negative.
func checkObservation(t *testing.T, obs *scaling.TrafficObservation, err error, window time.Duration) {
	t.Helper()
	if obs == nil {
		t.Fatalf("nil observation (err %v)", err)
	}
	if obs.DurationS != window.Seconds() {
		t.Fatalf("DurationS %v, want %v", obs.DurationS, window.Seconds())
	}
	means := []*float64{obs.TTFTMs, obs.ITLMs, obs.RequestDurationS, obs.ISL, obs.OSL}
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
	for i, m := range means {
		switch {
		case m == nil:
		case n == 0:
			t.Fatalf("idle window with mean %d = %v", i, *m)
		case math.IsNaN(*m) || math.IsInf(*m, 0) || *m < 0:
			t.Fatalf("mean %d = %v: not a finite non-negative number", i, *m)
		}
	}
}

// FuzzScrapeTraffic feeds three arbitrary /metrics bodies to ScrapeTraffic in sequence, then
// reads a 60 s window. steps sets the clock: its low three nibbles are the advances before
// each scrape (in 5 s units), the high nibble the delay before the read (in seconds).
// Invariants:
//   - no panic; a body the text parser rejects, or whose matching request counter is NaN,
//     infinite or negative, fails its scrape and adds no snapshot; any other body adds one;
//   - the observation satisfies the TrafficSource contract (checkObservation);
//   - a count is never read from nothing: some accepted body exposes the model's started or
//     total counter (an absent series or a malformed body is an error, not zero load);
//   - identical counter values in every accepted scrape are a count of 0, and a count is at
//     most twice (the largest scale-up of a half-covered window) the sum of every value
//     scraped: resets count the new value, never more.
func FuzzScrapeTraffic(f *testing.F) {
	const steady = 0x0660 // scrapes at 0 s, 30 s and 60 s, read at once
	add := func(steps uint16, bodies ...[]byte) {
		f.Add(bodies[0], bodies[1], bodies[2], steps)
	}
	add(steady, frontendExpositions(f, 0, 10, 20)...)
	add(steady, frontendExpositions(f, 10, -4, 3)...) // a restart between the first two scrapes
	add(0x3330, frontendExpositions(f, 5, 5, 5)...)   // scrapes 15 s apart: half the window
	add(0x9660, frontendExpositions(f, 1, 2, 3)...)   // read 9 s after the last scrape
	add(steady, exposition("100", "5000", "100"), exposition("130", "8000", "130"), exposition("150", "9000", "150"))
	add(steady, exposition("10000", "", ""), exposition("", "", ""), exposition("10020", "", "")) // a missed series is a gap
	add(steady, exposition("", "", ""), exposition("4", "400", "4"), exposition("6", "700", "6")) // a series appearing
	add(steady, exposition("10", "1000", "10"), exposition("NaN", "1100", "11"), exposition("12", "1200", "12"))
	add(steady, exposition("10", "1000", "10"), exposition("-5", "1100", "11"), exposition("12", "1200", "12"))
	add(steady, exposition("10", "1000", "10"), exposition("+Inf", "1100", "11"), exposition("12", "1200", "12"))
	add(steady, exposition("1e308", "1", "1"), exposition("1", "1", "1"), exposition("1e308", "1", "1"))
	add(steady, exposition("10", "1000", "10"), exposition("20", "NaN", "20"), exposition("30", "-1", "2.5"))
	add(steady, exposition("10", "1000", "10"), exposition("20", "2000", "20.5"), exposition("30", "3000", "30"))
	add(steady, exposition("10", "", ""), []byte(metricRequestsStarted+`{model="m" 3`+"\n"), exposition("20", "", ""))
	add(steady,
		[]byte("# TYPE dynamo_frontend_requests_total counter\n"+
			`dynamo_frontend_requests_total{model="Qwen/Qwen3-0.6B",dynamo_namespace="dynamo-ns",status="success"} 100`+"\n"+
			`dynamo_frontend_requests_total{model="Qwen/Qwen3-0.6B",dynamo_namespace="dynamo-ns",status="error"} 1`+"\n"),
		[]byte(`dynamo_frontend_requests_total{model="qwen/qwen3-0.6b",dynamo_namespace="dynamo-ns",status="success"} 130`+"\n"),
		[]byte(`dynamo_frontend_requests_total{model="qwen/qwen3-0.6b",dynamo_namespace="other",status="success"} 999`+"\n"))
	add(steady, []byte(""), []byte("# just a comment\n"), []byte("\n\n"))
	f.Fuzz(func(t *testing.T, b0, b1, b2 []byte, steps uint16) {
		const window = time.Minute
		s, clock := newSeqScrape(t, 10*time.Second, b0, b1, b2)
		var accepted []scrapeOracle
		for i, b := range [][]byte{b0, b1, b2} {
			clock.Advance(time.Duration(steps>>(4*i)&0xf) * 5 * time.Second)
			before := s.snapshots()
			err := s.ScrapeOnce(context.Background())
			o := oracleScrape(b)
			if err != nil {
				switch {
				case s.snapshots() != before:
					t.Fatalf("scrape %d failed (%v) but added a snapshot", i, err)
				case err.Error() == "":
					t.Fatalf("scrape %d: empty error", i)
				case o.parses && o.startedSane && o.totalSane:
					t.Fatalf("scrape %d rejected a well-formed body (%v): %q", i, err, b)
				}
				continue
			}
			if s.snapshots() != min(before+1, s.o.History) {
				t.Fatalf("scrape %d succeeded but holds %d snapshots, had %d", i, s.snapshots(), before)
			}
			switch {
			case !o.parses:
				t.Fatalf("scrape %d accepted a body the text parser rejects: %q", i, b)
			case o.hasStarted && !o.startedSane, o.hasTotal && !o.totalSane:
				t.Fatalf("scrape %d accepted a request counter that is NaN, infinite or negative: started %v, total %v", i, o.started, o.total)
			}
			accepted = append(accepted, o)
		}
		clock.Advance(time.Duration(steps>>12) * time.Second)

		obs, err := s.Traffic(context.Background(), window)
		checkObservation(t, obs, err, window)
		if err != nil {
			return
		}
		n := *obs.NumReq
		anyStarted, anyTotal, allEqual := false, false, true
		var bound float64
		for _, o := range accepted {
			anyStarted, anyTotal = anyStarted || o.hasStarted, anyTotal || o.hasTotal
			bound += o.started + o.total
		}
		if !anyStarted && !anyTotal {
			t.Fatalf("count %v, but no accepted body exposes %s or %s for the model", n, metricRequestsStarted, metricRequestsTotal)
		}
		for _, o := range accepted {
			first := accepted[0]
			if anyStarted && (!o.hasStarted || o.started != first.started) || !anyStarted && (!o.hasTotal || o.total != first.total) {
				allEqual = false
			}
		}
		if allEqual && n != 0 {
			t.Fatalf("count %v from identical counter values", n)
		}
		if n > 2*bound*(1+1e-12) {
			t.Fatalf("count %v exceeds twice the sum of every value scraped (%v)", n, bound)
		}
	})
}

// FuzzScrapeSequence drives three well-formed scrapes, at 0 s, 30 s and 60 s, of the started
// counter and the ISL histogram with arbitrary values (NaN, infinities, negative, fractional
// and huge ones included), each present or not per a bit of present (bits 0-2 the counter,
// 3-5 the histogram), and compares the 60 s window read at 60 s with a reference computed
// from the values:
//   - a scrape whose counter is NaN, infinite or negative fails (a malformed body is an error,
//     not zero load), as does one with a negative histogram count (the text parser rejects
//     it); a histogram with a NaN, infinite or negative sum or count is a gap;
//   - the count is the increase over the accepted scrapes, a decrease counting as a reset to 0
//     (the new value is the increase), a counter appearing after the first accepted scrape
//     counting from 0 and a missing one a gap, scaled from the covered span to the window;
//   - no counter in any accepted scrape, fewer than two accepted scrapes or an increase too
//     large for a float64 is an error, never a count;
//   - the ISL mean is the increase of the sum over that of the count, by the same rules; nil
//     when the count is 0, the histogram never present or its count did not increase.
func FuzzScrapeSequence(f *testing.F) {
	f.Add(0.0, 10.0, 20.0, 0.0, 10000.0, 20000.0, 0.0, 10.0, 20.0, uint8(0x3f))
	f.Add(10.0, 4.0, 7.0, 5000.0, 2000.0, 3500.0, 10.0, 4.0, 7.0, uint8(0x3f))       // a reset
	f.Add(10000.0, 0.0, 10020.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, uint8(0x05))          // a missed scrape
	f.Add(0.0, 4.0, 6.0, 0.0, 400.0, 700.0, 0.0, 4.0, 6.0, uint8(0x36))              // appearing mid-window
	f.Add(5.0, 5.0, 5.0, 500.0, 500.0, 500.0, 5.0, 5.0, 5.0, uint8(0x3f))            // idle
	f.Add(10.0, math.NaN(), 12.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, uint8(0x3f))         // NaN counter
	f.Add(10.0, -5.0, 12.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, uint8(0x3f))               // negative counter
	f.Add(10.0, math.Inf(1), 12.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, uint8(0x3f))        // infinite counter
	f.Add(0.0, 1.7e308, 1.6e308, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, uint8(0x06))          // an increase overflowing
	f.Add(10.0, 20.0, 30.0, 1000.0, math.NaN(), -1.0, 10.0, 20.0, 30.0, uint8(0x3f)) // bad sums
	f.Add(10.0, 20.0, 30.0, 1000.0, 2000.0, 3000.0, 10.0, 20.5, 30.0, uint8(0x3f))   // a fractional count
	f.Add(10.0, 20.0, 30.0, 1000.0, 2000.0, 3000.0, 10.0, -1.0, 30.0, uint8(0x3f))   // a negative count
	f.Fuzz(func(t *testing.T, v0, v1, v2, s0, s1, s2, c0, c1, c2 float64, present uint8) {
		const window = time.Minute
		vs, ss, cs := []float64{v0, v1, v2}, []float64{s0, s1, s2}, []float64{c0, c1, c2}
		format := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
		sane := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 }

		type snap struct {
			at            int // the scrape's index, 30 s apart
			counter, hist bool
			v, sum, count float64
		}
		var bodies [][]byte
		var want []snap // the accepted scrapes
		for i := range 3 {
			hasCounter, hasHist := present>>i&1 == 1, present>>(3+i)&1 == 1
			started, sum, count := "", "", ""
			if hasCounter {
				started = format(vs[i])
			}
			if hasHist {
				sum, count = format(ss[i]), format(cs[i])
			}
			bodies = append(bodies, exposition(started, sum, count))
			if hasCounter && !sane(vs[i]) || hasHist && cs[i] < 0 {
				continue // the scrape fails
			}
			want = append(want, snap{at: i, counter: hasCounter, v: vs[i],
				hist: hasHist && sane(ss[i]) && sane(cs[i]), sum: ss[i], count: cs[i]})
		}

		s, clock := newSeqScrape(t, 30*time.Second, bodies...)
		for i := range 3 {
			if i > 0 {
				clock.Advance(30 * time.Second)
			}
			err := s.ScrapeOnce(context.Background())
			if shouldFail := (present>>i&1 == 1 && !sane(vs[i])) || (present>>(3+i)&1 == 1 && cs[i] < 0); shouldFail != (err != nil) {
				t.Fatalf("scrape %d of %q: error %v, want an error: %v", i, bodies[i], err, shouldFail)
			}
		}
		obs, err := s.Traffic(context.Background(), window)
		checkObservation(t, obs, err, window)

		// The reference: with scrapes 30 s apart and the read at the last one, the window's
		// base is the first accepted scrape and the span every accepted one.
		var inc, prev float64
		seen := false
		var hsum, hcount float64
		var hprev snap
		hseen := false
		for i, x := range want {
			if x.counter {
				switch {
				case i == 0:
				case x.v >= prev:
					inc += x.v - prev
				default:
					inc += x.v
				}
				prev, seen = x.v, true
			}
			if x.hist {
				switch {
				case i == 0:
				case x.count >= hprev.count && x.sum >= hprev.sum:
					hsum += x.sum - hprev.sum
					hcount += x.count - hprev.count
				default:
					hsum += x.sum
					hcount += x.count
				}
				hprev, hseen = x, true
			}
		}
		if len(want) < 2 || !seen {
			if err == nil {
				t.Fatalf("count %v from %d accepted scrapes (counter seen: %v), want an error", *obs.NumReq, len(want), seen)
			}
			return
		}
		n := inc * (window.Seconds() / (30 * float64(want[len(want)-1].at-want[0].at)))
		if math.IsInf(n, 0) {
			if err == nil {
				t.Fatalf("count %v from an increase of %v, want an error", *obs.NumReq, inc)
			}
			return
		}
		if err != nil {
			t.Fatalf("unexpected error %v (want a count of %v)", err, n)
		}
		if !near(*obs.NumReq, n) {
			t.Fatalf("count %v, want %v (accepted %+v)", *obs.NumReq, n, want)
		}
		var wantISL *float64
		if n != 0 && hseen && hcount > 0 {
			wantISL = finite(hsum / hcount)
		}
		switch {
		case wantISL == nil && obs.ISL != nil:
			t.Fatalf("ISL %v, want nil (accepted %+v)", *obs.ISL, want)
		case wantISL != nil && obs.ISL == nil:
			t.Fatalf("ISL nil, want %v (accepted %+v)", *wantISL, want)
		case wantISL != nil && !near(*obs.ISL, *wantISL):
			t.Fatalf("ISL %v, want %v (accepted %+v)", *obs.ISL, *wantISL, want)
		}
	})
}

// near reports whether a and b agree to a relative 1e-12.
func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}
