// Package engineapi is the HTTP protocol between the simulated frontend and the simulated
// engines (`planner frontend` and `planner engine`). Dynamo's frontend talks to its workers
// over its own request plane; the simulator uses plain JSON over HTTP because only the timing
// matters: a request carries lengths, not tokens, and the answer carries the times its first
// token and its last token were produced.
//
// Engines register with the frontend (POST /v1/engines, repeated every second as a heartbeat;
// Draining=true when they stop taking requests), which stands in for Dynamo's discovery plane.
package engineapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Phases of a request an engine can run.
const (
	// PhasePrefill runs the prompt and produces the first token (disaggregated prefill).
	PhasePrefill = "prefill"
	// PhaseDecode generates the remaining OSL−1 tokens of a prefilled request.
	PhaseDecode = "decode"
	// PhaseFull runs the whole request (aggregated engine).
	PhaseFull = "full"
)

// Roles an engine plays.
const (
	RolePrefill    = "prefill"
	RoleDecode     = "decode"
	RoleAggregated = "aggregated"
)

// Paths served by engines and the frontend.
const (
	PathGenerate = "/v1/generate"
	PathEngines  = "/v1/engines"
	PathHealth   = "/healthz"
)

// GenerateRequest asks an engine to run one phase of a request.
type GenerateRequest struct {
	ID    string `json:"id"`
	Phase string `json:"phase"`
	ISL   int    `json:"isl"`
	OSL   int    `json:"osl"`
	// HashIDs are the prompt's 512-token block hashes (Mooncake hash_ids), for the
	// prefill or aggregated engine's prefix cache; the engine bounds their number.
	HashIDs []uint64 `json:"hash_ids,omitempty"`
}

// Validate checks the request.
func (r GenerateRequest) Validate() error {
	switch r.Phase {
	case PhasePrefill, PhaseDecode, PhaseFull:
	default:
		return fmt.Errorf("phase %q: want prefill, decode or full", r.Phase)
	}
	if r.ISL <= 0 || r.OSL <= 0 {
		return fmt.Errorf("isl (%d) and osl (%d) must be > 0", r.ISL, r.OSL)
	}
	return nil
}

// GenerateResponse reports when the phase produced its first and its last token (Unix
// nanoseconds on the engine's clock, the same machine's as the frontend's).
type GenerateResponse struct {
	FirstTokenUnixNano int64 `json:"first_token_unix_nano,omitempty"`
	FinishedUnixNano   int64 `json:"finished_unix_nano"`
	// HandoffDelayMs is the KV-transfer delay a prefill engine attaches before decode may
	// start (ISL × KV bytes per token / transfer bandwidth).
	HandoffDelayMs float64 `json:"handoff_delay_ms,omitempty"`
	// Worker is the engine's name.
	Worker string `json:"worker"`
}

// Registration is an engine announcing itself to the frontend.
type Registration struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// URL is the engine's HTTP base URL.
	URL string `json:"url"`
	// FPMEndpoint is where it publishes Forward Pass Metrics (informational).
	FPMEndpoint string `json:"fpm_endpoint,omitempty"`
	// Draining engines take no new requests.
	Draining bool `json:"draining,omitempty"`
	// PrefixCaching says the engine keeps a prefix cache of the requests' hash blocks
	// (`planner engine --prefix-caching` on a prefill or aggregated engine). A KV-routing
	// frontend predicts cached blocks only on such engines; on the others every request's
	// hit rate is 0. Absent (an engine that predates the field): false.
	PrefixCaching bool `json:"prefix_caching,omitempty"`
	// PrefixCacheBlocks is the most hash blocks the engine's prefix cache can hold (its KV
	// capacity in hash blocks; 0: unknown). The frontend predicts at most this many blocks
	// cached there.
	PrefixCacheBlocks int `json:"prefix_cache_blocks,omitempty"`
}

// Validate checks the registration.
func (r Registration) Validate() error {
	if r.Name == "" || r.URL == "" {
		return fmt.Errorf("registration needs a name and a URL")
	}
	switch r.Role {
	case RolePrefill, RoleDecode, RoleAggregated:
	default:
		return fmt.Errorf("role %q: want prefill, decode or aggregated", r.Role)
	}
	if r.PrefixCacheBlocks < 0 {
		return fmt.Errorf("prefix_cache_blocks %d: must be >= 0", r.PrefixCacheBlocks)
	}
	if r.PrefixCaching && r.Role == RoleDecode {
		return fmt.Errorf("prefix_caching: a decode engine keeps no prefix cache (it receives its KV)")
	}
	return nil
}

// PostJSON posts v as JSON to url and decodes a 200 answer into out (when not nil). Other
// statuses are errors carrying the body.
func PostJSON(ctx context.Context, c *http.Client, url string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(data))}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s: %w", url, err)
	}
	return nil
}

// StatusError is a non-200 HTTP answer.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// NewClient returns an HTTP client for many concurrent long requests to a few hosts.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConns: 4096, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
	}}
}

// UnixNano converts an engine timestamp.
func UnixNano(ns int64) time.Time { return time.Unix(0, ns) }
