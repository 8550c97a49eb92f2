package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
)

// LogicVersion is the version of the state a planner carries across Continue-As-New: a change
// to its meaning bumps it, with a migration in newRun. A worker refuses state newer than its
// own (the workflow task fails and is retried; the workflow goes on once a newer worker runs
// it). A change to what the workflow records in history (commands, their order, their inputs)
// is gated by workflow.GetVersion, so executions that began before it replay unchanged, and
// gets a recorded history under replaytests/testdata.
const LogicVersion = 1

// Timeouts and retries of the tick's steps.
const (
	observeTimeout   = 10 * time.Second
	applyTimeout     = 10 * time.Second
	localTimeout     = 20 * time.Second
	initRetryAfter   = 30 * time.Second
	waitDecisionSpan = 50 * time.Second
)

// PlannerWorkflow is the durable planner of one deployment: it runs Dynamo's load and
// throughput ticks forever, keeps the decision core's state, the operator's overrides and the
// virtual connector's protocol in its state, and continues as new when the server suggests
// it. See docs/runbook.md for the messages.
func PlannerWorkflow(ctx workflow.Context, in Input) error {
	r, err := newRun(ctx, in)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadConfig, err)
	}
	if err := r.register(); err != nil {
		return err
	}
	r.inline = workflow.GetVersion(ctx, inlineDecideChange, workflow.DefaultVersion, 1) == 1
	return r.loop()
}

// inlineDecideChange is the workflow.GetVersion change id of history generation 3: one
// Observe activity per tick, and Decide run in workflow code with only its decision recorded
// (before: three observe activities and a Decide local activity whose result, the whole
// decision-core state, was recorded every tick).
const inlineDecideChange = "inline-decide"

type run struct {
	ctx     workflow.Context
	st      *State
	in      Input
	logger  log.Logger
	signals []signalChannel
	// signalLog and signalControls apply signals in arrival order (nil: the channels do).
	signalLog      *signalLog
	signalControls map[string]control
	// inline is set for runs of history generation 3 on (inlineDecideChange).
	inline bool
	// planner is the decision core Decide runs with in workflow code (nil: build it from the
	// configuration and profile; reset when the configuration changes). profile is the
	// pre-deployment profile, read once per run (profileRead).
	planner     *scaling.Planner
	profile     *perf.Profile
	profileRead bool
	// waiters counts the wait_decision calls blocked now.
	waiters int
	// draining is set before Continue-As-New: blocked wait_decision calls return.
	draining  bool
	ticksHere int
	initErr   string
	// observed is the frontend's mean TTFT and ITL over the last traffic window read, for
	// the Web UI's details only (not state: it starts empty in each run).
	observed *observedLatency
	// spanCtx carries the current tick's trace span (nil: no traced tick under way); the
	// tick's activities are scheduled with it (tracing.go).
	spanCtx workflow.Context
}

// observedLatency is what the frontend measured over a traffic window.
type observedLatency struct {
	TTFTMs, ITLMs *float64
	// At is when the window was read (Unix seconds).
	At float64
}

func newRun(ctx workflow.Context, in Input) (*run, error) {
	r := &run{ctx: ctx, in: in, logger: workflow.GetLogger(ctx)}
	if in.State != nil {
		if v := in.State.LogicVersion; v > LogicVersion {
			// A worker of an older release must not read (and silently downgrade) state it does
			// not understand: the panic fails the workflow task, not the workflow, and the task
			// is retried until a worker of the newer release takes it.
			panic(fmt.Sprintf("planner state has logic version %d, newer than this worker's %d: run a worker of the release that wrote it", v, LogicVersion))
		}
		r.st = in.State
		r.st.Runs++
		// Migrations from older logic versions go here; the carried state is then current.
		r.st.LogicVersion = LogicVersion
		return r, nil
	}
	if err := in.Deployment.Validate(); err != nil {
		return nil, fmt.Errorf("invalid deployment: %w", err)
	}
	cfg, err := withConfig(in.Config)
	if err != nil {
		return nil, fmt.Errorf("invalid planner config:\n%w", err)
	}
	if err := errors.Join(config.CheckReplicas("initial_prefill", in.InitialPrefill), config.CheckReplicas("initial_decode", in.InitialDecode)); err != nil {
		return nil, err
	}
	if in.HostTaskQueue != "" {
		if err := checkTaskQueueName(in.HostTaskQueue); err != nil {
			return nil, err
		}
	}
	ack := in.AckTimeoutSeconds
	if ack == 0 {
		ack = virtual.DefaultAckTimeoutSeconds
	}
	if ack < 0 {
		return nil, errors.New("ack_timeout_seconds must be >= 0")
	}
	r.st = &State{LogicVersion: LogicVersion, Deployment: in.Deployment, Config: cfg, InitialPrefill: in.InitialPrefill,
		InitialDecode: in.InitialDecode, AckTimeoutSeconds: ack, HostTaskQueue: in.HostTaskQueue, Runs: 1}
	if cfg.Environment == config.EnvVirtual {
		v := virtual.NewState(in.InitialPrefill, in.InitialDecode)
		r.st.Virtual = &v
	}
	return r, nil
}

func (r *run) now() float64 {
	return float64(workflow.Now(r.ctx).UnixNano()) / 1e9
}

// register installs the query, update and signal handlers.
func (r *run) register() error {
	ctx, st := r.ctx, r.st
	queries := []struct {
		name, desc string
		fn         any
	}{
		{QueryState, "the planner's state at a glance", func() (StateView, error) { return r.view(), nil }},
		{QueryDiagnostics, "the recent ticks, oldest first", func() ([]TickRecord, error) { return st.Recent, nil }},
		{QueryConfig, "the configuration in force", func() (config.Config, error) { return st.Config, nil }},
		{QueryVirtualDecision, "the newest virtual decision", func() (virtual.Decision, error) {
			if st.Virtual == nil {
				return virtual.Decision{}, fmt.Errorf("environment %q publishes no virtual decisions", st.Config.Environment)
			}
			return st.Virtual.Decision, nil
		}},
	}
	for _, q := range queries {
		if err := workflow.SetQueryHandlerWithOptions(ctx, q.name, q.fn, workflow.QueryHandlerOptions{Description: q.desc}); err != nil {
			return err
		}
	}
	controls := []control{
		newControl(UpdateSetReplicas, "pin a component's replicas for a time", st.ValidateSetReplicas,
			func(q SetReplicasRequest) string { return st.SetReplicas(r.now(), q) }),
		newControl(UpdateClearOverride, "remove replica overrides", st.ValidateClearOverride, st.ClearOverride),
		newControl(UpdatePause, "pause scale-up, scale-down or both", ValidateDirection, st.Pause),
		newControl(UpdateResume, "resume scale-up, scale-down or both", ValidateDirection, st.Resume),
		newControl(UpdateSetSLA, "change the TTFT and ITL targets", st.ValidateSetSLA,
			func(q SetSLARequest) string { r.planner = nil; return st.SetSLA(q) }),
		newControl(UpdateSetLimits, "change the minimum endpoints and GPU budgets", st.ValidateSetLimits,
			func(q SetLimitsRequest) string { r.planner = nil; return st.SetLimits(q) }),
		newControl(UpdateAcknowledge, "acknowledge a virtual decision", st.ValidateAcknowledge, st.Acknowledge),
		newControl(UpdateConfig, "replace the configuration", st.ValidateConfig,
			func(q ConfigRequest) string { r.planner = nil; return st.SetConfig(q) }),
	}
	for _, c := range controls {
		// The Web UI's current details show the overrides: refreshed as soon as one is
		// handled, not at the next tick.
		handler := func(ctx workflow.Context, raw converter.RawValue) (Result, error) {
			res, err := c.handler(ctx, raw)
			if err == nil {
				r.refreshDetails()
			}
			return res, err
		}
		if err := workflow.SetUpdateHandlerWithOptions(ctx, c.name, handler, workflow.UpdateHandlerOptions{Validator: c.validator, Description: c.desc}); err != nil {
			return err
		}
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateWaitDecision,
		func(ctx workflow.Context, raw converter.RawValue) (virtual.Decision, error) {
			var q WaitDecisionRequest
			if err := decodeMessage(raw, &q, false, false); err != nil {
				return virtual.Decision{}, invalid(err)
			}
			// The SDK runs the validator and then this handler in one coroutine, so the
			// validator's count is this one's: no other call slips in between.
			r.waiters++
			defer func() { r.waiters-- }()
			// A lower id than asked for also answers: the planner was started again and its
			// virtual decision ids began anew.
			_, err := workflow.AwaitWithTimeout(ctx, waitDecisionSpan, func() bool {
				return r.draining || st.Virtual.Decision.DecisionID != q.AfterDecisionID
			})
			if err != nil {
				return virtual.Decision{}, err
			}
			return st.Virtual.Decision, nil
		}, workflow.UpdateHandlerOptions{
			Description: fmt.Sprintf("wait (up to a minute) for a virtual decision other than after_decision_id (at most %d waiting at once)", MaxWaitDecision),
			Validator: func(_ workflow.Context, raw converter.RawValue) error {
				var q WaitDecisionRequest
				if err := decodeMessage(raw, &q, true, false); err != nil {
					return invalid(err)
				}
				if st.Virtual == nil {
					return invalid(fmt.Errorf("environment %q publishes no virtual decisions", st.Config.Environment))
				}
				// The server holds a few in-flight updates per workflow (10 by default): waiters
				// must leave room for an operator's pause or override.
				if r.waiters >= MaxWaitDecision {
					return invalid(fmt.Errorf("%d wait_decision calls are already waiting, at most %d: query %s instead, or wait for one to return", r.waiters, MaxWaitDecision, QueryVirtualDecision))
				}
				return nil
			}})
	if err != nil {
		return err
	}
	// The signals are the same controls, applied in arrival order (signals.go).
	byName := map[string]control{}
	for _, c := range controls {
		if slices.Contains(SignalNames, c.name) {
			byName[c.name] = c
		}
	}
	r.listenSignals(byName)
	return nil
}

// control is one operator message, served as an update and as a signal from one validation
// and one application, so the two can never disagree.
type control struct {
	name, desc string
	handler    func(workflow.Context, converter.RawValue) (Result, error)
	validator  func(workflow.Context, converter.RawValue) error
	// signal decodes a signal's payload strictly (live and on replay, see handleSignal), validates and
	// applies it.
	signal func(raw converter.RawValue) (string, error)
}

func newControl[T any](name, desc string, validate func(T) error, apply func(T) string) control {
	return control{
		name: name, desc: desc,
		// The validator decodes strictly; it runs only for new requests. The handler also runs
		// on replay, where a field removed from T since the update was recorded must not fail it.
		handler: func(_ workflow.Context, raw converter.RawValue) (Result, error) {
			var q T
			if err := decodeMessage(raw, &q, false, false); err != nil {
				return Result{}, invalid(err)
			}
			return Result{apply(q)}, nil
		},
		validator: func(_ workflow.Context, raw converter.RawValue) error {
			var q T
			if err := decodeMessage(raw, &q, true, false); err != nil {
				return invalid(err)
			}
			return invalid(validate(q))
		},
		signal: func(raw converter.RawValue) (string, error) {
			var q T
			if err := decodeMessage(raw, &q, true, true); err != nil {
				return "", err
			}
			if err := validate(q); err != nil {
				return "", err
			}
			return apply(q), nil
		},
	}
}

// signalChannel is a signal's channel and the control it carries.
type signalChannel struct {
	ch      workflow.ReceiveChannel
	control control
}

// invalid turns a validator's error into a non-retryable application error, so clients
// show the reason without retrying.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidRequest, nil)
}

// handleSignal decodes, validates and applies one signal; an invalid one is recorded as
// rejected and changes nothing.
func (r *run) handleSignal(c control, raw converter.RawValue) {
	// Strict live and on replay alike: a signal's verdict (applied or rejected) is not
	// recorded, so it must come out the same when the history is replayed. A field removed
	// from a request type must therefore stay as an ignored, deprecated field.
	msg, err := c.signal(raw)
	if err != nil {
		r.st.reject(r.now(), c.name, err)
		r.logger.Warn("signal rejected", "signal", c.name, "error", err)
		return
	}
	r.logger.Info("signal applied", "signal", c.name, "result", msg)
	r.refreshDetails()
}

// decodeMessage decodes an update's or a signal's JSON payload into v. Strict decoding (new
// messages) refuses unknown fields and trailing data; lenient decoding (replay) ignores
// unknown fields, so a field removed since the message was recorded changes nothing. No
// payload is an error for a signal and the empty request for an update; another encoding or
// malformed JSON is an error.
func decodeMessage(raw converter.RawValue, v any, strict, isSignal bool) error {
	p := raw.Payload()
	if p == nil || string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingNil {
		if isSignal {
			return errors.New("the signal has no input: give a JSON object (--input '{...}')")
		}
		return nil
	}
	what := "update"
	if isSignal {
		what = "signal"
	}
	if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != converter.MetadataEncodingJSON {
		return fmt.Errorf("the %s's input is encoded %q: give a JSON object", what, enc)
	}
	if strict && len(p.GetData()) > maxMessageBytes {
		return fmt.Errorf("the %s's input is %d bytes, at most %d", what, len(p.GetData()), maxMessageBytes)
	}
	var err error
	if strict {
		err = strictJSON(p.GetData(), v)
	} else {
		err = lenientJSON(p.GetData(), v)
	}
	if err != nil {
		return fmt.Errorf("the %s's input is not a valid request: %w", what, err)
	}
	return nil
}

// maxMessageBytes bounds an operator message's JSON (a whole configuration fits many times).
const maxMessageBytes = 256 << 10

// drainSignals applies every signal logged or buffered but not yet applied, without blocking
// (before Continue-As-New, so none is lost).
func (r *run) drainSignals() {
	if r.signalLog != nil {
		r.applySignalLog()
		return
	}
	for _, sc := range r.signals {
		for {
			var raw converter.RawValue
			if !sc.ch.ReceiveAsync(&raw) {
				break
			}
			r.handleSignal(sc.control, raw)
		}
	}
}

func (r *run) loop() error {
	for {
		// A cancelled planner stops here (`temporal workflow cancel`): nothing is applied
		// after the request.
		if err := r.ctx.Err(); err != nil {
			r.logger.Info("planner cancelled", "ticks", r.st.Ticks)
			return err
		}
		if err := r.maybeContinueAsNew(); err != nil {
			return err
		}
		if r.st.Core == nil {
			r.initialize()
			continue
		}
		tk := scaling.Schedule(r.st.Config, *r.st.Core)
		woken := r.waitUntil(tk)
		if r.ctx.Err() != nil {
			continue
		}
		if woken {
			r.overridePass()
			continue
		}
		r.scheduledTick(tk)
	}
}

// waitUntil sleeps until the tick is due. It returns true when a replica override waiting
// to be applied cut the sleep short.
func (r *run) waitUntil(tk scaling.Tick) bool {
	d := time.Duration((tk.At - r.now()) * float64(time.Second))
	if d <= 0 {
		return false
	}
	woken, err := workflow.AwaitWithOptions(r.ctx, workflow.AwaitOptions{Timeout: d,
		TimerOptions: workflow.TimerOptions{Summary: tickSummary(tk, r.st.Ticks+1)}}, r.st.overrideDue)
	return err == nil && woken
}

func tickSummary(tk scaling.Tick, n int64) string {
	var loops []string
	if tk.Load {
		loops = append(loops, "load")
	}
	if tk.Throughput {
		loops = append(loops, "throughput")
	}
	return fmt.Sprintf("%s tick %d", strings.Join(loops, "+"), n)
}

// maybeContinueAsNew continues as new when the server suggests it (or after MaxTicksPerRun
// ticks), once every handler has finished and every buffered signal is applied.
func (r *run) maybeContinueAsNew() error {
	info := workflow.GetInfo(r.ctx)
	due := info.GetContinueAsNewSuggested() || (r.in.MaxTicksPerRun > 0 && r.ticksHere >= r.in.MaxTicksPerRun)
	if !due {
		return nil
	}
	r.draining = true
	if err := workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) }); err != nil {
		return err
	}
	r.drainSignals()
	r.logger.Info("continuing as new", "ticks", r.st.Ticks, "history_length", info.GetCurrentHistoryLength())
	next := r.in
	next.State = r.st
	return workflow.NewContinueAsNewError(r.ctx, PlannerWorkflow, next)
}

// initialize seeds the decision core; on failure it says why and retries later.
func (r *run) initialize() {
	ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: localTimeout, Summary: "initialise perf models and predictors",
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{ErrTypeBadConfig}},
	})
	var res InitResult
	err := workflow.ExecuteLocalActivity(ctx, ActivityInit, InitRequest{Deployment: r.st.Deployment, Config: r.st.Config, Now: r.now()}).Get(ctx, &res)
	if err == nil {
		r.st.Core = &res.Core
		r.initErr = ""
		for _, n := range res.Notes {
			r.logger.Info("planner initialised", "note", n)
		}
		r.details(nil)
		return
	}
	r.initErr = errorText(err)
	r.logger.Error("planner initialisation failed; retrying", "error", err, "retry_in", initRetryAfter)
	r.details(nil)
	_ = workflow.NewTimerWithOptions(r.ctx, initRetryAfter, workflow.TimerOptions{Summary: "retry initialisation"}).Get(r.ctx, nil)
}

// scheduledTick is one planner tick: observe inventory, FPM and traffic, decide, guard,
// apply, record.
func (r *run) scheduledTick(tk scaling.Tick) {
	if r.inline {
		r.scheduledTickInline(tk)
		return
	}
	st := r.st
	st.Ticks++
	r.ticksHere++
	defer r.startTickSpan("scheduled")("")
	now := r.now()
	rec := TickRecord{Tick: st.Ticks, Kind: "scheduled", At: now}
	// Inventory, FPM and traffic are read concurrently: one workflow task waits for all.
	rd := r.readInventory()
	var fpmF, trafficF workflow.Future
	if tk.NeedFPM {
		// A scripted FPM source replicates its per-engine template by the ready counts the
		// planner knows as the tick starts (live sources report the engines that exist).
		req := ObserveRequest{Deployment: st.Deployment, Environment: st.Config.Environment, Tick: st.Ticks,
			ReadyPrefill: st.ready(ComponentPrefill), ReadyDecode: st.ready(ComponentDecode)}
		if rd.virtual != nil {
			req.ReadyPrefill, req.ReadyDecode = deref(rd.virtual.ReadyPrefill), deref(rd.virtual.ReadyDecode)
		}
		fpmF = r.startActivity(ActivityObserveFPM, "observe FPM", observeTimeout, 2, req)
	}
	if tk.NeedTraffic {
		req := ObserveRequest{Deployment: st.Deployment, Environment: st.Config.Environment, Tick: st.Ticks, TrafficDurationS: tk.TrafficDurationS}
		trafficF = r.startActivity(ActivityObserveTraffic, fmt.Sprintf("observe traffic (%gs)", tk.TrafficDurationS), observeTimeout, 2, req)
	}
	inv := r.recordInventory(rd, &rec)
	in := scaling.Input{Now: now}
	if inv != nil {
		in.Workers = inv.Counts()
	}
	if fpmF != nil {
		var fr FPMResult
		if err := fpmF.Get(r.ctx, &fr); err != nil {
			rec.Notes = append(rec.Notes, "FPM unreadable: "+errorText(err))
		} else {
			in.FPM = fr.FPM
			mergeCapabilities(&st.Capabilities, fr.Capabilities)
		}
	}
	if trafficF != nil {
		var tr *scaling.TrafficObservation
		if err := trafficF.Get(r.ctx, &tr); err != nil {
			rec.Notes = append(rec.Notes, "traffic unreadable: "+errorText(err))
		} else {
			in.Traffic = tr
			if tr != nil {
				rec.ObservedTTFTMs, rec.ObservedITLMs = tr.TTFTMs, tr.ITLMs
				rec.ObservedRequestsPerSecond = tr.RequestsPerSecond()
			}
		}
	}
	in.Capabilities = st.Capabilities
	// The decision's time is when it is made, after the observations: if a crash made this
	// workflow task run late, the next tick still comes a full interval after the decision,
	// as in an uninterrupted run, instead of at once.
	now = r.now()
	in.Now, rec.At = now, now

	var dr DecideResult
	lctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: localTimeout, Summary: "decide",
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{ErrTypeBadConfig, ErrTypeBadState}},
	})
	if err := workflow.ExecuteLocalActivity(lctx, ActivityDecide, DecideRequest{Tick: st.Ticks, Config: st.Config, State: *st.Core, Input: in}).Get(lctx, &dr); err != nil {
		rec.Notes = append(rec.Notes, "decide failed, holding: "+errorText(err))
		r.logger.Error("decide failed; holding", "error", err)
		// Keep the schedule moving: without a new state the same tick would run again at once.
		r.bumpSchedule(tk, now)
		r.finishTick(&rec, scaling.Decision{})
		return
	}
	st.Core = &dr.State
	rec.Diagnostics = &dr.Diagnostics
	r.finishTick(&rec, dr.Decision)
}

// bumpSchedule moves the due loops forward after a failed Decide.
func (r *run) bumpSchedule(tk scaling.Tick, now float64) {
	core := r.st.Core
	if tk.Load && core.NextLoadAt != nil {
		v := now + float64(r.st.Config.LoadAdjustmentIntervalSeconds)
		core.NextLoadAt = &v
	}
	if tk.Throughput && core.NextThroughputAt != nil {
		v := now + float64(r.st.Config.ThroughputAdjustmentIntervalSeconds)
		core.NextThroughputAt = &v
	}
}

// overridePass applies a new replica override at once, without a planner decision.
func (r *run) overridePass() {
	r.st.Ticks++
	defer r.startTickSpan("override")("")
	rec := TickRecord{Tick: r.st.Ticks, Kind: "override", At: r.now()}
	r.observeInventory(&rec)
	r.finishTick(&rec, scaling.Decision{})
}

// finishTick guards the decision, applies it, and records the tick.
func (r *run) finishTick(rec *TickRecord, dec scaling.Decision) {
	now := rec.At
	targets, used, notes := r.guards(dec, now)
	rec.Notes = append(rec.Notes, notes...)
	id, submitted, applyNotes := r.apply(targets, used, now)
	rec.Notes = append(rec.Notes, applyNotes...)
	rec.DecisionID = id
	if n := len(r.st.Decisions); id != 0 && n > 0 && r.st.Decisions[n-1].ID == id && r.st.Decisions[n-1].sent() {
		rec.Applied = targets
	}
	if r.st.Core != nil && !submitted.Empty() {
		next := r.st.Core.WithSubmitted(submitted, now, r.st.Config.AppliesNothing())
		r.st.Core = &next
	}
	r.st.recordTick(*rec)
	r.details(rec)
}

func mergeCapabilities(into *scaling.WorkerCapabilities, got scaling.WorkerCapabilities) {
	if got.Prefill != nil {
		c := *got.Prefill
		into.Prefill = &c
	}
	if got.Decode != nil {
		c := *got.Decode
		into.Decode = &c
	}
}

// activity runs a regular activity with a timeout and attempts and waits for its result.
func (r *run) activity(name, summary string, timeout time.Duration, attempts int32, req, res any) error {
	return r.startActivity(name, summary, timeout, attempts, req).Get(r.ctx, res)
}

// hostScheduleToStart bounds how long an activity waits for the deployment's host worker.
const hostScheduleToStart = 30 * time.Second

// startActivity schedules a regular activity with a timeout and attempts.
func (r *run) startActivity(name, summary string, timeout time.Duration, attempts int32, req any) workflow.Future {
	opts := workflow.ActivityOptions{
		TaskQueue: r.st.HostTaskQueue, StartToCloseTimeout: timeout, Summary: summary,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: attempts,
			NonRetryableErrorTypes: []string{ErrTypeInvalidTargets, ErrTypeStaleDecision, ErrTypeBadConfig}},
	}
	if r.st.HostTaskQueue != "" {
		// A deployment's host worker may be down: the tick must not wait for it forever. The
		// observation is then missing (the planner holds) and the apply fails (retried on a
		// later tick).
		opts.ScheduleToStartTimeout = hostScheduleToStart
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(r.activityContext(), opts), name, req)
}

// inventoryRead is an inventory observation under way: the virtual protocol's view at once,
// or a connector's through an activity.
type inventoryRead struct {
	virtual *connectors.Inventory
	future  workflow.Future
}

// readInventory starts reading the deployment.
func (r *run) readInventory() inventoryRead {
	st := r.st
	if st.Virtual != nil {
		inv := st.Virtual.Inventory()
		return inventoryRead{virtual: &inv}
	}
	req := ObserveRequest{Deployment: st.Deployment, Environment: st.Config.Environment, Tick: st.Ticks,
		InitialPrefill: st.InitialPrefill, InitialDecode: st.InitialDecode}
	return inventoryRead{future: r.startActivity(ActivityObserveInventory, "observe inventory", observeTimeout, 2, req)}
}

// recordInventory waits for the read, records the inventory and marks decisions the
// deployment reached as done. It returns nil when the inventory is unreadable.
func (r *run) recordInventory(rd inventoryRead, rec *TickRecord) *connectors.Inventory {
	var inv connectors.Inventory
	if rd.virtual != nil {
		inv = *rd.virtual
	} else if err := rd.future.Get(r.ctx, &inv); err != nil {
		rec.Notes = append(rec.Notes, "inventory unreadable, holding: "+errorText(err))
		return nil
	}
	return r.acceptInventory(inv, rec)
}

// acceptInventory checks and records an inventory read and marks decisions the deployment
// reached as done. It returns nil when the inventory is out of bounds.
func (r *run) acceptInventory(inv connectors.Inventory, rec *TickRecord) *connectors.Inventory {
	st := r.st
	if err := inv.Validate(); err != nil {
		rec.Notes = append(rec.Notes, "inventory out of bounds, holding: "+err.Error())
		return nil
	}
	mergeCapabilities(&st.Capabilities, inv.Capabilities)
	st.Inventory = &inv
	for i := range st.Decisions {
		d := &st.Decisions[i]
		if d.Status != StatusApplied && d.Status != StatusPublished {
			continue
		}
		if reached(d.Targets.Prefill, inv.ReadyPrefill) && reached(d.Targets.Decode, inv.ReadyDecode) {
			d.Status = StatusDone
		}
	}
	return &inv
}

// observeInventory reads and records the deployment.
func (r *run) observeInventory(rec *TickRecord) *connectors.Inventory {
	return r.recordInventory(r.readInventory(), rec)
}

// errorText is what an operator needs of an activity error: the innermost application
// error's type and message, without the SDK's wrapping.
func errorText(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		if ae.Type() != "" {
			return ae.Type() + ": " + ae.Message()
		}
		return ae.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "timed out (" + te.TimeoutType().String() + ")"
	}
	return err.Error()
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func reached(target, ready *int) bool {
	return target == nil || (ready != nil && *ready == *target)
}

// guards turns the planner's decision into targets: replica overrides win (applied once,
// then the planner's decisions for that component are suppressed until the override
// expires or is cleared), and paused directions drop the planner's own moves.
func (r *run) guards(dec scaling.Decision, now float64) (connectors.Targets, []*ReplicaOverride, []string) {
	st := r.st
	var notes []string
	var t connectors.Targets
	var used []*ReplicaOverride
	for _, c := range []string{ComponentPrefill, ComponentDecode} {
		if !st.hasComponent(c) {
			continue
		}
		if o := st.override(c); o != nil && now >= o.ExpiresAt {
			st.setOverride(c, nil)
			notes = append(notes, fmt.Sprintf("%s override of %d replicas expired: the planner decides again", c, o.Replicas))
		}
		want := dec.Decode
		if c == ComponentPrefill {
			want = dec.Prefill
		}
		if o := st.override(c); o != nil {
			if want != nil {
				notes = append(notes, fmt.Sprintf("planner's %s target %d suppressed by the operator's override", c, *want))
			}
			want = nil
			if !o.Applied {
				v := o.Replicas
				want = &v
				used = append(used, o)
			}
		} else if want != nil {
			cur := st.ready(c)
			if *want > cur && st.Overrides.PauseScaleUp {
				notes = append(notes, fmt.Sprintf("%s scale-up %d -> %d not applied: scale-up is paused", c, cur, *want))
				want = nil
			} else if *want < cur && st.Overrides.PauseScaleDown {
				notes = append(notes, fmt.Sprintf("%s scale-down %d -> %d not applied: scale-down is paused", c, cur, *want))
				want = nil
			}
		}
		if c == ComponentPrefill {
			t.Prefill = want
		} else {
			t.Decode = want
		}
	}
	return t, used, notes
}

// apply sends the targets to the connector as a new decision and returns its id (0: no
// decision) and what was submitted (for the pending-desired guard). used are the overrides
// the targets carry: they are marked applied once sent, unless an operator replaced them
// meanwhile.
func (r *run) apply(t connectors.Targets, used []*ReplicaOverride, now float64) (int64, scaling.Decision, []string) {
	st := r.st
	if t.Prefill == nil && t.Decode == nil {
		return 0, scaling.Decision{}, nil
	}
	if r.ctx.Err() != nil {
		return 0, scaling.Decision{}, []string{"planner cancelled: nothing applied"}
	}
	source := "planner"
	if len(used) > 0 {
		source = "override"
		// Both pools, one pinned: the other target is the planner's.
		if t.Prefill != nil && t.Decode != nil && len(used) == 1 {
			source = "override+planner"
		}
	}
	if st.Config.AppliesNothing() && source == "planner" {
		if n := len(st.Decisions); n > 0 && st.Decisions[n-1].Status == StatusRecorded && st.Decisions[n-1].Targets.Equal(t) {
			// The same advice again: the deployment did not move, so it is not a new decision.
			return 0, scaling.Decision{}, []string{fmt.Sprintf("advice unchanged since decision %d: %s", st.Decisions[n-1].ID, t)}
		}
	}
	// sent records the outcome on the overrides the targets carry, unless an operator
	// replaced them while the connector was being called.
	sent := func(errText string) {
		for _, o := range used {
			if st.override(ComponentPrefill) == o || st.override(ComponentDecode) == o {
				o.Applied, o.Error = errText == "", errText
			}
		}
	}
	var notes []string
	var outcome virtual.Outcome
	if st.Virtual != nil {
		outcome = st.Virtual.Propose(now, t.Prefill, t.Decode, st.AckTimeoutSeconds)
		switch outcome {
		case virtual.Unchanged:
			sent("")
			return 0, scaling.Decision{}, []string{fmt.Sprintf("virtual decision %d already asks for %s", st.Virtual.Decision.DecisionID, t)}
		case virtual.AwaitingAcknowledgement:
			msg := fmt.Sprintf("%s held: virtual decision %d is not acknowledged yet", t, st.Virtual.Decision.DecisionID)
			sent(msg)
			return 0, scaling.Decision{}, []string{msg}
		}
	}
	// A planner started again for a deployment continues after the newest decision its
	// connector applied, so the connector never refuses its decisions as stale.
	if st.Inventory != nil && st.Inventory.AppliedDecisionID > st.LastDecisionID {
		st.LastDecisionID = st.Inventory.AppliedDecisionID
	}
	st.LastDecisionID++
	id := st.LastDecisionID
	rec := DecisionRecord{ID: id, At: now, Tick: st.Ticks, Source: source, Targets: t}
	submitted := scaling.Decision{Prefill: t.Prefill, Decode: t.Decode}
	switch {
	case st.Config.Advisory:
		rec.Status = StatusRecorded
		notes = append(notes, fmt.Sprintf("advisory: decision %d (%s) recorded, not applied", id, t))
		sent("")
		submitted = scaling.Decision{}
	case st.Virtual != nil:
		v := st.Virtual.Decision.DecisionID
		rec.Status, rec.VirtualDecisionID = StatusPublished, &v
		msg := fmt.Sprintf("decision %d published as virtual decision %d: %s", id, v, t)
		if outcome == virtual.PublishedAfterTimeout {
			msg += fmt.Sprintf(" (the previous decision was not acknowledged within %gs)", st.AckTimeoutSeconds)
		}
		notes = append(notes, msg)
		sent("")
	default:
		req := ApplyRequest{Deployment: st.Deployment, Environment: st.Config.Environment, DecisionID: id, Targets: t,
			InitialPrefill: st.InitialPrefill, InitialDecode: st.InitialDecode}
		if err := r.activity(ActivityApply, "apply "+r.describeMove(t), applyTimeout, 5, req, nil); err != nil {
			rec.Status, rec.Error = StatusFailed, errorText(err)
			notes = append(notes, fmt.Sprintf("decision %d (%s) failed: %s", id, t, rec.Error))
			sent(rec.Error)
			submitted = scaling.Decision{}
		} else if st.Config.AppliesNothing() {
			// The noop connector recorded it; the deployment does not move.
			rec.Status = StatusRecorded
			sent("")
		} else {
			rec.Status = StatusApplied
			sent("")
		}
	}
	st.record(rec)
	return id, submitted, notes
}

// describeMove renders targets against the current counts ("prefill 2→3 decode 4→5").
func (r *run) describeMove(t connectors.Targets) string {
	var parts []string
	if t.Prefill != nil {
		parts = append(parts, fmt.Sprintf("prefill %d→%d", r.st.ready(ComponentPrefill), *t.Prefill))
	}
	if t.Decode != nil {
		parts = append(parts, fmt.Sprintf("decode %d→%d", r.st.ready(ComponentDecode), *t.Decode))
	}
	return strings.Join(parts, " ")
}
