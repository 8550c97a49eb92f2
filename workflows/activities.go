package workflows

import (
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
)

// Activity names: the workflow calls activities by name with the request types below; the
// activities package implements and registers them under these names.
const (
	// ActivityInit seeds the decision core (local activity): perf models from the profile,
	// predictors from the warm-up trace.
	ActivityInit = "Init"
	// ActivityDecide runs scaling.Decide (local activity).
	ActivityDecide = "Decide"
	// ActivityObserveInventory reads the connector's inventory.
	ActivityObserveInventory = "ObserveInventory"
	// ActivityObserveTraffic reads the frontend traffic over a window.
	ActivityObserveTraffic = "ObserveTraffic"
	// ActivityObserveFPM reads the engines' latest Forward Pass Metrics and capabilities.
	ActivityObserveFPM = "ObserveFPM"
	// ActivityApply sends absolute targets tagged with a decision id to the connector.
	ActivityApply = "Apply"
	// ActivityObserve reads the inventory, the FPMs and the traffic a tick needs in one
	// activity (history generation 3 on; before, the three Observe* activities).
	ActivityObserve = "Observe"
	// ActivityLoadProfile reads a planner's pre-deployment profile (local activity; history
	// generation 3 on, once per run, for Decide in workflow code).
	ActivityLoadProfile = "LoadProfile"
)

// Typed error names of activities (temporal ApplicationError types). Non-retryable ones
// are not retried by the workflow's retry policies.
const (
	ErrTypeInvalidTargets = "InvalidTargets" // non-retryable
	ErrTypeStaleDecision  = "StaleDecision"  // non-retryable
	ErrTypeBadConfig      = "BadConfig"      // non-retryable
	ErrTypeBadState       = "BadState"       // non-retryable
	ErrTypeUnavailable    = "Unavailable"    // retryable: the source or connector is unreachable
	// ErrTypeNotReady is a change the deployment cannot take now (held; the error itself is
	// marked non-retryable, the next tick decides again).
	ErrTypeNotReady = "NotReady"
	// ErrTypeInvalidRequest is an update refused by its validator (never in history).
	ErrTypeInvalidRequest = "InvalidRequest"
)

// InitRequest asks for the initial decision-core state of a planner starting at Now.
type InitRequest struct {
	Deployment Deployment    `json:"deployment"`
	Config     config.Config `json:"config"`
	Now        float64       `json:"now"`
}

// InitResult is the initial decision-core state and what the bootstrap did.
type InitResult struct {
	Core  scaling.State `json:"core"`
	Notes []string      `json:"notes,omitempty"`
}

// DecideRequest is one Decide call.
type DecideRequest struct {
	// Tick is the planner's tick number (for logs and fault injection in tests).
	Tick   int64         `json:"tick"`
	Config config.Config `json:"config"`
	State  scaling.State `json:"state"`
	Input  scaling.Input `json:"input"`
}

// DecideResult is Decide's answer.
type DecideResult struct {
	State       scaling.State       `json:"state"`
	Decision    scaling.Decision    `json:"decision"`
	Diagnostics scaling.Diagnostics `json:"diagnostics"`
}

// ObserveRequest identifies what an observation activity reads.
type ObserveRequest struct {
	Deployment  Deployment         `json:"deployment"`
	Environment config.Environment `json:"environment"`
	// Tick is the planner's tick number (scripted observations are keyed by it).
	Tick int64 `json:"tick"`
	// TrafficDurationS is the traffic window (ObserveTraffic).
	TrafficDurationS float64 `json:"traffic_duration_s,omitempty"`
	// ReadyPrefill and ReadyDecode are the ready counts (ObserveFPM).
	ReadyPrefill int `json:"ready_prefill,omitempty"`
	ReadyDecode  int `json:"ready_decode,omitempty"`
	// InitialPrefill and InitialDecode describe the deployment to an advisory connector
	// (ObserveInventory, noop).
	InitialPrefill int `json:"initial_prefill,omitempty"`
	InitialDecode  int `json:"initial_decode,omitempty"`
}

// FPMResult is what ObserveFPM read.
type FPMResult struct {
	FPM          *scaling.FPMObservations   `json:"fpm,omitempty"`
	Capabilities scaling.WorkerCapabilities `json:"capabilities"`
}

// ObserveAllRequest asks ActivityObserve for the observations a tick needs.
type ObserveAllRequest struct {
	ObserveRequest
	// Inventory, FPM and Traffic select what to read.
	Inventory bool `json:"inventory,omitempty"`
	FPM       bool `json:"fpm,omitempty"`
	Traffic   bool `json:"traffic,omitempty"`
}

// ObserveAllResult is what ActivityObserve read: each part, or why it could not be read
// (an unreadable part is never read as zero load).
type ObserveAllResult struct {
	Inventory      *connectors.Inventory       `json:"inventory,omitempty"`
	InventoryError string                      `json:"inventory_error,omitempty"`
	FPM            *FPMResult                  `json:"fpm,omitempty"`
	FPMError       string                      `json:"fpm_error,omitempty"`
	Traffic        *scaling.TrafficObservation `json:"traffic,omitempty"`
	TrafficError   string                      `json:"traffic_error,omitempty"`
}

// LoadProfileRequest asks for the pre-deployment profile of a configuration.
type LoadProfileRequest struct {
	Config config.Config `json:"config"`
}

// LoadProfileResult is the profile (nil when the configuration has none or it is not
// readable: Decide then works without it, as the activity did) and why there is none.
type LoadProfileResult struct {
	Profile *perf.Profile `json:"profile,omitempty"`
	Note    string        `json:"note,omitempty"`
}

// ApplyRequest sends a decision to the connector.
type ApplyRequest struct {
	Deployment     Deployment         `json:"deployment"`
	Environment    config.Environment `json:"environment"`
	DecisionID     int64              `json:"decision_id"`
	Targets        connectors.Targets `json:"targets"`
	InitialPrefill int                `json:"initial_prefill,omitempty"`
	InitialDecode  int                `json:"initial_decode,omitempty"`
}
