package worker

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// PlannerGaugePrefix starts the names of the gauges planner workflows emit (Dynamo's names);
// OwnGaugePrefix starts the planner's own (not Dynamo's) ones.
const (
	PlannerGaugePrefix = "dynamo_planner_"
	OwnGaugePrefix     = "planner_"
	// TickIntervalGauge is a planner's longest tick interval in seconds: its series stay for
	// at least three of them.
	TickIntervalGauge = "planner_tick_interval_seconds"
)

// DefaultPlannerSeriesTTL is how long a planner's series stay on /metrics after its last
// update (at least three of its tick intervals, TickIntervalGauge): a planner that has not
// ticked for that long has ended (completed, terminated, moved to another worker) or is
// stuck, and its last values must not pass for current ones.
const DefaultPlannerSeriesTTL = 15 * time.Minute

// plannerGauges holds the dynamo_planner_* gauges the planner workflows emit through the SDK's
// metrics handler, per label set, with the time of their last update, and exposes them as a
// Prometheus collector that drops every series of a deployment none of whose series was
// updated within the TTL. (Through OpenTelemetry, a gauge's last value stayed exported for
// ever after its planner ended.)
type plannerGauges struct {
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	series   map[string]*gaugeSeries  // by name and sorted labels
	last     map[string]time.Time     // newest update per deployment
	interval map[string]time.Duration // tick interval per deployment (TickIntervalGauge)
}

type gaugeSeries struct {
	name       string
	keys, vals []string
	deployment string
	value      float64
}

func newPlannerGauges(ttl time.Duration, now func() time.Time) *plannerGauges {
	return &plannerGauges{ttl: ttl, now: now, series: map[string]*gaugeSeries{}, last: map[string]time.Time{}, interval: map[string]time.Duration{}}
}

func (g *plannerGauges) set(name string, tags map[string]string, v float64) {
	keys := slices.Sorted(maps.Keys(tags))
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = tags[k]
	}
	id := name + "\xff" + strings.Join(keys, "\xff") + "\xfe" + strings.Join(vals, "\xff")
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.series[id]
	if s == nil {
		s = &gaugeSeries{name: name, keys: keys, vals: vals, deployment: tags["deployment"]}
		g.series[id] = s
	}
	s.value = v
	g.last[s.deployment] = g.now()
	if name == TickIntervalGauge && v > 0 && v < 1e9 {
		g.interval[s.deployment] = time.Duration(v * float64(time.Second))
	}
}

// Describe sends nothing: the series come and go (an unchecked collector).
func (g *plannerGauges) Describe(chan<- *prometheus.Desc) {}

// Collect drops the deployments not updated within the TTL, then sends the rest.
func (g *plannerGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for d, at := range g.last {
		if now.Sub(at) > max(g.ttl, 3*g.interval[d]) {
			delete(g.last, d)
			delete(g.interval, d)
		}
	}
	for id, s := range g.series {
		if _, ok := g.last[s.deployment]; !ok {
			delete(g.series, id)
			continue
		}
		desc := prometheus.NewDesc(s.name, "Planner gauge (Dynamo's name), per deployment.", s.keys, nil)
		if m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.value, s.vals...); err == nil {
			ch <- m
		}
	}
}

// plannerMetricsHandler routes the planner gauges to plannerGauges and everything else to the
// SDK's handler.
type plannerMetricsHandler struct {
	next   client.MetricsHandler
	tags   map[string]string
	gauges *plannerGauges
}

// WithTags implements client.MetricsHandler.
func (h plannerMetricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return plannerMetricsHandler{next: h.next.WithTags(tags), tags: merged, gauges: h.gauges}
}

// Counter implements client.MetricsHandler.
func (h plannerMetricsHandler) Counter(name string) client.MetricsCounter {
	return h.next.Counter(name)
}

// Timer implements client.MetricsHandler.
func (h plannerMetricsHandler) Timer(name string) client.MetricsTimer { return h.next.Timer(name) }

// Gauge implements client.MetricsHandler: a planner gauge of a deployment goes to the
// expiring collector.
func (h plannerMetricsHandler) Gauge(name string) client.MetricsGauge {
	if (strings.HasPrefix(name, PlannerGaugePrefix) || strings.HasPrefix(name, OwnGaugePrefix)) && h.tags["deployment"] != "" {
		return plannerGauge{name: name, tags: h.tags, gauges: h.gauges}
	}
	return h.next.Gauge(name)
}

type plannerGauge struct {
	name   string
	tags   map[string]string
	gauges *plannerGauges
}

// Update implements client.MetricsGauge.
func (g plannerGauge) Update(v float64) { g.gauges.set(g.name, g.tags, v) }
