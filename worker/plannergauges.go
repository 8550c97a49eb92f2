package worker

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultPlannerSeriesTTL is how long a planner's series stay on /metrics after its last tick
// observed on this worker (or three of its tick intervals, when longer): a planner whose
// ticks have not reached this worker for that long has moved to another worker or is stuck,
// and its last values must not pass for current ones. A planner that ended is dropped at
// once, when the worker's refresh finds it closed (plannerMetrics).
const DefaultPlannerSeriesTTL = 15 * time.Minute

// plannerGauges holds the planner series the worker computes, per deployment (the planner's
// workflow id, label "deployment"), and exposes them as a Prometheus collector. A
// deployment's series are dropped together: by drop (its planner ended) or once no tick of
// it was seen on this worker within the TTL.
type plannerGauges struct {
	ttl time.Duration
	now func() time.Time

	mu          sync.Mutex
	deployments map[string]*deploymentSeries
}

type deploymentSeries struct {
	// seen is the last time a tick of the planner was observed on this worker; interval its
	// tick interval (the series live for at least three of them).
	seen     time.Time
	interval time.Duration
	series   map[string]*gaugeSeries // by name and labels
}

type gaugeSeries struct {
	name       string
	keys, vals []string
	value      float64
}

func newPlannerGauges(ttl time.Duration, now func() time.Time) *plannerGauges {
	return &plannerGauges{ttl: ttl, now: now, deployments: map[string]*deploymentSeries{}}
}

// entry returns a deployment's series, creating them; callers hold mu.
func (g *plannerGauges) entry(deployment string) *deploymentSeries {
	d := g.deployments[deployment]
	if d == nil {
		d = &deploymentSeries{seen: g.now(), series: map[string]*gaugeSeries{}}
		g.deployments[deployment] = d
	}
	return d
}

// seen records that a tick of the deployment ran on this worker: only a tick here keeps its
// series past the TTL, so a planner that moved to another worker leaves this one's /metrics
// even though its state query still answers.
func (g *plannerGauges) seen(deployment string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entry(deployment).seen = g.now()
}

// setInterval records a known deployment's tick interval (its series stay at least three
// intervals); it does not keep the series alive.
func (g *plannerGauges) setInterval(deployment string, interval time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d := g.deployments[deployment]; d != nil && interval > 0 && interval < 24*time.Hour {
		d.interval = interval
	}
}

// known reports whether the deployment has series here.
func (g *plannerGauges) known(deployment string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.deployments[deployment]
	return ok
}

// list returns the deployments with series, sorted.
func (g *plannerGauges) list() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire()
	return slices.Sorted(maps.Keys(g.deployments))
}

// set sets one series of a known deployment (an unknown one, never observed here or dropped,
// is left alone: a late refresh must not bring back an ended planner).
func (g *plannerGauges) set(deployment, name string, labels map[string]string, v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d := g.deployments[deployment]; d != nil {
		d.put(name, labels, v)
	}
}

// replace sets every series of a name for a deployment, removing the others of that name
// (per-engine gauges: an engine that left has no series).
func (g *plannerGauges) replace(deployment, name string, values []labelledValue) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.deployments[deployment]
	if d == nil {
		return
	}
	for id, s := range d.series {
		if s.name == name {
			delete(d.series, id)
		}
	}
	for _, v := range values {
		d.put(name, v.labels, v.value)
	}
}

type labelledValue struct {
	labels map[string]string
	value  float64
}

func (d *deploymentSeries) put(name string, labels map[string]string, v float64) {
	keys := slices.Sorted(maps.Keys(labels))
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = labels[k]
	}
	id := name + "\xff" + strings.Join(keys, "\xff") + "\xfe" + strings.Join(vals, "\xff")
	s := d.series[id]
	if s == nil {
		s = &gaugeSeries{name: name, keys: keys, vals: vals}
		d.series[id] = s
	}
	s.value = v
}

// drop removes every series of a deployment (its planner ended).
func (g *plannerGauges) drop(deployment string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.deployments, deployment)
}

// expire drops the deployments not seen within the TTL; callers hold mu.
func (g *plannerGauges) expire() {
	now := g.now()
	for name, d := range g.deployments {
		if now.Sub(d.seen) > max(g.ttl, 3*d.interval) {
			delete(g.deployments, name)
		}
	}
}

// Describe sends nothing: the series come and go (an unchecked collector).
func (g *plannerGauges) Describe(chan<- *prometheus.Desc) {}

// Collect drops the deployments not seen within the TTL, then sends the rest.
func (g *plannerGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire()
	for name, d := range g.deployments {
		for _, s := range d.series {
			m := plannerMetricByName[s.name]
			keys := append([]string{"deployment"}, s.keys...)
			vals := append([]string{name}, s.vals...)
			desc := prometheus.NewDesc(s.name, m.help, keys, nil)
			if c, err := prometheus.NewConstMetric(desc, m.kind, s.value, vals...); err == nil {
				ch <- c
			}
		}
	}
}
