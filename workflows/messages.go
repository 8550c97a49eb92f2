package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/scaling"
)

// Names of the workflow, its task queue and its messages. Signals use the same names and
// payloads as the updates they mirror, so `temporal workflow update execute --name X` and
// `temporal workflow signal --name X` (or `tctl workflow signal --name X`) take one input.
const (
	// WorkflowName is the registered workflow type.
	WorkflowName = "PlannerWorkflow"
	// TaskQueue is the default task queue of planner workers.
	TaskQueue = "planner"
	// IDPrefix starts every planner workflow id: planner/<namespace>/<deployment>.
	IDPrefix = "planner/"

	// QueryState returns a StateView.
	QueryState = "state"
	// QueryDiagnostics returns the recent ticks ([]TickRecord, oldest first).
	QueryDiagnostics = "diagnostics"
	// QueryConfig returns the current config.Config.
	QueryConfig = "config"
	// QueryVirtualDecision returns the newest virtual decision (virtual environment).
	QueryVirtualDecision = "virtual_decision"

	// UpdateSetReplicas sets a component's replicas for a time (SetReplicasRequest).
	UpdateSetReplicas = "set_replicas"
	// UpdateClearOverride removes replica overrides (ClearOverrideRequest).
	UpdateClearOverride = "clear_override"
	// UpdatePause pauses scale-up, scale-down or both (DirectionRequest).
	UpdatePause = "pause"
	// UpdateResume resumes scale-up, scale-down or both (DirectionRequest).
	UpdateResume = "resume"
	// UpdateSetSLA changes the TTFT and ITL targets (SetSLARequest).
	UpdateSetSLA = "set_sla"
	// UpdateSetLimits changes min endpoints and GPU budgets (SetLimitsRequest).
	UpdateSetLimits = "set_limits"
	// UpdateAcknowledge acknowledges a virtual decision (AcknowledgeRequest).
	UpdateAcknowledge = "acknowledge"
	// UpdateWaitDecision blocks until the newest virtual decision is another than the given
	// one (newer; or older, when the planner was started again), or about a minute passes
	// (WaitDecisionRequest; returns virtual.Decision).
	UpdateWaitDecision = "wait_decision"
	// MaxWaitDecision is how many wait_decision calls may wait at once: the server's
	// in-flight updates per workflow (10 by default) must leave room for operators.
	MaxWaitDecision = 4
	// UpdateConfig replaces the configuration (ConfigRequest), as `planner start` does for
	// a running planner.
	UpdateConfig = "update_config"

	// SearchAttributeDeployment and SearchAttributeMode are the keyword search attributes
	// a planner is started with when the namespace has them.
	SearchAttributeDeployment = "PlannerDeployment"
	SearchAttributeMode       = "PlannerMode"
)

// SupportedEnvironments are the environments this build's workers can serve (local and
// kubernetes need a worker that hosts the deployment: see HostTaskQueue).
var SupportedEnvironments = []string{string(config.EnvNoop), string(config.EnvVirtual), string(config.EnvLocal), string(config.EnvKubernetes)}

// HostTaskQueuePrefix starts every deployment's host task queue.
const HostTaskQueuePrefix = "planner-host/"

// HostTaskQueue is the task queue of the worker hosting a deployment (its connector, traffic
// source and FPM subscriber): planner-host/<namespace>/<name>. A worker polls it for every
// deployment of its deployments file.
func HostTaskQueue(d Deployment) string { return HostTaskQueuePrefix + d.Namespace + "/" + d.Name }

// SupportedEnvironment reports whether this build's workers serve env.
func SupportedEnvironment(env config.Environment) bool {
	for _, e := range SupportedEnvironments {
		if string(env) == e {
			return true
		}
	}
	return false
}

// SignalNames are the messages also accepted as signals.
var SignalNames = []string{UpdateSetReplicas, UpdateClearOverride, UpdatePause, UpdateResume, UpdateSetSLA, UpdateSetLimits, UpdateAcknowledge}

// Deployment identifies the deployment a planner manages.
type Deployment struct {
	// Namespace is the Kubernetes namespace (or any grouping the connector uses).
	Namespace string `json:"namespace"`
	// Name is the deployment (DynamoGraphDeployment) name.
	Name string `json:"name"`
}

// WorkflowID is the planner workflow id of a deployment: planner/<namespace>/<name>.
func (d Deployment) WorkflowID() string { return IDPrefix + d.Namespace + "/" + d.Name }

// Validate checks the deployment names are usable in a workflow id.
func (d Deployment) Validate() error {
	for _, f := range []struct{ name, v string }{{"namespace", d.Namespace}, {"deployment", d.Name}} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("%s must not be empty", f.name)
		}
		if strings.ContainsAny(f.v, "/ \t\n") {
			return fmt.Errorf("%s %q must not contain '/' or spaces", f.name, f.v)
		}
	}
	return nil
}

// Input starts (or continues) a planner.
type Input struct {
	// Deployment is the managed deployment.
	Deployment Deployment `json:"deployment"`
	// Config is the planner configuration (already validated by the starter; validated again).
	Config config.Config `json:"config"`
	// InitialPrefill and InitialDecode are the replicas the deployment runs when the
	// connector cannot tell (noop, virtual before any acknowledgement).
	InitialPrefill int `json:"initial_prefill"`
	InitialDecode  int `json:"initial_decode"`
	// AckTimeoutSeconds is the virtual connector's acknowledgement timeout (0: 1800 s).
	AckTimeoutSeconds float64 `json:"ack_timeout_seconds,omitempty"`
	// MaxTicksPerRun continues as new after this many ticks even if the server does not ask
	// (0: only when the server suggests it).
	MaxTicksPerRun int `json:"max_ticks_per_run,omitempty"`
	// HostTaskQueue, when set, is the task queue of the worker that hosts the deployment's
	// connector and FPM subscriber (the local connector's processes live on one machine): the
	// observe and apply activities go there; Init and Decide stay on the workflow's queue.
	HostTaskQueue string `json:"host_task_queue,omitempty"`
	// State is the state carried by Continue-As-New (nil on a first start).
	State *State `json:"state,omitempty"`
}

// strictJSON decodes one JSON value into v, refusing unknown fields (a misspelt field must
// not silently become "everything") and trailing data. New operator messages are decoded
// with it; messages replayed from history are not (decodeMessage). It is deterministic; workflowcheck
// flags encoding/json's reflection internals, hence the ignore.
//
//workflowcheck:ignore
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// lenientJSON decodes JSON into v, ignoring unknown fields (messages replayed from history).
// Deterministic; the ignore is for encoding/json's reflection internals, as for strictJSON.
//
//workflowcheck:ignore
func lenientJSON(data []byte, v any) error {
	return json.Unmarshal(data, v)
}

// Component names accepted in requests.
const (
	ComponentPrefill = "prefill"
	ComponentDecode  = "decode"
)

// SetReplicasRequest pins a component's replicas for a time: the planner applies it and its
// own decisions for that component are suppressed until it expires or is cleared.
type SetReplicasRequest struct {
	// Component is "prefill" or "decode" (the aggregated pool is "decode").
	Component string `json:"component"`
	// Replicas is the absolute target.
	Replicas int `json:"replicas"`
	// TTLSeconds is how long the override lasts (0: one hour; at most 7 days).
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// Reason is recorded with the override.
	Reason string `json:"reason,omitempty"`
	// Force allows a target below the component's minimum endpoints or over the GPU budget.
	Force bool `json:"force,omitempty"`
}

// ClearOverrideRequest removes the override of a component ("" or "all": every override).
type ClearOverrideRequest struct {
	Component string `json:"component,omitempty"`
}

// DirectionRequest names scaling directions: "up", "down" or "both" ("" means both).
type DirectionRequest struct {
	Direction string `json:"direction,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// SetSLARequest changes the SLA targets (nil: unchanged).
type SetSLARequest struct {
	TTFTMs *float64 `json:"ttft_ms,omitempty"`
	ITLMs  *float64 `json:"itl_ms,omitempty"`
}

// SetLimitsRequest changes the minimum endpoints and the GPU budgets (nil: unchanged; -1
// disables a budget bound, as in the configuration).
type SetLimitsRequest struct {
	MinEndpoint        *int `json:"min_endpoint,omitempty"`
	PrefillMinEndpoint *int `json:"prefill_min_endpoint,omitempty"`
	DecodeMinEndpoint  *int `json:"decode_min_endpoint,omitempty"`
	MinGPUBudget       *int `json:"min_gpu_budget,omitempty"`
	MaxGPUBudget       *int `json:"max_gpu_budget,omitempty"`
}

// AcknowledgeRequest acknowledges a virtual decision, optionally with the ready counts the
// orchestrator observes.
type AcknowledgeRequest struct {
	DecisionID   int64 `json:"decision_id"`
	ReadyPrefill *int  `json:"ready_prefill,omitempty"`
	ReadyDecode  *int  `json:"ready_decode,omitempty"`
}

// WaitDecisionRequest waits for a virtual decision with an id above AfterDecisionID.
type WaitDecisionRequest struct {
	AfterDecisionID int64 `json:"after_decision_id"`
}

// ConfigRequest replaces the configuration.
type ConfigRequest struct {
	Config config.Config `json:"config"`
	// HostTaskQueue, when set, moves the observe and apply activities to this task queue
	// ("" for none): `planner start` sets it, so a planner started before its deployment was
	// hosted finds its host.
	HostTaskQueue *string `json:"host_task_queue,omitempty"`
}

// Result is the answer of an update.
type Result struct {
	Message string `json:"message"`
}

// StateView is the answer of the state query: what an operator needs to see at once.
type StateView struct {
	WorkflowID   string     `json:"workflow_id"`
	Deployment   Deployment `json:"deployment"`
	LogicVersion int        `json:"logic_version"`
	Mode         string     `json:"mode"`
	Target       string     `json:"optimization_target"`
	Environment  string     `json:"environment"`
	Advisory     bool       `json:"advisory"`
	// Initialized is false until the perf models and predictors are set up.
	Initialized bool `json:"initialized"`
	// InitError is why the last initialisation failed (it is retried every 30 s).
	InitError  string  `json:"init_error,omitempty"`
	Ticks      int64   `json:"ticks"`
	Runs       int     `json:"runs"`
	NextTickAt float64 `json:"next_tick_at"`
	// NextTick is NextTickAt in RFC 3339, and AsOf the workflow time of the answer (times
	// elsewhere are Unix seconds).
	NextTick string `json:"next_tick,omitempty"`
	AsOf     string `json:"as_of"`
	// Inventory is the last observed deployment.
	Inventory *connectors.Inventory `json:"inventory,omitempty"`
	// LastTick is the most recent tick.
	LastTick *TickRecord `json:"last_tick,omitempty"`
	// Decisions are the recent decisions, newest last.
	Decisions []DecisionRecord `json:"decisions,omitempty"`
	// Overrides are the operator's overrides in force.
	Overrides Overrides `json:"overrides"`
	// Forced is true while an override bypasses the budget or min-endpoint invariants.
	Forced bool `json:"forced"`
	// LowerBoundPrefill and LowerBoundDecode are the throughput loop's floors.
	LowerBoundPrefill int `json:"lower_bound_prefill"`
	LowerBoundDecode  int `json:"lower_bound_decode"`
	// Virtual is the virtual connector's protocol state.
	Virtual *virtual.State `json:"virtual,omitempty"`
	// Rejected lists recent invalid signals and refused updates, newest last.
	Rejected []RejectedMessage `json:"rejected,omitempty"`
	// SLA targets in force.
	TTFTMs float64 `json:"ttft_ms"`
	ITLMs  float64 `json:"itl_ms"`
	// Models summarises the perf models (samples retained, ready or why not).
	Models []ModelStatus `json:"models,omitempty"`
}

// ModelStatus summarises one perf model for the state query.
type ModelStatus struct {
	Pool    string `json:"pool"`
	Samples int    `json:"samples"`
}

// TickRecord is one tick's diagnostics and outcome.
type TickRecord struct {
	Tick int64 `json:"tick"`
	// Kind is "scheduled" or "override".
	Kind        string               `json:"kind"`
	Diagnostics *scaling.Diagnostics `json:"diagnostics,omitempty"`
	// Applied are the targets sent to the connector, or recorded by an advisory planner
	// (empty: nothing was sent; a held or failed decision is in the decisions list).
	Applied connectors.Targets `json:"applied"`
	// DecisionID is the decision the tick made (0: none).
	DecisionID int64 `json:"decision_id,omitempty"`
	// ObservedTTFTMs and ObservedITLMs are the frontend's mean latencies over the traffic
	// window the tick read (nil: no window read, or the source does not report them), for
	// the diagnostics query and `planner report` beside the estimates.
	ObservedTTFTMs *float64 `json:"observed_ttft_ms,omitempty"`
	ObservedITLMs  *float64 `json:"observed_itl_ms,omitempty"`
	// ObservedRequestsPerSecond is the request rate over that window: the traffic the tick
	// read (what the ahead policy and Dynamo's throughput loop size from), where a load
	// generator's own count covers other seconds (nil: no window
	// read, its count unreadable, a window of no length, or a rate past float64:
	// scaling.TrafficObservation.RequestsPerSecond).
	ObservedRequestsPerSecond *float64 `json:"observed_requests_per_second,omitempty"`
	// Notes explain guards and connector outcomes.
	Notes []string `json:"notes,omitempty"`
	At    float64  `json:"at"`
}
