package scaling

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/llmplanner/planner/perf"
)

// FPM observations travel in workflow history every tick (the observe activity's result), one
// per engine, so they are encoded compactly: each FPM is a JSON array of its fields in a fixed
// order, trailing zeros dropped —
//
//	[version, worker_id, dp_rank, counter_id, wall_time,
//	 scheduled: num_prefill_requests, sum_prefill_tokens, var_prefill_length, sum_prefill_kv_tokens,
//	            num_decode_requests, sum_decode_kv_tokens, var_decode_kv_tokens,
//	 queued:    num_prefill_requests, sum_prefill_tokens, var_prefill_length,
//	            num_decode_requests, sum_decode_kv_tokens, var_decode_kv_tokens]
//
// — about a fifth of perf.FPM's JSON object. Decoding also accepts that object, which older
// histories hold.

// compactFPM is a perf.FPM with the compact JSON encoding.
type compactFPM perf.FPM

func (c *compactFPM) fields() []any {
	s, q := &c.Scheduled, &c.Queued
	return []any{&c.Version, &c.WorkerID, &c.DPRank, &c.CounterID, &c.WallTime,
		&s.NumPrefillRequests, &s.SumPrefillTokens, &s.VarPrefillLength, &s.SumPrefillKVTokens,
		&s.NumDecodeRequests, &s.SumDecodeKVTokens, &s.VarDecodeKVTokens,
		&q.NumPrefillRequests, &q.SumPrefillTokens, &q.VarPrefillLength,
		&q.NumDecodeRequests, &q.SumDecodeKVTokens, &q.VarDecodeKVTokens}
}

// MarshalJSON encodes the FPM as an array of its fields, trailing zeros dropped.
func (c compactFPM) MarshalJSON() ([]byte, error) {
	fields := c.fields()
	parts := make([][]byte, len(fields))
	last := 1 // the worker id is always kept
	for i, f := range fields {
		b, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		parts[i] = b
		if i > last && !bytes.Equal(b, []byte("0")) {
			last = i
		}
	}
	return append(append([]byte("["), bytes.Join(parts[:last+1], []byte(","))...), ']'), nil
}

// UnmarshalJSON decodes the array form, or the perf.FPM object older histories hold.
func (c *compactFPM) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		return json.Unmarshal(data, (*perf.FPM)(c))
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("fpm: want an array or an object: %w", err)
	}
	fields := c.fields()
	if len(raw) > len(fields) {
		return fmt.Errorf("fpm: %d fields, at most %d", len(raw), len(fields))
	}
	*c = compactFPM{}
	for i, r := range raw {
		if err := json.Unmarshal(r, fields[i]); err != nil {
			return fmt.Errorf("fpm field %d: %w", i, err)
		}
	}
	return nil
}

// fpmObservationsJSON is FPMObservations with compact FPMs.
type fpmObservationsJSON struct {
	Prefill        []compactFPM `json:"prefill,omitempty"`
	Decode         []compactFPM `json:"decode,omitempty"`
	PrefillSamples []compactFPM `json:"prefill_samples,omitempty"`
	DecodeSamples  []compactFPM `json:"decode_samples,omitempty"`
}

func compact(fs []perf.FPM) []compactFPM {
	if fs == nil {
		return nil
	}
	out := make([]compactFPM, len(fs))
	for i, f := range fs {
		out[i] = compactFPM(f)
	}
	return out
}

func expand(cs []compactFPM) []perf.FPM {
	if cs == nil {
		return nil
	}
	out := make([]perf.FPM, len(cs))
	for i, c := range cs {
		out[i] = perf.FPM(c)
	}
	return out
}

// MarshalJSON encodes the observations with compact FPMs.
func (o FPMObservations) MarshalJSON() ([]byte, error) {
	return json.Marshal(fpmObservationsJSON{compact(o.Prefill), compact(o.Decode), compact(o.PrefillSamples), compact(o.DecodeSamples)})
}

// UnmarshalJSON decodes compact or object FPMs.
func (o *FPMObservations) UnmarshalJSON(data []byte) error {
	var j fpmObservationsJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*o = FPMObservations{expand(j.Prefill), expand(j.Decode), expand(j.PrefillSamples), expand(j.DecodeSamples)}
	return nil
}
