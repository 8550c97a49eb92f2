package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tempotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/workflows"
)

// DefaultServiceName is the traces' service.name unless OTEL_SERVICE_NAME (or service.name in
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const DefaultServiceName = "planner-worker"

// Tracing is the worker's OpenTelemetry tracing: a tracer provider exporting over OTLP, the
// Temporal tracing interceptor on the client (so every worker made from it traces workflows
// and activities) and the planner's tick spans. It exists only when the environment asks for
// traces (TracingFromEnv): a worker without it creates no provider, no exporter and no span.
type Tracing struct {
	// Provider is the tracer provider (batching, OTLP exporter).
	Provider *sdktrace.TracerProvider
	// Exporter describes where spans go ("otlp http/protobuf", "otlp grpc").
	Exporter string

	tracer interceptor.Tracer
	key    spanKey
}

// spanKey is the workflow context key the Temporal tracing interceptor and the planner's
// tick spans keep the current span under (one key, so activities scheduled in a tick are its
// children).
type spanKey struct{}

// The OTEL_* variables TracingFromEnv reads itself; the exporter and the SDK read the others
// (docs/tracing.md lists them).
const (
	envSDKDisabled       = "OTEL_SDK_DISABLED"
	envTracesExporter    = "OTEL_TRACES_EXPORTER"
	envProtocol          = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol    = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envEndpoint          = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint    = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	protocolGRPC         = "grpc"
	protocolHTTPProtobuf = "http/protobuf"
)

// TracingFromEnv builds the worker's tracing from the standard OpenTelemetry environment, or
// returns nil (and creates nothing) when it asks for none. Traces are on when
// OTEL_TRACES_EXPORTER is otlp, or when it is unset and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set; off when none of them is set (the default), when
// OTEL_TRACES_EXPORTER is none, or when OTEL_SDK_DISABLED is true. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the
// default) or grpc. Any other exporter or protocol is an error: the worker does not start
// rather than silently not trace. lookup reads the environment (os.LookupEnv); the exporter
// and the SDK read the other OTEL_* variables (endpoint, headers, TLS, timeout, compression,
// sampler, batching, resource) from the process environment themselves.
func TracingFromEnv(ctx context.Context, lookup func(string) (string, bool)) (*Tracing, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(get(envSDKDisabled), "true") {
		return nil, nil
	}
	switch exp := strings.ToLower(get(envTracesExporter)); exp {
	case "none":
		return nil, nil
	case "":
		if get(envEndpoint) == "" && get(envTracesEndpoint) == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("%s=%q: this worker exports traces with otlp only (or none to turn them off)", envTracesExporter, exp)
	}
	protocol := get(envTracesProtocol)
	if protocol == "" {
		protocol = get(envProtocol)
	}
	if protocol == "" {
		protocol = protocolHTTPProtobuf
	}
	var (
		exporter sdktrace.SpanExporter
		err      error
	)
	switch protocol {
	case protocolHTTPProtobuf:
		exporter, err = otlptracehttp.New(ctx)
	case protocolGRPC:
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q (%s / %s): want %s or %s", protocol, envTracesProtocol, envProtocol, protocolHTTPProtobuf, protocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", protocol, err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("trace resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	// The sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and the batching
	// (OTEL_BSP_*) come from the environment through the SDK's defaults.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	t := &Tracing{Provider: tp, Exporter: "otlp " + protocol}
	t.tracer, err = tempotel.NewTracer(tempotel.TracerOptions{
		Tracer:         tp.Tracer("go.temporal.io/sdk"),
		SpanContextKey: t.key,
		// Queries (the Web UI reads the state often) would bury the ticks.
		DisableQueryTracing: true,
		SpanStarter:         startSpan,
	})
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, fmt.Errorf("temporal tracer: %w", err)
	}
	return t, nil
}

// startSpan is the Temporal tracer's span starter: the planner's own workflow spans (ticks,
// decisions) are internal spans, not the server spans the interceptor makes by default.
func startSpan(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
	if strings.HasPrefix(name, workflows.SpanTick+":") || strings.HasPrefix(name, workflows.SpanDecide+":") {
		opts = append(opts, trace.WithSpanKind(trace.SpanKindInternal))
	}
	_, span := t.Start(ctx, name, opts...)
	return span
}

// ClientInterceptor is the Temporal tracing interceptor, for client.Options.Interceptors:
// client calls (starting and updating planners), workflows and activities get spans, and
// every worker made from the client gets it too.
func (t *Tracing) ClientInterceptor() interceptor.Interceptor {
	return interceptor.NewTracingInterceptor(t.tracer)
}

// WorkerInterceptor gives every planner workflow the tick spans (workflows.Spans); it goes in
// the planner worker's worker.Options.Interceptors.
func (t *Tracing) WorkerInterceptor() interceptor.WorkerInterceptor {
	return &tickSpansInterceptor{spans: &workflowSpans{tracer: t.tracer, key: t.key}}
}

// Shutdown exports the spans still buffered (bounded by ctx) and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	return t.Provider.Shutdown(ctx)
}

// tickSpansInterceptor puts the tick spans in each planner's workflow context.
type tickSpansInterceptor struct {
	interceptor.WorkerInterceptorBase
	spans *workflowSpans
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (i *tickSpansInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != workflows.WorkflowName {
		return next
	}
	return &tickSpansInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, spans: i.spans}
}

type tickSpansInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	spans *workflowSpans
}

// ExecuteWorkflow hands the spans to the planner through its context.
func (i *tickSpansInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflows.WithSpans(ctx, i.spans), in)
}

// workflowSpans implements workflows.Spans with the Temporal tracer, so its spans are the
// parents of the activity spans the interceptor starts. Nothing is started while the workflow
// replays: a tick replayed after a worker restart is not traced again.
type workflowSpans struct {
	tracer interceptor.Tracer
	key    spanKey
}

// Start implements workflows.Spans. A root span (a tick's) starts a new trace linked to the
// workflow run's span.
func (s *workflowSpans) Start(ctx workflow.Context, name string, root bool, attrs map[string]string) (workflow.Context, func(string)) {
	if workflow.IsReplaying(ctx) {
		return ctx, func(string) {}
	}
	info := workflow.GetInfo(ctx)
	tags := map[string]string{"temporalWorkflowID": info.WorkflowExecution.ID, "temporalRunID": info.WorkflowExecution.RunID}
	for k, v := range attrs {
		tags[k] = v
	}
	current, _ := ctx.Value(s.key).(interceptor.TracerSpan)
	opts := &interceptor.TracerStartSpanOptions{Operation: name, Name: info.WorkflowType.Name, Time: time.Now(), Tags: tags}
	if !root {
		opts.Parent = current
	}
	span, err := s.tracer.StartSpan(opts)
	if err != nil {
		return ctx, func(string) {}
	}
	if root && current != nil {
		if run, ok := current.(interface{ SpanContext() trace.SpanContext }); ok {
			if otelSpan, ok := span.(trace.Span); ok {
				otelSpan.AddLink(trace.Link{SpanContext: run.SpanContext()})
			}
		}
	}
	return workflow.WithValue(ctx, s.key, span), func(errText string) {
		var err error
		if errText != "" {
			err = errors.New(errText)
		}
		span.Finish(&interceptor.TracerFinishSpanOptions{Error: err})
	}
}
