package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmplanner/planner/internal/tracing"
)

func TestSpansOnlyUnderARecordingSpan(t *testing.T) {
	var gotTraceparent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotTraceparent = append(gotTraceparent, r.Header.Get("traceparent"))
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	client := &http.Client{Transport: tracing.Transport("svc", nil)}
	get := func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/x?q=1", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusTeapot, resp.StatusCode)
	}

	// No span in the context (tracing off): the call goes through, nothing is made.
	get(context.Background())
	ctx, span := tracing.Start(context.Background(), "query")
	require.False(t, span.IsRecording())
	require.Equal(t, context.Background(), ctx, "the context is returned unchanged")
	tracing.End(span, errors.New("ignored"))
	// A sampled-out parent records nothing either.
	off := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSyncer(exp))
	octx, oroot := off.Tracer("t").Start(context.Background(), "sampled out")
	get(octx)
	oroot.End()
	require.Empty(t, exp.GetSpans())

	// Under a recording span: an internal span and the HTTP client span below it.
	rctx, root := tp.Tracer("t").Start(context.Background(), "activity")
	qctx, q := tracing.Start(rctx, "query")
	require.True(t, q.IsRecording())
	get(qctx)
	tracing.End(q, errors.New("no series"))
	root.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		byName[s.Name()] = s
	}
	require.Len(t, byName, 3, "activity, query, svc GET: %v", byName)
	require.Equal(t, root.SpanContext().SpanID(), byName["query"].Parent().SpanID())
	require.Equal(t, trace.SpanKindInternal, byName["query"].SpanKind())
	require.Equal(t, codes.Error, byName["query"].Status().Code)
	httpSpan := byName["svc GET"]
	require.NotNil(t, httpSpan)
	require.Equal(t, q.SpanContext().SpanID(), httpSpan.Parent().SpanID())
	require.Equal(t, trace.SpanKindClient, httpSpan.SpanKind())
	require.Equal(t, []string{"", "", ""}, gotTraceparent, "no trace context is sent to the server")
}
