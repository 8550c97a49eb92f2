package replay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/connectortest"
	"github.com/llmplanner/planner/scaling"
)

func TestStepper_Connector(t *testing.T) {
	connectortest.Run(t, func(t *testing.T) connectors.Connector {
		st, err := NewStepper(loadStep(), loadOptions(t), func() float64 { return 0 })
		require.NoError(t, err)
		return st
	}, connectortest.Options{Applies: true})
}

// driveStepper runs the planner over a Stepper the way the workflow does: tick at the
// scheduled time, read inventory, FPM and traffic through the hosted interfaces, decide,
// apply the decision with a new id, remember it as submitted.
func driveStepper(t *testing.T, st *Stepper, o Options) []TimelineEntry {
	t.Helper()
	ctx := context.Background()
	pl, err := scaling.New(o.Config, o.Profile)
	require.NoError(t, err)
	boot, err := bootstrap(pl, o)
	require.NoError(t, err)
	core, err := pl.Init(0, boot)
	require.NoError(t, err)
	var now float64
	st.clock = func() float64 { return now }
	var id int64
	var ticks []TimelineEntry
	for !st.Over() {
		tk := pl.NextTick(core)
		now = tk.At
		inv, err := st.Inventory(ctx)
		require.NoError(t, err)
		if st.Over() {
			break
		}
		in := scaling.Input{Now: now, Workers: inv.Counts(), Capabilities: inv.Capabilities}
		if tk.NeedFPM {
			in.FPM, err = st.ReadFPM(time.Time{})
			require.NoError(t, err)
		}
		if tk.NeedTraffic {
			in.Traffic, err = st.Traffic(ctx, time.Duration(tk.TrafficDurationS*float64(time.Second)))
			require.NoError(t, err)
		}
		var dec scaling.Decision
		core, dec, _, err = pl.Decide(core, in)
		require.NoError(t, err)
		ticks = append(ticks, TimelineEntry{At: now, Decision: dec})
		if dec.Empty() {
			continue
		}
		id++
		require.NoError(t, st.Apply(ctx, id, connectors.Targets{Prefill: dec.Prefill, Decode: dec.Decode}))
		core = pl.Submitted(core, dec, now)
	}
	return ticks
}

func TestStepper_DrivenLikeTheWorkflowMatchesRun(t *testing.T) {
	o := loadOptions(t)
	reqs := loadStep()
	want, err := Run(reqs, o)
	require.NoError(t, err)
	require.NotZero(t, want.ScaleActions, "the trace must make the planner scale")

	st, err := NewStepper(reqs, o, func() float64 { return 0 })
	require.NoError(t, err)
	ticks := driveStepper(t, st, o)
	got := st.Result()

	require.Len(t, ticks, len(want.Timeline))
	for i, e := range want.Timeline {
		require.Equal(t, e.At, ticks[i].At, "tick %d", i)
		require.Equal(t, e.Decision, ticks[i].Decision, "tick %d at %v s", i, e.At)
	}
	require.Equal(t, want.Requests, got.Requests)
	require.Equal(t, want.Replicas, got.Replicas)
	require.Equal(t, want.GPUSeconds, got.GPUSeconds)
	require.Equal(t, want.Good, got.Good)
	require.Equal(t, want.ScaleActions, got.ScaleActions)
	require.Equal(t, want.Reversals, got.Reversals)
	require.Empty(t, got.Timeline)
	require.Len(t, st.Observed(), len(ticks)+1, "one inventory read per tick, and the one that found the replay over")
}

func TestStepper_ClockGoingBackIsAnError(t *testing.T) {
	now := 10.0
	st, err := NewStepper(loadStep(), loadOptions(t), func() float64 { return now })
	require.NoError(t, err)
	_, err = st.Inventory(context.Background())
	require.NoError(t, err)
	now = 9
	_, err = st.Inventory(context.Background())
	require.ErrorContains(t, err, "clock went back")
	_, err = st.ReadFPM(time.Time{})
	require.Error(t, err, "the stepper stays failed")
	obs, err := st.Traffic(context.Background(), time.Minute)
	require.Error(t, err)
	require.Nil(t, obs.NumReq, "an unreadable window is never zero demand")
	require.Equal(t, 60.0, obs.DurationS)
}

func TestNewStepper_NeedsAClock(t *testing.T) {
	_, err := NewStepper(nil, loadOptions(t), nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestStepper_OverChangesNothing(t *testing.T) {
	now := 0.0
	o := loadOptions(t)
	reqs := steps(step{0, 10, 1, 1000, 10})
	st, err := NewStepper(reqs, o, func() float64 { return now })
	require.NoError(t, err)
	now = 3600
	before, err := st.Inventory(context.Background())
	require.NoError(t, err)
	require.True(t, st.Over())
	require.NoError(t, st.Apply(context.Background(), 1, connectors.Targets{Prefill: ptr(5)}))
	after, err := st.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, before.WorkerCounts, after.WorkerCounts, "a finished replay does not move")
	require.Equal(t, int64(1), after.AppliedDecisionID, "the decision is still acknowledged")
	require.Empty(t, st.Applied())
	res := st.Result()
	require.Equal(t, len(reqs), res.Finished)
	require.InDelta(t, 1.0, res.Goodput, 1e-12)
}
