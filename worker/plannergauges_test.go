package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// TestPlannerSeriesExpireWithTheirPlanner: a deployment's gauges are exposed while its planner
// updates them and dropped, all of them, once none was updated within the TTL (the planner
// ended); another deployment's stay. The clock is a fake.
func TestPlannerSeriesExpireWithTheirPlanner(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newPlannerGauges(15*time.Minute, func() time.Time { return now })
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	h := plannerMetricsHandler{next: nopHandler{}, gauges: g}.WithTags(map[string]string{"namespace": "default"})
	ended := h.WithTags(map[string]string{"deployment": "planner/ns/ended"})
	running := h.WithTags(map[string]string{"deployment": "planner/ns/running"})
	ended.Gauge("dynamo_planner_num_decode_replicas").Update(3)
	ended.WithTags(map[string]string{"dynamo_planner_load_scaling_decision": "scale_up"}).Gauge("dynamo_planner_load_scaling_decision").Update(1)
	running.Gauge("dynamo_planner_num_decode_replicas").Update(5)
	h.Gauge("temporal_other").Update(1) // not a planner gauge: the SDK's handler takes it

	count := func() int { n, err := testutil.GatherAndCount(reg); require.NoError(t, err); return n }
	require.Equal(t, 3, count())

	now = now.Add(10 * time.Minute)
	running.Gauge("dynamo_planner_num_decode_replicas").Update(6)
	require.Equal(t, 3, count(), "within the TTL")

	now = now.Add(6 * time.Minute) // the ended planner's last update is 16 minutes old
	require.Equal(t, 1, count())
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP dynamo_planner_num_decode_replicas Planner gauge (Dynamo's name), per deployment.
# TYPE dynamo_planner_num_decode_replicas gauge
dynamo_planner_num_decode_replicas{deployment="planner/ns/running",namespace="default"} 6
`)))

	ended.Gauge("dynamo_planner_num_decode_replicas").Update(2) // started again
	require.Equal(t, 2, count())

	// A planner ticking every 30 minutes keeps its series for three intervals.
	slow := h.WithTags(map[string]string{"deployment": "planner/ns/slow"})
	slow.Gauge(TickIntervalGauge).Update(1800)
	slow.Gauge("dynamo_planner_num_decode_replicas").Update(1)
	now = now.Add(80 * time.Minute)
	running.Gauge("dynamo_planner_num_decode_replicas").Update(6)
	require.Equal(t, 3, count(), "the slow planner's two series and the running one")
	now = now.Add(11 * time.Minute)
	running.Gauge("dynamo_planner_num_decode_replicas").Update(6)
	require.Equal(t, 1, count(), "91 minutes without a tick: gone")
}

type nopHandler struct{}

func (nopHandler) WithTags(map[string]string) client.MetricsHandler { return nopHandler{} }
func (nopHandler) Counter(string) client.MetricsCounter             { return client.MetricsNopHandler.Counter("") }
func (nopHandler) Gauge(string) client.MetricsGauge                 { return client.MetricsNopHandler.Gauge("") }
func (nopHandler) Timer(string) client.MetricsTimer                 { return client.MetricsNopHandler.Timer("") }
