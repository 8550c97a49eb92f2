package replaytests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

// TestSignalsInOneTaskApplyInArrivalOrder sends signals to a planner while no worker runs,
// so the real server delivers them in one workflow task: "resume" then "pause" must end
// paused (a channel per signal name read them pause-first), "pause" then "resume" resumed,
// and a signal of an unknown name must be recorded as rejected.
func TestSignalsInOneTaskApplyInArrivalOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := temporaltest.Start(t)
	c := srv.Client()
	const queue = "ordering"
	startWorker := func() sdkworker.Worker {
		w := sdkworker.New(c, queue, sdkworker.Options{Interceptors: workflows.Interceptors()})
		worker.Register(w, &activities.Activities{Unhosted: captureScript(), NoopJournalDir: t.TempDir()})
		require.NoError(t, w.Start())
		return w
	}
	cfg := captureConfig(config.EnvNoop)
	cfg.LoadAdjustmentIntervalSeconds = 3600 // no tick interleaves with the signals
	d := workflows.Deployment{Namespace: "ordering", Name: "llama"}
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: d.WorkflowID(), TaskQueue: queue}, workflows.WorkflowName,
		workflows.Input{Deployment: d, Config: cfg, InitialDecode: 1})
	require.NoError(t, err)
	pc := plannerclient.New(c, d)

	// roundTrip stops the worker, sends the signals, starts a worker and waits until the
	// planner has handled them (its rejected list reaches wantRejected).
	roundTrip := func(w sdkworker.Worker, wantRejected int, signals ...string) (sdkworker.Worker, workflows.StateView) {
		w.Stop()
		for _, name := range signals {
			require.NoError(t, c.SignalWorkflow(ctx, d.WorkflowID(), "", name, workflows.DirectionRequest{}))
		}
		w = startWorker()
		for {
			s, err := pc.State(ctx)
			if err == nil && len(s.Rejected) == wantRejected {
				return w, s
			}
			require.NoError(t, ctx.Err(), "waiting for the signals to be handled")
			time.Sleep(100 * time.Millisecond)
		}
	}
	w := startWorker()
	w, s := roundTrip(w, 1, workflows.UpdateResume, workflows.UpdatePause, "pasue")
	require.True(t, s.Overrides.PauseScaleUp && s.Overrides.PauseScaleDown, "resume then pause: paused")
	require.Equal(t, "pasue", s.Rejected[0].Name)
	require.Contains(t, s.Rejected[0].Error, `unknown signal "pasue"`)

	w, s = roundTrip(w, 2, workflows.UpdatePause, workflows.UpdateResume, "bogus")
	require.False(t, s.Overrides.PauseScaleUp || s.Overrides.PauseScaleDown, "pause then resume: resumed")
	w.Stop()
	require.NoError(t, c.TerminateWorkflow(ctx, d.WorkflowID(), "", "test done"))
}
