// Package activities holds the planner workflow's activities: thin adapters from Temporal to
// the pure packages. Init and Decide run the decision core (as local activities); the
// observe activities read the deployment and its traffic; Apply sends a decision to the
// connector. Errors carry the workflows.ErrType* types so the workflow's retry policies know
// what is worth retrying.
package activities

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/noop"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// Activities holds what the activities need. The zero value works: no observation source
// (traffic and FPM are then missing and the planner holds) and in-memory advisory
// connectors.
type Activities struct {
	// Unhosted, when set, observes the deployments this worker does not host (tests give it
	// scripted observations); nil: they are not observed and their planners hold.
	Unhosted Observer
	// NoopJournalDir, when set, journals the advisory connector's decisions per deployment,
	// so its decision ids survive a worker restart.
	NoopJournalDir string
	// Logger receives the activities' logs (slog.Default when nil).
	Logger *slog.Logger
	// Hooks, when set, are called at points of the activities (tests inject faults there).
	Hooks *Hooks
	// Sink, when set, is told of every Observe activity on this worker: the worker's
	// /metrics exports what the planners observe from it.
	Sink ObservationSink

	mu       sync.Mutex
	planners map[string]plannerEntry
	noops    map[string]connectors.Connector
	hosted   map[string]Hosted
}

// Observer observes a deployment for the observe activities.
type Observer interface {
	ObserveTraffic(ctx context.Context, req workflows.ObserveRequest) (*scaling.TrafficObservation, error)
	ObserveFPM(ctx context.Context, req workflows.ObserveRequest) (workflows.FPMResult, error)
}

// ObservationSink receives, on the worker, what the Observe activity sees of a tick.
type ObservationSink interface {
	// TickStarted is called as an Observe activity starts: scheduled is when the workflow
	// scheduled it (the tick's start).
	TickStarted(d workflows.Deployment, tick int64, scheduled time.Time)
	// Observed is called with the activity's request and result.
	Observed(req workflows.ObserveAllRequest, res workflows.ObserveAllResult)
}

// Hooks are called at chosen points of the activities; a nil function is skipped. Tests
// use them to kill the worker between a side effect and its record in history.
type Hooks struct {
	// AfterDecide runs once Decide computed tick's decision, before the workflow records it.
	AfterDecide func(ctx context.Context, tick int64)
	// AfterApply runs once the connector applied a decision, before the activity completes.
	AfterApply func(ctx context.Context, decisionID int64)
	// AfterObserve runs once Observe read tick's observations, before the activity completes
	// (Decide runs in workflow code from history generation 3 on: the point just before it).
	AfterObserve func(ctx context.Context, tick int64)
}

func (h *Hooks) afterObserve(ctx context.Context, tick int64) {
	if h != nil && h.AfterObserve != nil {
		h.AfterObserve(ctx, tick)
	}
}

func (h *Hooks) afterDecide(ctx context.Context, tick int64) {
	if h != nil && h.AfterDecide != nil {
		h.AfterDecide(ctx, tick)
	}
}

func (h *Hooks) afterApply(ctx context.Context, id int64) {
	if h != nil && h.AfterApply != nil {
		h.AfterApply(ctx, id)
	}
}

// Register registers every activity under its workflows.Activity* name.
func (a *Activities) Register(r worker.Registry) {
	r.RegisterActivityWithOptions(a.Init, activity.RegisterOptions{Name: workflows.ActivityInit})
	r.RegisterActivityWithOptions(a.Decide, activity.RegisterOptions{Name: workflows.ActivityDecide})
	r.RegisterActivityWithOptions(a.ObserveInventory, activity.RegisterOptions{Name: workflows.ActivityObserveInventory})
	r.RegisterActivityWithOptions(a.ObserveTraffic, activity.RegisterOptions{Name: workflows.ActivityObserveTraffic})
	r.RegisterActivityWithOptions(a.ObserveFPM, activity.RegisterOptions{Name: workflows.ActivityObserveFPM})
	r.RegisterActivityWithOptions(a.Apply, activity.RegisterOptions{Name: workflows.ActivityApply})
	r.RegisterActivityWithOptions(a.Observe, activity.RegisterOptions{Name: workflows.ActivityObserve})
	r.RegisterActivityWithOptions(a.LoadProfile, activity.RegisterOptions{Name: workflows.ActivityLoadProfile})
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func nonRetryable(kind string, err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), kind, nil)
}

// planner returns the scaling.Planner of a configuration and the profile it was built with
// (nil when there is none), cached: building one validates the configuration, reads the
// profile files and builds the interpolators.
func (a *Activities) planner(cfg config.Config) (plannerEntry, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return plannerEntry{}, nonRetryable(workflows.ErrTypeBadConfig, err)
	}
	sum := sha256.Sum256(data)
	key := string(sum[:])
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.planners[key]; ok {
		return e, nil
	}
	profile, perr := loadProfile(cfg)
	if perr != nil && cfg.ThroughputSizing == config.SizingInterpolation && cfg.OptimizationTarget == config.TargetSLA {
		return plannerEntry{}, nonRetryable(workflows.ErrTypeBadConfig, perr)
	}
	p, err := scaling.New(cfg, profile)
	if err != nil {
		return plannerEntry{}, nonRetryable(workflows.ErrTypeBadConfig, err)
	}
	if a.planners == nil {
		a.planners = map[string]plannerEntry{}
	}
	e := plannerEntry{planner: p, profile: profile, profileErr: perr}
	a.planners[key] = e
	return e, nil
}

type plannerEntry struct {
	planner    *scaling.Planner
	profile    *perf.Profile
	profileErr error
}

// loadProfile reads profile_results_dir for the sla target (nil when absent: the perf models
// then wait for live FPMs, Dynamo's last bootstrap source).
func loadProfile(cfg config.Config) (*perf.Profile, error) {
	if cfg.OptimizationTarget != config.TargetSLA {
		return nil, nil
	}
	p, err := perf.LoadProfile(cfg.ProfileResultsDir)
	if err != nil {
		return nil, fmt.Errorf("profile_results_dir %q: %w", cfg.ProfileResultsDir, err)
	}
	return p, nil
}

// Init builds the initial decision-core state: perf models seeded from the profile (when
// there is one) and predictors warmed with the warm-up trace (when configured).
func (a *Activities) Init(ctx context.Context, req workflows.InitRequest) (workflows.InitResult, error) {
	e, err := a.planner(req.Config)
	if err != nil {
		return workflows.InitResult{}, err
	}
	p, profile := e.planner, e.profile
	var boot scaling.Bootstrap
	var notes []string
	if req.Config.OptimizationTarget == config.TargetSLA {
		if profile == nil {
			notes = append(notes, fmt.Sprintf("no profile (%v): the perf models wait for %d live FPM samples", e.profileErr, req.Config.LoadMinObservations))
		} else {
			boot = scaling.ProfileBootstrap(profile, req.Config.Mode)
			if req.Config.Mode == config.ModeAgg {
				notes = append(notes, fmt.Sprintf("aggregated perf model seeded from %s: %d prefill and decode points", profile.Dir, len(boot.AggFPMs)))
			} else {
				notes = append(notes, fmt.Sprintf("perf models seeded from %s: %d prefill and %d decode points", profile.Dir, len(boot.PrefillFPMs), len(boot.DecodeFPMs)))
			}
		}
	}
	warmup, note, err := p.ReadWarmup()
	if err != nil {
		return workflows.InitResult{}, nonRetryable(workflows.ErrTypeBadConfig, err)
	}
	if note != "" {
		boot.Warmup = warmup
		notes = append(notes, note)
	}
	st, err := p.Init(req.Now, boot)
	if err != nil {
		return workflows.InitResult{}, nonRetryable(workflows.ErrTypeBadConfig, err)
	}
	a.logger().InfoContext(ctx, "planner initialised", "deployment", req.Deployment.WorkflowID(), "notes", notes)
	return workflows.InitResult{Core: st, Notes: notes}, nil
}

// Decide runs the decision core on one tick.
func (a *Activities) Decide(ctx context.Context, req workflows.DecideRequest) (workflows.DecideResult, error) {
	e, err := a.planner(req.Config)
	if err != nil {
		return workflows.DecideResult{}, err
	}
	st, dec, diag, err := e.planner.Decide(req.State, req.Input)
	if err != nil {
		return workflows.DecideResult{}, nonRetryable(workflows.ErrTypeBadState, err)
	}
	a.Hooks.afterDecide(ctx, req.Tick)
	return workflows.DecideResult{State: st, Decision: dec, Diagnostics: diag}, nil
}

// LoadProfile reads the configuration's pre-deployment profile (nil, with a note, when it has
// none or it cannot be read and the sizing does not need it; an error when it does).
func (a *Activities) LoadProfile(ctx context.Context, req workflows.LoadProfileRequest) (workflows.LoadProfileResult, error) {
	e, err := a.planner(req.Config)
	if err != nil {
		return workflows.LoadProfileResult{}, err
	}
	res := workflows.LoadProfileResult{Profile: e.profile}
	if e.profile == nil && e.profileErr != nil {
		res.Note = fmt.Sprintf("no profile: %v", e.profileErr)
	}
	return res, nil
}

// Observe reads the observations a tick asks for, concurrently; a part that cannot be read
// is reported as such, never as zero load, and the others still count. Each part gets a
// share of the activity's time (a slow Prometheus must not cost the tick its inventory and
// FPMs) and one retry when its error is retryable and time remains.
func (a *Activities) Observe(ctx context.Context, req workflows.ObserveAllRequest) (workflows.ObserveAllResult, error) {
	if a.Sink != nil {
		scheduled := time.Now()
		if activity.IsActivity(ctx) {
			scheduled = activity.GetInfo(ctx).ScheduledTime
		}
		a.Sink.TickStarted(req.Deployment, req.Tick, scheduled)
	}
	var res workflows.ObserveAllResult
	var wg sync.WaitGroup
	deadline, bounded := ctx.Deadline()
	const margin = 500 * time.Millisecond // left to report the result
	part := func(want bool, read func(context.Context) error, fail func(string)) {
		if !want {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			attempt := func(share float64) error {
				actx, cancel := ctx, context.CancelFunc(func() {})
				if bounded {
					actx, cancel = context.WithTimeout(ctx, time.Duration(float64(time.Until(deadline)-margin)*share))
				}
				defer cancel()
				return read(actx)
			}
			err := attempt(0.6)
			var app *temporal.ApplicationError
			retryable := !(errors.As(err, &app) && app.NonRetryable())
			if err != nil && retryable && ctx.Err() == nil && (!bounded || time.Until(deadline) > 2*margin) {
				err = attempt(1)
			}
			if err != nil {
				fail(applicationMessage(err))
			}
		}()
	}
	part(req.Inventory, func(ctx context.Context) error {
		inv, err := a.ObserveInventory(ctx, req.ObserveRequest)
		if err == nil {
			res.Inventory = &inv
		}
		return err
	}, func(m string) { res.InventoryError = m })
	part(req.FPM, func(ctx context.Context) error {
		fr, err := a.ObserveFPM(ctx, req.ObserveRequest)
		if err == nil {
			res.FPM = &fr
		}
		return err
	}, func(m string) { res.FPMError = m })
	part(req.Traffic, func(ctx context.Context) error {
		tr, err := a.ObserveTraffic(ctx, req.ObserveRequest)
		if err == nil {
			res.Traffic = tr
		}
		return err
	}, func(m string) { res.TrafficError = m })
	wg.Wait()
	if a.Sink != nil {
		a.Sink.Observed(req, res)
	}
	a.Hooks.afterObserve(ctx, req.Tick)
	return res, nil
}

// applicationMessage is an activity error's message, with its type, without the SDK's
// formatting.
func applicationMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if app.Type() != "" {
			return app.Message() + " (" + app.Type() + ")"
		}
		return app.Message()
	}
	return err.Error()
}

// ObserveTraffic reads the traffic over the requested window (nil when no source: the
// throughput loop then holds with no_traffic_data).
func (a *Activities) ObserveTraffic(ctx context.Context, req workflows.ObserveRequest) (*scaling.TrafficObservation, error) {
	if h, ok := a.hostedFor(req.Deployment); ok {
		return observeHostedTraffic(ctx, h, req)
	}
	if a.Unhosted == nil {
		return nil, nil
	}
	return a.Unhosted.ObserveTraffic(ctx, req)
}

// ObserveFPM reads the engines' latest FPMs and their capabilities.
func (a *Activities) ObserveFPM(ctx context.Context, req workflows.ObserveRequest) (workflows.FPMResult, error) {
	if h, ok := a.hostedFor(req.Deployment); ok {
		return observeHostedFPM(h)
	}
	if a.Unhosted == nil {
		return workflows.FPMResult{}, nil
	}
	return a.Unhosted.ObserveFPM(ctx, req)
}

// ObserveInventory reads the connector's inventory.
func (a *Activities) ObserveInventory(ctx context.Context, req workflows.ObserveRequest) (connectors.Inventory, error) {
	c, err := a.connector(req.Deployment, req.Environment, req.InitialPrefill, req.InitialDecode)
	if err != nil {
		return connectors.Inventory{}, err
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		return connectors.Inventory{}, temporal.NewApplicationError(err.Error(), workflows.ErrTypeUnavailable)
	}
	return inv, nil
}

// Apply sends a decision to the connector. A retry of the same decision is harmless; a
// stale or invalid one is a non-retryable error.
func (a *Activities) Apply(ctx context.Context, req workflows.ApplyRequest) error {
	c, err := a.connector(req.Deployment, req.Environment, req.InitialPrefill, req.InitialDecode)
	if err != nil {
		return err
	}
	err = c.Apply(ctx, req.DecisionID, req.Targets)
	switch {
	case errors.Is(err, connectors.ErrStaleDecision):
		return nonRetryable(workflows.ErrTypeStaleDecision, err)
	case errors.Is(err, connectors.ErrInvalidTargets):
		return nonRetryable(workflows.ErrTypeInvalidTargets, err)
	case errors.Is(err, connectors.ErrNotReady):
		return nonRetryable(workflows.ErrTypeNotReady, err)
	case err != nil:
		return temporal.NewApplicationError(err.Error(), workflows.ErrTypeUnavailable)
	}
	a.logger().InfoContext(ctx, "decision applied", "deployment", req.Deployment.WorkflowID(), "decision_id", req.DecisionID,
		"targets", req.Targets.String(), "environment", req.Environment)
	a.Hooks.afterApply(ctx, req.DecisionID)
	return nil
}

// connector returns the connector of a deployment: the one this worker hosts for it
// (kubernetes, local), else the advisory (noop) connector. Virtual lives in the workflow
// itself.
func (a *Activities) connector(d workflows.Deployment, env config.Environment, prefill, decode int) (connectors.Connector, error) {
	if h, ok := a.hostedFor(d); ok && h.Connector != nil {
		return h.Connector, nil
	}
	if env == config.EnvLocal || env == config.EnvKubernetes {
		return nil, temporal.NewApplicationError(fmt.Sprintf("this worker does not host deployment %s (environment %s): "+
			"list it in the deployments file of a worker (planner worker --deployments FILE), whose host task queue the planner uses",
			d.WorkflowID(), env), workflows.ErrTypeUnavailable)
	}
	if env != config.EnvNoop {
		return nil, nonRetryable(workflows.ErrTypeBadConfig, fmt.Errorf("environment %q has no connector in this worker (supported: noop; kubernetes and local when hosted; virtual runs in the workflow)", env))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.noops == nil {
		a.noops = map[string]connectors.Connector{}
	}
	key := d.WorkflowID()
	if c, ok := a.noops[key]; ok {
		return c, nil
	}
	inv := connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: &prefill, ReadyDecode: &decode}}
	var c connectors.Connector = noop.New(inv)
	if a.NoopJournalDir != "" {
		name := strings.NewReplacer("/", "_").Replace(key) + ".jsonl"
		j, err := noop.Open(filepath.Join(a.NoopJournalDir, name), inv)
		if err != nil {
			return nil, temporal.NewApplicationError(err.Error(), workflows.ErrTypeUnavailable)
		}
		c = j
	}
	a.noops[key] = c
	return c, nil
}
