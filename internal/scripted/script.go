// Package scripted is observations keyed by the planner's tick number, for tests: a
// planner's inputs become a function of its own progress, so two runs of one script decide
// the same whatever the wall clock does. It serves the activities' Unhosted observer; it is
// test-only wiring and never part of the planner binary.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// Script is a scripted set of observations, piecewise constant in the planner's tick number:
// the observation of tick k is the entry with the largest FromTick <= k. It makes a planner's
// inputs a function of its own progress, so two runs of the same script decide the same
// whatever the wall clock does (the durability test relies on it).
//
// The file is JSON:
//
//	{"entries": [
//	  {"from_tick": 0,  "traffic": {"requests_per_second": 2, "isl": 3000, "osl": 300},
//	   "prefill_engine": {...FPM...}, "decode_engine": {...FPM...}},
//	  {"from_tick": 20, "traffic": {"unreadable": true}}
//	]}
//
// The engine FPMs are templates: each ready worker of the pool reports one copy, with worker
// ids p0, p1, ... and d0, d1, ..., so the FPM count always matches the inventory.
type Script struct {
	Entries []ScriptEntry `json:"entries"`
}

// ScriptEntry is the observation from tick FromTick on.
type ScriptEntry struct {
	FromTick int64 `json:"from_tick"`
	// Traffic is the frontend traffic; nil means no traffic observation.
	Traffic *ScriptTraffic `json:"traffic,omitempty"`
	// PrefillEngine and DecodeEngine are the per-engine FPM templates; nil means no FPM.
	PrefillEngine *perf.FPM `json:"prefill_engine,omitempty"`
	DecodeEngine  *perf.FPM `json:"decode_engine,omitempty"`
	// Capabilities are the workers' capabilities.
	Capabilities *scaling.WorkerCapabilities `json:"capabilities,omitempty"`
}

// ScriptTraffic is a traffic level; the request count of a window is rate × window length.
type ScriptTraffic struct {
	RequestsPerSecond float64  `json:"requests_per_second"`
	ISL               float64  `json:"isl"`
	OSL               float64  `json:"osl"`
	TTFTMs            *float64 `json:"ttft_ms,omitempty"`
	ITLMs             *float64 `json:"itl_ms,omitempty"`
	KVHitRate         *float64 `json:"kv_hit_rate,omitempty"`
	// Unreadable makes the request count unreadable (a failed Prometheus query).
	Unreadable bool `json:"unreadable,omitempty"`
}

// LoadScript reads and validates a script file.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("observation script: %w", err)
	}
	var s Script
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("observation script %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("observation script %s: %w", path, err)
	}
	return &s, nil
}

// Validate checks the entries are ordered by tick and their values sane.
func (s *Script) Validate() error {
	if len(s.Entries) == 0 {
		return fmt.Errorf("no entries")
	}
	if !slices.IsSortedFunc(s.Entries, func(a, b ScriptEntry) int { return int(a.FromTick - b.FromTick) }) {
		return fmt.Errorf("entries must be in increasing from_tick order")
	}
	for i, e := range s.Entries {
		if i > 0 && e.FromTick == s.Entries[i-1].FromTick {
			return fmt.Errorf("entry %d: from_tick %d given twice", i, e.FromTick)
		}
		if t := e.Traffic; t != nil && (t.RequestsPerSecond < 0 || t.ISL < 0 || t.OSL < 0) {
			return fmt.Errorf("entry %d: traffic values must be >= 0", i)
		}
	}
	return nil
}

func (s *Script) at(tick int64) *ScriptEntry {
	var found *ScriptEntry
	for i := range s.Entries {
		if s.Entries[i].FromTick > tick {
			break
		}
		found = &s.Entries[i]
	}
	return found
}

// Traffic is the scripted traffic of tick over a window of durationS seconds (nil: none).
func (s *Script) Traffic(tick int64, durationS float64) *scaling.TrafficObservation {
	e := s.at(tick)
	if e == nil || e.Traffic == nil {
		return nil
	}
	t := e.Traffic
	obs := &scaling.TrafficObservation{DurationS: durationS, TTFTMs: t.TTFTMs, ITLMs: t.ITLMs, KVHitRate: t.KVHitRate}
	if t.Unreadable {
		return obs
	}
	n := t.RequestsPerSecond * durationS
	obs.NumReq = &n
	if n > 0 {
		isl, osl := t.ISL, t.OSL
		obs.ISL, obs.OSL = &isl, &osl
	}
	return obs
}

// FPM is the scripted FPMs of tick for the given ready counts (nil: none).
func (s *Script) FPM(tick int64, readyPrefill, readyDecode int) *scaling.FPMObservations {
	e := s.at(tick)
	if e == nil || (e.PrefillEngine == nil && e.DecodeEngine == nil) {
		return nil
	}
	out := &scaling.FPMObservations{}
	replicate := func(tmpl *perf.FPM, n int, prefix string) []perf.FPM {
		if tmpl == nil {
			return nil
		}
		fpms := make([]perf.FPM, n)
		for i := range fpms {
			fpms[i] = *tmpl
			fpms[i].WorkerID = fmt.Sprintf("%s%d", prefix, i)
			if fpms[i].Version == 0 {
				fpms[i].Version = perf.FPMVersion
			}
		}
		return fpms
	}
	out.Prefill = replicate(e.PrefillEngine, readyPrefill, "p")
	out.Decode = replicate(e.DecodeEngine, readyDecode, "d")
	return out
}

// Capabilities is the scripted capabilities of tick (zero value: none).
func (s *Script) Capabilities(tick int64) scaling.WorkerCapabilities {
	if e := s.at(tick); e != nil && e.Capabilities != nil {
		return *e.Capabilities
	}
	return scaling.WorkerCapabilities{}
}

// ObserveTraffic answers the observe activity from the script (activities.Observer).
func (s *Script) ObserveTraffic(_ context.Context, req workflows.ObserveRequest) (*scaling.TrafficObservation, error) {
	return s.Traffic(req.Tick, req.TrafficDurationS), nil
}

// ObserveFPM answers the observe activity from the script (activities.Observer).
func (s *Script) ObserveFPM(_ context.Context, req workflows.ObserveRequest) (workflows.FPMResult, error) {
	return workflows.FPMResult{FPM: s.FPM(req.Tick, req.ReadyPrefill, req.ReadyDecode), Capabilities: s.Capabilities(req.Tick)}, nil
}
