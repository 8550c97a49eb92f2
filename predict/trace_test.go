package predict

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if filepath.Ext(name) == ".gz" {
		f, err := os.Create(path)
		require.NoError(t, err)
		zw := gzip.NewWriter(f)
		_, err = zw.Write([]byte(content))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, f.Close())
		return path
	}
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

const mooncakeSample = `{"timestamp": 1000, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
{"timestamp": 1000, "input_length": 100, "output_length": 10}

{"timestamp": 250000, "input_length": 300, "output_length": 30, "extra": {"a": 1}}
`

func TestReadTraceMooncake(t *testing.T) {
	want := []Request{
		{Arrival: 0, InputTokens: 6758, OutputTokens: 500, HashIDs: []uint64{0, 1, 2}},
		{Arrival: 0, InputTokens: 100, OutputTokens: 10},
		{Arrival: 249, InputTokens: 300, OutputTokens: 30},
	}
	for _, name := range []string{"t.jsonl", "t.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			got, err := ReadTrace(writeFile(t, name, mooncakeSample))
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

func TestReadTraceByteOrderMark(t *testing.T) {
	got, err := ReadTrace(writeFile(t, "bom.jsonl", "\ufeff"+mooncakeSample))
	require.NoError(t, err)
	require.Len(t, got, 3)
	got, err = ReadTrace(writeFile(t, "bom.csv", "\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,1,2\n"))
	require.NoError(t, err)
	require.Equal(t, []Request{{InputTokens: 1, OutputTokens: 2}}, got)
}

func TestReadTraceAzure(t *testing.T) {
	path := writeFile(t, "azure.csv", `TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:04.0319600,3180,8
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:18:05,100,1
`)
	got, err := ReadTrace(path)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, Request{Arrival: 0, InputTokens: 4808, OutputTokens: 10}, got[0], "sorted, relative to the earliest row")
	require.InDelta(t, 0.052, got[1].Arrival, 1e-9)
	require.InDelta(t, 61.02004, got[2].Arrival, 1e-9)
}

func TestReadTraceBurstGPT(t *testing.T) {
	want := []Request{
		{Arrival: 0, InputTokens: 472, OutputTokens: 18},
		{Arrival: 0.5, InputTokens: 1087, OutputTokens: 0},
		{Arrival: 26, InputTokens: 51, OutputTokens: 313},
	}
	for _, tc := range []struct{ name, file, content string }{
		{"as published", "b.csv", `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
5.5,GPT-4,1087,0,1087,API log
31,ChatGPT,51,313,364,Conversation log
`},
		{"reordered, a byte-order mark, CRLF, gzip", "b.csv.gz", "\ufeffLog Type,Timestamp,Request tokens,Response tokens,Total tokens,Model\r\n" +
			"Conversation log,5,472,18,490,ChatGPT\r\nAPI log,5.5,1087,0,1087,GPT-4\r\nConversation log,31,51,313,364,ChatGPT\r\n"},
		{"quoted, a comma in a quoted field, a blank line", "q.csv", "\ufeff\"Note, first\",\"Timestamp\",\"Request tokens\",\"Response tokens\"\n" +
			"\"a, b\",5,472,18\n\n\"\",5.5,1087,0\n\"c \"\"d\"\"\",31,51,313\n"},
		{"a header past 512 bytes", "w.csv", "Timestamp,Request tokens," + strings.Repeat("x", 600) + ",Response tokens\n5,472,,18\n5.5,1087,,0\n31,51,,313\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadTrace(writeFile(t, tc.file, tc.content))
			require.NoError(t, err)
			require.Equal(t, want, got, "relative to the first request; a failed one (0 response tokens) read as no output")
		})
	}
}

// TestReadTraceOfModel: a model filter keeps one model's BurstGPT rows (their arrivals
// relative to that model's first request); a filter that matches none names the models there
// are; a trace with no Model column, or of a format without models, is an error, not all of
// its requests.
func TestReadTraceOfModel(t *testing.T) {
	published := writeFile(t, "b.csv", `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
5.5,GPT-4,1087,0,1087,API log
31,ChatGPT,51,313,364,Conversation log
40, GPT-4 ,12,7,19,API log
`)
	got, err := ReadTraceOf(published, TraceFilter{Model: "GPT-4"})
	require.NoError(t, err)
	require.Equal(t, []Request{{Arrival: 0, InputTokens: 1087}, {Arrival: 34.5, InputTokens: 12, OutputTokens: 7}}, got)
	got, err = ReadTraceOf(published, TraceFilter{Model: " ChatGPT "})
	require.NoError(t, err)
	require.Equal(t, []Request{{Arrival: 0, InputTokens: 472, OutputTokens: 18}, {Arrival: 26, InputTokens: 51, OutputTokens: 313}}, got)
	all, err := ReadTraceOf(published, TraceFilter{})
	require.NoError(t, err)
	require.Len(t, all, 4, "no filter: every model's requests")

	for _, tc := range []struct {
		name, file, content, model, want string
	}{
		{"no such model", "b.csv", "", "gpt-4", `no request of model "gpt-4" (its models: "ChatGPT", "GPT-4")`},
		{"no Model column", "n.csv", "Timestamp,Request tokens,Response tokens\n1,2,3\n", "GPT-4", `n.csv:1: a model filter ("GPT-4") needs a Model column`},
		{"no requests", "e.csv", "Timestamp,Model,Request tokens,Response tokens\n", "GPT-4", "the trace has no requests"},
		{"a row without its model", "s.csv", "Timestamp,Request tokens,Response tokens,Model\n1,2,3\n", "GPT-4", "s.csv:2: want at least 4 fields, got 3"},
		{"Azure", "a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,1,2\n", "GPT-4", "needs a BurstGPT trace's Model column; this is an Azure trace"},
		{"Mooncake", "m.jsonl", `{"timestamp": 1, "input_length": 2, "output_length": 3}` + "\n", "GPT-4", "this is a Mooncake trace"},
		{"an absurd name", "b.csv", "", strings.Repeat("x", MaxModelName+1), "model name of 257 bytes is too long (at most 256)"},
		{"a blank name: not every model", "b.csv", "", "  ", `model name "  " is blank`},
		{"an empty file", "z.csv", " \n", "GPT-4", `no request of model "GPT-4" (the trace has no requests)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := published
			if tc.content != "" {
				path = writeFile(t, tc.file, tc.content)
			}
			_, err := ReadTraceOf(path, TraceFilter{Model: tc.model})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestReadTraceOfModel_NamesBounded: the error for a model no row has names at most ten of
// the others, each cut to 64 bytes.
func TestReadTraceOfModel_NamesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("Timestamp,Model,Request tokens,Response tokens\n")
	for i := range 12 {
		fmt.Fprintf(&b, "%d,%s%02d,1,1\n", i, strings.Repeat("m", 1000), i)
	}
	_, err := ReadTraceOf(writeFile(t, "many.csv", b.String()), TraceFilter{Model: "GPT-4"})
	require.ErrorContains(t, err, `no request of model "GPT-4" (its models: "`+strings.Repeat("m", 64)+`…", `)
	require.ErrorContains(t, err, `…", …)`, "ten named, then an ellipsis")
	require.Less(t, len(err.Error()), 1200)
}

func TestReadTraceErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"bad json", "a.jsonl", "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3}\n{\"timestamp\": oops}\n", "a.jsonl:2:"},
		{"missing key", "b.jsonl", "{\"timestamp\": 1, \"input_length\": 2}\n", "b.jsonl:1: need timestamp, input_length and output_length"},
		{"fractional tokens", "c.jsonl", "{\"timestamp\": 1, \"input_length\": 2.5, \"output_length\": 3}\n", "c.jsonl:1: input_length"},
		{"bad time", "d.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,1,2\nyesterday,1,2\n", "d.csv:3: TIMESTAMP"},
		{"bad tokens", "e.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,-1,2\n", "e.csv:2: ContextTokens"},
		{"field count", "f.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,1\n", "f.csv:2: want 3 fields"},
		{"unknown", "g.csv", "a,b,c\n1,2,3\n", "unknown trace format"},
		{"BurstGPT without its response column", "bg0.csv", "Timestamp,Model,Request tokens\n1,x,2\n", "unknown trace format"},
		{"BurstGPT time", "bg1.csv", "Timestamp,Request tokens,Response tokens\n1,2,3\nsoon,2,3\n", "bg1.csv:3: Timestamp \"soon\""},
		{"BurstGPT negative time", "bg2.csv", "Timestamp,Request tokens,Response tokens\n-1,2,3\n", "bg2.csv:2: Timestamp"},
		{"BurstGPT absurd time", "bg3.csv", "Timestamp,Request tokens,Response tokens\n1e12,2,3\n", "bg3.csv:2: Timestamp"},
		{"BurstGPT NaN time", "bg4.csv", "Timestamp,Request tokens,Response tokens\nNaN,2,3\n", "bg4.csv:2: Timestamp"},
		{"BurstGPT fractional tokens", "bg5.csv", "Timestamp,Request tokens,Response tokens\n1,2.5,3\n", "bg5.csv:2: Request tokens \"2.5\""},
		{"BurstGPT negative tokens", "bg6.csv", "Timestamp,Request tokens,Response tokens\n1,2,-3\n", "bg6.csv:2: Response tokens"},
		{"BurstGPT huge tokens", "bg7.csv", "Timestamp,Request tokens,Response tokens\n1,1e12,3\n", "bg7.csv:2: Request tokens"},
		{"BurstGPT short row", "bg8.csv", "Timestamp,Request tokens,Response tokens\n1,2\n", "bg8.csv:2: want at least 3 fields"},
		{"BurstGPT line after blank ones", "bg9.csv", "Timestamp,Request tokens,Response tokens\n1,2,3\n\n\n1,x,3\n", "bg9.csv:5: Request tokens \"x\" is not an integer from 0 to 2147483647"},
		{"BurstGPT bad quoting", "bg10.csv", "Timestamp,Request tokens,Response tokens\n1,2,3\"x\n", "bg10.csv:2: bare \" in non-quoted-field"},
		{"BurstGPT line too long", "bg11.csv", "Timestamp,Request tokens,Response tokens\n1,2," + strings.Repeat("3", 2<<20) + "\n", "bg11.csv:2: bufio.Scanner: token too long (a line is at most 1048576 bytes)"},
		{"Azure token past int32", "az1.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,3000000000,2\n", "az1.csv:2: ContextTokens \"3000000000\" is not an integer from 0 to 2147483647"},
		{"a byte-order mark before a bad JSONL line", "bom.jsonl", "\ufeff{\"timestamp\": 1}\n", "bom.jsonl:1: need timestamp"},
		{"negative hash", "h.jsonl", "{\"timestamp\": 1, \"input_length\": 1000, \"output_length\": 3, \"hash_ids\": [1, -2]}\n", "h.jsonl:1: hash_ids: hash id 1: -2 is not a non-negative integer"},
		{"fractional hash", "i.jsonl", "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1.5]}\n", "i.jsonl:1: hash_ids: hash id 0: 1.5"},
		{"hash not a number", "j.jsonl", "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [\"a\"]}\n", "j.jsonl:1:"},
		{"too many hashes", "k.jsonl", "{\"timestamp\": 1, \"input_length\": 3, \"output_length\": 3, \"hash_ids\": [1, 2, 3, 4]}\n", "k.jsonl:1: hash_ids: 4 hash ids for input_length 3: at most 3"},
		{"hash 2^53", "m.jsonl", "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [9007199254740992]}\n", "m.jsonl:1: hash_ids: hash id 0: 9.007199254740992e+15 is not a non-negative integer below 2^53"},
		{"huge hash", "l.jsonl", "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1e300]}\n", "l.jsonl:1: hash_ids: hash id 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(writeFile(t, tc.file, tc.content))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := ReadTrace(filepath.Join(t.TempDir(), "missing.jsonl"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = ReadTrace(writeFile(t, "h.csv", "x,y\n"))
	require.ErrorIs(t, err, ErrUnknownTraceFormat)
}

// TestTraceFormat: a trace's format is read from its head, as ReadTrace reads it, without
// its rows being checked; another file is ErrUnknownTraceFormat.
func TestTraceFormat(t *testing.T) {
	for _, tc := range []struct{ file, content, want string }{
		{"a.jsonl", "\ufeff  {\"timestamp\": \"not read\"}\n", FormatMooncake},
		{"b.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nbad row\n", FormatAzure},
		{"c.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n", FormatBurstGPT},
		{"d.csv", " \n", ""},
	} {
		got, err := TraceFormat(writeFile(t, tc.file, tc.content))
		require.NoError(t, err, tc.file)
		require.Equal(t, tc.want, got, tc.file)
	}
	_, err := TraceFormat(writeFile(t, "e.csv", "window,model,count\n"))
	require.ErrorIs(t, err, ErrUnknownTraceFormat)
	_, err = TraceFormat(filepath.Join(t.TempDir(), "missing.csv"))
	require.ErrorIs(t, err, os.ErrNotExist)
	// A directory (or a link to one) cannot be read: an error, not an empty trace.
	dir := filepath.Join(t.TempDir(), "folder.csv")
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err = TraceFormat(dir)
	require.ErrorContains(t, err, "folder.csv")
	_, err = ReadTrace(dir)
	require.ErrorContains(t, err, "folder.csv")
	// So is a gzip stream whose data is corrupt.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(bytes.Repeat([]byte("{\"timestamp\": 1}\n"), 100))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	raw := gz.Bytes()
	raw[len(raw)/2] ^= 0xff
	bad := filepath.Join(t.TempDir(), "bad.jsonl.gz")
	require.NoError(t, os.WriteFile(bad, raw, 0o644))
	_, err = TraceFormat(bad)
	require.ErrorContains(t, err, "bad.jsonl.gz")
}

func TestBucket(t *testing.T) {
	reqs := []Request{
		{Arrival: 0, InputTokens: 100, OutputTokens: 10},
		{Arrival: 59.9, InputTokens: 300, OutputTokens: 30},
		{Arrival: 60, InputTokens: 50, OutputTokens: 5},
		{Arrival: 200, InputTokens: 10, OutputTokens: 1},
	}
	require.Equal(t, []Window{
		{Start: 0, Count: 2, AvgISL: 200, AvgOSL: 20},
		{Start: 60, Count: 1, AvgISL: 50, AvgOSL: 5},
		{Start: 120, Count: 0},
		{Start: 180, Count: 1, AvgISL: 10, AvgOSL: 1},
	}, Bucket(reqs, 60))
	require.Nil(t, Bucket(nil, 60))
	require.Nil(t, Bucket(reqs, 0))
}

func TestWarmup(t *testing.T) {
	mk := func() Predictor {
		p, err := New(Options{Kind: Constant})
		require.NoError(t, err)
		return p
	}
	n, isl, osl := mk(), mk(), mk()
	Warmup(n, isl, osl, []Window{
		{Start: 0, Count: 0},
		{Start: 60, Count: 2, AvgISL: 200, AvgOSL: 20},
		{Start: 120, Count: 0},
		{Start: 180, Count: 1, AvgISL: 10, AvgOSL: 1},
	})
	require.Equal(t, []float64{2, 0, 1}, n.State().Values, "the leading idle window is skipped")
	require.Equal(t, []float64{200, 200, 10}, isl.State().Values, "idle windows carry the last ISL")
	require.Equal(t, []float64{20, 20, 1}, osl.State().Values)
	for _, p := range []Predictor{n, isl, osl} {
		require.False(t, p.State().Active, "ResetIdleSkip after warm-up")
	}
	n.Add(0)
	require.Equal(t, []float64{2, 0, 1}, n.State().Values, "live leading zeros are skipped again")
	Warmup(nil, nil, nil, []Window{{Count: 1}}) // nil predictors are allowed
}

func TestReadServeGenAggregate(t *testing.T) {
	path := writeFile(t, "sg.csv", `category,model,timestamp_s,total_rate_rps,active_clients
language,m-large,0,2.5,43
language,m-large,600,1.0,40
reason,r1,0,0.5,3
language,m-large,1200,0,41
`)
	got, err := ReadServeGenAggregate(path)
	require.NoError(t, err)
	require.Equal(t, []RateSeries{
		{Category: "language", Model: "m-large", StepSeconds: 600, Counts: []float64{1500, 600, 0}},
		{Category: "reason", Model: "r1", StepSeconds: 600, Counts: []float64{300}},
	}, got)

	_, err = ReadServeGenAggregate(writeFile(t, "gap.csv", "category,model,timestamp_s,total_rate_rps\nl,m,0,1\nl,m,1800,1\n"))
	require.ErrorContains(t, err, "gap.csv:3: l/m jumps from 0 s to 1800 s")
	_, err = ReadServeGenAggregate(writeFile(t, "cols.csv", "category,model\n"))
	require.ErrorContains(t, err, `missing column "timestamp_s"`)
}

// The bundled slices of the shared traces (testdata/traces, see its README; the Azure code
// trace is the demo's copy, bundled once).
func TestReadBundledTraces(t *testing.T) {
	for _, tc := range []struct {
		path string
		rows int
		span float64 // seconds, approximately
	}{
		{filepath.Join("..", "cmd", "planner", "demodata", "azure_code_2023.csv.gz"), 8819, 57 * 60},
		{filepath.Join("testdata", "traces", "mooncake_conversation_first2000.jsonl.gz"), 2000, 0},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			reqs, err := ReadTrace(tc.path)
			require.NoError(t, err)
			require.Len(t, reqs, tc.rows)
			require.Zero(t, reqs[0].Arrival)
			if tc.span > 0 {
				require.InDelta(t, tc.span, reqs[len(reqs)-1].Arrival, 120)
			}
			wins := Bucket(reqs, 60)
			total := 0
			for _, w := range wins {
				total += w.Count
			}
			require.Equal(t, tc.rows, total)
			require.Equal(t, int(reqs[len(reqs)-1].Arrival/60)+1, len(wins), "empty windows are kept")
		})
	}
}

func TestMaxHashIDs(t *testing.T) {
	for _, tc := range []struct{ isl, want int }{
		{0, 1}, {511, 1}, {512, 2}, {6758, 14}, {1 << 30, MaxHashIDs},
	} {
		require.Equal(t, tc.want, MaxHashIDsFor(tc.isl), "isl %d", tc.isl)
	}
}

func TestReadTraceKeepsHashesOfSmallerBlocks(t *testing.T) {
	// A trace hashed in 64-token blocks (16 ids for 1,024 tokens) loads for everything that
	// ignores the hashes; MaxHashIDsFor says they do not fit 512-token blocks.
	path := filepath.Join(t.TempDir(), "small-blocks.jsonl")
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	require.NoError(t, os.WriteFile(path, []byte(`{"timestamp": 0, "input_length": 1024, "output_length": 3, "hash_ids": [`+
		strings.Join(ids, ", ")+`]}`+"\n"), 0o644))
	reqs, err := ReadTrace(path)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Len(t, reqs[0].HashIDs, 16)
	require.Greater(t, len(reqs[0].HashIDs), MaxHashIDsFor(reqs[0].InputTokens))
}

// manySeries is one row each of n series (models m0, m1, …).
func manySeries(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "l,m%d,0,1,1\n", i)
	}
	return b.String()
}

func TestReadServeGenClients(t *testing.T) {
	const csv = `category,model,client_id,timestamp_s,rate_rps,iat_cv,iat_dist,iat_param1,iat_param2
language,m-large,0,0,1.5,8.6,Weibull,0.37,0.39
language,m-large,0,600,0.0,0,,0,0
language,m-large,0,1200,0.25,0,,0,0
language,m-large,1,0,0.5,1.2,Gamma,0.7,2.8
reason,r1,0,0,0.1,2,Gamma,0.25,40
`
	want := []ClientSeries{
		{Category: "language", Model: "m-large", StepSeconds: 600, Windows: [][]ClientWindow{
			{{Rate: 1.5, IATCV: 8.6}, {Rate: 0.5, IATCV: 1.2}}, // rows in any order: client 1's window 0 after client 0's
			nil, // no client sent a request
			{{Rate: 0.25, IATCV: 0}},
		}},
		{Category: "reason", Model: "r1", StepSeconds: 600, Windows: [][]ClientWindow{{{Rate: 0.1, IATCV: 2}}}},
	}
	got, err := ReadServeGenClients(writeFile(t, "clients.csv", csv))
	require.NoError(t, err)
	require.Equal(t, want, got)

	got, err = ReadServeGenClients(writeFile(t, "clients.csv.gz", csv))
	require.NoError(t, err)
	require.Equal(t, want, got, "gzipped")

	const head = "category,model,timestamp_s,rate_rps,iat_cv\n"
	for name, tc := range map[string]struct{ body, err string }{
		"missing column":   {"category,model,timestamp_s,rate_rps\n", `missing column "iat_cv"`},
		"partial window":   {head + "l,m,300,1,1\n", `:2: timestamp_s "300" is not a whole 600 s window`},
		"negative time":    {head + "l,m,-600,1,1\n", `:2: timestamp_s "-600"`},
		"too many windows": {head + "l,m,6e8,1,1\n", `timestamp_s "6e8"`},
		"too many slots":   {head + "l,m,3.6e8,1,1\nl,n,3.6e8,1,1\n", ":3: more than 1000000 windows over all series"},
		"too many series":  {head + manySeries(1001), ":1002: more than 1000 series"},
		"negative rate":    {head + "l,m,0,1,1\nl,m,600,-1,1\n", `:3: rate_rps "-1" not in`},
		"absurd rate":      {head + "l,m,0,1e9,1\n", `rate_rps "1e9"`},
		"NaN cv":           {head + "l,m,0,1,NaN\n", `iat_cv "NaN"`},
		"short row":        {head + "l,m,0\n", ":2: "},
	} {
		_, err := ReadServeGenClients(writeFile(t, "bad.csv", tc.body))
		require.ErrorContains(t, err, tc.err, name)
	}
	_, err = ReadServeGenClients(filepath.Join(t.TempDir(), "none.csv"))
	require.Error(t, err)
}

// TestRecordingGaps: a window under 5% of its series' median is a gap in the recording;
// one at 5% or over is traffic, however low.
func TestRecordingGaps(t *testing.T) {
	for name, tc := range map[string]struct {
		rates []float64
		want  []bool
	}{
		"empty":                   {nil, []bool{}},
		"steady":                  {[]float64{100, 90, 110}, []bool{false, false, false}},
		"a run of zeros":          {[]float64{100, 0, 0, 90, 110}, []bool{false, true, true, false, false}},
		"a partial window":        {[]float64{100, 0, 1, 90, 110, 105}, []bool{false, true, true, false, false, false}},
		"at 5% of the median":     {[]float64{100, 5, 100}, []bool{false, false, false}},
		"just under 5%":           {[]float64{100, 4.99, 100}, []bool{false, true, false}},
		"a quiet series":          {[]float64{0, 0, 0, 1}, []bool{false, false, false, false}},
		"low but not a gap (26%)": {[]float64{190, 50, 180, 200}, []bool{false, false, false, false}},
	} {
		require.Equal(t, tc.want, RecordingGaps(tc.rates), name)
	}
	rs := RateSeries{Counts: []float64{6e4, 0, 6e4}}
	require.Equal(t, []bool{false, true, false}, rs.Gaps())
	cs := ClientSeries{Windows: [][]ClientWindow{{{Rate: 50}, {Rate: 50}}, nil, {{Rate: 0.5}}, {{Rate: 90}}}}
	require.Equal(t, []bool{false, true, true, false}, cs.Gaps(), "a window's clients summed")
}
