package engine

import (
	"errors"
	"fmt"
	"math"
)

// Role is the kind of worker an engine plays in a deployment.
type Role string

// The engine roles (the same strings as sim/engineapi's roles).
const (
	// RolePrefill runs prompts only: a request finishes with its first token, and the
	// engine reports the KV hand-off delay to the decode engine.
	RolePrefill Role = "prefill"
	// RoleDecode runs requests whose prompt was prefilled elsewhere: it generates the
	// OSL−1 tokens after the first one.
	RoleDecode Role = "decode"
	// RoleAggregated runs whole requests (prefill and decode).
	RoleAggregated Role = "aggregated"
)

// PreemptionMode chooses the request preempted when KV blocks run out.
type PreemptionMode string

// PreemptLIFO preempts the newest running request (vLLM's and the mocker's default). It
// is the only mode implemented.
const PreemptLIFO PreemptionMode = "lifo"

// Mocker defaults (reference/evaluation.md §1.5).
const (
	// DefaultMaxNumBatchedTokens is the token budget of one pass.
	DefaultMaxNumBatchedTokens = 8192
	// DefaultMaxNumSeqs is the maximum number of running requests.
	DefaultMaxNumSeqs = 256
	// DefaultBlockSize is the KV block size in tokens (vLLM's mocker CLI default).
	DefaultBlockSize = 64
	// DefaultNumGPUBlocks is the KV capacity in blocks when the timing model does not
	// know the engine's capacity.
	DefaultNumGPUBlocks = 16384
	// DefaultKVTransferBandwidth is the prefill→decode KV transfer bandwidth in bytes per
	// second (64 GB/s; about 450 GB/s models NVLink).
	DefaultKVTransferBandwidth = 64e9
	// DefaultHashBlockTokens is the number of prompt tokens a request hash id covers: the
	// Mooncake traces' 512-token blocks (DynoSim's --trace-block-size for them).
	DefaultHashBlockTokens = 512
	// DefaultKVBytesPerToken is the KV cache size of one token of Llama-3.1-8B with a
	// 16-bit KV cache: 32 layers × 2 (K and V) × 8 KV heads × 128 head dim × 2 bytes.
	DefaultKVBytesPerToken = 32 * 2 * 8 * 128 * 2
)

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("engine: invalid config")

// Config configures an Engine. Start from DefaultConfig: the zero value is not valid.
type Config struct {
	// Role is the engine's role (prefill, decode or aggregated).
	Role Role
	// MaxNumBatchedTokens is the token budget of one pass (≥ 1).
	MaxNumBatchedTokens int
	// MaxNumSeqs is the maximum number of running requests (≥ 1).
	MaxNumSeqs int
	// BlockSize is the KV block size in tokens (≥ 1).
	BlockSize int
	// NumGPUBlocks is the KV capacity in blocks. 0 derives it when the engine is built:
	// the timing model's KV capacity in tokens divided by BlockSize when it has one
	// (ProfileTiming: the profile's max_kv_tokens), DefaultNumGPUBlocks otherwise.
	NumGPUBlocks int
	// EnableChunkedPrefill lets a prompt be computed over several passes. Without it a
	// request's whole sequence must fit in one pass's budget (Submit rejects the others).
	EnableChunkedPrefill bool
	// Preemption chooses the preempted request; only PreemptLIFO is implemented.
	Preemption PreemptionMode
	// SpeedupRatio divides every pass time (> 0; 1 is real time).
	SpeedupRatio float64
	// DecodeSpeedupRatio further divides the decode part of a pass (> 0; default 1).
	DecodeSpeedupRatio float64
	// KVBytesPerToken is the KV cache size of one token in bytes (≥ 0), for the hand-off
	// delay of prefill engines: layers × 2 × KV heads × head dim × dtype bytes.
	KVBytesPerToken float64
	// KVTransferBandwidth is the prefill→decode KV transfer bandwidth in bytes per second
	// (> 0). A prefill engine reports handoff delay = ISL × KVBytesPerToken / bandwidth.
	KVTransferBandwidth float64
	// EnablePrefixCaching keeps a prefix cache of prompt blocks keyed by the requests'
	// hash ids on prefill and aggregated engines (decode engines receive their KV): a
	// request's leading blocks found in it are not computed again. Off, hash ids are
	// ignored.
	EnablePrefixCaching bool
	// HashBlockTokens is the number of prompt tokens one request hash id covers (≥ 1;
	// DefaultHashBlockTokens, the Mooncake traces' 512).
	HashBlockTokens int
	// WorkerID identifies the engine in its Forward Pass Metrics.
	WorkerID string
	// DPRank is the engine's data-parallel rank in its Forward Pass Metrics (≥ 0).
	DPRank int
}

// DefaultConfig returns the mocker's defaults for an engine of the given role, with
// NumGPUBlocks 0 (derived from the timing model by New).
func DefaultConfig(role Role) Config {
	return Config{
		Role:                 role,
		MaxNumBatchedTokens:  DefaultMaxNumBatchedTokens,
		MaxNumSeqs:           DefaultMaxNumSeqs,
		BlockSize:            DefaultBlockSize,
		EnableChunkedPrefill: true,
		Preemption:           PreemptLIFO,
		SpeedupRatio:         1,
		DecodeSpeedupRatio:   1,
		KVBytesPerToken:      DefaultKVBytesPerToken,
		KVTransferBandwidth:  DefaultKVTransferBandwidth,
		HashBlockTokens:      DefaultHashBlockTokens,
	}
}

// Validate checks every field and returns all problems joined, each wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	switch c.Role {
	case RolePrefill, RoleDecode, RoleAggregated:
	default:
		bad("role %q: want %q, %q or %q", c.Role, RolePrefill, RoleDecode, RoleAggregated)
	}
	if c.MaxNumBatchedTokens < 1 {
		bad("max_num_batched_tokens %d: must be ≥ 1", c.MaxNumBatchedTokens)
	}
	if c.MaxNumSeqs < 1 {
		bad("max_num_seqs %d: must be ≥ 1", c.MaxNumSeqs)
	}
	if c.BlockSize < 1 {
		bad("block_size %d: must be ≥ 1", c.BlockSize)
	}
	if c.NumGPUBlocks < 0 {
		bad("num_gpu_blocks %d: must be ≥ 0 (0 derives it from the timing model)", c.NumGPUBlocks)
	}
	if c.Preemption != PreemptLIFO {
		bad("preemption mode %q: only %q is implemented", c.Preemption, PreemptLIFO)
	}
	if !positiveFinite(c.SpeedupRatio) {
		bad("speedup_ratio %v: must be a finite number > 0", c.SpeedupRatio)
	}
	if !positiveFinite(c.DecodeSpeedupRatio) {
		bad("decode_speedup_ratio %v: must be a finite number > 0", c.DecodeSpeedupRatio)
	}
	if math.IsNaN(c.KVBytesPerToken) || math.IsInf(c.KVBytesPerToken, 0) || c.KVBytesPerToken < 0 {
		bad("kv_bytes_per_token %v: must be a finite number ≥ 0", c.KVBytesPerToken)
	}
	if !positiveFinite(c.KVTransferBandwidth) {
		bad("kv_transfer_bandwidth %v: must be a finite number of bytes/s > 0", c.KVTransferBandwidth)
	}
	if c.HashBlockTokens < 1 || c.HashBlockTokens > 1<<20 {
		bad("hash_block_tokens %d: must be in [1, %d]", c.HashBlockTokens, 1<<20)
	}
	if c.DPRank < 0 {
		bad("dp_rank %d: must be ≥ 0", c.DPRank)
	}
	return errors.Join(errs...)
}

func positiveFinite(v float64) bool { return v > 0 && !math.IsInf(v, 1) }
