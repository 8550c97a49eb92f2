package perf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sbinet/npyio/npy"
	"github.com/sbinet/npyio/npz"
)

// ErrNoProfile is returned (wrapped, with the paths tried) by LoadProfile when the directory
// holds neither a prefill nor a decode profile. Its text is the start of Dynamo's message
// for the same situation.
var ErrNoProfile = errors.New("SLA-Planner requires pre-deployment profiling results to run")

// ErrInvalidProfile is the error every *ArrayError unwraps to: a profile file was read but
// one of its arrays is missing, malformed or out of range.
var ErrInvalidProfile = errors.New("invalid profile")

// ArrayError reports a problem with one array (or a pair of arrays) of a profile. It
// unwraps to ErrInvalidProfile.
type ArrayError struct {
	// File is the profile file the arrays came from; empty when an in-memory profile was
	// validated.
	File string
	// Arrays names the arrays concerned, with Dynamo's names (e.g. "prefill_ttft").
	Arrays []string
	// Reason says what is wrong, e.g. "value 3 is NaN".
	Reason string
}

// Error implements error: `perf: <file>: array "<name>": <reason>`.
func (e *ArrayError) Error() string {
	var b strings.Builder
	b.WriteString("perf: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if len(e.Arrays) == 1 {
		b.WriteString("array ")
	} else {
		b.WriteString("arrays ")
	}
	for i, a := range e.Arrays {
		switch {
		case i == 0:
		case i == len(e.Arrays)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(a))
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns ErrInvalidProfile.
func (e *ArrayError) Unwrap() error { return ErrInvalidProfile }

// Array names in the profile files, as Dynamo's profiler writes them.
const (
	arrPrefillISL    = "prefill_isl"
	arrPrefillTTFT   = "prefill_ttft"
	arrPrefillThpt   = "prefill_thpt_per_gpu"
	arrKVUsage       = "x_kv_usage"
	arrContextLength = "y_context_length"
	arrITL           = "z_itl"
	arrDecodeThpt    = "z_thpt_per_gpu"
	arrMaxKVTokens   = "max_kv_tokens"
	arrEncodeRate    = "encode_request_rate"
	arrEncodeThpt    = "encode_thpt_per_gpu"
)

// minPrefillPoints is the number of points a cubic spline needs (scipy's interp1d).
const minPrefillPoints = 4

// MaxProfilePoints bounds the points of a profile's prefill or decode part. Dynamo's profiler
// measures tens to a few hundred; the decode surface's triangulation is built whenever the
// planner's configuration changes, in workflow code, and must stay well under a second.
const MaxProfilePoints = 1024

// PrefillProfile is the prefill part of a pre-deployment profile: TTFT and throughput
// measured at a few input lengths (Dynamo's selected_prefill_interpolation/raw_data.npz).
// The points need not be sorted; the interpolator sorts them by ISL.
type PrefillProfile struct {
	// ISL holds the input sequence lengths in tokens (prefill_isl).
	ISL []float64
	// TTFTMs holds the time to first token at each ISL, in milliseconds (prefill_ttft).
	TTFTMs []float64
	// ThroughputPerGPU holds the prefill throughput at each ISL, in prompt tokens per second
	// per GPU (prefill_thpt_per_gpu).
	ThroughputPerGPU []float64
}

// DecodeProfile is the decode part of a pre-deployment profile: ITL and throughput measured
// at scattered (KV usage, context length) points (Dynamo's
// selected_decode_interpolation/raw_data.npz). The points are not a grid.
type DecodeProfile struct {
	// KVUsage holds the active KV-cache usage of each point, as a fraction in [0, 1] of
	// MaxKVTokens (x_kv_usage).
	KVUsage []float64
	// ContextLength holds the context length of each point in tokens (y_context_length).
	ContextLength []float64
	// ITLMs holds the inter-token latency at each point in milliseconds (z_itl).
	ITLMs []float64
	// ThroughputPerGPU holds the decode throughput at each point in output tokens per second
	// per GPU (z_thpt_per_gpu).
	ThroughputPerGPU []float64
	// MaxKVTokens is the KV-cache capacity of one engine in tokens (max_kv_tokens).
	MaxKVTokens int64
}

// EncodeProfile is the multimodal encoder part of a profile (Dynamo's
// selected_encode_interpolation/raw_data.npz or encode_raw_data.json): sustainable encoder
// throughput against request rate.
type EncodeProfile struct {
	// RequestRate holds the request rates sampled, in requests per second
	// (encode_request_rate).
	RequestRate []float64
	// ThroughputPerGPU holds the encoder throughput per GPU at each rate
	// (encode_thpt_per_gpu).
	ThroughputPerGPU []float64
}

// Profile is a pre-deployment profile as read from a directory. At least one of Prefill and
// Decode is set; Encode is optional.
type Profile struct {
	// Dir is the directory the profile was read from.
	Dir string
	// Prefill is the prefill profile, nil if the directory has none.
	Prefill *PrefillProfile
	// Decode is the decode profile, nil if the directory has none.
	Decode *DecodeProfile
	// Encode is the encoder profile, nil if the directory has none.
	Encode *EncodeProfile
	// PrefillFile, DecodeFile and EncodeFile are the files each part was read from ("" when
	// the part is absent).
	PrefillFile, DecodeFile, EncodeFile string
}

// ProfileFiles returns the files LoadProfile tries, in order, for one kind of profile
// ("prefill", "decode" or "encode") in dir: Dynamo's profiler layout
// (selected_<kind>_interpolation/raw_data.npz), this repository's bundled layout
// (<kind>_raw_data.npz) and Dynamo's JSON fallback (<kind>_raw_data.json).
func ProfileFiles(dir, kind string) []string {
	return []string{
		filepath.Join(dir, "selected_"+kind+"_interpolation", "raw_data.npz"),
		filepath.Join(dir, kind+"_raw_data.npz"),
		filepath.Join(dir, kind+"_raw_data.json"),
	}
}

// LoadProfile reads the pre-deployment profile in dir. For each of prefill, decode and
// encode it reads the first file of ProfileFiles that exists (a file that exists but cannot
// be read is an error; there is no fall-through to the next one, as in Dynamo) and
// validates it. NPZ arrays may be of any integer or floating-point dtype; max_kv_tokens
// may be a scalar or a one-element array in both NPZ and JSON. JSON files may use Python's
// NaN and Infinity literals (they are then reported as non-finite values).
//
// A directory with neither a prefill nor a decode profile is an error wrapping
// ErrNoProfile and listing the paths tried. Every problem with the contents is an
// *ArrayError naming the file and the array; several are joined with errors.Join.
func LoadProfile(dir string) (*Profile, error) {
	p := &Profile{Dir: dir}
	var tried []string
	for _, kind := range []string{"prefill", "decode", "encode"} {
		file, candidates, err := findProfileFile(dir, kind)
		if err != nil {
			return nil, err
		}
		if kind != "encode" {
			tried = append(tried, candidates...)
		}
		if file == "" {
			continue
		}
		switch kind {
		case "prefill":
			p.Prefill, err = readPrefill(file)
			p.PrefillFile = file
		case "decode":
			p.Decode, err = readDecode(file)
			p.DecodeFile = file
		case "encode":
			p.Encode, err = readEncode(file)
			p.EncodeFile = file
		}
		if err != nil {
			return nil, err
		}
	}
	if p.Prefill == nil && p.Decode == nil {
		return nil, fmt.Errorf("%w: no prefill or decode profile in %s (tried %s)",
			ErrNoProfile, dir, strings.Join(tried, ", "))
	}
	return p, nil
}

// findProfileFile returns the first existing candidate file for kind ("" if none) and the
// candidates.
func findProfileFile(dir, kind string) (string, []string, error) {
	candidates := ProfileFiles(dir, kind)
	for _, f := range candidates {
		_, err := os.Stat(f)
		switch {
		case err == nil:
			return f, candidates, nil
		case errors.Is(err, fs.ErrNotExist):
			continue
		default:
			return "", candidates, fmt.Errorf("perf: %s profile: %w", kind, err)
		}
	}
	return "", candidates, nil
}

func readPrefill(file string) (*PrefillProfile, error) {
	arrs, err := readArrays(file, []string{arrPrefillISL, arrPrefillTTFT, arrPrefillThpt})
	if err != nil {
		return nil, err
	}
	var p PrefillProfile
	var errs []*ArrayError
	p.ISL, errs = arrs.vector(arrPrefillISL, errs)
	p.TTFTMs, errs = arrs.vector(arrPrefillTTFT, errs)
	p.ThroughputPerGPU, errs = arrs.vector(arrPrefillThpt, errs)
	if len(errs) == 0 {
		errs = p.validate()
	}
	return &p, joinArrayErrors(file, errs)
}

func readDecode(file string) (*DecodeProfile, error) {
	arrs, err := readArrays(file, []string{arrKVUsage, arrContextLength, arrITL, arrDecodeThpt, arrMaxKVTokens})
	if err != nil {
		return nil, err
	}
	var d DecodeProfile
	var errs []*ArrayError
	d.KVUsage, errs = arrs.vector(arrKVUsage, errs)
	d.ContextLength, errs = arrs.vector(arrContextLength, errs)
	d.ITLMs, errs = arrs.vector(arrITL, errs)
	d.ThroughputPerGPU, errs = arrs.vector(arrDecodeThpt, errs)
	d.MaxKVTokens, errs = arrs.count(arrMaxKVTokens, errs)
	if len(errs) == 0 {
		errs = d.validate()
	}
	return &d, joinArrayErrors(file, errs)
}

func readEncode(file string) (*EncodeProfile, error) {
	arrs, err := readArrays(file, []string{arrEncodeRate, arrEncodeThpt})
	if err != nil {
		return nil, err
	}
	var e EncodeProfile
	var errs []*ArrayError
	e.RequestRate, errs = arrs.vector(arrEncodeRate, errs)
	e.ThroughputPerGPU, errs = arrs.vector(arrEncodeThpt, errs)
	if len(errs) == 0 {
		errs = e.validate()
	}
	return &e, joinArrayErrors(file, errs)
}

// joinArrayErrors stamps the file on each error and joins them (nil if none).
func joinArrayErrors(file string, errs []*ArrayError) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		e.File = file
		out[i] = e
	}
	return errors.Join(out...)
}

// rawArray is one array of a profile file: values converted to float64 and the shape
// (nil for a scalar).
type rawArray struct {
	values []float64
	shape  []int
}

// arrays maps array names to their contents; a missing name is absent.
type arrays map[string]rawArray

// vector returns the named array, which must be one-dimensional.
func (a arrays) vector(name string, errs []*ArrayError) ([]float64, []*ArrayError) {
	r, ok := a[name]
	switch {
	case !ok:
		return nil, append(errs, &ArrayError{Arrays: []string{name}, Reason: "missing"})
	case len(r.shape) != 1:
		return nil, append(errs, &ArrayError{Arrays: []string{name}, Reason: fmt.Sprintf("has shape %v, want a 1-D array", r.shape)})
	}
	return r.values, errs
}

// count returns the named scalar or one-element array as a positive integer.
func (a arrays) count(name string, errs []*ArrayError) (int64, []*ArrayError) {
	r, ok := a[name]
	switch {
	case !ok:
		return 0, append(errs, &ArrayError{Arrays: []string{name}, Reason: "missing"})
	case len(r.values) != 1 || len(r.shape) > 1:
		return 0, append(errs, &ArrayError{Arrays: []string{name}, Reason: fmt.Sprintf("has shape %v, want a scalar or a 1-element array", r.shape)})
	}
	v := r.values[0]
	if !isFinite(v) || v != math.Trunc(v) || v < 1 || v > 1<<53 {
		return 0, append(errs, &ArrayError{Arrays: []string{name}, Reason: fmt.Sprintf("is %v, want a positive integer", v)})
	}
	return int64(v), errs
}

// readArrays reads the named arrays of an NPZ or JSON file (by extension). Missing names
// are left out of the result; errors are about the file as a whole.
func readArrays(file string, names []string) (arrays, error) {
	if strings.EqualFold(filepath.Ext(file), ".json") {
		return readJSONArrays(file, names)
	}
	return readNPZArrays(file, names)
}

func readNPZArrays(file string, names []string) (arrays, error) {
	r, err := npz.Open(file)
	if err != nil {
		return nil, fmt.Errorf("perf: %s: read NPZ: %w", file, err)
	}
	defer func() { _ = r.Close() }()
	keys := map[string]bool{}
	for _, k := range r.Keys() {
		keys[k] = true
	}
	out := arrays{}
	for _, name := range names {
		key := name + ".npy"
		if !keys[key] {
			continue
		}
		arr, err := readNPYMember(r, key)
		if err != nil {
			return nil, &ArrayError{File: file, Arrays: []string{name}, Reason: err.Error()}
		}
		out[name] = arr
	}
	return out, nil
}

// readNPYMember reads one .npy member of an NPZ archive. The member is read into memory
// first (the npy reader assumes reads are never short) and its size is checked against the
// header, so a truncated member is an error rather than zeros. Malformed headers that
// make the npy package panic are turned into errors.
func readNPYMember(r *npz.Reader, key string) (arr rawArray, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed NPY data: %v", p)
		}
	}()
	rc, err := r.Open(key)
	if err != nil {
		return arr, err
	}
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		return arr, fmt.Errorf("read: %w", err)
	}
	br := bytes.NewReader(data)
	nr, err := npy.NewReader(br)
	if err != nil {
		return arr, fmt.Errorf("read NPY header: %w", err)
	}
	shape := nr.Header.Descr.Shape
	n := 1
	for _, s := range shape {
		n *= s
	}
	dtype := strings.TrimLeft(nr.Header.Descr.Type, "<>|=")
	size := 0
	if len(dtype) == 2 && strings.ContainsRune("fiu", rune(dtype[0])) {
		size = int(dtype[1] - '0')
	}
	var read func(*npy.Reader) ([]float64, error)
	switch dtype {
	case "f8":
		read = readAs[float64]
	case "f4":
		read = readAs[float32]
	case "i8":
		read = readAs[int64]
	case "i4":
		read = readAs[int32]
	case "i2":
		read = readAs[int16]
	case "i1":
		read = readAs[int8]
	case "u8":
		read = readAs[uint64]
	case "u4":
		read = readAs[uint32]
	case "u2":
		read = readAs[uint16]
	case "u1":
		read = readAs[uint8]
	default:
		return arr, fmt.Errorf("has dtype %q, want an integer or floating-point dtype", nr.Header.Descr.Type)
	}
	if br.Len() < n*size {
		return arr, fmt.Errorf("truncated: %d bytes of data for shape %v of %s", br.Len(), shape, nr.Header.Descr.Type)
	}
	vals, err := read(nr)
	if err != nil {
		return arr, fmt.Errorf("read NPY data: %w", err)
	}
	return rawArray{values: vals, shape: shape}, nil
}

// readAs reads a numpy array of element type T and converts it to float64.
func readAs[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64](r *npy.Reader) ([]float64, error) {
	var v []T
	if err := r.Read(&v); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out, nil
}

func readJSONArrays(file string, names []string) (arrays, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("perf: %s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(quotePythonSpecials(data)))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("perf: %s: decode JSON: %w", file, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("perf: %s: decode JSON: unexpected data after the top-level object", file)
	}
	out := arrays{}
	for _, name := range names {
		v, ok := doc[name]
		if !ok {
			continue
		}
		arr, err := jsonArray(v)
		if err != nil {
			return nil, &ArrayError{File: file, Arrays: []string{name}, Reason: err.Error()}
		}
		out[name] = arr
	}
	return out, nil
}

// jsonArray converts a decoded JSON value (a number or a flat list of numbers) to a rawArray.
func jsonArray(v any) (rawArray, error) {
	if list, ok := v.([]any); ok {
		vals := make([]float64, len(list))
		for i, x := range list {
			f, err := jsonNumber(x)
			if err != nil {
				return rawArray{}, fmt.Errorf("value %d %w", i, err)
			}
			vals[i] = f
		}
		return rawArray{values: vals, shape: []int{len(list)}}, nil
	}
	f, err := jsonNumber(v)
	if err != nil {
		return rawArray{}, fmt.Errorf("value %w", err)
	}
	return rawArray{values: []float64{f}}, nil
}

// jsonNumber converts a JSON number, or one of Python's non-finite literals (quoted by
// quotePythonSpecials), to float64.
func jsonNumber(v any) (float64, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, fmt.Errorf("is not a float64: %w", err)
		}
		return f, nil
	case string:
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, fmt.Errorf("is the string %q, want a number", x)
	case nil:
		return 0, errors.New("is null, want a number")
	case []any:
		return 0, errors.New("is a list, want a number (arrays must be 1-D)")
	}
	return 0, fmt.Errorf("is a %T, want a number", v)
}

// quotePythonSpecials rewrites the bare NaN, Infinity and -Infinity tokens that Python's
// json module writes for non-finite floats into JSON strings, so that the standard decoder
// accepts the file and validation can report the value. Text inside strings is untouched.
func quotePythonSpecials(data []byte) []byte {
	var out []byte // allocated on the first rewrite
	inString, escaped := false, false
	specials := [][]byte{[]byte("NaN"), []byte("Infinity"), []byte("-Infinity")}
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			var tok []byte
			for _, s := range specials {
				if bytes.HasPrefix(data[i:], s) {
					tok = s
					break
				}
			}
			if tok != nil {
				if out == nil {
					out = append(make([]byte, 0, len(data)+16), data[:i]...)
				}
				out = append(out, '"')
				out = append(out, tok...)
				out = append(out, '"')
				i += len(tok) - 1
				continue
			}
		}
		switch {
		case !inString:
			inString = c == '"'
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inString = false
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return data
	}
	return out
}

// Validate checks that the prefill profile can be interpolated as Dynamo does: the three
// arrays have the same length, at least 4 points (a cubic spline), finite values, positive
// ISL, TTFT and throughput (the sizing divides by the last two), and unique ISL values (the
// points need not be sorted). Every problem is reported, as *ArrayError values joined
// with errors.Join.
func (p *PrefillProfile) Validate() error {
	if p == nil {
		return errors.New("perf: no prefill profile")
	}
	return joinArrayErrors("", p.validate())
}

func (p *PrefillProfile) validate() []*ArrayError {
	var errs []*ArrayError
	n := len(p.ISL)
	errs = checkLength(errs, arrPrefillISL, n, arrPrefillTTFT, len(p.TTFTMs))
	errs = checkLength(errs, arrPrefillISL, n, arrPrefillThpt, len(p.ThroughputPerGPU))
	if n < minPrefillPoints {
		errs = append(errs, &ArrayError{Arrays: []string{arrPrefillISL}, Reason: fmt.Sprintf("has %d points, want at least %d (cubic spline)", n, minPrefillPoints)})
	}
	if n > MaxProfilePoints {
		errs = append(errs, &ArrayError{Arrays: []string{arrPrefillISL}, Reason: fmt.Sprintf("has %d points, at most %d", n, MaxProfilePoints)})
	}
	errs = checkValues(errs, arrPrefillISL, p.ISL, 0, math.Inf(1), false)
	errs = checkValues(errs, arrPrefillTTFT, p.TTFTMs, 0, math.Inf(1), false)
	errs = checkValues(errs, arrPrefillThpt, p.ThroughputPerGPU, 0, math.Inf(1), false)
	if i, j, ok := findDuplicate(p.ISL, make([]float64, n)); ok && allFinite(p.ISL) {
		errs = append(errs, &ArrayError{Arrays: []string{arrPrefillISL}, Reason: fmt.Sprintf("values %d and %d are both %v, want unique ISLs", i, j, p.ISL[i])})
	}
	return errs
}

// Validate checks that the decode profile can be interpolated as Dynamo does: the four
// arrays have the same length, finite values, KV usage in [0, 1], positive context length
// and ITL (the correction factor divides by the ITL), non-negative throughput (Dynamo's
// sizing treats a non-positive throughput as "minimum replicas"), a positive MaxKVTokens,
// and at least 3 distinct, non-collinear (KV usage, context length) points so they can be
// triangulated. Every problem is reported, as *ArrayError values joined with errors.Join.
func (d *DecodeProfile) Validate() error {
	if d == nil {
		return errors.New("perf: no decode profile")
	}
	return joinArrayErrors("", d.validate())
}

func (d *DecodeProfile) validate() []*ArrayError {
	var errs []*ArrayError
	n := len(d.KVUsage)
	errs = checkLength(errs, arrKVUsage, n, arrContextLength, len(d.ContextLength))
	errs = checkLength(errs, arrKVUsage, n, arrITL, len(d.ITLMs))
	errs = checkLength(errs, arrKVUsage, n, arrDecodeThpt, len(d.ThroughputPerGPU))
	errs = checkValues(errs, arrKVUsage, d.KVUsage, 0, 1, true)
	errs = checkValues(errs, arrContextLength, d.ContextLength, 0, math.Inf(1), false)
	errs = checkValues(errs, arrITL, d.ITLMs, 0, math.Inf(1), false)
	errs = checkValues(errs, arrDecodeThpt, d.ThroughputPerGPU, 0, math.Inf(1), true)
	if d.MaxKVTokens <= 0 {
		errs = append(errs, &ArrayError{Arrays: []string{arrMaxKVTokens}, Reason: fmt.Sprintf("is %d, want > 0", d.MaxKVTokens)})
	}
	if n > MaxProfilePoints {
		errs = append(errs, &ArrayError{Arrays: []string{arrKVUsage}, Reason: fmt.Sprintf("has %d points, at most %d", n, MaxProfilePoints)})
	}
	if len(errs) > 0 {
		return errs // the geometry checks need consistent, finite points
	}
	pair := []string{arrKVUsage, arrContextLength}
	if n < 3 {
		return append(errs, &ArrayError{Arrays: pair, Reason: fmt.Sprintf("have %d points, want at least 3 (triangulation)", n)})
	}
	xs, ys := d.normalisedPoints()
	if i, j, ok := findDuplicate(xs, ys); ok {
		return append(errs, &ArrayError{Arrays: pair, Reason: fmt.Sprintf("points %d and %d are both (%v, %v), want distinct points", i, j, d.KVUsage[i], d.ContextLength[i])})
	}
	for k := 2; k < n; k++ {
		if orient2d(xs[0], ys[0], xs[1], ys[1], xs[k], ys[k]) != 0 {
			return errs
		}
	}
	return append(errs, &ArrayError{Arrays: pair, Reason: fmt.Sprintf("all %d points are collinear, want a 2-D spread (triangulation)", n)})
}

// normalisedPoints returns the decode points in the coordinates the interpolator
// triangulates in: KV usage as is, context length divided by its maximum.
func (d *DecodeProfile) normalisedPoints() (xs, ys []float64) {
	maxCtx := 0.0
	for _, c := range d.ContextLength {
		maxCtx = math.Max(maxCtx, c)
	}
	xs = append([]float64(nil), d.KVUsage...)
	ys = make([]float64, len(d.ContextLength))
	for i, c := range d.ContextLength {
		ys[i] = c / maxCtx
	}
	return xs, ys
}

// Validate checks the encoder profile as Dynamo does: two arrays of the same length, at
// least 2 samples, finite values, non-negative request rates and positive throughput; it
// also rejects duplicate request rates (the interpolator sorts the samples by rate).
func (e *EncodeProfile) Validate() error {
	if e == nil {
		return errors.New("perf: no encode profile")
	}
	return joinArrayErrors("", e.validate())
}

func (e *EncodeProfile) validate() []*ArrayError {
	var errs []*ArrayError
	n := len(e.RequestRate)
	errs = checkLength(errs, arrEncodeRate, n, arrEncodeThpt, len(e.ThroughputPerGPU))
	if n < 2 {
		errs = append(errs, &ArrayError{Arrays: []string{arrEncodeRate}, Reason: fmt.Sprintf("has %d samples, want at least 2", n)})
	}
	errs = checkValues(errs, arrEncodeRate, e.RequestRate, 0, math.Inf(1), true)
	errs = checkValues(errs, arrEncodeThpt, e.ThroughputPerGPU, 0, math.Inf(1), false)
	if i, j, ok := findDuplicate(e.RequestRate, make([]float64, n)); ok && allFinite(e.RequestRate) {
		errs = append(errs, &ArrayError{Arrays: []string{arrEncodeRate}, Reason: fmt.Sprintf("values %d and %d are both %v, want unique rates", i, j, e.RequestRate[i])})
	}
	return errs
}

func allFinite(vals []float64) bool {
	for _, v := range vals {
		if !isFinite(v) {
			return false
		}
	}
	return true
}

// checkLength reports array b whose length differs from that of the reference array a.
func checkLength(errs []*ArrayError, a string, na int, b string, nb int) []*ArrayError {
	if na == nb {
		return errs
	}
	return append(errs, &ArrayError{Arrays: []string{b}, Reason: fmt.Sprintf("has %d values, want %d (the length of %q)", nb, na, a)})
}

// checkValues reports the first value of the array that is non-finite or out of range:
// values must be > lo (>= lo if loInclusive) and <= hi.
func checkValues(errs []*ArrayError, name string, vals []float64, lo, hi float64, loInclusive bool) []*ArrayError {
	for i, v := range vals {
		var reason string
		switch {
		case !isFinite(v):
			reason = fmt.Sprintf("value %d is %v, want a finite number", i, v)
		case loInclusive && v < lo, !loInclusive && v <= lo, v > hi:
			want := "> " + strconv.FormatFloat(lo, 'g', -1, 64)
			if loInclusive {
				want = ">= " + strconv.FormatFloat(lo, 'g', -1, 64)
			}
			if !math.IsInf(hi, 1) {
				want = fmt.Sprintf("in [%v, %v]", lo, hi)
			}
			reason = fmt.Sprintf("value %d is %v, want %s", i, v, want)
		}
		if reason != "" {
			return append(errs, &ArrayError{Arrays: []string{name}, Reason: reason})
		}
	}
	return errs
}
