package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTraceModelNeedsTrace: --trace-model selects a --trace's requests; without one, loadgen
// and demo refuse it before starting anything, rather than replaying their default load.
func TestTraceModelNeedsTrace(t *testing.T) {
	for name, run := range map[string]func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error{
		"loadgen": func(ctx context.Context, args []string, o, e *bytes.Buffer) error { return runLoadgen(ctx, args, o, e) },
		"demo":    func(ctx context.Context, args []string, o, e *bytes.Buffer) error { return runDemo(ctx, args, o, e) },
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"--trace-model", "GPT-4"}, &stdout, &stderr)
			require.ErrorContains(t, err, "--trace-model selects a --trace's requests")
		})
	}
}
