package observe

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"

	"github.com/llmplanner/planner/perf"
)

// ErrMalformedFPM is wrapped by every error DecodeFPM returns: the payload is not a valid
// Forward Pass Metrics message (wrong type, truncated, trailing bytes, negative count,
// non-finite time). A malformed message is dropped; it is never read as zero load.
var ErrMalformedFPM = errors.New("malformed forward pass metrics")

// Top-level field indexes, in Dynamo's declaration order (reference §8.1). The positional
// (array) form uses the same order.
const (
	fVersion = iota
	fWorkerID
	fDPRank
	fCounterID
	fWallTime
	fScheduled
	fQueued
	numTopFields
)

// Field indexes of ScheduledRequestMetrics.
const (
	sNumPrefill = iota
	sSumPrefillTokens
	sVarPrefillLength
	sSumPrefillKV
	sNumDecode
	sSumDecodeKV
	sVarDecodeKV
	numScheduledFields
)

// Field indexes of QueuedRequestMetrics.
const (
	qNumPrefill = iota
	qSumPrefillTokens
	qVarPrefillLength
	qNumDecode
	qSumDecodeKV
	qVarDecodeKV
	numQueuedFields
)

// internFunc returns a canonical string equal to b, if one is known, without allocating.
type internFunc func(b []byte) (string, bool)

// DecodeFPM decodes one msgpack Forward Pass Metrics payload into dst, which is reset first.
//
// It accepts msgspec's map form (string keys, nested maps) and the positional array form
// (same field order, nested arrays; short arrays leave defaults, extra trailing elements are
// ignored). Unknown keys are skipped, missing keys take defaults (a message without
// "version" is a legacy v0 message), ints may use any msgpack int width and float fields
// also accept ints, and nil for a nested struct means defaults. Anything else — wrong types,
// truncated data, trailing bytes, negative ints or variances, NaN/Inf or negative
// wall_time — returns an error wrapping ErrMalformedFPM and leaves dst zeroed.
//
// DecodeFPM does not allocate when dst.WorkerID already equals the payload's worker_id, so
// decoding a stream into one reusable perf.FPM per worker allocates nothing.
func DecodeFPM(data []byte, dst *perf.FPM) error {
	return decodeFPM(data, dst, nil)
}

func decodeFPM(data []byte, dst *perf.FPM, intern internFunc) error {
	old := dst.WorkerID
	*dst = perf.FPM{}
	rest, err := decodeTop(data, dst, old, intern)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d trailing bytes after the message", ErrMalformedFPM, len(rest))
	}
	if err != nil {
		*dst = perf.FPM{}
		return err
	}
	return nil
}

func decodeTop(b []byte, dst *perf.FPM, oldID string, intern internFunc) ([]byte, error) {
	switch msgp.NextType(b) {
	case msgp.MapType:
		n, b, err := msgp.ReadMapHeaderBytes(b)
		if err != nil {
			return nil, malformed("message map header", err)
		}
		for range n {
			var key []byte
			if key, b, err = readKey(b); err != nil {
				return nil, err
			}
			idx := topIndex(key)
			if idx < 0 {
				if b, err = msgp.Skip(b); err != nil {
					return nil, malformed("value of unknown key", err)
				}
				continue
			}
			if b, err = setTop(idx, b, dst, oldID, intern); err != nil {
				return nil, err
			}
		}
		return b, nil
	case msgp.ArrayType:
		n, b, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return nil, malformed("message array header", err)
		}
		for i := range int(n) {
			if i >= numTopFields {
				if b, err = msgp.Skip(b); err != nil {
					return nil, malformed("extra array element", err)
				}
				continue
			}
			if b, err = setTop(i, b, dst, oldID, intern); err != nil {
				return nil, err
			}
		}
		return b, nil
	case msgp.InvalidType:
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: empty payload", ErrMalformedFPM)
		}
		return nil, fmt.Errorf("%w: invalid msgpack prefix 0x%02x", ErrMalformedFPM, b[0])
	default:
		return nil, fmt.Errorf("%w: message is a msgpack %s, want a map or an array", ErrMalformedFPM, msgp.NextType(b))
	}
}

func readKey(b []byte) ([]byte, []byte, error) {
	if msgp.NextType(b) != msgp.StrType {
		return nil, nil, typeErr(b, "map key", "a string")
	}
	key, rest, err := msgp.ReadStringZC(b)
	if err != nil {
		return nil, nil, malformed("map key", err)
	}
	return key, rest, nil
}

func topIndex(key []byte) int {
	switch string(key) {
	case "version":
		return fVersion
	case "worker_id":
		return fWorkerID
	case "dp_rank":
		return fDPRank
	case "counter_id":
		return fCounterID
	case "wall_time":
		return fWallTime
	case "scheduled_requests":
		return fScheduled
	case "queued_requests":
		return fQueued
	}
	return -1
}

func setTop(idx int, b []byte, dst *perf.FPM, oldID string, intern internFunc) ([]byte, error) {
	var err error
	switch idx {
	case fVersion:
		dst.Version, b, err = readCount(b, "version")
	case fWorkerID:
		dst.WorkerID, b, err = readWorkerID(b, oldID, intern)
	case fDPRank:
		dst.DPRank, b, err = readCount(b, "dp_rank")
	case fCounterID:
		dst.CounterID, b, err = readCount(b, "counter_id")
	case fWallTime:
		dst.WallTime, b, err = readNonNegFloat(b, "wall_time")
	case fScheduled:
		b, err = decodeNested(b, fScheduled, dst)
	case fQueued:
		b, err = decodeNested(b, fQueued, dst)
	}
	return b, err
}

// nestedField describes the nested struct of top-level field which (fScheduled or fQueued).
func nestedField(which int) (name string, nfields int) {
	if which == fScheduled {
		return "scheduled_requests", numScheduledFields
	}
	return "queued_requests", numQueuedFields
}

// nestedIndex maps a key of nested struct which to its field index, -1 if unknown.
func nestedIndex(which int, key []byte) int {
	if which == fScheduled {
		return scheduledIndex(key)
	}
	return queuedIndex(key)
}

// setNested decodes field idx of nested struct which into dst.
func setNested(which, idx int, b []byte, dst *perf.FPM) ([]byte, error) {
	if which == fScheduled {
		return setScheduled(idx, b, &dst.Scheduled)
	}
	return setQueued(idx, b, &dst.Queued)
}

// decodeNested decodes the nested struct of top-level field which in map, array or nil form.
func decodeNested(b []byte, which int, dst *perf.FPM) ([]byte, error) {
	name, nfields := nestedField(which)
	switch msgp.NextType(b) {
	case msgp.NilType:
		return b[1:], nil
	case msgp.MapType:
		n, b, err := msgp.ReadMapHeaderBytes(b)
		if err != nil {
			return nil, malformed(name, err)
		}
		for range n {
			var key []byte
			if key, b, err = readKey(b); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			idx := nestedIndex(which, key)
			if idx < 0 {
				if b, err = msgp.Skip(b); err != nil {
					return nil, malformed(name+": value of unknown key", err)
				}
				continue
			}
			if b, err = setNested(which, idx, b, dst); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		return b, nil
	case msgp.ArrayType:
		n, b, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return nil, malformed(name, err)
		}
		for i := range int(n) {
			if i >= nfields {
				if b, err = msgp.Skip(b); err != nil {
					return nil, malformed(name+": extra array element", err)
				}
				continue
			}
			if b, err = setNested(which, i, b, dst); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%w: %s is a msgpack %s, want a map, an array or nil",
			ErrMalformedFPM, name, msgp.NextType(b))
	}
}

func scheduledIndex(key []byte) int {
	switch string(key) {
	case "num_prefill_requests":
		return sNumPrefill
	case "sum_prefill_tokens":
		return sSumPrefillTokens
	case "var_prefill_length":
		return sVarPrefillLength
	case "sum_prefill_kv_tokens":
		return sSumPrefillKV
	case "num_decode_requests":
		return sNumDecode
	case "sum_decode_kv_tokens":
		return sSumDecodeKV
	case "var_decode_kv_tokens":
		return sVarDecodeKV
	}
	return -1
}

func setScheduled(idx int, b []byte, s *perf.ScheduledRequests) ([]byte, error) {
	var err error
	switch idx {
	case sNumPrefill:
		s.NumPrefillRequests, b, err = readCount(b, "num_prefill_requests")
	case sSumPrefillTokens:
		s.SumPrefillTokens, b, err = readCount(b, "sum_prefill_tokens")
	case sVarPrefillLength:
		s.VarPrefillLength, b, err = readNonNegFloat(b, "var_prefill_length")
	case sSumPrefillKV:
		s.SumPrefillKVTokens, b, err = readCount(b, "sum_prefill_kv_tokens")
	case sNumDecode:
		s.NumDecodeRequests, b, err = readCount(b, "num_decode_requests")
	case sSumDecodeKV:
		s.SumDecodeKVTokens, b, err = readCount(b, "sum_decode_kv_tokens")
	case sVarDecodeKV:
		s.VarDecodeKVTokens, b, err = readNonNegFloat(b, "var_decode_kv_tokens")
	}
	return b, err
}

func queuedIndex(key []byte) int {
	switch string(key) {
	case "num_prefill_requests":
		return qNumPrefill
	case "sum_prefill_tokens":
		return qSumPrefillTokens
	case "var_prefill_length":
		return qVarPrefillLength
	case "num_decode_requests":
		return qNumDecode
	case "sum_decode_kv_tokens":
		return qSumDecodeKV
	case "var_decode_kv_tokens":
		return qVarDecodeKV
	}
	return -1
}

func setQueued(idx int, b []byte, q *perf.QueuedRequests) ([]byte, error) {
	var err error
	switch idx {
	case qNumPrefill:
		q.NumPrefillRequests, b, err = readCount(b, "num_prefill_requests")
	case qSumPrefillTokens:
		q.SumPrefillTokens, b, err = readCount(b, "sum_prefill_tokens")
	case qVarPrefillLength:
		q.VarPrefillLength, b, err = readNonNegFloat(b, "var_prefill_length")
	case qNumDecode:
		q.NumDecodeRequests, b, err = readCount(b, "num_decode_requests")
	case qSumDecodeKV:
		q.SumDecodeKVTokens, b, err = readCount(b, "sum_decode_kv_tokens")
	case qVarDecodeKV:
		q.VarDecodeKVTokens, b, err = readNonNegFloat(b, "var_decode_kv_tokens")
	}
	return b, err
}

// readCount reads a non-negative integer of any msgpack int width.
func readCount(b []byte, name string) (int64, []byte, error) {
	if t := msgp.NextType(b); t != msgp.IntType && t != msgp.UintType {
		return 0, nil, typeErr(b, name, "an integer")
	}
	v, rest, err := msgp.ReadInt64Bytes(b)
	if err != nil {
		return 0, nil, malformed(name, err)
	}
	if v < 0 {
		return 0, nil, fmt.Errorf("%w: %s is negative (%d)", ErrMalformedFPM, name, v)
	}
	return v, rest, nil
}

// readNonNegFloat reads a finite, non-negative float (float32, float64 or an int).
func readNonNegFloat(b []byte, name string) (float64, []byte, error) {
	var (
		v    float64
		rest []byte
		err  error
	)
	switch msgp.NextType(b) {
	case msgp.Float64Type, msgp.Float32Type:
		v, rest, err = msgp.ReadFloat64Bytes(b)
	case msgp.IntType, msgp.UintType:
		var i int64
		i, rest, err = msgp.ReadInt64Bytes(b)
		v = float64(i)
	default:
		return 0, nil, typeErr(b, name, "a number")
	}
	if err != nil {
		return 0, nil, malformed(name, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, nil, fmt.Errorf("%w: %s is %v, want a finite non-negative number", ErrMalformedFPM, name, v)
	}
	return v, rest, nil
}

// readWorkerID reads the worker_id string, reusing old (or an interned copy) when the bytes
// are equal, so the steady state does not allocate.
func readWorkerID(b []byte, old string, intern internFunc) (string, []byte, error) {
	if msgp.NextType(b) != msgp.StrType {
		return "", nil, typeErr(b, "worker_id", "a string")
	}
	v, rest, err := msgp.ReadStringZC(b)
	if err != nil {
		return "", nil, malformed("worker_id", err)
	}
	if string(v) == old {
		return old, rest, nil
	}
	if !utf8.Valid(v) {
		return "", nil, fmt.Errorf("%w: worker_id is not valid UTF-8", ErrMalformedFPM)
	}
	if intern != nil {
		if s, ok := intern(v); ok {
			return s, rest, nil
		}
	}
	return string(v), rest, nil
}

func typeErr(b []byte, name, want string) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: %s: message truncated", ErrMalformedFPM, name)
	}
	return fmt.Errorf("%w: %s is a msgpack %s, want %s", ErrMalformedFPM, name, msgp.NextType(b), want)
}

func malformed(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrMalformedFPM, what, err)
}

// AppendFPM appends f to dst in the map form msgspec's encoder produces for Dynamo's
// ForwardPassMetrics: string keys in declaration order, nested maps, ints in the smallest
// msgpack int encoding (unsigned forms for non-negative values) and floats as float64.
func AppendFPM(dst []byte, f *perf.FPM) []byte {
	dst = msgp.AppendMapHeader(dst, numTopFields)
	dst = msgp.AppendString(dst, "version")
	dst = appendInt(dst, f.Version)
	dst = msgp.AppendString(dst, "worker_id")
	dst = msgp.AppendString(dst, f.WorkerID)
	dst = msgp.AppendString(dst, "dp_rank")
	dst = appendInt(dst, f.DPRank)
	dst = msgp.AppendString(dst, "counter_id")
	dst = appendInt(dst, f.CounterID)
	dst = msgp.AppendString(dst, "wall_time")
	dst = msgp.AppendFloat64(dst, f.WallTime)

	s := &f.Scheduled
	dst = msgp.AppendString(dst, "scheduled_requests")
	dst = msgp.AppendMapHeader(dst, numScheduledFields)
	dst = msgp.AppendString(dst, "num_prefill_requests")
	dst = appendInt(dst, s.NumPrefillRequests)
	dst = msgp.AppendString(dst, "sum_prefill_tokens")
	dst = appendInt(dst, s.SumPrefillTokens)
	dst = msgp.AppendString(dst, "var_prefill_length")
	dst = msgp.AppendFloat64(dst, s.VarPrefillLength)
	dst = msgp.AppendString(dst, "sum_prefill_kv_tokens")
	dst = appendInt(dst, s.SumPrefillKVTokens)
	dst = msgp.AppendString(dst, "num_decode_requests")
	dst = appendInt(dst, s.NumDecodeRequests)
	dst = msgp.AppendString(dst, "sum_decode_kv_tokens")
	dst = appendInt(dst, s.SumDecodeKVTokens)
	dst = msgp.AppendString(dst, "var_decode_kv_tokens")
	dst = msgp.AppendFloat64(dst, s.VarDecodeKVTokens)

	q := &f.Queued
	dst = msgp.AppendString(dst, "queued_requests")
	dst = msgp.AppendMapHeader(dst, numQueuedFields)
	dst = msgp.AppendString(dst, "num_prefill_requests")
	dst = appendInt(dst, q.NumPrefillRequests)
	dst = msgp.AppendString(dst, "sum_prefill_tokens")
	dst = appendInt(dst, q.SumPrefillTokens)
	dst = msgp.AppendString(dst, "var_prefill_length")
	dst = msgp.AppendFloat64(dst, q.VarPrefillLength)
	dst = msgp.AppendString(dst, "num_decode_requests")
	dst = appendInt(dst, q.NumDecodeRequests)
	dst = msgp.AppendString(dst, "sum_decode_kv_tokens")
	dst = appendInt(dst, q.SumDecodeKVTokens)
	dst = msgp.AppendString(dst, "var_decode_kv_tokens")
	dst = msgp.AppendFloat64(dst, q.VarDecodeKVTokens)
	return dst
}

// appendInt encodes like msgspec: non-negative values as positive fixint/uint8..uint64,
// negative values as negative fixint/int8..int64.
func appendInt(dst []byte, v int64) []byte {
	if v >= 0 {
		return msgp.AppendUint64(dst, uint64(v))
	}
	return msgp.AppendInt64(dst, v)
}
