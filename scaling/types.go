package scaling

import (
	"math"

	"github.com/llmplanner/planner/perf"
)

// Reason is a decision reason. The spellings are Dynamo's (LOAD_DECISION_STATES and
// THROUGHPUT_DECISION_STATES), so dashboards, Prometheus enum states and reports match;
// the few this planner adds are marked as extensions.
type Reason string

// Reasons shared by both loops or specific to one, with Dynamo's spellings.
const (
	ReasonUnset    Reason = "unset"
	ReasonDisabled Reason = "disabled"
	ReasonNoChange Reason = "no_change"

	// Load loop.
	ReasonNoFPMData                     Reason = "no_fpm_data"
	ReasonScalingInProgress             Reason = "scaling_in_progress"
	ReasonWorkerCountMismatch           Reason = "worker_count_mismatch"
	ReasonInsufficientData              Reason = "insufficient_data"
	ReasonScaleUp                       Reason = "scale_up"
	ReasonScaleDown                     Reason = "scale_down"
	ReasonScaleDownCappedByThroughput   Reason = "scale_down_capped_by_throughput"
	ReasonScaleDownRefusedConsolidation Reason = "scale_down_refused_consolidation"
	ReasonGPUBudgetGuardHold            Reason = "gpu_budget_guard_hold"
	ReasonGPUBudgetReconcile            Reason = "gpu_budget_reconcile"
	ReasonNoTrafficData                 Reason = "no_traffic_data"
	ReasonPredictFailed                 Reason = "predict_failed"
	ReasonModelNotReady                 Reason = "model_not_ready"
	ReasonSetLowerBound                 Reason = "set_lower_bound"
	ReasonScale                         Reason = "scale"
	ReasonPartnerNotReady               Reason = "partner_not_ready"
	ReasonNoWorkerCounts                Reason = "no_worker_counts"               // extension: inventory unreadable, hold
	ReasonScaleDownHeldAfterScaleUp     Reason = "scale_down_held_after_scale_up" // extension: older load planner's decode grace period
	ReasonScaleUpSkippedQueueTrend      Reason = "scale_up_skipped_queue_trend"   // extension: older load planner's prefill queue trend
	ReasonScaleDownStabilizing          Reason = "scale_down_stabilizing"         // extension: scale_down_stabilization_seconds held a scale-down
	ReasonScaleUpForeseen               Reason = "scale_up_foreseen"              // extension: ahead, a scale-up at an idle tick where a followed period foresees demand
)

// LoadReasons lists every load-loop reason in Dynamo's enum order, extensions last.
var LoadReasons = []Reason{ReasonUnset, ReasonDisabled, ReasonNoFPMData, ReasonScalingInProgress,
	ReasonWorkerCountMismatch, ReasonInsufficientData, ReasonNoChange, ReasonScaleUp, ReasonScaleDown,
	ReasonScaleDownCappedByThroughput, ReasonScaleDownRefusedConsolidation, ReasonGPUBudgetGuardHold,
	ReasonGPUBudgetReconcile, ReasonNoWorkerCounts, ReasonScaleDownHeldAfterScaleUp, ReasonScaleUpSkippedQueueTrend,
	ReasonScaleDownStabilizing, ReasonScaleUpForeseen}

// ThroughputReasons lists every throughput-loop reason in Dynamo's enum order, extensions last.
var ThroughputReasons = []Reason{ReasonUnset, ReasonDisabled, ReasonNoTrafficData, ReasonPredictFailed,
	ReasonModelNotReady, ReasonSetLowerBound, ReasonScale, ReasonNoChange, ReasonPartnerNotReady,
	ReasonGPUBudgetGuardHold, ReasonGPUBudgetReconcile, ReasonNoWorkerCounts, ReasonScaleDownStabilizing}

// Component is a worker pool the planner sizes.
type Component string

// The components. An aggregated deployment's single pool is the decode component, as in
// Dynamo.
const (
	Prefill Component = "prefill"
	Decode  Component = "decode"
)

// EngineCapabilities are what one replica of a pool can do (Dynamo's EngineCapabilities,
// from the worker model cards). Zero values mean "not reported".
type EngineCapabilities struct {
	// NumGPU is the GPUs per replica.
	NumGPU int `json:"num_gpu,omitempty"`
	// GPUCostPerReplica overrides NumGPU for budgeting (e.g. GPU sidecars).
	GPUCostPerReplica int `json:"gpu_cost_per_replica,omitempty"`
	// MaxNumBatchedTokens is the engine's token budget per iteration (chunk size).
	MaxNumBatchedTokens int64 `json:"max_num_batched_tokens,omitempty"`
	// MaxNumSeqs is the engine's maximum concurrent sequences.
	MaxNumSeqs int64 `json:"max_num_seqs,omitempty"`
	// ContextLength is the model's maximum context.
	ContextLength int64 `json:"context_length,omitempty"`
	// MaxKVTokens is the KV-cache capacity (total blocks × block size).
	MaxKVTokens int64 `json:"max_kv_tokens,omitempty"`
	// SpeculativeNextn is the speculative-decoding draft length (0: none).
	SpeculativeNextn int `json:"speculative_nextn,omitempty"`
}

// GPUCost is the resolved per-replica GPU cost (GPUCostPerReplica, else NumGPU; 0 unknown).
func (c *EngineCapabilities) GPUCost() int {
	if c == nil {
		return 0
	}
	if c.GPUCostPerReplica > 0 {
		return c.GPUCostPerReplica
	}
	return c.NumGPU
}

// Limits are the engine limits the perf model's queries use.
func (c *EngineCapabilities) Limits() perf.Limits {
	return perf.Limits{MaxNumBatchedTokens: c.MaxNumBatchedTokens, MaxNumSeqs: c.MaxNumSeqs, MaxKVTokens: c.MaxKVTokens}
}

// WorkerCapabilities are the capabilities of each pool (aggregated: Decode only); nil means
// the pool's workers have not reported them.
type WorkerCapabilities struct {
	Prefill *EngineCapabilities `json:"prefill,omitempty"`
	Decode  *EngineCapabilities `json:"decode,omitempty"`
}

// TrafficObservation is the frontend traffic over one window (Dynamo's
// TrafficObservation). Nil pointers mean "could not be read" — never zero.
type TrafficObservation struct {
	// DurationS is the window length in seconds.
	DurationS float64 `json:"duration_s"`
	// NumReq is the request count in the window; nil when the query failed or the series is
	// missing (the throughput decision is then skipped, never taken as zero demand).
	NumReq *float64 `json:"num_req,omitempty"`
	// ISL and OSL are the mean input and output lengths (nil when there was no request).
	ISL *float64 `json:"isl,omitempty"`
	OSL *float64 `json:"osl,omitempty"`
	// TTFTMs, ITLMs and RequestDurationS are the observed means, for the classic sizing's
	// correction factors.
	TTFTMs           *float64 `json:"ttft_ms,omitempty"`
	ITLMs            *float64 `json:"itl_ms,omitempty"`
	RequestDurationS *float64 `json:"request_duration_s,omitempty"`
	// KVHitRate is the router's prefix-cache hit rate (0–1).
	KVHitRate *float64 `json:"kv_hit_rate,omitempty"`
	// AcceptLength is the speculative-decoding accept length.
	AcceptLength *float64 `json:"accept_length,omitempty"`
}

// RequestsPerSecond is the window's request rate, NumReq over DurationS; nil when the count
// was not read, the window has no length, or the ratio is not a finite number (never zero
// for an unread count, never an infinity that JSON cannot carry).
func (o *TrafficObservation) RequestsPerSecond() *float64 {
	if o == nil || o.NumReq == nil || !(o.DurationS > 0) {
		return nil
	}
	r := *o.NumReq / o.DurationS
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return nil
	}
	return &r
}

// WorkerCounts is the connector's inventory (Dynamo's WorkerCounts). Nil counts mean
// "unknown".
type WorkerCounts struct {
	ReadyPrefill    *int `json:"ready_prefill,omitempty"`
	ReadyDecode     *int `json:"ready_decode,omitempty"`
	ExpectedPrefill *int `json:"expected_prefill,omitempty"`
	ExpectedDecode  *int `json:"expected_decode,omitempty"`
	// QueuedPrefill and QueuedDecode are the workers the connector holds back until
	// capacity frees (counted in the expected counts, not started yet: the local connector's
	// pending workers, waiting for a draining worker's GPUs); nil when the connector does not
	// say. (Not State.PendingPrefill, the planner's own submitted targets.)
	QueuedPrefill *int `json:"queued_prefill,omitempty"`
	QueuedDecode  *int `json:"queued_decode,omitempty"`
	// PrefillScalingInProgress and DecodeScalingInProgress are the connector's own flags.
	PrefillScalingInProgress bool `json:"prefill_scaling_in_progress,omitempty"`
	DecodeScalingInProgress  bool `json:"decode_scaling_in_progress,omitempty"`
}

// FPMObservations are the latest Forward Pass Metrics per (worker_id, dp_rank) of each pool
// (aggregated: Decode). Samples, when given, are extra iterations seen since the last tick,
// fed to the regression in addition to the latest values.
type FPMObservations struct {
	Prefill        []perf.FPM `json:"prefill,omitempty"`
	Decode         []perf.FPM `json:"decode,omitempty"`
	PrefillSamples []perf.FPM `json:"prefill_samples,omitempty"`
	DecodeSamples  []perf.FPM `json:"decode_samples,omitempty"`
}

// Input is everything one tick observed. Now is the tick time in seconds (any fixed epoch,
// e.g. Unix time); nil parts were not observed.
type Input struct {
	Now          float64             `json:"now"`
	Workers      *WorkerCounts       `json:"workers,omitempty"`
	Traffic      *TrafficObservation `json:"traffic,omitempty"`
	FPM          *FPMObservations    `json:"fpm,omitempty"`
	Capabilities WorkerCapabilities  `json:"capabilities"`
}

// Decision is a scaling decision: absolute replica targets, nil for "no opinion".
type Decision struct {
	Prefill *int `json:"prefill,omitempty"`
	Decode  *int `json:"decode,omitempty"`
}

// Empty reports whether the decision changes nothing.
func (d Decision) Empty() bool { return d.Prefill == nil && d.Decode == nil }

// Diagnostics explain one tick (Dynamo's TickDiagnostics plus the inputs that mattered).
type Diagnostics struct {
	At            float64 `json:"at"`
	RanLoad       bool    `json:"ran_load"`
	RanThroughput bool    `json:"ran_throughput"`
	// Inventory as the decision saw it (after the pending-desired guard).
	ReadyPrefill    *int `json:"ready_prefill,omitempty"`
	ReadyDecode     *int `json:"ready_decode,omitempty"`
	ExpectedPrefill *int `json:"expected_prefill,omitempty"`
	ExpectedDecode  *int `json:"expected_decode,omitempty"`

	EstimatedTTFTMs    *float64 `json:"estimated_ttft_ms,omitempty"`
	EstimatedITLMs     *float64 `json:"estimated_itl_ms,omitempty"`
	ObservedNumReq     *float64 `json:"observed_num_req,omitempty"`
	PredictedNumReq    *float64 `json:"predicted_num_req,omitempty"`
	PredictedISL       *float64 `json:"predicted_isl,omitempty"`
	PredictedOSL       *float64 `json:"predicted_osl,omitempty"`
	PredictedKVHitRate *float64 `json:"predicted_kv_hit_rate,omitempty"`
	EngineRPSPrefill   *float64 `json:"engine_rps_prefill,omitempty"`
	EngineRPSDecode    *float64 `json:"engine_rps_decode,omitempty"`

	ThroughputLowerBoundPrefill int `json:"throughput_lower_bound_prefill"`
	ThroughputLowerBoundDecode  int `json:"throughput_lower_bound_decode"`

	LoadReason              Reason `json:"load_reason,omitempty"`
	LoadReasonPrefill       Reason `json:"load_reason_prefill,omitempty"`
	LoadReasonDecode        Reason `json:"load_reason_decode,omitempty"`
	ThroughputReason        Reason `json:"throughput_reason,omitempty"`
	ThroughputReasonPrefill Reason `json:"throughput_reason_prefill,omitempty"`
	ThroughputReasonDecode  Reason `json:"throughput_reason_decode,omitempty"`

	// Decision is what the tick decided (empty: hold).
	Decision Decision `json:"decision"`
	// NextTickAt is when the next tick is due.
	NextTickAt float64 `json:"next_tick_at"`
	// Notes are human-readable details (why a model is not ready, what was skipped).
	Notes []string `json:"notes,omitempty"`
}

func (d *Diagnostics) note(s string) { d.Notes = append(d.Notes, s) }

func ptr[T any](v T) *T { return &v }
