package noop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/connectortest"
	"github.com/llmplanner/planner/scaling"
)

func one() *int { v := 1; return &v }

func TestConformance(t *testing.T) {
	connectortest.Run(t, func(*testing.T) connectors.Connector {
		return New(connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: one(), ReadyDecode: one()}})
	}, connectortest.Options{Applies: false})
}

func TestRecordsAndAppliesNothing(t *testing.T) {
	c := New(connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: one(), ReadyDecode: one()}})
	three := 3
	require.NoError(t, c.Apply(context.Background(), 1, connectors.Targets{Decode: &three}))
	require.NoError(t, c.Apply(context.Background(), 1, connectors.Targets{Decode: &three}))
	require.Equal(t, []Applied{{DecisionID: 1, Targets: connectors.Targets{Decode: &three}}}, c.Recorded())
	inv, err := c.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, *inv.ReadyDecode, "advisory: the deployment is unchanged")
	require.Nil(t, inv.ExpectedDecode)
}

func TestJournalSurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/journal.jsonl"
	inv := connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: one(), ReadyDecode: one()}}
	j, err := Open(path, inv)
	require.NoError(t, err)
	two := 2
	ctx := context.Background()
	require.NoError(t, j.Apply(ctx, 1, connectors.Targets{Prefill: &two}))
	require.NoError(t, j.Apply(ctx, 2, connectors.Targets{Decode: &two}))

	// A new process: the retried decision 2 is recognised, decision 1 is stale.
	again, err := Open(path, inv)
	require.NoError(t, err)
	require.NoError(t, again.Apply(ctx, 2, connectors.Targets{Decode: &two}))
	require.ErrorIs(t, again.Apply(ctx, 1, connectors.Targets{Prefill: &two}), connectors.ErrStaleDecision)
	require.Len(t, again.Recorded(), 2, "no decision recorded twice")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(data), "\n"))
	got, err := again.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), got.AppliedDecisionID)

	require.NoError(t, os.WriteFile(path, []byte("{\n"), 0o600))
	_, err = Open(path, inv)
	require.ErrorContains(t, err, "journal.jsonl:1")
}

func TestJournalWriteFailureIsRetried(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "j.jsonl")
	j, err := Open(path, connectors.Inventory{})
	require.NoError(t, err)
	two := 2
	// The directory does not exist yet: the write fails and nothing is recorded.
	require.ErrorContains(t, j.Apply(context.Background(), 1, connectors.Targets{Decode: &two}), "noop journal")
	require.Empty(t, j.Recorded())
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, j.Apply(context.Background(), 1, connectors.Targets{Decode: &two}), "the retry writes it")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, `{"decision_id":1,"targets":{"decode":2}}`+"\n", string(data))
}
