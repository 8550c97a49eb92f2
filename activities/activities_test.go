package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/workflows"
)

func applicationError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "want an ApplicationError, got %T: %v", err, err)
	return ae
}

func TestApplyErrorsAreTyped(t *testing.T) {
	a := &Activities{NoopJournalDir: t.TempDir()}
	ctx := context.Background()
	dep := workflows.Deployment{Namespace: "ns", Name: "x"}
	two, minus := 2, -1
	req := func(id int64, decode *int, env config.Environment) workflows.ApplyRequest {
		return workflows.ApplyRequest{Deployment: dep, Environment: env, DecisionID: id, Targets: connectors.Targets{Decode: decode}, InitialDecode: 1}
	}
	require.NoError(t, a.Apply(ctx, req(3, &two, config.EnvNoop)))
	require.NoError(t, a.Apply(ctx, req(3, &two, config.EnvNoop)), "a retried apply of the newest decision is harmless")

	tests := []struct {
		name      string
		req       workflows.ApplyRequest
		wantType  string
		wantInMsg string
	}{
		{"stale", req(2, &two, config.EnvNoop), workflows.ErrTypeStaleDecision, "decision 2, newest 3"},
		{"invalid", req(4, &minus, config.EnvNoop), workflows.ErrTypeInvalidTargets, "decode target -1 is negative"},
		{"no connector", req(4, &two, config.EnvGlobalPlanner), workflows.ErrTypeBadConfig, `environment "global-planner" has no connector in this worker`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ae := applicationError(t, a.Apply(ctx, tt.req))
			require.Equal(t, tt.wantType, ae.Type())
			require.True(t, ae.NonRetryable())
			require.Contains(t, ae.Error(), tt.wantInMsg)
		})
	}
	// The journal kept the one decision.
	data, err := os.ReadFile(filepath.Join(a.NoopJournalDir, "planner_ns_x.jsonl"))
	require.NoError(t, err)
	require.Equal(t, `{"decision_id":3,"targets":{"decode":2}}`+"\n", string(data))
}

// notReady is a hosted connector that cannot take a change now.
type notReady struct{ connectors.Connector }

func (notReady) Apply(context.Context, int64, connectors.Targets) error {
	return fmt.Errorf("%w: a rollout is in progress", connectors.ErrNotReady)
}

func TestApplyHeldAndUnhostedErrors(t *testing.T) {
	a := &Activities{}
	ctx := context.Background()
	dep := workflows.Deployment{Namespace: "ns", Name: "k"}
	two := 2
	req := workflows.ApplyRequest{Deployment: dep, Environment: config.EnvKubernetes, DecisionID: 1, Targets: connectors.Targets{Decode: &two}}
	ae := applicationError(t, a.Apply(ctx, req))
	require.Equal(t, workflows.ErrTypeUnavailable, ae.Type(), "not hosted (yet): retryable")
	require.False(t, ae.NonRetryable())
	require.Contains(t, ae.Error(), "this worker does not host deployment planner/ns/k (environment kubernetes)")

	a.Host(dep, Hosted{Connector: notReady{}})
	ae = applicationError(t, a.Apply(ctx, req))
	require.Equal(t, workflows.ErrTypeNotReady, ae.Type())
	require.True(t, ae.NonRetryable(), "held: not retried within the tick, decided again on the next")
	require.Contains(t, ae.Error(), "a rollout is in progress")
}

func TestUnreadableJournalIsRetryable(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planner_ns_x.jsonl"), []byte("{not json\n"), 0o644))
	a := &Activities{NoopJournalDir: dir}
	_, err := a.ObserveInventory(context.Background(), workflows.ObserveRequest{Deployment: workflows.Deployment{Namespace: "ns", Name: "x"}, Environment: config.EnvNoop})
	ae := applicationError(t, err)
	require.Equal(t, workflows.ErrTypeUnavailable, ae.Type())
	require.False(t, ae.NonRetryable())
	require.Contains(t, ae.Error(), "planner_ns_x.jsonl:1")
}

func TestInitRefusesAMissingProfileForInterpolation(t *testing.T) {
	c := config.Default()
	c.Mode, c.Environment, c.OptimizationTarget, c.ThroughputSizing, c.ProfileResultsDir = config.ModeDecode, config.EnvNoop, config.TargetSLA, config.SizingInterpolation, t.TempDir()
	_, err := (&Activities{}).Init(context.Background(), workflows.InitRequest{Config: c})
	ae := applicationError(t, err)
	require.Equal(t, workflows.ErrTypeBadConfig, ae.Type())
	require.True(t, ae.NonRetryable())
	require.Contains(t, ae.Error(), "SLA-Planner requires pre-deployment profiling results")
}

func TestObservationsWithoutASourceAreMissingNotZero(t *testing.T) {
	a := &Activities{}
	tr, err := a.ObserveTraffic(context.Background(), workflows.ObserveRequest{TrafficDurationS: 60})
	require.NoError(t, err)
	require.Nil(t, tr, "no traffic source: no observation, never zero requests")
	fr, err := a.ObserveFPM(context.Background(), workflows.ObserveRequest{ReadyDecode: 2})
	require.NoError(t, err)
	require.Nil(t, fr.FPM)
}
