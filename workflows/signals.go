package workflows

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// Signals arrive in history in the order operators sent them, but the SDK hands each signal
// name its own channel, so two signals of different names delivered in one workflow task
// ("resume" then "pause") would be applied in the order their channels are read, not the
// order they were sent, and a signal of an unknown name would wait in a channel nobody reads,
// neither applied nor rejected. The interceptor below sees every signal as its history event
// is processed, in order, and keeps it in the run's signal log; the planner applies the log in
// that order and rejects names it does not know.

// orderedSignalsChange is the workflow.GetVersion change id of the signal log: executions
// that began before it (recorded histories, planners running during an upgrade) keep reading
// one channel per signal name.
const orderedSignalsChange = "ordered-signals"

// HistoryGeneration counts the workflow.GetVersion changes: 1 before any, 2 since
// orderedSignalsChange, 3 since inlineDecideChange. Recorded histories are kept per generation (replaytests), so each
// branch a change keeps for older executions stays replayed.
const HistoryGeneration = 3

// Interceptors are the worker interceptors every worker running PlannerWorkflow must be
// created with (worker.Options.Interceptors, and the replayer's and the test environment's
// options): they keep each planner's signal log.
func Interceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{&signalLogInterceptor{}}
}

// signalEntry is one signal as it arrived.
type signalEntry struct {
	name    string
	payload *commonpb.Payload
}

// signalLog holds a run's signals in arrival order, filled by the interceptor while history
// events are processed and emptied by the planner's coroutine.
type signalLog struct {
	entries []signalEntry
	// decided is set once the run has chosen (by version) whether it reads the log; until
	// then signals are both logged and passed on to their channels.
	decided bool
	// logged is the choice: read the log (true) or the channels (false).
	logged bool
}

type signalLogKey struct{}

// signalLogInterceptor gives every PlannerWorkflow execution a signal log.
type signalLogInterceptor struct {
	interceptor.WorkerInterceptorBase
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (*signalLogInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != WorkflowName {
		return next
	}
	return &signalLogInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, log: &signalLog{}}
}

// signalLogInbound is one execution's interceptor.
type signalLogInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	log *signalLog
}

// ExecuteWorkflow hands the log to the workflow through its context.
func (i *signalLogInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, signalLogKey{}, i.log), in)
}

// HandleSignal logs the signal in arrival order. It runs while the history event is
// processed, outside the workflow's coroutines: it only appends.
func (i *signalLogInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	if !i.log.decided || i.log.logged {
		var p *commonpb.Payload
		if in.Arg != nil && len(in.Arg.Payloads) > 0 {
			p = in.Arg.Payloads[0]
		}
		i.log.entries = append(i.log.entries, signalEntry{name: in.SignalName, payload: p})
	}
	if i.log.decided && i.log.logged {
		return nil
	}
	return i.Next.HandleSignal(ctx, in)
}

// errNoSignalLog fails a workflow task on a worker created without Interceptors.
var errNoSignalLog = errors.New("this worker runs PlannerWorkflow without workflows.Interceptors() in its options: signals could not be applied in order; fix the worker and the task is retried")

// listenSignals installs the signal handling: the signal log for runs at the
// orderedSignalsChange version, one coroutine per signal channel for older executions.
func (r *run) listenSignals(byName map[string]control) {
	ctx := r.ctx
	lg, _ := ctx.Value(signalLogKey{}).(*signalLog)
	if workflow.GetVersion(ctx, orderedSignalsChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		if lg != nil {
			lg.decided, lg.logged, lg.entries = true, false, nil
		}
		r.listenChannels(byName)
		return
	}
	if lg == nil {
		panic(errNoSignalLog)
	}
	lg.decided, lg.logged = true, true
	r.signalLog, r.signalControls = lg, byName
	for _, name := range SignalNames {
		// Declared for the Web UI and `temporal workflow metadata`; the log carries the signals.
		workflow.GetSignalChannelWithOptions(ctx, name, workflow.SignalChannelOptions{Description: signalDescription(name)})
	}
	// Signals delivered before this point also went to their channels: empty those, the log
	// has them.
	for _, name := range workflow.GetUnhandledSignalNames(ctx) {
		ch := workflow.GetSignalChannel(ctx, name)
		for {
			var raw converter.RawValue
			if !ch.ReceiveAsync(&raw) {
				break
			}
		}
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return len(lg.entries) > 0 }); err != nil {
				return
			}
			r.applySignalLog()
		}
	})
}

// applySignalLog applies the logged signals in arrival order; an unknown name is rejected.
func (r *run) applySignalLog() {
	for len(r.signalLog.entries) > 0 {
		e := r.signalLog.entries[0]
		r.signalLog.entries = r.signalLog.entries[1:]
		c, ok := r.signalControls[e.name]
		if !ok {
			err := fmt.Errorf("unknown signal %q: the signals are %s (queries and updates are not signals)", truncate(e.name, 100), strings.Join(SignalNames, ", "))
			r.st.reject(r.now(), truncate(e.name, 100), err)
			r.logger.Warn("signal rejected", "signal", truncate(e.name, 100), "error", err)
			continue
		}
		r.handleSignal(c, converter.NewRawValue(e.payload))
	}
	r.signalLog.entries = nil
}

// listenChannels reads each signal name's channel in its own coroutine (executions that
// began before the signal log).
func (r *run) listenChannels(byName map[string]control) {
	for _, name := range SignalNames {
		c := byName[name]
		ch := workflow.GetSignalChannelWithOptions(r.ctx, c.name, workflow.SignalChannelOptions{Description: signalDescription(c.name)})
		sc := signalChannel{ch: ch, control: c}
		r.signals = append(r.signals, sc)
		workflow.Go(r.ctx, func(ctx workflow.Context) {
			for {
				// A RawValue always decodes, so a malformed payload cannot be dropped
				// silently by the SDK: handleSignal decodes it and records the error.
				var raw converter.RawValue
				ch.Receive(ctx, &raw)
				r.handleSignal(sc.control, raw)
			}
		})
	}
}

func signalDescription(name string) string {
	return "the " + name + " update as a signal: applied in arrival order; invalid payloads are recorded as rejected, never applied"
}

// truncate shortens s to at most n bytes (on a rune boundary) for messages and logs.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
