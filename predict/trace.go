package predict

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Request is one request of a trace.
type Request struct {
	// Arrival is the arrival time in seconds after the trace's first request.
	Arrival float64
	// InputTokens is the prompt length (ISL).
	InputTokens int
	// OutputTokens is the generated length (OSL).
	OutputTokens int
	// HashIDs are the prompt's block hashes, one per HashBlockTokens tokens of the prompt
	// (the last block may be partial), as Mooncake traces give them: two requests whose
	// first k hash ids are equal share their first k blocks of prompt (a prefix a prefix
	// cache can reuse). Nil for traces without hashes (Azure, BurstGPT, synthetic): no reuse.
	HashIDs []uint64
}

// HashBlockTokens is the number of prompt tokens one hash id covers in the Mooncake traces
// (Dynamo's --trace-block-size default for them).
const HashBlockTokens = 512

// MaxHashIDs bounds the hash ids of one request, whatever its length: 65,536 blocks of 512
// tokens are 32M tokens, far beyond any model's context.
const MaxHashIDs = 1 << 16

// MaxHashIDsFor is the most hash ids a prompt of isl tokens has in blocks of
// HashBlockTokens: one per started block (ISL/512 rounded up, plus one of slack for traces
// that round differently), never more than MaxHashIDs. ReadTrace accepts more (a trace
// hashed in smaller blocks still loads for everything that ignores the hashes); a prefix
// cache, which takes every id for HashBlockTokens tokens, checks it.
func MaxHashIDsFor(isl int) int { return min(isl/HashBlockTokens+1, MaxHashIDs) }

// ErrUnknownTraceFormat is returned (wrapped) by ReadTrace, ReadTraceOf and TraceFormat for
// a file that is neither a Mooncake JSONL trace, an Azure LLM inference CSV trace nor a
// BurstGPT CSV trace.
var ErrUnknownTraceFormat = errors.New("unknown trace format")

// byteOrderMark is UTF-8's, which some tools write at the start of a CSV or JSONL file.
var byteOrderMark = []byte("\ufeff")

// azureHeader is the header of the Azure LLM inference traces (2023).
var azureHeader = []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}

// azureTimeLayout parses "2023-11-16 18:17:03.9799600" (fractional seconds are accepted
// whatever their length; the time is taken as UTC).
const azureTimeLayout = "2006-01-02 15:04:05"

// ReadTrace reads a request trace: Mooncake JSONL (one object a line with `timestamp` in
// ms, `input_length`, `output_length` and optionally `hash_ids`, the prompt's 512-token
// block hashes: non-negative integers below 2^53, at most one per prompt token and
// MaxHashIDs in all (MaxHashIDsFor says whether they fit 512-token blocks); other keys
// ignored), the Azure LLM inference CSV (TIMESTAMP,ContextTokens,GeneratedTokens), or a
// BurstGPT CSV (Timestamp in seconds, Request tokens, Response tokens: readBurstGPT). Files
// ending in .gz are decompressed, and a leading UTF-8 byte-order mark is skipped. The format
// is recognised from the content's first 64 KiB (a JSON object, the Azure header, or a header
// with BurstGPT's columns). Requests are returned in arrival order, with arrival times
// relative to the earliest request. A malformed line is an error naming the file and the
// line; a CSV line is at most 1 MiB, a JSONL one 64 MiB.
func ReadTrace(path string) ([]Request, error) { return ReadTraceOf(path, TraceFilter{}) }

// TraceFilter selects part of a trace's requests (the zero value: all of them).
type TraceFilter struct {
	// Model keeps the requests of one model: a BurstGPT trace's Model column (ChatGPT,
	// GPT-4), compared exactly after trimming spaces. Other formats carry no model, and a
	// filter on one is an error. At most MaxModelName bytes.
	Model string
}

// Label names a trace read with the filter: name, and the model kept (", model GPT-4").
func (f TraceFilter) Label(name string) string {
	if m := strings.TrimSpace(f.Model); m != "" {
		return name + ", model " + m
	}
	return name
}

// MaxModelName bounds a TraceFilter's model name.
const MaxModelName = 256

// CheckModelName reports whether name may be a TraceFilter's model: empty (no filter), or
// not blank and at most MaxModelName bytes once trimmed.
func CheckModelName(name string) error {
	trimmed := strings.TrimSpace(name)
	switch {
	case name != "" && trimmed == "":
		return fmt.Errorf("model name %q is blank", name)
	case len(trimmed) > MaxModelName:
		return fmt.Errorf("model name of %d bytes is too long (at most %d)", len(trimmed), MaxModelName)
	}
	return nil
}

// modelless is the error of a model filter on a trace format without models (nil without one).
func (f TraceFilter) modelless(path, format string) error {
	if f.Model == "" {
		return nil
	}
	return fmt.Errorf("predict: read trace %s: a model filter (%q) needs a BurstGPT trace's Model column; this is %s trace", path, f.Model, format)
}

// noRequestOf is the error of a model filter that selects no request of the trace at path.
func noRequestOf(path, model, why string) error {
	return fmt.Errorf("predict: read trace %s: no request of model %q (%s)", path, model, why)
}

// ReadTraceOf is ReadTrace keeping the requests the filter selects, their arrival times
// relative to the earliest one kept; a filter that selects none is an error naming the
// models the trace has. With a model, the other models' rows are only checked for their
// number of fields.
func ReadTraceOf(path string, filter TraceFilter) ([]Request, error) {
	if err := CheckModelName(filter.Model); err != nil {
		return nil, fmt.Errorf("predict: read trace %s: %w", path, err)
	}
	filter.Model = strings.TrimSpace(filter.Model)
	f, br, format, err := openTrace(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var reqs []Request
	switch format {
	case "":
		if filter.Model != "" {
			return nil, noRequestOf(path, filter.Model, "the trace has no requests")
		}
		return nil, nil
	case FormatMooncake:
		if err = filter.modelless(path, "a Mooncake"); err == nil {
			reqs, err = readMooncake(path, br)
		}
	case FormatAzure:
		if err = filter.modelless(path, "an Azure"); err == nil {
			reqs, err = readAzure(path, br)
		}
	case FormatBurstGPT:
		reqs, err = readBurstGPT(path, br, filter.Model)
	}
	if err != nil {
		return nil, err
	}
	return relative(reqs), nil
}

// The request-trace formats ReadTraceOf reads (TraceFormat).
const (
	FormatMooncake = "Mooncake JSONL"
	FormatAzure    = "Azure CSV"
	FormatBurstGPT = "BurstGPT CSV"
)

// TraceFormat is the format of the request trace at path (FormatMooncake, FormatAzure or
// FormatBurstGPT; "" for an empty file), read from its first 64 KiB as ReadTraceOf reads it,
// without reading the rest: a file of another format is an error wrapping
// ErrUnknownTraceFormat.
func TraceFormat(path string) (string, error) {
	f, _, format, err := openTrace(path)
	if err != nil {
		return "", err
	}
	return format, f.Close()
}

// openTrace opens the trace at path and reads its format from its first 64 KiB (past a
// byte-order mark and leading blanks): the reader is at the start of its text. A format
// ReadTraceOf does not read is an error wrapping ErrUnknownTraceFormat.
func openTrace(path string) (io.Closer, *bufio.Reader, string, error) {
	r, err := openData(path)
	if err != nil {
		return nil, nil, "", fmt.Errorf("predict: read trace: %w", err)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	if bom, _ := br.Peek(len(byteOrderMark)); bytes.Equal(bom, byteOrderMark) {
		_, _ = br.Discard(len(byteOrderMark)) // peeked: it cannot fail
	}
	head, err := br.Peek(br.Size())
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		// Not a short file: a directory, a corrupt gzip stream. Read as empty, it would
		// pass for a trace without requests.
		r.Close()
		return nil, nil, "", fmt.Errorf("predict: read trace %s: %w", path, err)
	}
	head = bytes.TrimLeft(head, " \t\r\n")
	switch {
	case len(head) == 0:
		return r, br, "", nil
	case head[0] == '{':
		return r, br, FormatMooncake, nil
	case bytes.HasPrefix(head, []byte(strings.Join(azureHeader, ","))):
		return r, br, FormatAzure, nil
	case burstGPTColumns(head) != nil:
		return r, br, FormatBurstGPT, nil
	}
	r.Close()
	return nil, nil, "", fmt.Errorf("predict: read trace %s: %w (want Mooncake JSONL, an Azure CSV with header %s, or a BurstGPT CSV with the columns %s)",
		path, ErrUnknownTraceFormat, strings.Join(azureHeader, ","), strings.Join(burstGPTHeader, ", "))
}

// openData opens a data file, decompressing it when its name ends in .gz.
func openData(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return gzipFile{gz, f}, nil
}

// gzipFile is a decompressed file: closing it closes both.
type gzipFile struct {
	*gzip.Reader
	f *os.File
}

// Close closes the decompressor and the file.
func (g gzipFile) Close() error { return errors.Join(g.Reader.Close(), g.f.Close()) }

// relative sorts by arrival (stable) and makes arrivals relative to the earliest.
func relative(reqs []Request) []Request {
	if len(reqs) == 0 {
		return reqs
	}
	slices.SortStableFunc(reqs, func(a, b Request) int {
		switch {
		case a.Arrival < b.Arrival:
			return -1
		case a.Arrival > b.Arrival:
			return 1
		}
		return 0
	})
	t0 := reqs[0].Arrival
	for i := range reqs {
		reqs[i].Arrival -= t0
	}
	return reqs
}

type mooncakeLine struct {
	Timestamp    *float64  `json:"timestamp"`
	InputLength  *float64  `json:"input_length"`
	OutputLength *float64  `json:"output_length"`
	HashIDs      []float64 `json:"hash_ids"`
}

func readMooncake(path string, r *bufio.Reader) ([]Request, error) {
	var reqs []Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var m mooncakeLine
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("predict: %s:%d: %w", path, line, err)
		}
		switch {
		case m.Timestamp == nil || m.InputLength == nil || m.OutputLength == nil:
			return nil, fmt.Errorf("predict: %s:%d: need timestamp, input_length and output_length", path, line)
		case !finite(*m.Timestamp):
			return nil, fmt.Errorf("predict: %s:%d: timestamp is not finite", path, line)
		}
		in, err := tokenCount(*m.InputLength)
		if err != nil {
			return nil, fmt.Errorf("predict: %s:%d: input_length: %w", path, line, err)
		}
		out, err := tokenCount(*m.OutputLength)
		if err != nil {
			return nil, fmt.Errorf("predict: %s:%d: output_length: %w", path, line, err)
		}
		hashes, err := hashIDs(m.HashIDs, in)
		if err != nil {
			return nil, fmt.Errorf("predict: %s:%d: hash_ids: %w", path, line, err)
		}
		reqs = append(reqs, Request{Arrival: *m.Timestamp / 1000, InputTokens: in, OutputTokens: out, HashIDs: hashes})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("predict: %s:%d: %w", path, line+1, err)
	}
	return reqs, nil
}

// hashIDs checks a request's hash ids: non-negative integers (exact in a float64), at most
// MaxHashIDs of them and at most one per prompt token. None is nil.
func hashIDs(v []float64, isl int) ([]uint64, error) {
	if len(v) == 0 {
		return nil, nil
	}
	if n := min(max(isl, 1), MaxHashIDs); len(v) > n {
		return nil, fmt.Errorf("%d hash ids for input_length %d: at most %d (one per prompt token at most, and at most %d)",
			len(v), isl, n, MaxHashIDs)
	}
	out := make([]uint64, len(v))
	for i, h := range v {
		if !(h >= 0) || h != math.Trunc(h) || h >= 1<<53 {
			return nil, fmt.Errorf("hash id %d: %v is not a non-negative integer below 2^53", i, h)
		}
		out[i] = uint64(h)
	}
	return out, nil
}

func tokenCount(v float64) (int, error) {
	if !(v >= 0) || v != math.Trunc(v) || v > math.MaxInt32 {
		return 0, fmt.Errorf("%v is not a non-negative integer", v)
	}
	return int(v), nil
}

// readAzure reads an Azure LLM inference CSV trace (readCSV; the header checked by
// ReadTrace): one request a row, TIMESTAMP a UTC time (azureTimeLayout), ContextTokens its
// prompt and GeneratedTokens its output length.
func readAzure(path string, r io.Reader) ([]Request, error) {
	var (
		reqs   []Request
		times  []int64
		header = true
	)
	err := readCSV(path, r, func(rec []string) error {
		if header {
			header = false
			return nil
		}
		if len(rec) != len(azureHeader) {
			return fmt.Errorf("want %d fields, got %d", len(azureHeader), len(rec))
		}
		ts, err := time.Parse(azureTimeLayout, strings.TrimSpace(rec[0]))
		if err != nil {
			return fmt.Errorf("TIMESTAMP: %w", err)
		}
		var tokens [2]int
		for i, name := range azureHeader[1:] {
			if tokens[i], err = csvTokens(name, rec[1+i]); err != nil {
				return err
			}
		}
		times = append(times, ts.UnixNano())
		reqs = append(reqs, Request{InputTokens: tokens[0], OutputTokens: tokens[1]})
		return nil
	})
	if err != nil || len(times) == 0 {
		return reqs, err
	}
	t0 := slices.Min(times) // exact integer nanoseconds before converting to seconds
	for i := range reqs {
		reqs[i].Arrival = float64(times[i]-t0) / 1e9
	}
	return reqs, nil
}

// maxCSVLineBytes bounds one line of a CSV trace (their rows are a few dozen bytes).
const maxCSVLineBytes = 1 << 20

// readCSV reads a CSV trace a line at a time — no field of these traces spans lines — each at
// most maxCSVLineBytes, and calls row with each non-blank line's fields, the header's first.
// An error, row's or the CSV's, names the file and the line.
func readCSV(path string, r io.Reader, row func(rec []string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxCSVLineBytes)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var rec []string
		if bytes.IndexByte(b, '"') < 0 {
			rec = strings.Split(string(b), ",")
		} else {
			var err error
			if rec, err = csv.NewReader(bytes.NewReader(b)).Read(); err != nil {
				if pe := (*csv.ParseError)(nil); errors.As(err, &pe) {
					err = pe.Err // its line is the one-line reader's
				}
				return fmt.Errorf("predict: %s:%d: %w", path, line, err)
			}
		}
		if err := row(rec); err != nil {
			return fmt.Errorf("predict: %s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("predict: %s:%d: %w (a line is at most %d bytes)", path, line+1, err, maxCSVLineBytes)
	}
	return nil
}

// csvTokens parses a CSV trace's token count: an integer from 0 to math.MaxInt32 (a float
// notation of one is accepted, as 18.0).
func csvTokens(column, field string) (int, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
	if err == nil {
		var n int
		if n, err = tokenCount(v); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s %q is not an integer from 0 to %d", column, field, math.MaxInt32)
}

// burstGPTHeader are the columns a BurstGPT trace must have, in any order among others
// (its files: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type).
var burstGPTHeader = []string{"Timestamp", "Request tokens", "Response tokens"}

// maxBurstGPTSeconds bounds a BurstGPT timestamp: its published files span four months;
// ten years is far past any trace.
const maxBurstGPTSeconds = 10 * 365 * 86400

// burstGPTColumns finds the BurstGPT columns (burstGPTHeader) in the CSV header that begins
// the file's head, and returns their indices; nil when it is not one.
func burstGPTColumns(head []byte) []int {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	rec, err := csv.NewReader(bytes.NewReader(bytes.TrimRight(line, "\r"))).Read()
	if err != nil {
		return nil
	}
	return burstGPTIndices(rec)
}

// burstGPTIndices are the indices of the BurstGPT columns (burstGPTHeader) among a header's
// fields; nil when one is missing.
func burstGPTIndices(header []string) []int {
	idx := make([]int, len(burstGPTHeader))
	for i, name := range burstGPTHeader {
		idx[i] = slices.IndexFunc(header, func(f string) bool { return strings.TrimSpace(f) == name })
		if idx[i] < 0 {
			return nil
		}
	}
	return idx
}

// readBurstGPT reads a BurstGPT trace (HPMLL/BurstGPT: Azure OpenAI GPT requests): a CSV whose
// header names Timestamp (seconds from the trace's start), Request tokens and Response
// tokens; other columns (Total tokens, Log Type) are ignored. With a model, only the rows
// whose Model column is it are kept (the file must have that column, and some row must match);
// without one, every model's requests are read. Failed requests, whose Response tokens are 0,
// are read as requests of no output (filter the file to leave them out).
func readBurstGPT(path string, r io.Reader, model string) ([]Request, error) {
	var (
		reqs     []Request
		cols     []int
		modelCol = -1
		seen     []string // the models of the rows left out, the first maxModelsNamed
		more     bool     // there were others
	)
	const maxModelsNamed, maxModelNamedBytes = 10, 64
	err := readCSV(path, r, func(rec []string) error {
		if cols == nil {
			if cols = burstGPTIndices(rec); cols == nil {
				return fmt.Errorf("want the columns %s", strings.Join(burstGPTHeader, ", "))
			}
			if model != "" {
				if modelCol = slices.IndexFunc(rec, func(f string) bool { return strings.TrimSpace(f) == "Model" }); modelCol < 0 {
					return fmt.Errorf("a model filter (%q) needs a Model column; the header has none", model)
				}
			}
			return nil
		}
		if n := max(slices.Max(cols), modelCol) + 1; len(rec) < n {
			return fmt.Errorf("want at least %d fields, got %d", n, len(rec))
		}
		if modelCol >= 0 {
			if m := strings.TrimSpace(rec[modelCol]); m != model {
				switch {
				case slices.Contains(seen, m):
				case len(seen) < maxModelsNamed:
					seen = append(seen, m)
				default:
					more = true
				}
				return nil
			}
		}
		ts, err := strconv.ParseFloat(strings.TrimSpace(rec[cols[0]]), 64)
		if err != nil || !(ts >= 0) || ts > maxBurstGPTSeconds {
			return fmt.Errorf("%s %q is not a number of seconds from 0 to %d", burstGPTHeader[0], rec[cols[0]], maxBurstGPTSeconds)
		}
		var tokens [2]int
		for i, c := range cols[1:] {
			if tokens[i], err = csvTokens(burstGPTHeader[1+i], rec[c]); err != nil {
				return err
			}
		}
		reqs = append(reqs, Request{Arrival: ts, InputTokens: tokens[0], OutputTokens: tokens[1]})
		return nil
	})
	if err == nil && model != "" && len(reqs) == 0 {
		if len(seen) == 0 {
			return nil, noRequestOf(path, model, "the trace has no requests")
		}
		named := make([]string, len(seen))
		for i, m := range seen {
			if len(m) > maxModelNamedBytes {
				m = strings.ToValidUTF8(m[:maxModelNamedBytes], "") + "…"
			}
			named[i] = strconv.Quote(m)
		}
		if more {
			named = append(named, "…")
		}
		return nil, noRequestOf(path, model, "its models: "+strings.Join(named, ", "))
	}
	return reqs, err
}

// Window is one throughput interval of a bucketed trace.
type Window struct {
	// Start is the window start in seconds (a multiple of the interval).
	Start float64
	// Count is the number of requests that arrived in [Start, Start+interval).
	Count int
	// AvgISL and AvgOSL are the mean input and output lengths, 0 for an empty window.
	AvgISL float64
	AvgOSL float64
}

// Bucket groups requests into consecutive windows of intervalSeconds, from the window of the
// earliest request to that of the latest; empty windows are kept as zero rows so the series
// is continuous (Dynamo trace_data). It returns nil for no requests or a non-positive
// interval.
func Bucket(reqs []Request, intervalSeconds float64) []Window {
	if len(reqs) == 0 || !(intervalSeconds > 0) || math.IsInf(intervalSeconds, 0) {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range reqs {
		lo, hi = math.Min(lo, r.Arrival), math.Max(hi, r.Arrival)
	}
	first := math.Floor(lo / intervalSeconds)
	n := int(math.Floor(hi/intervalSeconds)-first) + 1
	wins := make([]Window, n)
	sumISL := make([]float64, n)
	sumOSL := make([]float64, n)
	for i := range wins {
		wins[i].Start = (first + float64(i)) * intervalSeconds
	}
	for _, r := range reqs {
		i := int(math.Floor(r.Arrival/intervalSeconds) - first)
		wins[i].Count++
		sumISL[i] += float64(r.InputTokens)
		sumOSL[i] += float64(r.OutputTokens)
	}
	for i := range wins {
		if c := wins[i].Count; c > 0 {
			wins[i].AvgISL = sumISL[i] / float64(c)
			wins[i].AvgOSL = sumOSL[i] / float64(c)
		}
	}
	return wins
}

// Warmup feeds bucketed windows to the three predictors of the throughput loop (any may be
// nil) and then calls ResetIdleSkip on each, so live leading zeros are skipped again. As in
// the live loop (Dynamo's idle normalisation), an empty window adds a zero request count and
// carries the last known ISL and OSL instead of adding zeros.
func Warmup(numReq, isl, osl Predictor, windows []Window) {
	for _, w := range windows {
		if numReq != nil {
			numReq.Add(float64(w.Count))
		}
		if isl != nil {
			if w.Count > 0 {
				isl.Add(w.AvgISL)
			} else {
				isl.Add(isl.LastValue())
			}
		}
		if osl != nil {
			if w.Count > 0 {
				osl.Add(w.AvgOSL)
			} else {
				osl.Add(osl.LastValue())
			}
		}
	}
	for _, p := range []Predictor{numReq, isl, osl} {
		if p != nil {
			p.ResetIdleSkip()
		}
	}
}

// RateSeries is one model's request-rate series from the ServeGen aggregate CSV.
type RateSeries struct {
	// Category and Model identify the series ("language", "m-large").
	Category, Model string
	// StepSeconds is the window length (600 s in the published data).
	StepSeconds float64
	// Counts are requests per window (total_rate_rps × window length), in time order.
	Counts []float64
}

// csvWithColumns reads a CSV's header: the reader, positioned at the first row (records
// reused), and each column's index; a missing column in need is an error naming the file.
func csvWithColumns(path string, r io.Reader, need ...string) (*csv.Reader, map[string]int, error) {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<16))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("predict: %s:1: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, nil, fmt.Errorf("predict: %s:1: missing column %q", path, n)
		}
	}
	return cr, col, nil
}

// ReadServeGenAggregate reads servegen_aggregate_10min.csv (columns category, model,
// timestamp_s, total_rate_rps, ...; .gz: decompressed): one series per (category, model), in
// order of first appearance, windows of 600 s. Missing windows inside a series are an error.
func ReadServeGenAggregate(path string) ([]RateSeries, error) {
	const step = 600.0
	f, err := openData(path)
	if err != nil {
		return nil, fmt.Errorf("predict: read servegen aggregate: %w", err)
	}
	defer f.Close()
	cr, col, err := csvWithColumns(path, f, "category", "model", "timestamp_s", "total_rate_rps")
	if err != nil {
		return nil, err
	}
	var out []RateSeries
	index := map[[2]string]int{}
	last := map[[2]string]float64{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("predict: %s:%d: %w", path, line, err)
		}
		key := [2]string{rec[col["category"]], rec[col["model"]]}
		ts, err1 := strconv.ParseFloat(rec[col["timestamp_s"]], 64)
		rate, err2 := strconv.ParseFloat(rec[col["total_rate_rps"]], 64)
		if err1 != nil || err2 != nil || !finite(ts) || !finite(rate) || rate < 0 {
			return nil, fmt.Errorf("predict: %s:%d: bad timestamp_s %q or total_rate_rps %q", path, line, rec[col["timestamp_s"]], rec[col["total_rate_rps"]])
		}
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, RateSeries{Category: key[0], Model: key[1], StepSeconds: step})
		} else if ts != last[key]+step {
			return nil, fmt.Errorf("predict: %s:%d: %s/%s jumps from %v s to %v s (want windows of %v s)", path, line, key[0], key[1], last[key], ts, step)
		}
		last[key] = ts
		out[i].Counts = append(out[i].Counts, rate*step)
	}
	return out, nil
}
