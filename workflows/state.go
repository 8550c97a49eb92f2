package workflows

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/scaling"
)

// Bounds of the rings kept in the state (it lives in workflow history).
const (
	MaxTickRecords     = 24
	MaxDecisionRecords = 16
	MaxRejected        = 16
	DefaultOverrideTTL = 3600.0
	MaxOverrideTTL     = 7 * 24 * 3600.0
)

// State is everything a planner carries across ticks and Continue-As-New. It is a plain,
// JSON-serialisable value; the decision core's state (models, predictors, floors, pending
// desired counts) is in Core.
type State struct {
	LogicVersion int           `json:"logic_version"`
	Deployment   Deployment    `json:"deployment"`
	Config       config.Config `json:"config"`
	// Core is the decision core's state (nil until initialised).
	Core *scaling.State `json:"core,omitempty"`
	// Virtual is the virtual connector's protocol state (virtual environment only).
	Virtual *virtual.State `json:"virtual,omitempty"`
	// InitialPrefill and InitialDecode are the counts assumed before any observation.
	InitialPrefill int `json:"initial_prefill"`
	InitialDecode  int `json:"initial_decode"`
	// AckTimeoutSeconds is the virtual connector's acknowledgement timeout.
	AckTimeoutSeconds float64 `json:"ack_timeout_seconds"`
	// HostTaskQueue is the task queue of the worker hosting the connector and the FPM
	// subscriber ("" = the workflow's own queue).
	HostTaskQueue string `json:"host_task_queue,omitempty"`
	// Ticks counts every tick since the planner started (across runs); Runs counts the runs
	// (Continue-As-New).
	Ticks int64 `json:"ticks"`
	Runs  int   `json:"runs"`
	// LastDecisionID is the newest decision id issued (they increase by one).
	LastDecisionID int64 `json:"last_decision_id"`
	// Inventory is the last observed deployment.
	Inventory *connectors.Inventory `json:"inventory,omitempty"`
	// Capabilities are the last reported worker capabilities.
	Capabilities scaling.WorkerCapabilities `json:"capabilities"`
	// Overrides are the operator's overrides.
	Overrides Overrides `json:"overrides"`
	// Decisions, Recent and Rejected are bounded rings, newest last.
	Decisions []DecisionRecord  `json:"decisions,omitempty"`
	Recent    []TickRecord      `json:"recent,omitempty"`
	Rejected  []RejectedMessage `json:"rejected,omitempty"`
}

// Overrides are the operator's controls.
type Overrides struct {
	Prefill *ReplicaOverride `json:"prefill,omitempty"`
	Decode  *ReplicaOverride `json:"decode,omitempty"`
	// PauseScaleUp and PauseScaleDown stop the planner's own decisions in that direction
	// (replica overrides still apply).
	PauseScaleUp   bool   `json:"pause_scale_up,omitempty"`
	PauseScaleDown bool   `json:"pause_scale_down,omitempty"`
	PauseReason    string `json:"pause_reason,omitempty"`
}

// ReplicaOverride pins one component.
type ReplicaOverride struct {
	Replicas  int     `json:"replicas"`
	SetAt     float64 `json:"set_at"`
	ExpiresAt float64 `json:"expires_at"`
	Reason    string  `json:"reason,omitempty"`
	// Forced records that the override bypassed the min-endpoint or GPU-budget invariants.
	Forced bool `json:"forced,omitempty"`
	// Applied is set once the target was sent to the connector.
	Applied bool `json:"applied,omitempty"`
	// Error is why the last attempt to apply it failed or was held (retried on the next
	// scheduled tick).
	Error string `json:"error,omitempty"`
}

// Decision statuses.
const (
	StatusApplied   = "applied"   // the connector accepted it
	StatusPublished = "published" // virtual: published, awaiting acknowledgement
	StatusDone      = "done"      // the deployment reached it
	StatusHeld      = "held"      // not sent: the connector is busy (virtual: unacknowledged)
	StatusFailed    = "failed"    // the connector refused it or kept failing
	StatusRecorded  = "recorded"  // advisory: recorded, not applied
	// StatusSuperseded: a newer decision replaced it before the deployment reached it.
	StatusSuperseded = "superseded"
)

// DecisionRecord is one decision sent (or not) to the connector.
type DecisionRecord struct {
	ID      int64              `json:"id"`
	At      float64            `json:"at"`
	Tick    int64              `json:"tick"`
	Source  string             `json:"source"` // "planner" or "override"
	Targets connectors.Targets `json:"targets"`
	Status  string             `json:"status"`
	// VirtualDecisionID is the id the virtual connector published it under.
	VirtualDecisionID *int64 `json:"virtual_decision_id,omitempty"`
	Error             string `json:"error,omitempty"`
}

// sent reports whether the decision reached the connector (or, advisory, was recorded).
func (d DecisionRecord) sent() bool {
	switch d.Status {
	case StatusApplied, StatusPublished, StatusDone, StatusRecorded:
		return true
	}
	return false
}

// RejectedMessage is an invalid signal, kept for the state query. (Invalid updates are
// refused by their validators and answered at once; they never reach the state.)
type RejectedMessage struct {
	At    float64 `json:"at"`
	Name  string  `json:"name"`
	Error string  `json:"error"`
}

func pushRing[T any](ring []T, v T, limit int) []T {
	ring = append(ring, v)
	if over := len(ring) - limit; over > 0 {
		ring = append(ring[:0:0], ring[over:]...)
	}
	return ring
}

func (s *State) reject(at float64, name string, err error) {
	// Both bounded: the name may be any signal name an operator typed.
	s.Rejected = pushRing(s.Rejected, RejectedMessage{At: at, Name: truncate(name, 200), Error: truncate(err.Error(), 2000)}, MaxRejected)
}

// overrideDue reports whether a replica override waits to be applied (and has not just
// failed: a failed one is retried by the next scheduled tick, not in a loop).
func (s *State) overrideDue() bool {
	for _, c := range []string{ComponentPrefill, ComponentDecode} {
		if o := s.override(c); o != nil && s.hasComponent(c) && !o.Applied && o.Error == "" {
			return true
		}
	}
	return false
}

func (s *State) record(r DecisionRecord) {
	if r.sent() {
		for i := range s.Decisions {
			if d := &s.Decisions[i]; d.Status == StatusApplied || d.Status == StatusPublished {
				d.Status = StatusSuperseded
			}
		}
	}
	s.Decisions = pushRing(s.Decisions, r, MaxDecisionRecords)
}

func (s *State) recordTick(r TickRecord) {
	s.Recent = pushRing(s.Recent, r, MaxTickRecords)
}

// hasComponent reports whether the mode has the component.
func (s *State) hasComponent(c string) bool {
	switch c {
	case ComponentPrefill:
		return s.Config.HasPrefill()
	case ComponentDecode:
		return s.Config.HasDecode()
	}
	return false
}

func (s *State) minEndpoint(c string) int {
	if c == ComponentPrefill {
		return s.Config.PrefillMinEndpoints()
	}
	return s.Config.DecodeMinEndpoints()
}

func (s *State) gpuCost(c string) int {
	caps := s.Capabilities.Decode
	fallback := s.Config.DecodeGPUs()
	if c == ComponentPrefill {
		caps, fallback = s.Capabilities.Prefill, s.Config.PrefillGPUs()
	}
	if g := caps.GPUCost(); g > 0 {
		return g
	}
	return fallback
}

// current is a component's replicas for budget checks: the override if any, else the
// ready count.
func (s *State) current(c string) int {
	if o := s.override(c); o != nil {
		return o.Replicas
	}
	return s.ready(c)
}

// ready is a component's observed ready count, else its initial count.
func (s *State) ready(c string) int {
	if s.Inventory != nil {
		if c == ComponentPrefill && s.Inventory.ReadyPrefill != nil {
			return *s.Inventory.ReadyPrefill
		}
		if c == ComponentDecode && s.Inventory.ReadyDecode != nil {
			return *s.Inventory.ReadyDecode
		}
	}
	if c == ComponentPrefill {
		return s.InitialPrefill
	}
	return s.InitialDecode
}

func (s *State) override(c string) *ReplicaOverride {
	if c == ComponentPrefill {
		return s.Overrides.Prefill
	}
	return s.Overrides.Decode
}

func (s *State) setOverride(c string, o *ReplicaOverride) {
	if c == ComponentPrefill {
		s.Overrides.Prefill = o
	} else {
		s.Overrides.Decode = o
	}
}

// ValidateSetReplicas checks an override request against the state: a component of the
// mode, a non-negative count, a sane time-to-live and — unless forced — at least the
// component's minimum endpoints and within the GPU ceiling with the other component as it is.
func (s *State) ValidateSetReplicas(r SetReplicasRequest) error {
	var errs []error
	if !s.hasComponent(r.Component) {
		errs = append(errs, fmt.Errorf("component %q is not a pool of mode %q (want %s)", r.Component, s.Config.Mode, s.componentList()))
	}
	if err := config.CheckReplicas("replicas", r.Replicas); err != nil {
		errs = append(errs, err)
	}
	if err := config.CheckText("reason", r.Reason, config.MaxReasonBytes); err != nil {
		errs = append(errs, err)
	}
	if !(r.TTLSeconds >= 0) || r.TTLSeconds > MaxOverrideTTL || math.IsInf(r.TTLSeconds, 0) {
		errs = append(errs, fmt.Errorf("ttl_seconds must be within 0..%g (0 means %g), got %v", MaxOverrideTTL, DefaultOverrideTTL, r.TTLSeconds))
	}
	if len(errs) > 0 || r.Force {
		return errors.Join(errs...)
	}
	if m := s.minEndpoint(r.Component); r.Replicas < m {
		errs = append(errs, fmt.Errorf("%d %s replicas is below the minimum of %d (set force to override)", r.Replicas, r.Component, m))
	}
	if max := s.Config.MaxGPUBudget; max >= 0 {
		total := gpus(r.Replicas, s.gpuCost(r.Component))
		for _, other := range []string{ComponentPrefill, ComponentDecode} {
			if other != r.Component && s.hasComponent(other) {
				total = addGPUs(total, gpus(s.current(other), s.gpuCost(other)))
			}
		}
		if total > max {
			errs = append(errs, fmt.Errorf("%d %s replicas would use %d GPUs in all, over the budget of %d (set force to override)", r.Replicas, r.Component, total, max))
		}
	}
	return errors.Join(errs...)
}

// gpus is replicas × GPUs per engine, saturating at math.MaxInt: the counts are bounded where
// they enter, and an overflow here must never wrap into a budget check's favour.
func gpus(replicas, perEngine int) int {
	if replicas <= 0 || perEngine <= 0 {
		return 0
	}
	if replicas > math.MaxInt/perEngine {
		return math.MaxInt
	}
	return replicas * perEngine
}

// addGPUs adds GPU counts, saturating at math.MaxInt.
func addGPUs(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

func (s *State) componentList() string {
	switch s.Config.Mode {
	case config.ModeDisagg:
		return `"prefill" or "decode"`
	case config.ModePrefill:
		return `"prefill"`
	}
	return `"decode"`
}

// SetReplicas records a validated override at time now.
func (s *State) SetReplicas(now float64, r SetReplicasRequest) string {
	ttl := r.TTLSeconds
	if ttl == 0 {
		ttl = DefaultOverrideTTL
	}
	forced := r.Force && s.ValidateSetReplicas(SetReplicasRequest{Component: r.Component, Replicas: r.Replicas, TTLSeconds: ttl}) != nil
	s.setOverride(r.Component, &ReplicaOverride{Replicas: r.Replicas, SetAt: now, ExpiresAt: now + ttl, Reason: r.Reason, Forced: forced})
	msg := fmt.Sprintf("%s pinned to %d replicas for %s", r.Component, r.Replicas, formatDuration(ttl))
	if forced {
		msg += " (forced past the min-endpoint or GPU-budget invariant)"
	}
	return msg
}

// ValidateClearOverride checks a clear request names a component of the mode (or all).
func (s *State) ValidateClearOverride(r ClearOverrideRequest) error {
	if r.Component == "" || r.Component == "all" || s.hasComponent(r.Component) {
		return nil
	}
	return fmt.Errorf("component %q is not a pool of mode %q (want %s, or all)", r.Component, s.Config.Mode, s.componentList())
}

// ClearOverride removes overrides.
func (s *State) ClearOverride(r ClearOverrideRequest) string {
	cleared := 0
	for _, c := range []string{ComponentPrefill, ComponentDecode} {
		if (r.Component == "" || r.Component == "all" || r.Component == c) && s.override(c) != nil {
			s.setOverride(c, nil)
			cleared++
		}
	}
	if cleared == 0 {
		return "no override to clear"
	}
	return fmt.Sprintf("cleared %d override(s): the planner decides again", cleared)
}

func parseDirection(d string) (up, down bool, err error) {
	switch d {
	case "", "both":
		return true, true, nil
	case "up":
		return true, false, nil
	case "down":
		return false, true, nil
	}
	return false, false, fmt.Errorf("direction must be up, down or both, got %q", d)
}

// ValidateDirection checks a pause or resume request.
func ValidateDirection(r DirectionRequest) error {
	_, _, err := parseDirection(r.Direction)
	return errors.Join(err, config.CheckText("reason", r.Reason, config.MaxReasonBytes))
}

// Pause stops the planner's decisions in the given directions.
func (s *State) Pause(r DirectionRequest) string {
	up, down, _ := parseDirection(r.Direction)
	s.Overrides.PauseScaleUp = s.Overrides.PauseScaleUp || up
	s.Overrides.PauseScaleDown = s.Overrides.PauseScaleDown || down
	if r.Reason != "" {
		s.Overrides.PauseReason = r.Reason
	}
	return s.pauseStatus()
}

// Resume lets the planner decide again in the given directions.
func (s *State) Resume(r DirectionRequest) string {
	up, down, _ := parseDirection(r.Direction)
	if up {
		s.Overrides.PauseScaleUp = false
	}
	if down {
		s.Overrides.PauseScaleDown = false
	}
	if !s.Overrides.PauseScaleUp && !s.Overrides.PauseScaleDown {
		s.Overrides.PauseReason = ""
	}
	return s.pauseStatus()
}

func (s *State) pauseStatus() string {
	switch {
	case s.Overrides.PauseScaleUp && s.Overrides.PauseScaleDown:
		return "scale-up and scale-down paused"
	case s.Overrides.PauseScaleUp:
		return "scale-up paused, scale-down active"
	case s.Overrides.PauseScaleDown:
		return "scale-down paused, scale-up active"
	}
	return "scaling active in both directions"
}

// withConfig validates a candidate configuration the way the planner would load it.
func withConfig(c config.Config) (config.Config, error) {
	c.Scheduling.ScaleIntervalSeconds = nil
	c.Resolve()
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// ValidateSetSLA checks SLA targets.
func (s *State) ValidateSetSLA(r SetSLARequest) error {
	if r.TTFTMs == nil && r.ITLMs == nil {
		return errors.New("give ttft_ms, itl_ms or both")
	}
	c := s.Config
	if r.TTFTMs != nil {
		c.TTFTMs = *r.TTFTMs
	}
	if r.ITLMs != nil {
		c.ITLMs = *r.ITLMs
	}
	_, err := withConfig(c)
	return err
}

// SetSLA applies validated SLA targets.
func (s *State) SetSLA(r SetSLARequest) string {
	if r.TTFTMs != nil {
		s.Config.TTFTMs = *r.TTFTMs
	}
	if r.ITLMs != nil {
		s.Config.ITLMs = *r.ITLMs
	}
	msg := fmt.Sprintf("SLA targets: TTFT %g ms, ITL %g ms", s.Config.TTFTMs, s.Config.ITLMs)
	if s.Config.IsEasyMode() {
		msg += fmt.Sprintf(" (recorded; optimization_target %q does not use them)", s.Config.OptimizationTarget)
	}
	return msg
}

func (s *State) limitsConfig(r SetLimitsRequest) config.Config {
	c := s.Config
	if r.MinEndpoint != nil {
		c.MinEndpoint = *r.MinEndpoint
	}
	if r.PrefillMinEndpoint != nil {
		c.PrefillMinEndpoint = r.PrefillMinEndpoint
	}
	if r.DecodeMinEndpoint != nil {
		c.DecodeMinEndpoint = r.DecodeMinEndpoint
	}
	if r.MinGPUBudget != nil {
		c.MinGPUBudget = *r.MinGPUBudget
	}
	if r.MaxGPUBudget != nil {
		c.MaxGPUBudget = *r.MaxGPUBudget
	}
	return c
}

// ValidateSetLimits checks new limits: a valid configuration whose minimum footprint fits
// the GPU ceiling.
func (s *State) ValidateSetLimits(r SetLimitsRequest) error {
	if r == (SetLimitsRequest{}) {
		return errors.New("give at least one of min_endpoint, prefill_min_endpoint, decode_min_endpoint, min_gpu_budget, max_gpu_budget")
	}
	c, err := withConfig(s.limitsConfig(r))
	if err != nil {
		return err
	}
	if c.MaxGPUBudget >= 0 {
		need := 0
		if c.HasPrefill() {
			need = addGPUs(need, gpus(c.PrefillMinEndpoints(), s.gpuCost(ComponentPrefill)))
		}
		if c.HasDecode() {
			need = addGPUs(need, gpus(c.DecodeMinEndpoints(), s.gpuCost(ComponentDecode)))
		}
		if need > c.MaxGPUBudget {
			return fmt.Errorf("the minimum endpoints need %d GPUs, over max_gpu_budget %d", need, c.MaxGPUBudget)
		}
	}
	return nil
}

// SetLimits applies validated limits.
func (s *State) SetLimits(r SetLimitsRequest) string {
	s.Config = s.limitsConfig(r)
	return fmt.Sprintf("limits: min endpoints prefill %d / decode %d, GPU budget [%d, %d] (-1: none)",
		s.Config.PrefillMinEndpoints(), s.Config.DecodeMinEndpoints(), s.Config.MinGPUBudget, s.Config.MaxGPUBudget)
}

// ValidateAcknowledge checks an acknowledgement against the virtual protocol.
func (s *State) ValidateAcknowledge(r AcknowledgeRequest) error {
	if s.Virtual == nil {
		return fmt.Errorf("environment %q has no decisions to acknowledge (only virtual does)", s.Config.Environment)
	}
	probe := *s.Virtual
	return probe.Acknowledge(r.DecisionID, r.ReadyPrefill, r.ReadyDecode)
}

// Acknowledge applies a validated acknowledgement.
func (s *State) Acknowledge(r AcknowledgeRequest) string {
	if err := s.Virtual.Acknowledge(r.DecisionID, r.ReadyPrefill, r.ReadyDecode); err != nil {
		return err.Error()
	}
	// An override held back for want of this acknowledgement may go now.
	for _, c := range []string{ComponentPrefill, ComponentDecode} {
		if o := s.override(c); o != nil && !o.Applied {
			o.Error = ""
		}
	}
	for i := range s.Decisions {
		d := &s.Decisions[i]
		if d.VirtualDecisionID != nil && *d.VirtualDecisionID <= r.DecisionID && d.Status == StatusPublished {
			d.Status = StatusDone
		}
	}
	return fmt.Sprintf("decision %d acknowledged", r.DecisionID)
}

// immutableConfigKeys are settings a running planner cannot change: they shape its state.
func immutableConfigChange(old, c config.Config) error {
	type field struct {
		name     string
		old, new any
	}
	for _, f := range []field{
		{"mode", old.Mode, c.Mode}, {"environment", old.Environment, c.Environment},
		{"optimization_target", old.OptimizationTarget, c.OptimizationTarget},
		{"load_predictor", old.LoadPredictor, c.LoadPredictor}, {"load_predictor_log1p", old.LoadPredictorLog1p, c.LoadPredictorLog1p},
		{"enable_throughput_scaling", old.EnableThroughputScaling, c.EnableThroughputScaling},
		{"profile_results_dir", old.ProfileResultsDir, c.ProfileResultsDir},
		{"throughput_sizing", old.ThroughputSizing, c.ThroughputSizing},
		{"scaling_policy", policyName(old), policyName(c)},
	} {
		if f.old != f.new {
			return fmt.Errorf("%s cannot change on a running planner (%v -> %v): it shapes the planner's state; terminate the workflow and start it again", f.name, f.old, f.new)
		}
	}
	return nil
}

// policyName is the configuration's scaling policy ("" is Dynamo's).
func policyName(c config.Config) config.ScalingPolicy {
	if c.ScalingPolicy == "" {
		return config.PolicyDynamo
	}
	return c.ScalingPolicy
}

// maxTaskQueueLen bounds a task queue name (Temporal's own limit is 1000 bytes).
const maxTaskQueueLen = 1000

// ValidateConfig checks a replacement configuration.
func (s *State) ValidateConfig(r ConfigRequest) error {
	c, err := withConfig(r.Config)
	if err != nil {
		return err
	}
	if q := r.HostTaskQueue; q != nil {
		if err := checkTaskQueueName(*q); err != nil {
			return err
		}
		if *q == "" && (c.Environment == config.EnvLocal || c.Environment == config.EnvKubernetes) {
			return fmt.Errorf("host_task_queue: environment %s needs the worker hosting the deployment", c.Environment)
		}
	}
	return immutableConfigChange(s.Config, c)
}

// checkTaskQueueName refuses a host task queue name no worker could poll: too long, not
// UTF-8, with control characters or surrounding spaces (a copy-paste accident), or in
// Temporal's reserved "/_sys/" space. Activities sent there would wait for a worker that
// never comes, and the planner would stop observing.
func checkTaskQueueName(q string) error {
	if err := config.CheckText("host_task_queue", q, maxTaskQueueLen); err != nil {
		return err
	}
	if strings.TrimSpace(q) != q {
		return fmt.Errorf("host_task_queue %q has leading or trailing spaces", q)
	}
	if i := strings.IndexFunc(q, unicode.IsControl); i >= 0 {
		return fmt.Errorf("host_task_queue %q has a control character at byte %d", q, i)
	}
	if strings.HasPrefix(q, "/_sys/") {
		return fmt.Errorf("host_task_queue %q is in Temporal's reserved /_sys/ space", q)
	}
	return nil
}

// SetConfig applies a validated configuration.
func (s *State) SetConfig(r ConfigRequest) string {
	c, _ := withConfig(r.Config)
	s.Config = c
	if r.HostTaskQueue != nil && *r.HostTaskQueue != s.HostTaskQueue {
		s.HostTaskQueue = *r.HostTaskQueue
		if s.HostTaskQueue == "" {
			return "configuration updated, no host task queue; it applies from the next tick"
		}
		return "configuration updated, host task queue " + s.HostTaskQueue + "; it applies from the next tick"
	}
	return "configuration updated; it applies from the next tick"
}

func formatDuration(seconds float64) string {
	switch {
	case seconds >= 3600 && math.Mod(seconds, 3600) == 0:
		return fmt.Sprintf("%gh", seconds/3600)
	case seconds >= 60 && math.Mod(seconds, 60) == 0:
		return fmt.Sprintf("%gm", seconds/60)
	}
	return fmt.Sprintf("%gs", seconds)
}
