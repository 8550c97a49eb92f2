package scaletest

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Snapshot is one scrape of workers' /metrics, each metric summed over its series (and over
// the workers, after Add).
type Snapshot struct {
	// Values are counters, gauges and untyped metrics by name.
	Values map[string]float64
	// Hists are histograms by name.
	Hists map[string]Histogram
}

// Histogram is a cumulative histogram: Counts[i] observations were at most Bounds[i].
type Histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// splitLabels are the labels whose values also key a metric in a Snapshot:
// temporal_worker_task_slots_used{worker_type=WorkflowWorker}, persistence_latency{operation=...},
// temporal_activity_execution_latency_seconds{activity_type=Observe}.
var splitLabels = []string{"worker_type", "poller_type", "operation", "activity_type"}

// ParseMetrics reads the Prometheus text format.
func ParseMetrics(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	s := Snapshot{Values: map[string]float64{}, Hists: map[string]Histogram{}}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			// A series is also counted under name{label=value} for the labels that tell
			// the workers' parts apart.
			keys := []string{name}
			for _, l := range m.GetLabel() {
				if slices.Contains(splitLabels, l.GetName()) {
					keys = append(keys, fmt.Sprintf("%s{%s=%s}", name, l.GetName(), l.GetValue()))
				}
			}
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
				for _, k := range keys {
					s.Values[k] += v
				}
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				one := Histogram{Count: float64(h.GetSampleCount()), Sum: h.GetSampleSum()}
				for _, b := range h.GetBucket() {
					one.Bounds = append(one.Bounds, b.GetUpperBound())
					one.Counts = append(one.Counts, float64(b.GetCumulativeCount()))
				}
				for _, k := range keys {
					s.Hists[k] = s.Hists[k].Add(one)
				}
			}
		}
	}
	return s, nil
}

// Scrape fetches and parses a /metrics URL.
func Scrape(ctx context.Context, url string) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Snapshot{}, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	s, err := ParseMetrics(resp.Body)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return s, nil
}

// Add returns the sum of two snapshots (two workers).
func (s Snapshot) Add(o Snapshot) Snapshot {
	out := Snapshot{Values: map[string]float64{}, Hists: map[string]Histogram{}}
	for _, x := range []Snapshot{s, o} {
		for k, v := range x.Values {
			out.Values[k] += v
		}
		for k, h := range x.Hists {
			out.Hists[k] = out.Hists[k].Add(h)
		}
	}
	return out
}

// Sub returns the counts of s since prev (an earlier scrape of the same workers): counters
// and histograms are differences; gauges are meaningless as differences, so read them from
// the later snapshot instead.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	out := Snapshot{Values: map[string]float64{}, Hists: map[string]Histogram{}}
	for k, v := range s.Values {
		out.Values[k] = v - prev.Values[k]
	}
	for k, h := range s.Hists {
		out.Hists[k] = h.Sub(prev.Hists[k])
	}
	return out
}

// Add merges two histograms bucket by bucket (bounds that only one has are kept, with the
// other's cumulative count at the nearest lower bound).
func (h Histogram) Add(o Histogram) Histogram {
	return h.combine(o, 1)
}

// Sub is h minus an earlier reading of the same histogram.
func (h Histogram) Sub(o Histogram) Histogram {
	return h.combine(o, -1)
}

func (h Histogram) combine(o Histogram, sign float64) Histogram {
	bounds := slices.Clone(h.Bounds)
	for _, b := range o.Bounds {
		if !slices.Contains(bounds, b) {
			bounds = append(bounds, b)
		}
	}
	slices.Sort(bounds)
	out := Histogram{Bounds: bounds, Counts: make([]float64, len(bounds)), Count: h.Count + sign*o.Count, Sum: h.Sum + sign*o.Sum}
	for i, b := range bounds {
		out.Counts[i] = h.cumulative(b) + sign*o.cumulative(b)
	}
	return out
}

// cumulative is the count of observations at most b.
func (h Histogram) cumulative(b float64) float64 {
	c := 0.0
	for i, ub := range h.Bounds {
		if ub > b {
			break
		}
		c = h.Counts[i]
	}
	return c
}

// Quantile is the upper bound of the bucket holding the q-quantile (so the quantile is at
// most that); +Inf past the last finite bound, NaN for an empty histogram.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	rank := q * h.Count
	for i, c := range h.Counts {
		if c >= rank {
			return h.Bounds[i]
		}
	}
	return math.Inf(1)
}

// Mean is the histogram's mean observation (NaN when empty).
func (h Histogram) Mean() float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	return h.Sum / h.Count
}
