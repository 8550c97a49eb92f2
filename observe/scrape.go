package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmplanner/planner/scaling"
)

// Defaults of ScrapeOptions.
const (
	DefaultScrapeInterval = 2 * time.Second
	// DefaultScrapeHistory keeps 1024 snapshots: 34 minutes at the default interval, several
	// throughput windows of Dynamo's default 180 s.
	DefaultScrapeHistory = 1024
)

// maxExpositionBytes bounds one /metrics body (a variable so that tests can lower it). A
// larger body fails its scrape, a gap, with an error naming the limit. Read only as far as
// the limit, a body cut at the end of a line parses and silently loses the series past the
// cut; one cut inside a line fails as an unexplained "unexpected end of input stream".
var maxExpositionBytes int64 = 16 << 20

// errExpositionTooLarge is the error of a body over maxExpositionBytes.
var errExpositionTooLarge = errors.New("/metrics body too large")

// limitedBody reads a body of at most limit bytes; a byte more fails the read with
// errExpositionTooLarge (and sets over), so the body is never taken as ending at the limit.
type limitedBody struct {
	r     io.Reader // the body, limited to limit+1 bytes
	limit int64
	read  int64
	over  bool
}

func newLimitedBody(r io.Reader, limit int64) *limitedBody {
	return &limitedBody{r: io.LimitReader(r, limit+1), limit: limit}
}

// Read implements io.Reader.
func (b *limitedBody) Read(p []byte) (int, error) {
	if b.over {
		return 0, b.err()
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	if b.read > b.limit {
		b.over = true
		return 0, b.err()
	}
	return n, err
}

// err is the error of a body over the limit.
func (b *limitedBody) err() error {
	return fmt.Errorf("%w: more than the %s", errExpositionTooLarge, byteLimit(b.limit))
}

// byteLimit renders a limit in bytes, and in MiB when it is a whole number of them.
func byteLimit(n int64) string {
	if n > 0 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d-byte limit (%d MiB)", n, n>>20)
	}
	return fmt.Sprintf("%d-byte limit", n)
}

// ScrapeOptions configure ScrapeTraffic.
type ScrapeOptions struct {
	// URL is the frontend's metrics endpoint, e.g. http://frontend:8000/metrics.
	URL string
	// Model (compared lower-case) and Namespace (the dynamo_namespace label, compared as is)
	// select the series.
	Model, Namespace string
	// Interval is the scrape period of Run (default DefaultScrapeInterval).
	Interval time.Duration
	// History is the number of snapshots kept (default DefaultScrapeHistory); windows longer
	// than about History × Interval cannot be answered.
	History int
	// Timeout bounds one scrape (default Interval).
	Timeout time.Duration
	// Client is the HTTP client (default http.DefaultClient).
	Client *http.Client
	// Now is the clock (default time.Now); tests inject a fake one.
	Now func() time.Time
	// Logger receives scrape failures (default slog.Default()).
	Logger *slog.Logger
}

// ScrapeTraffic reads the frontend's own /metrics directly, for setups without Prometheus. Run
// scrapes every Interval and keeps a bounded ring of snapshots (time, and the matching series'
// histogram sums and counts and request counters); Traffic answers from the deltas between the
// newest snapshot and the one closest to now − window.
//
// The deltas treat a decrease as a counter reset, as Prometheus does (the increase across a
// reset is the new value). A series absent from the window's first snapshots counts from 0
// when it appears (Dynamo creates its per-model series at the model's first request); one
// missing from a later snapshot is a gap, skipped (see counterIncrease).
//
// A body larger than 16 MiB fails its scrape (a gap), rather than being read as far as the
// limit, which would silently lose the series past the cut.
//
// A scrape whose matching request counter is NaN, infinite or negative fails like a malformed
// body: a counter cannot hold such a value, so the snapshot's count cannot be trusted. A
// matching histogram whose sum or count is NaN, infinite or negative is left out of its
// snapshot (a gap in that mean); the count does not depend on it.
// The request count is the observed rate times the window: delta × window / covered, where
// covered is the time between the two snapshots. Like Prometheus's increase(), this scales a
// partially covered window up (and a slightly over-covered one down) to the whole window. The
// means are ratios of deltas and need no scaling.
//
// The count is unreadable (NumReq nil, with an error saying why) when no scrape has succeeded,
// when the newest successful scrape is older than 3 intervals, when the history covers less
// than half the window, or when the frontend exposes neither requests_started_total nor
// requests_total for the model and namespace. It is safe for concurrent use.
type ScrapeTraffic struct {
	o     ScrapeOptions
	model string

	mu        sync.Mutex
	snaps     []scrapeSnapshot
	lastErr   error
	lastErrAt time.Time
	seen      []string
	failing   bool
}

var _ TrafficSource = (*ScrapeTraffic)(nil)

// scrapeValue is one quantity of a snapshot: present is false when no matching series was
// exposed.
type scrapeValue struct {
	present bool
	v       float64
}

// scrapeHist is one histogram of a snapshot.
type scrapeHist struct {
	present    bool
	sum, count float64
}

// scrapeSnapshot is what one successful scrape read.
type scrapeSnapshot struct {
	at             time.Time
	started, total scrapeValue
	// hists is indexed like trafficMeans.
	hists []scrapeHist
}

// NewScrapeTraffic validates opts; Run starts the scraping.
func NewScrapeTraffic(opts ScrapeOptions) (*ScrapeTraffic, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("scrape traffic: url %q: %w", opts.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("scrape traffic: url %q: want http(s)://host[:port]/metrics", opts.URL)
	}
	if opts.Model == "" || opts.Namespace == "" {
		return nil, fmt.Errorf("scrape traffic: model (%q) and namespace (%q) are required", opts.Model, opts.Namespace)
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultScrapeInterval
	}
	if opts.History <= 0 {
		opts.History = DefaultScrapeHistory
	}
	if opts.History < 2 {
		return nil, fmt.Errorf("scrape traffic: history %d: need at least 2 snapshots", opts.History)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = opts.Interval
	}
	if opts.Client == nil {
		opts.Client = http.DefaultClient
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &ScrapeTraffic{o: opts, model: strings.ToLower(opts.Model)}, nil
}

// Run scrapes at once and then every Interval until ctx ends, and returns nil then. A failed
// scrape is logged (at Warn on the first of a run of failures) and leaves the history as it is.
func (s *ScrapeTraffic) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		err := s.ScrapeOnce(ctx)
		s.mu.Lock()
		first := err != nil && !s.failing
		s.failing = err != nil
		s.mu.Unlock()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case first:
			s.o.Logger.Warn("scrape traffic: scrape failed", "url", s.o.URL, "err", err)
		case err != nil:
			s.o.Logger.Debug("scrape traffic: scrape failed", "url", s.o.URL, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ScrapeOnce reads the metrics endpoint once and, on success, appends a snapshot taken at the
// clock's now (dropping the oldest beyond History).
func (s *ScrapeTraffic) ScrapeOnce(ctx context.Context) error {
	snap, seen, err := s.scrape(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr, s.lastErrAt = err, s.o.Now()
		return err
	}
	snap.at = s.o.Now()
	if len(s.snaps) >= s.o.History {
		s.snaps = slices.Delete(s.snaps, 0, len(s.snaps)-s.o.History+1)
	}
	s.snaps = append(s.snaps, snap)
	s.seen = seen
	return nil
}

func (s *ScrapeTraffic) scrape(ctx context.Context) (scrapeSnapshot, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.URL, nil)
	if err != nil {
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: %w", s.o.URL, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: %w", s.o.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: HTTP %s: %s", s.o.URL, resp.Status, strings.TrimSpace(string(b)))
	}
	if resp.ContentLength > maxExpositionBytes {
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: %w: %d bytes (Content-Length), more than the %s; the scrape is skipped, not read in part",
			s.o.URL, errExpositionTooLarge, resp.ContentLength, byteLimit(maxExpositionBytes))
	}
	body := newLimitedBody(resp.Body, maxExpositionBytes)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(body)
	if body.over {
		// Whatever the parser made of the cut: the body is not read in part.
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: %w; the scrape is skipped, not read in part", s.o.URL, body.err())
	}
	if err != nil {
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: parse the text exposition: %w", s.o.URL, err)
	}
	snap, seen, err := s.extract(mfs)
	if err != nil {
		return scrapeSnapshot{}, nil, fmt.Errorf("scrape %s: %w", s.o.URL, err)
	}
	return snap, seen, nil
}

// extract sums the series of the configured model and namespace; seen lists the
// model/namespace pairs the frontend exposes, for error messages. A request counter that is
// not a finite, non-negative number (or whose series sum overflows) is an error; such a
// histogram is left out of the snapshot.
func (s *ScrapeTraffic) extract(mfs map[string]*dto.MetricFamily) (scrapeSnapshot, []string, error) {
	snap := scrapeSnapshot{hists: make([]scrapeHist, len(trafficMeans))}
	seenSet := map[string]bool{}
	match := func(m *dto.Metric, anyModel bool) bool {
		var mdl, ns string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "model":
				mdl = l.GetValue()
			case "dynamo_namespace":
				ns = l.GetValue()
			}
		}
		seenSet[fmt.Sprintf("model=%q dynamo_namespace=%q", mdl, ns)] = true
		return (anyModel || strings.ToLower(mdl) == s.model) && ns == s.o.Namespace
	}
	var err error
	counter := func(name string) scrapeValue {
		var out scrapeValue
		for _, m := range mfs[name].GetMetric() {
			if !match(m, false) {
				continue
			}
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			if !countable(v) && err == nil {
				err = fmt.Errorf("%s%s is %v, not a count", name, labelString(m), v)
			}
			out.present, out.v = true, out.v+v
		}
		if out.present && !countable(out.v) && err == nil {
			err = fmt.Errorf("%s for model=%q dynamo_namespace=%q sums to %v, not a count", name, s.model, s.o.Namespace, out.v)
		}
		return out
	}
	snap.started, snap.total = counter(metricRequestsStarted), counter(metricRequestsTotal)
	if err != nil {
		return scrapeSnapshot{}, nil, err
	}
	for i, tm := range trafficMeans {
		h, bad := &snap.hists[i], false
		for _, m := range mfs[tm.metric].GetMetric() {
			if m.Histogram == nil || !match(m, tm.anyModel) {
				continue
			}
			hist := m.GetHistogram()
			// The text parser keeps a count that is not a whole number (or any count of a
			// histogram with such a bucket) as a float, leaving the integer count at 0.
			count := float64(hist.GetSampleCount())
			if hist.SampleCountFloat != nil {
				count = hist.GetSampleCountFloat()
			}
			h.present = true
			h.sum += hist.GetSampleSum()
			h.count += count
			bad = bad || !countable(hist.GetSampleSum()) || !countable(count)
		}
		if bad || !countable(h.sum) || !countable(h.count) {
			*h = scrapeHist{}
		}
	}
	seen := make([]string, 0, len(seenSet))
	for k := range seenSet {
		seen = append(seen, k)
	}
	slices.Sort(seen)
	return snap, seen, nil
}

// countable reports whether v can be a counter's value: finite and non-negative.
func countable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0
}

// labelString renders a sample's labels for an error message.
func labelString(m *dto.Metric) string {
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Traffic computes the window's observation from the history (see ScrapeTraffic).
func (s *ScrapeTraffic) Traffic(_ context.Context, window time.Duration) (*scaling.TrafficObservation, error) {
	obs := &scaling.TrafficObservation{DurationS: window.Seconds()}
	if err := validWindow(window); err != nil {
		return obs, fmt.Errorf("scrape traffic: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	if len(s.snaps) == 0 {
		return obs, s.unreadable(fmt.Sprintf("no successful scrape of %s yet", s.o.URL))
	}
	newest := s.snaps[len(s.snaps)-1]
	if age := now.Sub(newest.at); age > 3*s.o.Interval {
		return obs, s.unreadable(fmt.Sprintf("the last successful scrape of %s is stale: %v old, more than 3 intervals of %v",
			s.o.URL, age.Round(time.Millisecond), s.o.Interval))
	}
	base := s.closest(now.Add(-window))
	covered := newest.at.Sub(s.snaps[base].at)
	if covered <= 0 || covered < window/2 {
		return obs, s.unreadable(fmt.Sprintf("the scrape history covers %v of the %v window, less than half (%d snapshots)",
			max(covered, 0), window, len(s.snaps)))
	}
	span := s.snaps[base:]
	scale := window.Seconds() / covered.Seconds()

	var values []scrapeValue
	switch {
	case slices.ContainsFunc(span, func(x scrapeSnapshot) bool { return x.started.present }):
		values = project(span, func(x scrapeSnapshot) scrapeValue { return x.started })
	case slices.ContainsFunc(span, func(x scrapeSnapshot) bool { return x.total.present }):
		values = project(span, func(x scrapeSnapshot) scrapeValue { return x.total })
	default:
		seen := "none"
		if len(s.seen) > 0 {
			seen = strings.Join(s.seen, ", ")
		}
		return obs, fmt.Errorf("scrape traffic: request count unreadable: %s exposes neither %s nor %s for model=%q dynamo_namespace=%q (series seen: %s)",
			s.o.URL, metricRequestsStarted, metricRequestsTotal, s.model, s.o.Namespace, seen)
	}
	n := counterIncrease(values) * scale
	if finite(n) == nil {
		return obs, s.unreadable(fmt.Sprintf("the increase of the request counter over %v overflows", covered))
	}
	obs.NumReq = &n
	if n == 0 {
		return obs, nil
	}
	for i, tm := range trafficMeans {
		if !slices.ContainsFunc(span, func(x scrapeSnapshot) bool { return x.hists[i].present }) {
			continue
		}
		sum, count := histogramIncrease(project(span, func(x scrapeSnapshot) scrapeHist { return x.hists[i] }))
		if count > 0 {
			*tm.field(obs) = finite(sum / count * tm.scale)
		}
	}
	return obs, nil
}

// unreadable is the error of an unreadable count, with the last scrape error if any.
func (s *ScrapeTraffic) unreadable(why string) error {
	if s.lastErr != nil && (len(s.snaps) == 0 || s.lastErrAt.After(s.snaps[len(s.snaps)-1].at)) {
		return fmt.Errorf("scrape traffic: request count unreadable: %s; last scrape error: %w", why, s.lastErr)
	}
	return errors.New("scrape traffic: request count unreadable: " + why)
}

// closest returns the index of the snapshot, other than the newest, nearest to t (the earlier
// one on a tie); 0 when there is only one snapshot.
func (s *ScrapeTraffic) closest(t time.Time) int {
	best := 0
	for i := range len(s.snaps) - 1 {
		if absDuration(s.snaps[i].at.Sub(t)) < absDuration(s.snaps[best].at.Sub(t)) {
			best = i
		}
	}
	return best
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func project[T any](span []scrapeSnapshot, f func(scrapeSnapshot) T) []T {
	out := make([]T, len(span))
	for i, x := range span {
		out[i] = f(x)
	}
	return out
}

// counterIncrease is the increase over consecutive values, a decrease counting as a reset to 0
// (Prometheus's rule). A series absent at the start counts from 0 when it appears (it was
// created in the window); a value missing after the series was seen is a gap, skipped: the
// next value is compared with the last one seen, so a missed scrape is never read as a reset
// (10000, 10010, missing, 10020 is an increase of 20, not of 10020).
func counterIncrease(values []scrapeValue) float64 {
	var inc, prev float64
	for i, x := range values {
		switch {
		case !x.present:
			continue // before the series appeared: prev stays 0; after: a gap
		case i == 0:
		case x.v >= prev:
			inc += x.v - prev
		default:
			inc += x.v
		}
		prev = x.v
	}
	return inc
}

// histogramIncrease is the increase of a histogram's sum and count, a decrease of either
// counting as a reset of both; as for counterIncrease, a histogram absent at the start counts
// from empty when it appears, and one missing after it was seen is a gap, skipped.
func histogramIncrease(values []scrapeHist) (sum, count float64) {
	var prev scrapeHist
	for i, x := range values {
		switch {
		case !x.present:
			continue
		case i == 0:
		case x.count >= prev.count && x.sum >= prev.sum:
			sum += x.sum - prev.sum
			count += x.count - prev.count
		default:
			sum += x.sum
			count += x.count
		}
		prev = x
	}
	return sum, count
}
