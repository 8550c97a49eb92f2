package workflows_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/workflows"
)

// recordedSpan is a span the fake Spans started.
type recordedSpan struct {
	name, parent string
	root, ended  bool
	attrs        map[string]string
}

func (s *recordedSpan) label() string { return s.name + "#" + s.attrs["planner.tick"] }

type spanCtxKey struct{}

// fakeSpans records the spans the planner starts and, through its outbound interceptor, the
// span each activity is scheduled under.
type fakeSpans struct {
	interceptor.WorkerInterceptorBase
	spans      []*recordedSpan
	activities []string
}

func (f *fakeSpans) Start(ctx workflow.Context, name string, root bool, attrs map[string]string) (workflow.Context, func(string)) {
	s := &recordedSpan{name: name, root: root, attrs: attrs}
	if p, ok := ctx.Value(spanCtxKey{}).(*recordedSpan); ok && !root {
		s.parent, s.attrs = p.name, p.attrs
	}
	f.spans = append(f.spans, s)
	return workflow.WithValue(ctx, spanCtxKey{}, s), func(string) { s.ended = true }
}

func (f *fakeSpans) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &fakeSpansInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, f: f}
}

type fakeSpansInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	f *fakeSpans
}

func (i *fakeSpansInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&fakeSpansOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, f: i.f})
}

func (i *fakeSpansInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflows.WithSpans(ctx, i.f), in)
}

type fakeSpansOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	f *fakeSpans
}

func (o *fakeSpansOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	under := "no span"
	if s, ok := ctx.Value(spanCtxKey{}).(*recordedSpan); ok {
		under = s.label()
	}
	o.f.activities = append(o.f.activities, activityType+" under "+under)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// TestTicksAreTraced: with workflows.Spans in its context, every tick is a root span whose
// activities are scheduled under it and whose decision is its child, all ended by the tick's
// end; without it the planner runs as before (every other test).
func TestTicksAreTraced(t *testing.T) {
	h := newHarness(t, kvScript())
	f := &fakeSpans{}
	h.env.SetWorkerOptions(worker.Options{Interceptors: append(workflows.Interceptors(), f)})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 3,
	})
	h.finishedByContinueAsNew()

	var got, want []string
	for _, s := range f.spans {
		require.True(t, s.ended, "%s ended", s.label())
		got = append(got, fmt.Sprintf("%s root=%v parent=%q deployment=%s", s.label(), s.root, s.parent, s.attrs["planner.deployment"]))
	}
	for tick := 1; tick <= 3; tick++ {
		want = append(want,
			fmt.Sprintf("Tick#%d root=true parent=\"\" deployment=ns/llama", tick),
			fmt.Sprintf("Decide#%d root=false parent=\"Tick\" deployment=ns/llama", tick))
	}
	require.Equal(t, want, got)
	require.Equal(t, []string{"Observe under Tick#1", "Apply under Tick#1", "Observe under Tick#2", "Observe under Tick#3"}, f.activities,
		"the first tick applies decode=2 through the noop connector")
}
