package kubernetes_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmplanner/planner/connectors"
)

// testTracedCalls: under a recording span (a traced activity) every API call of Inventory and
// Apply is a client span, its child; without one (tracing off) no span is made at all.
func testTracedCalls(t *testing.T) {
	c, ns, _ := newDGD(t, "traced", 1, 1)
	k := newConnector(t, c.Admin, ns, "traced")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	// Tracing off: the context carries no span; the provider exists but nothing reaches it.
	_, err := k.Inventory(context.Background())
	require.NoError(t, err)
	require.Empty(t, exp.GetSpans(), "no span without a traced caller")

	ctx, activity := tp.Tracer("test").Start(context.Background(), "RunActivity:Apply")
	_, err = k.Inventory(ctx)
	require.NoError(t, err)
	n := func(v int) *int { return &v }
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Decode: n(2)}))
	activity.End()

	methods := map[string]int{}
	for _, s := range exp.GetSpans() {
		if s.Name == "RunActivity:Apply" {
			continue
		}
		require.Equal(t, activity.SpanContext().SpanID(), s.Parent.SpanID(), "%s is the activity's child", s.Name)
		require.Equal(t, trace.SpanKindClient, s.SpanKind)
		methods[s.Name]++
	}
	require.Positive(t, methods["kubernetes GET"], "reads: %v", methods)
	require.Positive(t, methods["kubernetes PATCH"], "the decode component's write is a JSON patch of the DGD: %v", methods)
}
