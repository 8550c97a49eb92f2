// Package tracing gives the calls the planner's activities make (Prometheus queries,
// Kubernetes API calls) spans under the span of their context: explicit spans with Start, and
// HTTP client spans through otelhttp with Transport. A context without a recording span
// (tracing off, or the trace sampled out) gets nothing: no span is created and requests go
// straight to the wrapped transport, so tracing costs nothing when it is off. Spans come from
// the parent span's tracer provider, so the packages that use this need no provider of their
// own and never touch OpenTelemetry's global one. It imports the OpenTelemetry API only (no
// SDK, no Temporal), so pure packages may use it.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans started here.
const ScopeName = "github.com/llmplanner/planner"

// Transport wraps base (http.DefaultTransport when nil). Spans are named "<component> <METHOD>"
// (e.g. "prometheus POST"); the URL is recorded as the request has it when it reaches this
// transport, so wrap it outside any transport that adds credentials to the URL. No trace
// context is sent to the server.
func Transport(component string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithFilter(Traced),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return component + " " + r.Method }),
	)
}

// Traced reports whether a request's context carries a recording span, i.e. whether its call
// gets a span.
func Traced(r *http.Request) bool {
	return trace.SpanFromContext(r.Context()).IsRecording()
}

// Start starts an internal span named name under the recording span of ctx. Without one it
// returns ctx and its (non-recording) span unchanged: End and the other methods do nothing.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// End ends a span started by Start, marking it failed when err is not nil.
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
