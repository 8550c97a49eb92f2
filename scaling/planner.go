package scaling

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
)

// StateVersion is the layout version of State.
const StateVersion = 1

// MergeToleranceS merges two loops due within this many seconds into one tick (Dynamo's
// _MERGE_TOLERANCE_S).
const MergeToleranceS = 0.5

// PendingExpiryIntervals is how many throughput intervals a remembered desired count is
// trusted before it expires (Dynamo's pending-desired guard: 5 × 180 s = 900 s).
const PendingExpiryIntervals = 5

// State is everything the planner carries from one tick to the next. It is a plain,
// JSON-serialisable value (it lives in the workflow history), kept compact: the predictor
// histories are bounded by load_predictor_history_size and the regression samples by
// max_num_fpm_samples.
type State struct {
	Version int `json:"v"`
	// NextLoadAt and NextThroughputAt are when each loop is next due (nil: disabled).
	NextLoadAt       *float64 `json:"next_load_at,omitempty"`
	NextThroughputAt *float64 `json:"next_throughput_at,omitempty"`
	// LowerBoundPrefill and LowerBoundDecode are the throughput loop's floors for the load
	// loop (initially 1, as in Dynamo).
	LowerBoundPrefill int `json:"lower_bound_prefill"`
	LowerBoundDecode  int `json:"lower_bound_decode"`
	// LastKVHitRate and LastAcceptLength are last-value runtime metadata.
	LastKVHitRate    *float64 `json:"last_kv_hit_rate,omitempty"`
	LastAcceptLength float64  `json:"last_accept_length"`
	// LastISL and LastOSL are carried through idle windows (no requests, no means).
	LastISL *float64 `json:"last_isl,omitempty"`
	LastOSL *float64 `json:"last_osl,omitempty"`
	// Predictors hold the request count, ISL and OSL predictors (throughput loop).
	Predictors *PredictorStates `json:"predictors,omitempty"`
	// Models hold the perf models (sla target only).
	Models Models `json:"models"`
	// PendingPrefill and PendingDecode are the last submitted desired counts (Dynamo's
	// pending-desired guard).
	PendingPrefill *PendingDesired `json:"pending_prefill,omitempty"`
	PendingDecode  *PendingDesired `json:"pending_decode,omitempty"`
	// PrefillCorrection and DecodeCorrection are the classic sizing's correction factors.
	PrefillCorrection *float64 `json:"prefill_correction,omitempty"`
	DecodeCorrection  *float64 `json:"decode_correction,omitempty"`
	// LastDecodeScaleUpAt and PrevPrefillQueue serve the older load planner's rules.
	LastDecodeScaleUpAt *float64 `json:"last_decode_scale_up_at,omitempty"`
	PrevPrefillQueue    *float64 `json:"prev_prefill_queue,omitempty"`
	// StabilizationPrefill and StabilizationDecode are the recommendations of the last
	// scale_down_stabilization_seconds that can still be the window's highest (a decreasing
	// sequence: the first is the highest), when the window is on.
	StabilizationPrefill []Recommendation `json:"stabilization_prefill,omitempty"`
	StabilizationDecode  []Recommendation `json:"stabilization_decode,omitempty"`
	// Ahead is the ahead policy's memory (scaling_policy "ahead" only).
	Ahead *AheadState `json:"ahead,omitempty"`
}

// Recommendation is a pool count the planner recommended at a time (its target, or the
// ready count when it held).
type Recommendation struct {
	At       float64 `json:"at"`
	Replicas int     `json:"replicas"`
}

// PredictorStates are the three traffic predictors of the throughput loop.
type PredictorStates struct {
	NumReq predict.State `json:"num_req"`
	ISL    predict.State `json:"isl"`
	OSL    predict.State `json:"osl"`
}

// Models are the perf models of the active pools.
type Models struct {
	Prefill *perf.EngineModelState `json:"prefill,omitempty"`
	Decode  *perf.EngineModelState `json:"decode,omitempty"`
	Agg     *perf.EngineModelState `json:"agg,omitempty"`
}

// PendingDesired is a desired count submitted at a time, not yet seen ready.
type PendingDesired struct {
	Replicas int     `json:"replicas"`
	At       float64 `json:"at"`
	// Queued says the connector held some of the new workers back until capacity freed
	// while they were awaited (the ahead policy then does not count the wait as startup).
	Queued bool `json:"queued,omitempty"`
}

// Bootstrap seeds a new planner: benchmark FPMs for the perf models (from a profile) and
// a warm-up trace (ReadWarmup) for the predictors or the ahead policy's history.
type Bootstrap struct {
	PrefillFPMs []perf.FPM
	DecodeFPMs  []perf.FPM
	AggFPMs     []perf.FPM
	// Warmup is the traffic before the planner started (arrivals relative to its first
	// request; taken to end at Init's now): Dynamo's predictors get it in windows of the
	// throughput interval, the ahead policy in its buckets (AheadState.warm).
	Warmup []predict.Request
}

// ProfileBootstrap is the Bootstrap a pre-deployment profile gives the perf models of a
// planner in mode: its prefill points (sum_prefill_tokens = ISL, wall time = TTFT) and
// decode points (sum_decode_kv_tokens, wall time = ITL), converted as Dynamo converts
// profile_results_dir (reference §6.1). An aggregated model (mode agg) is seeded with both
// sets: its 2-D regression (wall time over scheduled prefill tokens and decode KV tokens)
// gets a prefill-only and a decode-only edge to fit, which keeps its coefficients positive
// while the live, mixed passes accumulate. That agg seeding is this planner's choice: the
// reference does not say how Dynamo seeds an agg model from a disaggregated profile, and
// seeded from live FPMs alone the fit can come out with a negative KV coefficient and be
// refused (docs/fidelity.md). A nil profile, or a nil side, seeds nothing for it.
func ProfileBootstrap(profile *perf.Profile, mode config.Mode) Bootstrap {
	var boot Bootstrap
	if profile == nil {
		return boot
	}
	var pre, dec []perf.FPM
	if profile.Prefill != nil {
		pre = perf.PrefillBootstrapFPMs(profile.Prefill)
	}
	if profile.Decode != nil {
		dec = perf.DecodeBootstrapFPMs(profile.Decode)
	}
	if mode == config.ModeAgg {
		boot.AggFPMs = append(append([]perf.FPM(nil), pre...), dec...)
		return boot
	}
	boot.PrefillFPMs, boot.DecodeFPMs = pre, dec
	return boot
}

// Tick describes the next tick: when it is due, which loops run, and what it must observe
// (Dynamo's ScheduledTick).
type Tick struct {
	At         float64 `json:"at"`
	Load       bool    `json:"load"`
	Throughput bool    `json:"throughput"`
	// NeedTraffic asks for a traffic observation over TrafficDurationS seconds. FullTraffic is
	// false for the cheap read of a load-only planner (only the KV hit rate is used).
	NeedTraffic      bool    `json:"need_traffic"`
	FullTraffic      bool    `json:"full_traffic"`
	TrafficDurationS float64 `json:"traffic_duration_s"`
	NeedFPM          bool    `json:"need_fpm"`
	NeedWorkers      bool    `json:"need_workers"`
}

// Planner is the decision core of one deployment: the validated configuration and the
// static perf inputs (profile interpolators for the classic sizing, and the profile's pass
// model for the ahead policy's aggregated sizing). It holds no mutable state and is safe for
// concurrent use; everything that changes lives in State.
type Planner struct {
	cfg         config.Config
	regOpts     perf.RegressionOptions
	predOpts    predict.Options
	prefillProf *perf.PrefillInterpolator
	decodeProf  *perf.DecodeInterpolator
	// aggProfilePass is an aggregated engine's forward pass as the profile measured its
	// parts (profileAggPass), for the ahead policy; nil unless scaling_policy ahead in mode
	// agg with a profile of both parts (Dynamo's policies never read it).
	aggProfilePass passFunc
	loadI          float64
	thrI           float64
}

// ErrProfileRequired is returned when the classic interpolation sizing has no profile.
var ErrProfileRequired = errors.New("throughput_sizing \"interpolation\" needs a pre-deployment profile (profile_results_dir)")

// New validates cfg and builds a planner. profile may be nil; the classic interpolation
// sizing requires it.
func New(cfg config.Config, profile *perf.Profile) (*Planner, error) {
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scaling: invalid config:\n%w", err)
	}
	p := &Planner{
		cfg:     cfg,
		regOpts: perf.RegressionOptions{MaxSamples: cfg.MaxNumFPMSamples, MinObservations: cfg.LoadMinObservations, BucketCount: cfg.FPMSampleBucketSize},
		loadI:   float64(cfg.LoadAdjustmentIntervalSeconds),
		thrI:    float64(cfg.ThroughputAdjustmentIntervalSeconds),
	}
	floorAt := func(v, floor float64) float64 { return math.Max(v, floor) } // Dynamo's max(1e-12, q) etc.
	p.predOpts = predict.Options{
		Kind: predict.Kind(cfg.LoadPredictor), Log1p: cfg.LoadPredictorLog1p, ProphetWindow: cfg.ProphetWindowSize,
		StepSeconds: p.thrI, KalmanQLevel: floorAt(cfg.KalmanQLevel, 1e-12), KalmanQTrend: floorAt(cfg.KalmanQTrend, 1e-12),
		KalmanR: floorAt(cfg.KalmanR, 1e-9), KalmanMinPoints: cfg.KalmanMinPoints, MaxHistory: cfg.LoadPredictorHistorySize,
	}
	if err := p.predOpts.Validate(); err != nil {
		return nil, fmt.Errorf("scaling: predictor: %w", err)
	}
	if profile != nil {
		if profile.Prefill != nil && cfg.HasPrefill() {
			pi, err := perf.NewPrefillInterpolator(profile.Prefill)
			if err != nil {
				return nil, fmt.Errorf("scaling: %w", err)
			}
			p.prefillProf = pi
		}
		if profile.Decode != nil && cfg.HasDecode() {
			di, err := perf.NewDecodeInterpolator(profile.Decode)
			if err != nil {
				return nil, fmt.Errorf("scaling: %w", err)
			}
			p.decodeProf = di
		}
		if cfg.ScalingPolicy == config.PolicyAhead && cfg.Mode == config.ModeAgg && profile.Prefill != nil && p.decodeProf != nil {
			pi, err := perf.NewPrefillInterpolator(profile.Prefill)
			if err != nil {
				return nil, fmt.Errorf("scaling: %w", err)
			}
			p.aggProfilePass = profileAggPass(pi, p.decodeProf)
		}
	}
	if p.usesInterpolation() {
		if cfg.Mode == config.ModeAgg {
			return nil, errors.New("scaling: throughput_sizing \"interpolation\" has no aggregated model (Dynamo's classic planner is disaggregated only); use capacity_search")
		}
		if (cfg.HasPrefill() && p.prefillProf == nil) || (cfg.Mode != config.ModePrefill && p.decodeProf == nil) {
			return nil, fmt.Errorf("scaling: %w", ErrProfileRequired)
		}
	}
	return p, nil
}

// Config returns the planner's resolved configuration.
func (p *Planner) Config() config.Config { return p.cfg }

func (p *Planner) sla() bool { return p.cfg.OptimizationTarget == config.TargetSLA }

func (p *Planner) usesInterpolation() bool {
	return p.sla() && p.cfg.EnableThroughputScaling && p.cfg.ThroughputSizing == config.SizingInterpolation
}

// loadStream reports whether load ticks run: for load decisions, and with the sla target
// also to keep tuning the perf model from live FPMs when only throughput scaling is on.
func (p *Planner) loadStream() bool { return p.cfg.EnableLoadScaling || p.sla() }

// Init returns the initial state of a planner started at now: the schedule, the perf models
// seeded with the bootstrap FPMs, and the predictors or the ahead policy's history warmed
// with the warm-up trace.
func (p *Planner) Init(now float64, boot Bootstrap) (State, error) {
	if err := p.checkWarmup(boot.Warmup); err != nil {
		return State{}, err
	}
	st := State{Version: StateVersion, LowerBoundPrefill: 1, LowerBoundDecode: 1, LastAcceptLength: 1}
	if p.loadStream() {
		st.NextLoadAt = ptr(now + p.loadI)
	}
	if p.cfg.EnableThroughputScaling && !p.cfg.Ahead() {
		st.NextThroughputAt = ptr(now + p.thrI)
	}
	if p.cfg.Ahead() {
		st.Ahead = &AheadState{BucketS: AheadBucket(p.cfg.StartupPriorSeconds(), p.loadI)}
		st.Ahead.warm(now, p.loadI, boot.Warmup)
	}
	if p.sla() {
		seed := func(kind perf.EngineKind, fpms []perf.FPM) (*perf.EngineModelState, error) {
			m, err := perf.NewEngineModel(kind, p.regOpts)
			if err != nil {
				return nil, err
			}
			m.Bootstrap(fpms)
			s := m.State()
			return &s, nil
		}
		var err error
		switch {
		case p.cfg.Mode == config.ModeAgg:
			st.Models.Agg, err = seed(perf.KindAggregated, boot.AggFPMs)
		default:
			if p.cfg.HasPrefill() {
				if st.Models.Prefill, err = seed(perf.KindPrefill, boot.PrefillFPMs); err != nil {
					return State{}, fmt.Errorf("scaling: %w", err)
				}
			}
			if p.cfg.HasDecode() {
				st.Models.Decode, err = seed(perf.KindDecode, boot.DecodeFPMs)
			}
		}
		if err != nil {
			return State{}, fmt.Errorf("scaling: %w", err)
		}
	}
	if p.sla() && p.cfg.EnableThroughputScaling && !p.cfg.Ahead() {
		preds, err := p.newPredictors()
		if err != nil {
			return State{}, err
		}
		if len(boot.Warmup) > 0 {
			predict.Warmup(preds[0], preds[1], preds[2], predict.Bucket(boot.Warmup, p.thrI))
		}
		st.Predictors = &PredictorStates{NumReq: preds[0].State(), ISL: preds[1].State(), OSL: preds[2].State()}
	}
	return st, nil
}

func (p *Planner) newPredictors() ([3]predict.Predictor, error) {
	var out [3]predict.Predictor
	for i := range out {
		pr, err := predict.New(p.predOpts)
		if err != nil {
			return out, fmt.Errorf("scaling: predictor: %w", err)
		}
		out[i] = pr
	}
	return out, nil
}

// NextTick returns the next tick of st (Dynamo's explicit schedule, reference §1.3): at the
// earliest due loop, running every loop due within MergeToleranceS of it.
func (p *Planner) NextTick(st State) Tick { return Schedule(p.cfg, st) }

// Schedule is NextTick for a configuration without building a Planner: pure comparisons,
// safe in workflow code (New validates the configuration, which may look at files).
func Schedule(cfg config.Config, st State) Tick {
	loadI, thrI := float64(cfg.LoadAdjustmentIntervalSeconds), float64(cfg.ThroughputAdjustmentIntervalSeconds)
	t := Tick{At: math.Inf(1), NeedWorkers: true}
	for _, at := range []*float64{st.NextLoadAt, st.NextThroughputAt} {
		if at != nil && *at < t.At {
			t.At = *at
		}
	}
	if math.IsInf(t.At, 1) {
		t.At = 0
		return t
	}
	t.Load = st.NextLoadAt != nil && *st.NextLoadAt <= t.At+MergeToleranceS
	t.Throughput = st.NextThroughputAt != nil && *st.NextThroughputAt <= t.At+MergeToleranceS
	t.NeedFPM = t.Load
	switch {
	case t.Load && cfg.Ahead():
		// The ahead policy reads the traffic of every interval.
		t.NeedTraffic, t.FullTraffic, t.TrafficDurationS = true, true, loadI
	case t.Throughput:
		t.NeedTraffic, t.FullTraffic, t.TrafficDurationS = true, true, thrI
	case t.Load && !cfg.EnableThroughputScaling:
		// A load-only planner refreshes the KV hit rate with a cheap read over the load interval.
		t.NeedTraffic, t.TrafficDurationS = true, loadI
	}
	return t
}

// Clone returns a deep copy of st, so a caller's state is never modified.
func (st State) Clone() State {
	c := st
	cp := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		return ptr(*v)
	}
	c.NextLoadAt, c.NextThroughputAt = cp(st.NextLoadAt), cp(st.NextThroughputAt)
	c.LastKVHitRate, c.LastISL, c.LastOSL = cp(st.LastKVHitRate), cp(st.LastISL), cp(st.LastOSL)
	c.PrefillCorrection, c.DecodeCorrection = cp(st.PrefillCorrection), cp(st.DecodeCorrection)
	c.LastDecodeScaleUpAt, c.PrevPrefillQueue = cp(st.LastDecodeScaleUpAt), cp(st.PrevPrefillQueue)
	c.StabilizationPrefill, c.StabilizationDecode = slices.Clone(st.StabilizationPrefill), slices.Clone(st.StabilizationDecode)
	c.Ahead = st.Ahead.clone()
	if st.PendingPrefill != nil {
		c.PendingPrefill = ptr(*st.PendingPrefill)
	}
	if st.PendingDecode != nil {
		c.PendingDecode = ptr(*st.PendingDecode)
	}
	// Predictor and model states are replaced wholesale (never mutated in place) by Decide,
	// so sharing their slices with the input is safe.
	if st.Predictors != nil {
		c.Predictors = ptr(*st.Predictors)
	}
	return c
}

// tick is the working set of one Decide call.
type tick struct {
	p    *Planner
	st   *State
	in   Input
	diag *Diagnostics
	caps WorkerCapabilities

	// inventory after the pending-desired guard
	readyP, readyD       int
	expectedP, expectedD *int
	inProgP, inProgD     bool
	countsKnown          bool
	// readyDBefore and readyPBefore are the ready decode and prefill engines at the ahead
	// policy's last tick (0: unknown).
	readyDBefore, readyPBefore int
	// decodeGrewBefore is the ahead state's DecodeGrewAt before this tick set it: a growth
	// at the tick before this one still sends requests into this interval
	// (finishersPredateGrowth).
	decodeGrewBefore float64
	// decodeKept says the decode sizing kept more engines than the rate needs, for a
	// scale-down's spare (decodeEngines): a tick held by it reports scale_down_stabilizing.
	decodeKept bool
	// promptsLonger says the newest prompts (over shiftWindow) are longer than the
	// aheadLengthSeconds mean beyond their noise (promptShift; the sizing then takes their
	// mean): an aggregated pool is not scaled down at this tick (aheadDecide).
	promptsLonger bool
	// idleForeseen says nothing arrived in the tick's interval and nothing is queued, and a
	// followed period foresees demand over the lead time (tick.ahead): a scale-up then
	// reports scale_up_foreseen, not scale_up.
	idleForeseen bool
	// clearingBacklog says a backlog is being cleared at this tick (learnExcessWait): the
	// prompt pool's queued prompts shrink, and an engine's own queue takes it longer than the
	// TTFT slack to clear, or did at the tick before (clearingBefore). The interval's TTFTs
	// are then that queue's tail: the excess wait is not learned from them, and the SLO
	// feedback does not count them as missed.
	clearingBacklog bool
	// heldFloorExcess is how many engines the aggregated pool's requests-held floor added
	// to its need at this tick, past the first lead time of live traffic, on calm arrivals
	// (aheadAggSize), plus the SLO headroom's share on them (tick.ahead): the holds do not
	// record them (holdNeed). 0 once an idle tick has taken them out of its need (tick.ahead),
	// so that holdNeed does not take them out twice.
	heldFloorExcess int
	// readied says which pools had a scale-up become ready at this tick (measureStartup):
	// the SLO feedback does not count their interval (grewWithin).
	readied map[Component]bool
	// backlogBefore is the prompt tokens queued on the prompt pool at the ahead policy's
	// last tick, when that was one interval ago (backlogBeforeKnown).
	backlogBefore      float64
	backlogBeforeKnown bool
	// backlogSpan is the seconds since that tick (when backlogBeforeKnown).
	backlogSpan float64
	// clearingBefore says that tick found a backlog being cleared (AheadState.ClearingAt;
	// when backlogBeforeKnown): this interval's TTFTs end that queue's tail.
	clearingBefore bool

	prefill, decode, agg *perf.EngineModel

	predNumReq float64 // the throughput tick's predicted request count (classic sizing)

	// fpmStats are the pools' FPMs as stats returns them, worked out once a tick (the
	// sizing reads them several times; a pool of thousands of engines sorts thousands).
	fpmStats map[Component][]perf.FPM
}

// Decide runs the loops due at in.Now on state st and returns the next state, the decision
// (absolute targets; empty to hold) and the tick's diagnostics. It is pure: the same state
// and input always give the same result, and st is not modified. An error means the state
// itself is unusable (e.g. corrupted), or that the tick computed a value the state or the
// diagnostics cannot carry as JSON (a NaN or an infinity: a defect, which it names); bad or
// missing observations are otherwise never errors — they hold the current replicas and say
// why in the diagnostics. No target is over config.MaxReplicas.
func (p *Planner) Decide(st State, in Input) (State, Decision, Diagnostics, error) {
	if st.Version != StateVersion {
		return st, Decision{}, Diagnostics{}, fmt.Errorf("scaling: state version %d, this planner reads %d", st.Version, StateVersion)
	}
	next := st.Clone()
	diag := Diagnostics{At: in.Now}
	var dropped string
	in.FPM, dropped = boundedFPMs(in.FPM)
	if dropped != "" {
		diag.note(dropped)
	}
	t := &tick{p: p, st: &next, in: in, diag: &diag, caps: in.Capabilities}
	if err := t.restoreModels(); err != nil {
		return st, Decision{}, Diagnostics{}, err
	}
	due := p.NextTick(st)
	runLoad := st.NextLoadAt != nil && *st.NextLoadAt <= in.Now+MergeToleranceS
	runThr := st.NextThroughputAt != nil && *st.NextThroughputAt <= in.Now+MergeToleranceS
	if !runLoad && !runThr {
		diag.note(fmt.Sprintf("no loop due at %.3f (next at %.3f): nothing decided", in.Now, due.At))
		diag.NextTickAt = due.At
		diag.ThroughputLowerBoundPrefill, diag.ThroughputLowerBoundDecode = next.LowerBoundPrefill, next.LowerBoundDecode
		return next, Decision{}, diag, nil
	}
	diag.RanLoad, diag.RanThroughput = runLoad, runThr

	t.observeInventory()
	t.observeRuntimeMetadata()
	if runLoad {
		t.observeFPM()
	}
	var final Decision
	if p.cfg.Ahead() {
		// This planner's own policy replaces both of Dynamo's loops.
		runThr, diag.RanThroughput, next.NextThroughputAt = false, false, nil
		if runLoad {
			final = t.ahead()
		}
	} else {
		var dec *Decision
		if runThr {
			dec = t.throughput()
		}
		if runLoad {
			if d := t.load(); d != nil {
				dec = d
			}
		}
		final = t.finish(dec)
	}
	t.saveModels()

	if runLoad {
		next.NextLoadAt = ptr(in.Now + p.loadI)
	}
	if runThr {
		next.NextThroughputAt = ptr(in.Now + p.thrI)
	}
	// No target past what a pool may report (connectors and acknowledgements refuse counts
	// over config.MaxReplicas): one ordered there could not be read back.
	for _, c := range []struct {
		name   string
		target **int
		ready  int
	}{{"prefill", &final.Prefill, t.readyP}, {"decode", &final.Decode, t.readyD}} {
		if *c.target != nil && **c.target > config.MaxReplicas {
			if c.ready >= config.MaxReplicas {
				diag.note(fmt.Sprintf("%s target %d not ordered: the pool is at %d, the most replicas a pool may report", c.name, **c.target, config.MaxReplicas))
				*c.target = nil
				continue
			}
			diag.note(fmt.Sprintf("%s target %d capped at %d, the most replicas a pool may report", c.name, **c.target, config.MaxReplicas))
			*c.target = ptr(config.MaxReplicas)
		}
	}
	diag.Decision = final
	diag.NextTickAt = p.NextTick(next).At
	diag.ThroughputLowerBoundPrefill, diag.ThroughputLowerBoundDecode = next.LowerBoundPrefill, next.LowerBoundDecode
	// The workflow carries the state and the diagnostics as JSON (its history, queries and
	// Continue-As-New), where a NaN or an infinity does not encode: one would fail every
	// workflow task after it. No computation should make one; if one does, the tick fails
	// (it holds, the state as it was) and says where, rather than wedge the workflow.
	if where := nonFinite(reflect.ValueOf(next), "state"); where != "" {
		return st, Decision{}, Diagnostics{}, fmt.Errorf("scaling: the tick computed a value JSON cannot carry (%s): holding, the state unchanged", where)
	}
	if where := nonFinite(reflect.ValueOf(diag), "diagnostics"); where != "" {
		return st, Decision{}, Diagnostics{}, fmt.Errorf("scaling: the tick computed a value JSON cannot carry (%s): holding, the state unchanged", where)
	}
	return next, final, diag, nil
}

// nonFinite is the path of the first NaN or infinite float64 within v (structs, pointers,
// slices and arrays; maps are not walked: State and Diagnostics hold none), prefixed with
// root, or "" when there is none. The path is built only for what it finds. It is
// deterministic (fields and elements in their order, no map ranged over); workflowcheck flags
// reflect's internals, hence the ignore.
//
//workflowcheck:ignore
func nonFinite(v reflect.Value, root string) string {
	if where, ok := findNonFinite(v); ok {
		return root + where
	}
	return ""
}

func findNonFinite(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.Float64, reflect.Float32:
		if f := v.Float(); !finite(f) {
			return fmt.Sprintf(" = %v", f), true
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return findNonFinite(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if w, ok := findNonFinite(v.Field(i)); ok {
				return "." + v.Type().Field(i).Name + w, true
			}
		}
	case reflect.Slice, reflect.Array:
		if k := v.Type().Elem().Kind(); k == reflect.Int || k == reflect.Int64 || k == reflect.Bool || k == reflect.String {
			return "", false // nothing to look at
		}
		for i := range v.Len() {
			if w, ok := findNonFinite(v.Index(i)); ok {
				return fmt.Sprintf("[%d]%s", i, w), true
			}
		}
	}
	return "", false
}

// boundedFPMs is o without the FPMs past the bounds of what an engine reports
// (perf.FPM.OutOfBounds: a broken publisher, not load), and a note naming how many were
// left out and the first one's field ("" when none). A pool whose FPMs were left out then
// reports from fewer workers than it has, which the loops read as FPMs not to decide from.
func boundedFPMs(o *FPMObservations) (*FPMObservations, string) {
	if o == nil {
		return nil, ""
	}
	dropped, first := 0, ""
	keep := func(fs []perf.FPM) []perf.FPM {
		var out []perf.FPM // nil until one is left out: then the ones kept
		for i := range fs {
			if why := fs[i].OutOfBounds(); why != "" {
				if dropped == 0 {
					first = fmt.Sprintf("worker %.64q rank %d: %s", fs[i].WorkerID, fs[i].DPRank, why)
				}
				dropped++
				if out == nil {
					out = make([]perf.FPM, i, len(fs))
					copy(out, fs[:i])
				}
				continue
			}
			if out != nil {
				out = append(out, fs[i])
			}
		}
		if out == nil {
			return fs
		}
		return out
	}
	b := *o
	b.Prefill, b.Decode, b.PrefillSamples, b.DecodeSamples = keep(o.Prefill), keep(o.Decode), keep(o.PrefillSamples), keep(o.DecodeSamples)
	if dropped == 0 {
		return o, ""
	}
	return &b, fmt.Sprintf("left out %d FPMs past what an engine reports (the first: %s): a broken publisher, not load", dropped, first)
}

func (t *tick) restoreModels() error {
	var err error
	restore := func(kind perf.EngineKind, s *perf.EngineModelState) *perf.EngineModel {
		if s == nil || err != nil {
			return nil
		}
		var m *perf.EngineModel
		m, err = perf.RestoreEngineModel(kind, t.p.regOpts, *s)
		return m
	}
	t.prefill = restore(perf.KindPrefill, t.st.Models.Prefill)
	t.decode = restore(perf.KindDecode, t.st.Models.Decode)
	t.agg = restore(perf.KindAggregated, t.st.Models.Agg)
	if err != nil {
		return fmt.Errorf("scaling: state: %w", err)
	}
	if t.p.sla() {
		missing := (t.p.cfg.Mode == config.ModeAgg && t.agg == nil) ||
			(t.p.cfg.Mode != config.ModeAgg && ((t.p.cfg.HasPrefill() && t.prefill == nil) || (t.p.cfg.HasDecode() && t.decode == nil)))
		if missing {
			return errors.New("scaling: state has no perf model for an active pool: was it created by Init with this configuration?")
		}
	}
	return nil
}

func (t *tick) saveModels() {
	save := func(m *perf.EngineModel) *perf.EngineModelState {
		if m == nil {
			return nil
		}
		s := m.State()
		return &s
	}
	t.st.Models = Models{Prefill: save(t.prefill), Decode: save(t.decode), Agg: save(t.agg)}
}

// observeInventory reads the worker counts and applies the pending-desired guard: a
// submitted desired count is reported as the expected count until the ready count matches
// it, for at most PendingExpiryIntervals throughput intervals.
func (t *tick) observeInventory() {
	w := t.in.Workers
	needP, needD := t.p.cfg.HasPrefill(), t.p.cfg.HasDecode()
	if w == nil || (needP && w.ReadyPrefill == nil) || (needD && w.ReadyDecode == nil) {
		t.countsKnown = false
		t.diag.note("worker inventory unreadable: holding the current replicas")
		return
	}
	t.countsKnown = true
	if w.ReadyPrefill != nil {
		t.readyP = *w.ReadyPrefill
	}
	if w.ReadyDecode != nil {
		t.readyD = *w.ReadyDecode
	}
	t.expectedP, t.expectedD = w.ExpectedPrefill, w.ExpectedDecode
	t.inProgP, t.inProgD = w.PrefillScalingInProgress, w.DecodeScalingInProgress
	expiry := PendingExpiryIntervals * t.p.thrI
	guard := func(pending **PendingDesired, ready int, expected **int, name Component) {
		pd := *pending
		switch {
		case pd == nil:
		case ready == pd.Replicas:
			*pending = nil
		case t.in.Now-pd.At > expiry:
			t.diag.note(fmt.Sprintf("%s: desired %d submitted at %.0f never became ready (ready %d) after %.0f s: guard expired", name, pd.Replicas, pd.At, ready, expiry))
			*pending = nil
		default:
			*expected = ptr(pd.Replicas)
		}
	}
	guard(&t.st.PendingPrefill, t.readyP, &t.expectedP, Prefill)
	guard(&t.st.PendingDecode, t.readyD, &t.expectedD, Decode)
	if needP {
		t.diag.ReadyPrefill, t.diag.ExpectedPrefill = ptr(t.readyP), t.expectedP
	}
	if needD {
		t.diag.ReadyDecode, t.diag.ExpectedDecode = ptr(t.readyD), t.expectedD
	}
}

// scalingInProgress is Dynamo's _scaling_in_progress.
func (t *tick) scalingInProgress(c Component) bool {
	if c == Prefill {
		return t.inProgP || (t.expectedP != nil && *t.expectedP != t.readyP)
	}
	return t.inProgD || (t.expectedD != nil && *t.expectedD != t.readyD)
}

func (t *tick) current(c Component) int {
	if c == Prefill {
		return t.readyP
	}
	return t.readyD
}

// observeRuntimeMetadata records the last KV hit rate and accept length seen in traffic.
func (t *tick) observeRuntimeMetadata() {
	tr := t.in.Traffic
	if tr == nil {
		return
	}
	if tr.KVHitRate != nil && !math.IsNaN(*tr.KVHitRate) {
		t.st.LastKVHitRate = ptr(*tr.KVHitRate)
	}
	if tr.AcceptLength != nil && !math.IsNaN(*tr.AcceptLength) && !math.IsInf(*tr.AcceptLength, 0) {
		t.st.LastAcceptLength = t.clampAcceptLength(*tr.AcceptLength)
	}
}

// clampAcceptLength is Dynamo's _clamp_accept_length: [1, nextn+1], 1 without spec decode.
func (t *tick) clampAcceptLength(a float64) float64 {
	n := t.p.cfg.SpeculativeNextn
	if c := t.caps.Decode; c != nil && c.SpeculativeNextn > 0 {
		n = c.SpeculativeNextn
	}
	if n <= 0 || math.IsNaN(a) || math.IsInf(a, 0) {
		return 1
	}
	return math.Min(math.Max(a, 1), float64(n+1))
}

func (t *tick) acceptLength() float64 { return t.clampAcceptLength(t.st.LastAcceptLength) }

func (t *tick) kvHitRate() float64 {
	if t.st.LastKVHitRate == nil {
		return 0
	}
	return *t.st.LastKVHitRate
}

// observeFPM feeds the live FPMs to the perf models (sla target only).
func (t *tick) observeFPM() {
	f := t.in.FPM
	if f == nil || !t.p.sla() {
		return
	}
	feed := func(m *perf.EngineModel, latest, samples []perf.FPM, name string) {
		if m == nil {
			return
		}
		batch := latest
		if len(samples) > 0 {
			batch = append(append([]perf.FPM(nil), samples...), latest...)
		}
		if skipped := m.Observe(batch); skipped > 0 {
			t.diag.note(fmt.Sprintf("%s: skipped %d FPMs of an unsupported schema version (want %d)", name, skipped, perf.FPMVersion))
		}
	}
	if t.agg != nil {
		feed(t.agg, f.Decode, f.DecodeSamples, "aggregated")
		return
	}
	feed(t.prefill, f.Prefill, f.PrefillSamples, "prefill")
	feed(t.decode, f.Decode, f.DecodeSamples, "decode")
}

// gpuCost is the per-replica GPU cost of a component: the workers' report, else the
// configuration (1 by default). Dynamo skips the budget when workers report none; here the
// budget always applies.
func (t *tick) gpuCost(c Component) int {
	caps := t.caps.Decode
	fallback := t.p.cfg.DecodeGPUs()
	if c == Prefill {
		caps, fallback = t.caps.Prefill, t.p.cfg.PrefillGPUs()
	}
	if g := caps.GPUCost(); g > 0 {
		return g
	}
	return fallback
}

func (t *tick) minEndpoint(c Component) int {
	if c == Prefill {
		return t.p.cfg.PrefillMinEndpoints()
	}
	return t.p.cfg.DecodeMinEndpoints()
}

// finish normalises the decision (components equal to their current count are dropped),
// records the older planner's memory, and returns the final decision. The pending desired
// counts are recorded by Submitted, for what the caller really submits.
func (t *tick) finish(dec *Decision) Decision {
	if !t.countsKnown {
		return Decision{}
	}
	out := Decision{}
	if dec != nil && dec.Prefill != nil && *dec.Prefill != t.readyP {
		out.Prefill = ptr(*dec.Prefill)
	}
	if dec != nil && dec.Decode != nil && *dec.Decode != t.readyD {
		out.Decode = ptr(*dec.Decode)
	}
	t.stabilize(&out)
	if out.Decode != nil && *out.Decode > t.readyD {
		t.st.LastDecodeScaleUpAt = ptr(t.in.Now)
	}
	return out
}

// Submitted records the targets the caller actually submitted to the deployment at time now
// (the pending-desired guard's memory): a decision an override replaced, a paused direction
// dropped or a connector held back must not be remembered as submitted. Advisory planners
// record nothing, as in Dynamo. It returns the new state; st is not modified.
func (p *Planner) Submitted(st State, applied Decision, now float64) State {
	return st.WithSubmitted(applied, now, p.cfg.Advisory)
}

// WithSubmitted is Submitted without a Planner (for workflow code): it returns a copy of st
// remembering the submitted targets, unless advisory.
func (st State) WithSubmitted(applied Decision, now float64, advisory bool) State {
	next := st.Clone()
	if advisory {
		return next
	}
	if applied.Prefill != nil {
		next.PendingPrefill = &PendingDesired{Replicas: *applied.Prefill, At: now}
	}
	if applied.Decode != nil {
		next.PendingDecode = &PendingDesired{Replicas: *applied.Decode, At: now}
	}
	return next
}
