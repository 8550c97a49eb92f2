package replay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/scaling"
)

// Stepper is a replay whose planner runs elsewhere, e.g. in the planner workflow: the
// simulated deployment is reached through the interfaces a worker hosts for a deployment. It
// is a connectors.Connector (inventory and absolute, id-tagged applies), an FPM reader (the
// latest FPM of each ready engine) and an observe.TrafficSource (the frontend's traffic
// over a window).
//
// Every call first advances the simulation to Clock() the way the direct loop advances to
// a planner tick, so a planner that ticks at the same times and decides the same way sees
// the same observations and moves the same engines as Run. Once every request is done the
// replay is over: observations report its final state and Apply changes nothing.
//
// A Stepper is safe for concurrent use (the workflow reads its observations in parallel).
type Stepper struct {
	// Clock is the simulated time in seconds; it must never go back.
	clock func() float64

	mu       sync.Mutex
	s        *sim
	over     bool
	err      error
	lastID   int64
	applied  []Applied
	observed []float64
}

// Applied is a decision the Stepper applied: its id, when, and its targets (nil: the pool
// was left alone).
type Applied struct {
	At         float64 `json:"at"`
	DecisionID int64   `json:"decision_id"`
	Prefill    *int    `json:"prefill,omitempty"`
	Decode     *int    `json:"decode,omitempty"`
}

// NewStepper prepares a replay of reqs under o, driven by clock (seconds, from 0). Options
// are checked as Run checks them; Static and Progress are not used (the driver decides).
func NewStepper(reqs []predict.Request, o Options, clock func() float64) (*Stepper, error) {
	if clock == nil {
		return nil, fmt.Errorf("%w: a stepper needs a clock", ErrInvalidOptions)
	}
	o.Static, o.Progress = false, nil
	s, err := newSim(reqs, o)
	if err != nil {
		return nil, err
	}
	return &Stepper{clock: clock, s: s}, nil
}

// advance moves the simulation to the clock's time and returns that time (the simulation
// stays where it ended once the replay is over); it is called with mu held.
func (st *Stepper) advance() (float64, error) {
	if st.err != nil {
		return 0, st.err
	}
	t := st.clock()
	if t < st.s.now {
		st.err = fmt.Errorf("replay: the clock went back from %.6f s to %.6f s", st.s.now, t)
		return 0, st.err
	}
	if !st.over && !st.s.advanceTo(t) {
		st.over = true
	}
	return t, nil
}

// Inventory reports the pools as the direct loop's tick observes them: ready engines, the
// targets last applied (expected), scaling in progress while an engine starts or drains,
// the engines' capabilities and the newest decision applied.
func (st *Stepper) Inventory(context.Context) (connectors.Inventory, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t, err := st.advance()
	if err != nil {
		return connectors.Inventory{}, err
	}
	st.observed = append(st.observed, t)
	w, _, _ := st.s.workers(t)
	return connectors.Inventory{WorkerCounts: *w, Capabilities: st.s.caps, AppliedDecisionID: st.lastID}, nil
}

// Apply sets the pools' targets at the clock's time: new engines start (ready after the
// startup delay), surplus ones are cancelled or drained. The newest id again changes
// nothing; an older one is refused with connectors.ErrStaleDecision.
func (st *Stepper) Apply(_ context.Context, decisionID int64, targets connectors.Targets) error {
	if err := targets.Validate(); err != nil {
		return fmt.Errorf("%w: %w", connectors.ErrInvalidTargets, err)
	}
	if st.s.agg && targets.Prefill != nil && *targets.Prefill != 0 {
		return fmt.Errorf("%w: mode agg has no prefill pool (prefill target %d)", connectors.ErrInvalidTargets, *targets.Prefill)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case decisionID < st.lastID:
		return fmt.Errorf("%w: decision %d, newest applied %d", connectors.ErrStaleDecision, decisionID, st.lastID)
	case decisionID == st.lastID:
		return nil
	}
	t, err := st.advance()
	if err != nil {
		return err
	}
	st.lastID = decisionID
	if st.over {
		return nil
	}
	if err := st.s.apply(targets.Prefill, targets.Decode, t); err != nil {
		return err
	}
	st.applied = append(st.applied, Applied{At: t, DecisionID: decisionID, Prefill: copyInt(targets.Prefill), Decode: copyInt(targets.Decode)})
	return nil
}

// ReadFPM returns the latest FPM of every ready engine (a heartbeat for an idle one) at the
// clock's time and a sample of the passes since the previous read, as the live worker's FPM
// store does; the wall time it is given is not used.
func (st *Stepper) ReadFPM(time.Time) (*scaling.FPMObservations, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t, err := st.advance()
	if err != nil {
		return nil, err
	}
	return st.s.fpmObservations(t), nil
}

// Traffic returns the frontend's traffic over the window ending at the clock's time.
func (st *Stepper) Traffic(_ context.Context, window time.Duration) (*scaling.TrafficObservation, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t, err := st.advance()
	if err != nil {
		return &scaling.TrafficObservation{DurationS: window.Seconds()}, err
	}
	return st.s.traffic(t, window.Seconds()), nil
}

// Over reports whether every request is done (or the replay's horizon passed).
func (st *Stepper) Over() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.over
}

// Applied returns the decisions applied so far, oldest first.
func (st *Stepper) Applied() []Applied {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Applied(nil), st.applied...)
}

// Observed returns the times the inventory was read (one per planner tick), oldest first.
func (st *Stepper) Observed() []float64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]float64(nil), st.observed...)
}

// Result returns the replay's outcome so far (complete once Over): the requests, scores,
// GPU-seconds and pool samples as Run computes them. Its Timeline is empty (the planner's
// ticks are the driver's) and its actions and reversals count the applied decisions.
func (st *Stepper) Result() Result {
	st.mu.Lock()
	defer st.mu.Unlock()
	res := st.s.res
	res.Requests = append([]Record(nil), res.Requests...)
	res.Replicas = append([]ReplicaSample(nil), res.Replicas...)
	res.PrefixEngines = append([]EnginePrefix(nil), res.PrefixEngines...) // summarise appends the live engines'
	s := *st.s
	s.res = res
	s.summarise()
	return s.res
}

func copyInt(p *int) *int {
	if p == nil {
		return nil
	}
	return ptr(*p)
}
