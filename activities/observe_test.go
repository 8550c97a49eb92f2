package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// slowTraffic is a traffic source that answers only when its context ends (a Prometheus
// that hangs); its FPMs answer at once. calls counts the traffic reads.
type slowTraffic struct{ calls chan struct{} }

func (s slowTraffic) ObserveTraffic(ctx context.Context, _ workflows.ObserveRequest) (*scaling.TrafficObservation, error) {
	s.calls <- struct{}{}
	<-ctx.Done()
	return nil, temporal.NewApplicationError("prometheus: "+ctx.Err().Error(), workflows.ErrTypeUnavailable)
}

func (slowTraffic) ObserveFPM(context.Context, workflows.ObserveRequest) (workflows.FPMResult, error) {
	return workflows.FPMResult{FPM: &scaling.FPMObservations{Decode: []perf.FPM{{WorkerID: "d0", WallTime: 0.01}}}}, nil
}

// TestObserveKeepsWhatItReadWhenOnePartHangs: a hanging traffic read fails within the
// activity's time, the inventory and the FPMs still come back, and the traffic is reported
// unreadable, not zero.
func TestObserveKeepsWhatItReadWhenOnePartHangs(t *testing.T) {
	src := slowTraffic{calls: make(chan struct{}, 4)}
	a := &Activities{Unhosted: src, NoopJournalDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := workflows.ObserveAllRequest{ObserveRequest: workflows.ObserveRequest{Deployment: workflows.Deployment{Namespace: "ns", Name: "x"},
		Environment: config.EnvNoop, InitialDecode: 2, ReadyDecode: 1, TrafficDurationS: 60}, Inventory: true, FPM: true, Traffic: true}
	res, err := a.Observe(ctx, req)
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "answered before the activity's deadline")
	require.NotNil(t, res.Inventory)
	require.Equal(t, 2, *res.Inventory.ReadyDecode)
	require.NotNil(t, res.FPM)
	require.Len(t, res.FPM.FPM.Decode, 1)
	require.Nil(t, res.Traffic)
	require.Contains(t, res.TrafficError, "prometheus: context deadline exceeded (Unavailable)")
	require.Len(t, src.calls, 2, "retried once")
}
