package workflows

import (
	"strconv"

	"go.temporal.io/sdk/workflow"
)

// Spans start trace spans from workflow code. A worker that traces (worker.Run with the
// OTEL_* environment set) puts one in every planner's context (WithSpans); without one the
// planner starts no span and pays one context lookup per tick. Spans are never recorded in
// history and change no command: an implementation must start nothing while the workflow
// replays (workflow.IsReplaying) and must not block.
type Spans interface {
	// Start starts a span: a new trace when root is true, else a child of the span ctx
	// carries. It returns ctx carrying the span (activities scheduled with it are its
	// children) and the function that ends it, with the error text of a failure ("" for
	// none).
	Start(ctx workflow.Context, name string, root bool, attrs map[string]string) (workflow.Context, func(errText string))
}

type spansKey struct{}

// WithSpans returns ctx with s: the planner traces its ticks with it.
func WithSpans(ctx workflow.Context, s Spans) workflow.Context {
	return workflow.WithValue(ctx, spansKey{}, s)
}

// Span names the planner starts.
const (
	// SpanTick is the root span of a tick's trace: its activities (observe, apply) and the
	// decision are its children.
	SpanTick = "Tick"
	// SpanDecide is the decision core's run in workflow code (history generation 3 on).
	SpanDecide = "Decide"
)

// startTickSpan starts the tick's trace; the tick's activities are scheduled under it until
// the returned function ends it.
func (r *run) startTickSpan(kind string) func(errText string) {
	s, _ := r.ctx.Value(spansKey{}).(Spans)
	if s == nil {
		return func(string) {}
	}
	ctx, end := s.Start(r.ctx, SpanTick, true, map[string]string{
		"planner.deployment": r.st.Deployment.Namespace + "/" + r.st.Deployment.Name,
		"planner.tick":       strconv.FormatInt(r.st.Ticks, 10),
		"planner.tick_kind":  kind,
	})
	r.spanCtx = ctx
	return func(errText string) {
		r.spanCtx = nil
		end(errText)
	}
}

// startChildSpan starts a span under the tick's (none outside a traced tick).
func (r *run) startChildSpan(name string) func(errText string) {
	s, _ := r.ctx.Value(spansKey{}).(Spans)
	if s == nil || r.spanCtx == nil {
		return func(string) {}
	}
	_, end := s.Start(r.spanCtx, name, false, nil)
	return end
}

// activityContext is the context activities are scheduled with: the tick's span, when traced.
func (r *run) activityContext() workflow.Context {
	if r.spanCtx != nil {
		return r.spanCtx
	}
	return r.ctx
}
