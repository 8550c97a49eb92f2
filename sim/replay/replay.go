// Package replay replays a request trace through simulated engines (sim/engine) on a
// virtual clock, with the planner's decision core (scaling) in the loop: the same policy
// the workflow runs decides, from observations computed from what happened in the
// simulation, and its decisions start and drain simulated engines.
//
// The replay is a discrete-event loop. Every event time it, in order: ends the passes due
// then (delivering their first-token and completion events and publishing their FPMs),
// makes the engines whose startup delay elapsed ready, routes the KV hand-offs and the
// arrivals due, runs the planner tick due, removes the drained engines that are idle, and
// starts a pass on every engine that holds work and is not running one.
//
// Routing: an arrival goes to a ready (not draining) prefill engine chosen by the router
// mode (sim/router): by default the one with the fewest outstanding requests (running,
// waiting, and finishing in the pass in flight, which the engine lets go of when it computes
// the pass; ties to the lowest index); round robin; or KV-aware, Dynamo's KV router cost
// (the engine's busy KV tokens — used blocks, the pass in flight's finishing requests'
// included, and waiting prompt tokens — less the tokens of the request's leading blocks its
// prefix cache holds; Options.PrefixCache). At its first
// token plus the KV hand-off delay a request goes the same way to a decode engine (which
// holds no cache: KV-aware picks the least busy in tokens there), unless its OSL is
// ≤ 1 (it finished with its first token). A request that finds no ready engine of
// its role waits, in arrival order, in a frontend queue of that role, flushed as soon as an
// engine of the role becomes ready.
//
// Aggregated deployments (config mode agg) have one pool of aggregated engines (chunked
// prefill, the mocker's defaults) that run whole requests: an arrival goes to the one
// the router mode picks (with the prefix cache, aggregated engines keep one) and stays there; its TTFT is its first token, its ITL the decode on the
// same engine. As in Dynamo, the single pool is the decode component: its counts, targets,
// capabilities and FPMs are the decode ones, and the prefill pool stays empty.
//
// Scaling: a target above the pool's ready + starting engines starts new engines, ready
// after StartupDelay (starting meanwhile); a target below cancels starting engines first
// (newest first), then drains the highest-index ready engines: they take no new request,
// finish the ones they hold, and are removed when idle.
//
// Everything is deterministic: no wall clock, no maps iterated, no randomness.
package replay

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/router"
)

// DefaultHorizon is how long after the last arrival the replay keeps running when some
// requests are still unfinished (e.g. no engine of a role is ever ready).
const DefaultHorizon = time.Hour

// ErrInvalidOptions is wrapped by Run errors about its options or trace.
var ErrInvalidOptions = errors.New("replay: invalid options")

// Options configure a replay.
type Options struct {
	// Config is the planner configuration (its mode must be disagg or agg).
	Config config.Config
	// Profile is the pre-deployment profile: the engines' timing model, the perf models'
	// bootstrap FPMs and the classic sizing's interpolators.
	Profile *perf.Profile
	// StartupDelay is how long a new engine takes to become ready.
	StartupDelay time.Duration
	// InitialPrefill and InitialDecode are the engines ready at time 0. In agg mode
	// InitialDecode counts the aggregated engines and InitialPrefill must be 0.
	InitialPrefill, InitialDecode int
	// EngineConfig returns the configuration of a new engine of a role (nil:
	// engine.DefaultConfig). The replay sets its WorkerID.
	EngineConfig func(role engine.Role) engine.Config
	// Horizon bounds the replay at the last arrival + Horizon (0: DefaultHorizon).
	Horizon time.Duration
	// Static runs no planner: the pools stay at InitialPrefill and InitialDecode (a static
	// deployment). Config then only supplies the SLAs the requests are scored against.
	Static bool
	// ContextLength is the engines' maximum context in tokens, reported in their
	// capabilities (the threshold targets need it; 0: DefaultContextLength).
	ContextLength int
	// Router is how the frontend picks an engine ("": router.LeastLoaded).
	Router router.Mode
	// PrefixCache turns on the prefill and aggregated engines' prefix cache (engine
	// Config.EnablePrefixCaching), keyed by the requests' hash ids (predict.Request.HashIDs).
	PrefixCache bool
	// Progress, when set, is called as requests finish (about every 1% of them, and at the
	// end) with the finished count and the total.
	Progress func(done, total int)
}

// DefaultContextLength is the engines' maximum context when Options.ContextLength is 0:
// the H200 profile's max model length.
const DefaultContextLength = 16384

// Record is the outcome of one request.
type Record struct {
	// Arrival is the arrival time in seconds; ISL and OSL the request's lengths.
	Arrival float64 `json:"arrival"`
	ISL     int     `json:"isl"`
	OSL     int     `json:"osl"`
	// FirstToken and Finish are the first- and last-token times in seconds (0 until then).
	FirstToken float64 `json:"first_token"`
	Finish     float64 `json:"finish"`
	// TTFTMs is first token − arrival; ITLMs is (finish − first token)/(OSL − 1), 0 when
	// OSL ≤ 1; both in milliseconds.
	TTFTMs float64 `json:"ttft_ms"`
	ITLMs  float64 `json:"itl_ms"`
	// Finished reports whether the request produced its last token within the replay.
	Finished bool `json:"finished"`
	// Error is why an engine refused the request (e.g. too long), empty otherwise.
	Error string `json:"error,omitempty"`
}

// Percentiles are the p50, p90 and p99 of a latency in milliseconds (linear
// interpolation between order statistics; 0 without samples).
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// PoolCounts are a pool's engines by state.
type PoolCounts struct {
	Ready    int `json:"ready"`
	Starting int `json:"starting"`
	Draining int `json:"draining"`
}

// TimelineEntry is one planner tick.
type TimelineEntry struct {
	// At is the tick time in seconds.
	At float64 `json:"at"`
	// Prefill and Decode are the pools as the tick observed them, before its decision
	// (agg: Decode is the aggregated pool).
	Prefill PoolCounts `json:"prefill"`
	Decode  PoolCounts `json:"decode"`
	// Decision is what the planner decided (nil: no opinion).
	Decision scaling.Decision `json:"decision"`
	// The loops' reasons, from the tick's diagnostics.
	LoadReasonPrefill       scaling.Reason `json:"load_reason_prefill,omitempty"`
	LoadReasonDecode        scaling.Reason `json:"load_reason_decode,omitempty"`
	ThroughputReasonPrefill scaling.Reason `json:"throughput_reason_prefill,omitempty"`
	ThroughputReasonDecode  scaling.Reason `json:"throughput_reason_decode,omitempty"`
	// Traffic is the window the tick observed (nil on a tick that read none): the requests,
	// their mean lengths and latencies.
	Traffic *scaling.TrafficObservation `json:"traffic,omitempty"`
	// EstimatedTTFTMs and EstimatedITLMs are the policy's latency estimates for the ready
	// pools, from the tick's diagnostics (nil: none).
	EstimatedTTFTMs *float64 `json:"estimated_ttft_ms,omitempty"`
	EstimatedITLMs  *float64 `json:"estimated_itl_ms,omitempty"`
	// Notes are the diagnostics' notes.
	Notes []string `json:"notes,omitempty"`
}

// Result is a replay's outcome.
type Result struct {
	// Requests are the per-request records, in trace order.
	Requests []Record `json:"requests"`
	// Duration is the replay's end in seconds: the last completion (or the horizon).
	Duration float64 `json:"duration_s"`
	// Finished counts the finished requests; Good those within both SLAs; Goodput is
	// Good / len(Requests) (unfinished requests are not good).
	Finished int     `json:"finished"`
	Good     int     `json:"good"`
	Goodput  float64 `json:"goodput"`
	// Misses split the finished requests that are not good by the SLA they miss. Like
	// Goodput they count every request from 0 s; the simulator's rows score from their own
	// start.
	Misses
	// TTFT and ITL are the finished requests' latency percentiles (ITL: OSL > 1 only).
	TTFT Percentiles `json:"ttft_ms"`
	ITL  Percentiles `json:"itl_ms"`
	// PrefillGPUSeconds and DecodeGPUSeconds are the provisioned GPU-seconds (starting +
	// ready + draining engines × 1 GPU, integrated over time); GPUSeconds their sum. In agg
	// mode the aggregated engines are the decode pool's.
	PrefillGPUSeconds float64 `json:"prefill_gpu_seconds"`
	DecodeGPUSeconds  float64 `json:"decode_gpu_seconds"`
	GPUSeconds        float64 `json:"gpu_seconds"`
	// ScaleActions counts the applied target changes (per pool); Reversals those whose
	// direction is the opposite of the pool's previous action.
	ScaleActions int `json:"scale_actions"`
	Reversals    int `json:"reversals"`
	// Timeline has one entry per planner tick.
	Timeline []TimelineEntry `json:"timeline"`
	// Replicas samples the pools whenever they change (starting, ready or draining counts),
	// from time 0: what was provisioned when, whatever decided it.
	Replicas []ReplicaSample `json:"replicas"`
	// KVHitRate is the KV router's mean hit rate over the routed prompts (the mean
	// of dynamo_component_router_kv_hit_rate; 0 unless Options.Router is router.KV).
	KVHitRate float64 `json:"kv_hit_rate,omitempty"`
	// Prefix sums the prefill and aggregated engines' prefix-cache counters; PrefixEngines has each
	// engine's (both only with Options.PrefixCache).
	Prefix        *engine.PrefixStats `json:"prefix_cache,omitempty"`
	PrefixEngines []EnginePrefix      `json:"prefix_engines,omitempty"`
}

// EnginePrefix is one engine's prefix-cache counters over its life.
type EnginePrefix struct {
	ID string `json:"id"`
	engine.PrefixStats
}

// ReplicaSample is the pools from a time on.
type ReplicaSample struct {
	At      float64    `json:"at"`
	Prefill PoolCounts `json:"prefill"`
	Decode  PoolCounts `json:"decode"`
}

// replica is one simulated engine.
type replica struct {
	eng      *engine.Engine
	id       string
	readyAt  float64 // when it becomes ready (starting until then)
	draining bool
	inFlight bool    // a pass is running
	passEnd  float64 // its end, when inFlight
	events   []engine.Event
	running  perf.FPM // the FPM of the pass in flight, published at its end
	fpm      perf.FPM // the latest published FPM
	hasFPM   bool
}

func (r *replica) ready(now float64) bool { return now >= r.readyAt }

// outstanding is the requests an engine's load l holds: running and waiting (read with
// Engine.LoadAt, the running include those the pass in flight finishes, until it ends).
func outstanding(l engine.Load) int { return l.Running + l.Waiting }

// pool is the engines of one role.
type pool struct {
	role     engine.Role
	reps     []*replica
	target   int
	queue    []int // frontend queue: request indexes
	seq      int   // engines ever made (worker id suffix)
	gpuSec   float64
	lastSign int
	started  int // engines started by scaling (not the initial ones)
	rt       router.Router
	samples  perf.FPMReservoir  // the pool's pass FPMs since the last FPM observation
	cands    []router.Candidate // scratch
	candReps []*replica         // scratch
}

// handoff is a request becoming available to decode at a time.
type handoff struct {
	at  float64
	req int
}

type handoffHeap []handoff

func (h handoffHeap) Len() int { return len(h) }
func (h handoffHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].req < h[j].req
}
func (h handoffHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *handoffHeap) Push(x any)   { *h = append(*h, x.(handoff)) }
func (h *handoffHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sim is one replay's state.
type sim struct {
	o       Options
	reqs    []predict.Request
	order   []int // request indexes by arrival
	timing  engine.Timing
	planner *scaling.Planner
	caps    scaling.WorkerCapabilities
	st      scaling.State
	p, d    *pool
	agg     bool // mode agg: d is the aggregated pool, p stays empty
	res     Result
	hand    handoffHeap
	done    int
	last    float64 // time GPU-seconds are integrated to
	now     float64 // the time the replay stands at
	next    int     // next arrival, as a position in order
	end     float64 // the replay's bound: last arrival + horizon
	tail    bool    // the passes' start at now is still to do (see advanceTo)
	stop    func() bool
	watch   *watch     // requests whose outcome an oracle evaluation counts (nil: none)
	rng     *rand.Rand // the FPM reservoirs' draws (fixed seed, as observe.FPMStore's)

	progressEvery, progressNext int

	// traffic windows, observed when Dynamo's frontend observes them: arrivals (the request
	// count), first tokens (TTFT and ISL) and finishes (OSL, ITL and duration), each a time
	// series with prefix sums
	arrivals        []float64
	firstT          []float64
	cumTTFT, cumISL []float64
	finT            []float64
	cumOSL, cumDur  []float64
	itlT            []float64
	cumITL          []float64
	kvT             []float64 // KV router hit rates, by routing time
	cumKV           []float64
}

// Run replays reqs (any order; arrivals in seconds from 0) and returns the result.
func Run(reqs []predict.Request, o Options) (Result, error) {
	s, err := newSim(reqs, o)
	if err != nil {
		return Result{}, err
	}
	if err := s.run(); err != nil {
		return Result{}, err
	}
	s.summarise()
	return s.res, nil
}

func newSim(reqs []predict.Request, o Options) (*sim, error) {
	switch {
	case o.Profile == nil:
		return nil, fmt.Errorf("%w: no profile", ErrInvalidOptions)
	case o.Config.Mode != config.ModeDisagg && o.Config.Mode != config.ModeAgg:
		return nil, fmt.Errorf("%w: mode %q: only disagg and agg are simulated", ErrInvalidOptions, o.Config.Mode)
	case o.Config.Mode == config.ModeAgg && o.InitialPrefill != 0:
		return nil, fmt.Errorf("%w: mode agg has no prefill pool (initial prefill %d): give the aggregated engines as InitialDecode", ErrInvalidOptions, o.InitialPrefill)
	case o.InitialPrefill < 0 || o.InitialDecode < 0:
		return nil, fmt.Errorf("%w: negative initial replicas", ErrInvalidOptions)
	case o.StartupDelay < 0 || o.Horizon < 0:
		return nil, fmt.Errorf("%w: negative startup delay or horizon", ErrInvalidOptions)
	}
	if o.PrefixCache {
		for i, r := range reqs {
			if n := predict.MaxHashIDsFor(r.InputTokens); len(r.HashIDs) > n {
				return nil, fmt.Errorf("%w: prefix cache: request %d has %d hash ids for %d prompt tokens, more than one per %d-token block (%d): "+
					"the trace is not hashed in %d-token blocks; run it without the prefix cache", ErrInvalidOptions, i, len(r.HashIDs),
					r.InputTokens, predict.HashBlockTokens, n, predict.HashBlockTokens)
			}
		}
	}
	if o.Horizon == 0 {
		o.Horizon = DefaultHorizon
	}
	if o.EngineConfig == nil {
		o.EngineConfig = engine.DefaultConfig
	}
	if o.ContextLength < 0 {
		return nil, fmt.Errorf("%w: negative context length", ErrInvalidOptions)
	}
	if o.ContextLength == 0 {
		o.ContextLength = DefaultContextLength
	}
	timing, err := engine.NewProfileTiming(o.Profile)
	if err != nil {
		return nil, fmt.Errorf("replay: timing: %w", err)
	}
	pl, err := scaling.New(o.Config, o.Profile)
	if err != nil {
		return nil, fmt.Errorf("replay: planner: %w", err)
	}
	rt, err := router.New(o.Router)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	s := &sim{o: o, reqs: reqs, timing: timing, planner: pl,
		p:   &pool{role: engine.RolePrefill, target: o.InitialPrefill, rt: rt},
		d:   &pool{role: engine.RoleDecode, target: o.InitialDecode, rt: rt},
		rng: rand.New(rand.NewPCG(0x6670, 0x6d))}
	s.stop = func() bool { return s.done == len(s.reqs) }
	s.progressEvery = max(1, len(reqs)/100)
	s.progressNext = s.progressEvery
	if o.Config.Mode == config.ModeAgg {
		s.agg, s.d.role = true, engine.RoleAggregated
		s.caps = scaling.WorkerCapabilities{Decode: s.capabilities(engine.RoleAggregated)}
	} else {
		s.caps = scaling.WorkerCapabilities{Prefill: s.capabilities(engine.RolePrefill), Decode: s.capabilities(engine.RoleDecode)}
	}
	boot, err := bootstrap(pl, o)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if s.st, err = pl.Init(0, boot); err != nil {
		return nil, fmt.Errorf("replay: planner init: %w", err)
	}
	s.res.Requests = make([]Record, len(reqs))
	s.order = make([]int, len(reqs))
	for i, r := range reqs {
		if math.IsNaN(r.Arrival) || math.IsInf(r.Arrival, 0) || r.Arrival < 0 {
			return nil, fmt.Errorf("%w: request %d: arrival %v", ErrInvalidOptions, i, r.Arrival)
		}
		s.res.Requests[i] = Record{Arrival: r.Arrival, ISL: r.InputTokens, OSL: r.OutputTokens}
		s.order[i] = i
	}
	sort.SliceStable(s.order, func(a, b int) bool { return reqs[s.order[a]].Arrival < reqs[s.order[b]].Arrival })
	s.end = o.Horizon.Seconds()
	if n := len(s.order); n > 0 {
		s.end += reqs[s.order[n-1]].Arrival
	}
	s.arrivals = make([]float64, 0, len(reqs))
	s.cumISL, s.cumOSL = []float64{0}, []float64{0}
	s.cumTTFT, s.cumDur, s.cumITL, s.cumKV = []float64{0}, []float64{0}, []float64{0}, []float64{0}
	for i := 0; i < o.InitialPrefill; i++ {
		if err := s.add(s.p, 0); err != nil {
			return nil, err
		}
	}
	for i := 0; i < o.InitialDecode; i++ {
		if err := s.add(s.d, 0); err != nil {
			return nil, err
		}
	}
	s.sample(0)
	return s, nil
}

// bootstrap is what a replay's decision core starts from, as the workflow's Init activity
// seeds it: for the sla target, perf models seeded from the profile, and the warm-up trace
// the configuration names when its policy reads one.
func bootstrap(pl *scaling.Planner, o Options) (scaling.Bootstrap, error) {
	if pl.Config().OptimizationTarget != config.TargetSLA {
		return scaling.Bootstrap{}, nil
	}
	boot := scaling.ProfileBootstrap(o.Profile, pl.Config().Mode)
	warmup, _, err := pl.ReadWarmup()
	boot.Warmup = warmup
	return boot, err
}

// add starts an engine in pl, ready at readyAt.
func (s *sim) add(pl *pool, readyAt float64) error {
	cfg := s.o.EngineConfig(pl.role)
	cfg.Role = pl.role
	cfg.WorkerID = fmt.Sprintf("%s-%d", pl.role, pl.seq)
	if s.o.PrefixCache {
		cfg.EnablePrefixCaching = true
	}
	pl.seq++
	e, err := engine.New(cfg, s.timing)
	if err != nil {
		return fmt.Errorf("replay: %s engine: %w", pl.role, err)
	}
	pl.reps = append(pl.reps, &replica{eng: e, id: cfg.WorkerID, readyAt: readyAt})
	return nil
}

func (s *sim) run() error {
	for {
		if s.o.Static {
			s.advanceTo(math.Inf(1))
			return nil
		}
		tk := s.planner.NextTick(s.st)
		if !tk.Load && !tk.Throughput {
			s.advanceTo(math.Inf(1))
			return nil
		}
		if !s.advanceTo(tk.At) {
			return nil
		}
		if err := s.tick(tk.At, tk); err != nil {
			return err
		}
	}
}

// nextEvent is the time of the next event after now: an arrival, a hand-off, a pass's end
// or an engine becoming ready (+Inf: none).
func (s *sim) nextEvent() float64 {
	t := math.Inf(1)
	if s.next < len(s.order) {
		t = s.reqs[s.order[s.next]].Arrival
	}
	if len(s.hand) > 0 {
		t = math.Min(t, s.hand[0].at)
	}
	for _, pl := range []*pool{s.p, s.d} {
		for _, r := range pl.reps {
			if r.inFlight {
				t = math.Min(t, r.passEnd)
			} else if r.readyAt > s.last {
				t = math.Min(t, r.readyAt)
			}
		}
	}
	return t
}

// advanceTo runs the replay up to limit: every event time before it in full, then, at
// limit itself, the events due (passes ending, engines becoming ready, hand-offs and
// arrivals routed) but not yet the start of new passes, which the next call does first. A
// planner tick at limit thus observes what the direct loop's tick observes. It returns
// false, having stopped early, when the stop condition holds (by default: every request
// done) or the replay's end is passed; true when it stands at limit.
func (s *sim) advanceTo(limit float64) bool {
	for {
		if s.tail {
			s.startPasses(s.now)
			s.sample(s.now)
			s.tail = false
		}
		if s.stop() {
			return false
		}
		t := math.Min(s.nextEvent(), limit)
		if t > s.end {
			s.integrate(s.end)
			s.now = s.end
			return false
		}
		s.integrate(t)
		s.now = t
		s.process(t)
		s.tail = true // the pools are sampled after it: it always runs at t, next
		if t >= limit {
			return true
		}
	}
}

// process handles the events due at t: passes ending, engines becoming ready, hand-offs
// and arrivals.
func (s *sim) process(t float64) {
	// 1. passes ending now
	for _, pl := range []*pool{s.p, s.d} {
		for _, r := range pl.reps {
			if r.inFlight && r.passEnd <= t {
				r.inFlight = false
				s.deliver(pl, r)
			}
		}
	}
	// 2. engines becoming ready: flush the frontend queues
	s.flush(s.p, t)
	// 3. hand-offs due
	for len(s.hand) > 0 && s.hand[0].at <= t {
		h := heap.Pop(&s.hand).(handoff)
		s.d.queue = append(s.d.queue, h.req)
	}
	s.flush(s.d, t)
	// 4. arrivals due
	for s.next < len(s.order) && s.reqs[s.order[s.next]].Arrival <= t {
		i := s.order[s.next]
		s.next++
		s.arrived(i)
		s.entry().queue = append(s.entry().queue, i)
	}
	s.flush(s.entry(), t)
}

// entry is the pool arrivals go to: prefill, or the aggregated pool in agg mode.
func (s *sim) entry() *pool {
	if s.agg {
		return s.d
	}
	return s.p
}

// startPasses routes what the frontend queues hold (a scale-up at t may have made an engine
// ready), removes the drained engines that are idle and starts a pass on every ready engine
// that holds work and is not running one.
func (s *sim) startPasses(t float64) {
	s.flush(s.p, t)
	s.flush(s.d, t)
	for _, pl := range []*pool{s.p, s.d} {
		kept := pl.reps[:0]
		for _, r := range pl.reps {
			if r.draining && !r.inFlight && r.eng.Idle() {
				s.retire(r)
				continue
			}
			kept = append(kept, r)
		}
		clear(pl.reps[len(kept):])
		pl.reps = kept
		for _, r := range pl.reps {
			if r.inFlight || !r.ready(t) {
				continue
			}
			pass, ok := r.eng.Step(t)
			if !ok {
				continue
			}
			r.inFlight, r.passEnd = true, pass.End()
			r.events = append(r.events[:0], pass.Events...)
			r.running = pass.FPM
		}
	}
}

// sample records the pools at t when they differ from the last sample.
func (s *sim) sample(t float64) {
	rs := ReplicaSample{At: t, Prefill: s.p.counts(t), Decode: s.d.counts(t)}
	if n := len(s.res.Replicas); n > 0 {
		last := s.res.Replicas[n-1]
		if last.Prefill == rs.Prefill && last.Decode == rs.Decode {
			return
		}
		if last.At == t {
			s.res.Replicas[n-1] = rs
			return
		}
	}
	s.res.Replicas = append(s.res.Replicas, rs)
}

// integrate adds the provisioned GPU-seconds up to t.
func (s *sim) integrate(t float64) {
	if t <= s.last {
		return
	}
	dt := t - s.last
	s.p.gpuSec += float64(len(s.p.reps)) * dt
	s.d.gpuSec += float64(len(s.d.reps)) * dt
	s.last = t
}

// arrived records request i's arrival in the traffic windows.
func (s *sim) arrived(i int) {
	s.arrivals = append(s.arrivals, s.reqs[i].Arrival)
}

// firstToken records request i's first token at t: its TTFT and ISL enter the traffic
// windows then, as Dynamo's frontend observes them with the first response.
func (s *sim) firstToken(i int, t float64) {
	rec := &s.res.Requests[i]
	rec.FirstToken = t
	rec.TTFTMs = (t - rec.Arrival) * 1000
	s.firstT = append(s.firstT, t)
	s.cumTTFT = append(s.cumTTFT, s.cumTTFT[len(s.cumTTFT)-1]+rec.TTFTMs)
	s.cumISL = append(s.cumISL, s.cumISL[len(s.cumISL)-1]+float64(rec.ISL))
	if s.watch != nil {
		s.watch.firstToken(s, i)
	}
}

// finished records request i's completion at t.
func (s *sim) finished(i int, t float64) {
	rec := &s.res.Requests[i]
	rec.Finish, rec.Finished = t, true
	if rec.OSL > 1 {
		rec.ITLMs = (t - rec.FirstToken) * 1000 / float64(rec.OSL-1)
		s.itlT = append(s.itlT, t)
		s.cumITL = append(s.cumITL, s.cumITL[len(s.cumITL)-1]+rec.ITLMs)
	}
	s.finT = append(s.finT, t)
	s.cumOSL = append(s.cumOSL, s.cumOSL[len(s.cumOSL)-1]+float64(rec.OSL))
	s.cumDur = append(s.cumDur, s.cumDur[len(s.cumDur)-1]+(t-rec.Arrival))
	s.completed(i)
}

// completed counts request i as done (finished or failed).
func (s *sim) completed(i int) {
	s.done++
	if s.watch != nil {
		s.watch.done(s, i)
	}
	if s.o.Progress != nil && (s.done >= s.progressNext || s.done == len(s.reqs)) {
		s.progressNext = s.done + s.progressEvery
		s.o.Progress(s.done, len(s.reqs))
	}
}

// failed records that request i can never run.
func (s *sim) failed(i int, err error) {
	s.res.Requests[i].Error = err.Error()
	s.completed(i)
}

// deliver handles the events of r's pass that just ended.
func (s *sim) deliver(pl *pool, r *replica) {
	r.fpm, r.hasFPM = r.running, true
	if !r.fpm.IsHeartbeat() {
		pl.samples.Add(&r.fpm, s.rng)
	}
	for _, ev := range r.events {
		i := int(ev.ID)
		rec := &s.res.Requests[i]
		switch {
		case pl.role == engine.RolePrefill && ev.Kind == engine.EventFirstToken:
			s.firstToken(i, ev.Time)
			if rec.OSL <= 1 {
				s.finished(i, ev.Time)
			} else {
				heap.Push(&s.hand, handoff{at: ev.Time + ev.HandoffDelay, req: i})
			}
		case pl.role == engine.RoleDecode && ev.Kind == engine.EventFinished:
			s.finished(i, ev.Time)
		case pl.role == engine.RoleAggregated && ev.Kind == engine.EventFirstToken:
			s.firstToken(i, ev.Time)
		case pl.role == engine.RoleAggregated && ev.Kind == engine.EventFinished:
			s.finished(i, ev.Time) // an OSL ≤ 1 request finishes in its first-token pass
		}
	}
	r.events = r.events[:0]
}

// flush routes pl's frontend queue, in order, to its ready engines as the router picks.
func (s *sim) flush(pl *pool, t float64) {
	for len(pl.queue) > 0 {
		i := pl.queue[0]
		q := s.reqs[i]
		kv := pl.rt.Mode() == router.KV
		pl.cands, pl.candReps = pl.cands[:0], pl.candReps[:0]
		for _, r := range pl.reps {
			if r.draining || !r.ready(t) {
				continue
			}
			l := r.eng.LoadAt(t)
			c := router.Candidate{Load: outstanding(l)}
			if kv {
				c.ActiveTokens = l.KVBlocksUsed*r.eng.Config().BlockSize + l.WaitingTokens
				c.CachedBlocks = r.eng.CachedBlocks(q.HashIDs)
			}
			pl.cands, pl.candReps = append(pl.cands, c), append(pl.candReps, r)
		}
		k := pl.rt.Pick(pl.cands)
		if k < 0 {
			return
		}
		best := pl.candReps[k]
		clear(pl.candReps)
		pl.queue = pl.queue[1:]
		if kv && pl.role != engine.RoleDecode {
			s.routedKV(t, router.HitRate(pl.cands[k].CachedBlocks, len(q.HashIDs)))
		}
		err := best.eng.Submit(engine.Request{ID: uint64(i), ISL: q.InputTokens, OSL: q.OutputTokens, Arrival: q.Arrival, HashIDs: q.HashIDs})
		if err != nil {
			s.failed(i, fmt.Errorf("%s: %w", best.id, err))
		}
	}
	if len(pl.queue) == 0 {
		pl.queue = nil // drop the consumed backing array
	}
}

// routedKV records the KV router's hit rate of a request routed at t.
func (s *sim) routedKV(t, rate float64) {
	s.kvT = append(s.kvT, t)
	s.cumKV = append(s.cumKV, s.cumKV[len(s.cumKV)-1]+rate)
}

// retire keeps the prefix-cache counters of an engine leaving the replay.
func (s *sim) retire(r *replica) {
	if !s.o.PrefixCache || r.eng.Config().Role == engine.RoleDecode {
		return
	}
	st := r.eng.PrefixStats()
	st.Blocks, st.Inactive = 0, 0
	s.res.PrefixEngines = append(s.res.PrefixEngines, EnginePrefix{ID: r.id, PrefixStats: st})
}

// counts returns pl's engines by state at t.
func (pl *pool) counts(t float64) PoolCounts {
	var c PoolCounts
	for _, r := range pl.reps {
		switch {
		case r.draining:
			c.Draining++
		case r.ready(t):
			c.Ready++
		default:
			c.Starting++
		}
	}
	return c
}

// fpms returns the latest FPM of each ready engine of pl (a heartbeat when it is idle).
func (pl *pool) fpms(t float64) []perf.FPM {
	var out []perf.FPM
	for _, r := range pl.reps {
		if r.draining || !r.ready(t) {
			continue
		}
		if !r.hasFPM || (!r.inFlight && r.eng.Idle()) {
			out = append(out, perf.FPM{Version: perf.FPMVersion, WorkerID: r.id})
			continue
		}
		out = append(out, r.fpm)
	}
	return out
}

// fpmObservations are the FPMs a planner tick at t reads, as the live worker's FPM store
// (observe.FPMStore) gives them: the latest FPM of each ready engine and, per pool, a
// uniform sample of at most perf.FPMReservoirSize of the passes that ended since the
// previous read (every engine's, draining ones included), which it then forgets.
func (s *sim) fpmObservations(t float64) *scaling.FPMObservations {
	return &scaling.FPMObservations{Prefill: s.p.fpms(t), Decode: s.d.fpms(t),
		PrefillSamples: s.p.samples.Take(), DecodeSamples: s.d.samples.Take()}
}

// capabilities are a replica's capabilities, as the workers report them.
func (s *sim) capabilities(role engine.Role) *scaling.EngineCapabilities {
	cfg := s.o.EngineConfig(role)
	blocks := cfg.NumGPUBlocks
	if blocks == 0 {
		blocks = engine.DefaultNumGPUBlocks
		if c, ok := s.timing.(engine.KVCapacity); ok && c.KVCapacityTokens() >= cfg.BlockSize {
			blocks = c.KVCapacityTokens() / cfg.BlockSize
		}
	}
	return &scaling.EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: int64(cfg.MaxNumBatchedTokens),
		MaxNumSeqs: int64(cfg.MaxNumSeqs), MaxKVTokens: int64(blocks * cfg.BlockSize), ContextLength: int64(s.o.ContextLength)}
}

// traffic is the frontend's traffic over (t − dur, t], as Dynamo's frontend metrics give it:
// the requests that arrived (requests_started_total), the TTFT and ISL of the requests whose
// first token came (both observed with the first response), the OSL, ITL and duration of
// those that finished (observed at completion). A mean without observations is nil, as the
// Prometheus source reads it, except that a window without arrivals has no ISL or OSL (its
// TTFT, ITL and duration means are still those of the requests that got there in it).
func (s *sim) traffic(t, dur float64) *scaling.TrafficObservation {
	from := t - dur
	obs := &scaling.TrafficObservation{DurationS: dur}
	lo := sort.Search(len(s.arrivals), func(i int) bool { return s.arrivals[i] > from })
	n := len(s.arrivals) - lo
	obs.NumReq = ptr(float64(n))
	lo = sort.Search(len(s.firstT), func(i int) bool { return s.firstT[i] > from })
	if m := len(s.firstT) - lo; m > 0 {
		obs.TTFTMs = ptr((s.cumTTFT[len(s.firstT)] - s.cumTTFT[lo]) / float64(m))
		if n > 0 {
			obs.ISL = ptr((s.cumISL[len(s.firstT)] - s.cumISL[lo]) / float64(m))
		}
	}
	lo = sort.Search(len(s.finT), func(i int) bool { return s.finT[i] > from })
	if m := len(s.finT) - lo; m > 0 {
		if n > 0 {
			obs.OSL = ptr((s.cumOSL[len(s.finT)] - s.cumOSL[lo]) / float64(m))
		}
		obs.RequestDurationS = ptr((s.cumDur[len(s.finT)] - s.cumDur[lo]) / float64(m))
	}
	lo = sort.Search(len(s.itlT), func(i int) bool { return s.itlT[i] > from })
	if n := len(s.itlT) - lo; n > 0 {
		obs.ITLMs = ptr((s.cumITL[len(s.itlT)] - s.cumITL[lo]) / float64(n))
	}
	// The KV router's hit-rate histogram mean over the window (only a KV router has one).
	lo = sort.Search(len(s.kvT), func(i int) bool { return s.kvT[i] > from })
	if n := len(s.kvT) - lo; n > 0 {
		obs.KVHitRate = ptr((s.cumKV[len(s.kvT)] - s.cumKV[lo]) / float64(n))
	}
	return obs
}

// workers are the worker counts a planner tick at t observes (ready engines, the targets
// last applied, scaling in progress while an engine starts or drains) and the pools' counts.
func (s *sim) workers(t float64) (*scaling.WorkerCounts, PoolCounts, PoolCounts) {
	pc, dc := s.p.counts(t), s.d.counts(t)
	if s.agg {
		return &scaling.WorkerCounts{ReadyDecode: ptr(dc.Ready), ExpectedDecode: ptr(s.d.target),
			DecodeScalingInProgress: dc.Starting+dc.Draining > 0}, pc, dc
	}
	return &scaling.WorkerCounts{
		ReadyPrefill: ptr(pc.Ready), ReadyDecode: ptr(dc.Ready),
		ExpectedPrefill: ptr(s.p.target), ExpectedDecode: ptr(s.d.target),
		PrefillScalingInProgress: pc.Starting+pc.Draining > 0, DecodeScalingInProgress: dc.Starting+dc.Draining > 0,
	}, pc, dc
}

// tick runs one planner tick at t, as the workflow does: observe inventory, FPM and
// traffic, decide, apply, record the submitted targets.
func (s *sim) tick(t float64, tk scaling.Tick) error {
	w, pc, dc := s.workers(t)
	in := scaling.Input{Now: t, Workers: w, Capabilities: s.caps}
	if tk.NeedFPM {
		in.FPM = s.fpmObservations(t)
	}
	if tk.NeedTraffic {
		in.Traffic = s.traffic(t, tk.TrafficDurationS)
	}
	st, dec, diag, err := s.planner.Decide(s.st, in)
	if err != nil {
		return fmt.Errorf("replay: decide at %.3f s: %w", t, err)
	}
	s.st = st
	s.res.Timeline = append(s.res.Timeline, TimelineEntry{At: t, Prefill: pc, Decode: dc, Decision: dec,
		LoadReasonPrefill: diag.LoadReasonPrefill, LoadReasonDecode: diag.LoadReasonDecode,
		ThroughputReasonPrefill: diag.ThroughputReasonPrefill, ThroughputReasonDecode: diag.ThroughputReasonDecode,
		Traffic: in.Traffic, EstimatedTTFTMs: diag.EstimatedTTFTMs, EstimatedITLMs: diag.EstimatedITLMs, Notes: diag.Notes})
	if dec.Empty() || s.planner.Config().Advisory {
		return nil
	}
	if err := s.apply(dec.Prefill, dec.Decode, t); err != nil {
		return err
	}
	s.st = s.planner.Submitted(s.st, dec, t)
	return nil
}

// apply applies a decision's targets at t (nil: leave the pool alone). In agg mode the
// decode target sizes the aggregated pool and a prefill target other than 0 is refused.
func (s *sim) apply(prefill, decode *int, t float64) error {
	if s.agg {
		if prefill != nil && *prefill != 0 {
			return fmt.Errorf("%w: mode agg has no prefill pool (prefill target %d)", ErrInvalidOptions, *prefill)
		}
		return s.scale(s.d, decode, t)
	}
	if err := s.scale(s.p, prefill, t); err != nil {
		return err
	}
	return s.scale(s.d, decode, t)
}

// scale applies a target to pl at t.
func (s *sim) scale(pl *pool, target *int, t float64) error {
	if target == nil || *target < 0 {
		return nil
	}
	want := *target
	if want != pl.target {
		sign := 1
		if want < pl.target {
			sign = -1
		}
		s.res.ScaleActions++
		if pl.lastSign != 0 && sign != pl.lastSign {
			s.res.Reversals++
		}
		pl.lastSign = sign
	}
	pl.target = want
	var active []*replica // not draining, in index order
	for _, r := range pl.reps {
		if !r.draining {
			active = append(active, r)
		}
	}
	for n := len(active); n < want; n++ {
		if err := s.add(pl, t+s.o.StartupDelay.Seconds()); err != nil {
			return err
		}
		pl.started++
	}
	excess := len(active) - want
	// Cancel starting engines, newest first.
	for i := len(active) - 1; i >= 0 && excess > 0; i-- {
		if r := active[i]; !r.ready(t) {
			r.draining = true // idle and never ready: removed at once
			excess--
		}
	}
	// Drain the highest-index ready engines.
	for i := len(active) - 1; i >= 0 && excess > 0; i-- {
		if r := active[i]; r.ready(t) {
			r.draining = true
			r.eng.Drain()
			excess--
		}
	}
	return nil
}

// summarise computes the result's aggregates.
func (s *sim) summarise() {
	res := &s.res
	res.Duration = s.last
	cfg := s.planner.Config()
	sc := Score(res.Requests, cfg.TTFTMs, cfg.ITLMs, 0)
	res.Finished, res.Good, res.Goodput, res.TTFT, res.ITL = sc.Finished, sc.Good, sc.Goodput, sc.TTFT, sc.ITL
	res.Misses = sc.Misses
	res.PrefillGPUSeconds, res.DecodeGPUSeconds = s.p.gpuSec, s.d.gpuSec
	res.GPUSeconds = s.p.gpuSec + s.d.gpuSec
	if n := len(s.kvT); n > 0 {
		res.KVHitRate = s.cumKV[n] / float64(n)
	}
	if s.o.PrefixCache {
		for _, r := range slices.Concat(s.p.reps, s.d.reps) { // decode engines keep no cache: retire skips them
			s.retire(r)
		}
		var sum engine.PrefixStats
		for _, e := range res.PrefixEngines {
			sum.Lookups += e.Lookups
			sum.LookupBlocks += e.LookupBlocks
			sum.HitBlocks += e.HitBlocks
			sum.PromptTokens += e.PromptTokens
			sum.HitTokens += e.HitTokens
			sum.Evictions += e.Evictions
		}
		res.Prefix = &sum
	}
}

// Scores are the outcome of a set of requests against the SLAs.
type Scores struct {
	// Requests counts the requests scored; Finished those that finished; Good those within
	// both SLAs; Goodput is Good / Requests (unfinished requests are not good).
	Requests, Finished, Good int
	Goodput                  float64
	// Misses split the finished requests that are not good by the SLA they miss (Requests −
	// Finished are the unfinished rest).
	Misses
	// TTFT and ITL are the finished requests' latency percentiles (ITL: OSL > 1 only).
	TTFT, ITL Percentiles
}

// Outcome is how a finished request fares against a TTFT and an ITL SLA.
type Outcome int

// A finished request is good (within both SLAs), or misses the TTFT SLA only, the ITL SLA
// only (OSL > 1 only: one token has no ITL), or both.
const (
	Good Outcome = iota
	MissedTTFT
	MissedITL
	MissedBoth
)

// Outcome is how r fares against a TTFT and an ITL SLA in milliseconds, for a finished record:
// callers skip unfinished ones, whose zero latencies would read as Good. The SLAs are negated
// as they read (within them: ≤), so that a latency that is not a number is never good.
func (r Record) Outcome(ttftMs, itlMs float64) Outcome {
	lateFirst, slowTokens := !(r.TTFTMs <= ttftMs), r.OSL > 1 && !(r.ITLMs <= itlMs)
	switch {
	case lateFirst && slowTokens:
		return MissedBoth
	case lateFirst:
		return MissedTTFT
	case slowTokens:
		return MissedITL
	}
	return Good
}

// Misses split finished requests that are not good by the SLA they miss (Record.Outcome):
// the TTFT only, the ITL only, or both.
type Misses struct {
	MissedTTFT int `json:"missed_ttft"`
	MissedITL  int `json:"missed_itl"`
	MissedBoth int `json:"missed_both"`
}

// Count adds a finished request's outcome to m, and reports whether it was good (which m
// does not count).
func (m *Misses) Count(o Outcome) (good bool) {
	switch o {
	case MissedTTFT:
		m.MissedTTFT++
	case MissedITL:
		m.MissedITL++
	case MissedBoth:
		m.MissedBoth++
	default:
		return true
	}
	return false
}

// Score scores the records that arrived at or after from (seconds) against a TTFT and an
// ITL SLA in milliseconds.
func Score(recs []Record, ttftMs, itlMs, from float64) Scores {
	var sc Scores
	var ttft, itl []float64
	for _, r := range recs {
		if r.Arrival < from {
			continue
		}
		sc.Requests++
		if !r.Finished {
			continue
		}
		sc.Finished++
		ttft = append(ttft, r.TTFTMs)
		if r.OSL > 1 {
			itl = append(itl, r.ITLMs)
		}
		if sc.Count(r.Outcome(ttftMs, itlMs)) {
			sc.Good++
		}
	}
	if sc.Requests > 0 {
		sc.Goodput = float64(sc.Good) / float64(sc.Requests)
	}
	sc.TTFT, sc.ITL = percentiles(ttft), percentiles(itl)
	return sc
}

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	sort.Float64s(v)
	q := func(p float64) float64 {
		x := p * float64(len(v)-1)
		lo := int(math.Floor(x))
		if lo >= len(v)-1 {
			return v[len(v)-1]
		}
		return v[lo] + (x-float64(lo))*(v[lo+1]-v[lo])
	}
	return Percentiles{P50: q(0.5), P90: q(0.9), P99: q(0.99)}
}

func ptr[T any](v T) *T { return &v }
