package observe

import (
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tinylib/msgp/msgp"

	"github.com/llmplanner/planner/perf"
)

// key is a msgpack fixstr (0xa0 | len, then the bytes), written from the msgpack spec
// rather than with the library under test.
func key(s string) string {
	if len(s) > 31 {
		panic("key too long for fixstr")
	}
	return fmt.Sprintf("%02x", 0xa0|len(s)) + hex.EncodeToString([]byte(s))
}

// goldenFPM is the message whose msgspec encoding is goldenHex.
var goldenFPM = perf.FPM{
	Version: 1, WorkerID: "w1", DPRank: 0, CounterID: 300, WallTime: 0.025,
	Scheduled: perf.ScheduledRequests{
		NumPrefillRequests: 2, SumPrefillTokens: 4096, VarPrefillLength: 1.5,
		SumPrefillKVTokens: 200, NumDecodeRequests: 0, SumDecodeKVTokens: 70000, VarDecodeKVTokens: 0,
	},
	Queued: perf.QueuedRequests{NumPrefillRequests: 1, SumPrefillTokens: 3000},
}

// goldenHex is what msgspec.msgpack.Encoder().encode(ForwardPassMetrics(...)) produces for
// goldenFPM: a fixmap of 7, keys in declaration order, ints in the smallest unsigned form,
// floats as float64 (0xcb).
var goldenHex = strings.Join([]string{
	"87",                                               // fixmap, 7 entries
	key("version") + "01",                              // positive fixint 1
	key("worker_id") + "a27731",                        // fixstr "w1"
	key("dp_rank") + "00",                              // positive fixint 0
	key("counter_id") + "cd012c",                       // uint16 300
	key("wall_time") + "cb3f9999999999999a",            // float64 0.025
	key("scheduled_requests") + "87",                   // nested fixmap, 7 entries
	key("num_prefill_requests") + "02",                 // positive fixint 2
	key("sum_prefill_tokens") + "cd1000",               // uint16 4096
	key("var_prefill_length") + "cb3ff8000000000000",   // float64 1.5
	key("sum_prefill_kv_tokens") + "ccc8",              // uint8 200
	key("num_decode_requests") + "00",                  // positive fixint 0
	key("sum_decode_kv_tokens") + "ce00011170",         // uint32 70000
	key("var_decode_kv_tokens") + "cb0000000000000000", // float64 0.0
	key("queued_requests") + "86",                      // nested fixmap, 6 entries
	key("num_prefill_requests") + "01",                 // positive fixint 1
	key("sum_prefill_tokens") + "cd0bb8",               // uint16 3000
	key("var_prefill_length") + "cb0000000000000000",   // float64 0.0
	key("num_decode_requests") + "00",                  // positive fixint 0
	key("sum_decode_kv_tokens") + "00",                 // positive fixint 0
	key("var_decode_kv_tokens") + "cb0000000000000000", // float64 0.0
}, "")

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

func TestAppendFPMGolden(t *testing.T) {
	want := mustHex(t, goldenHex)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(AppendFPM(nil, &goldenFPM)))

	var got perf.FPM
	require.NoError(t, DecodeFPM(want, &got))
	require.Equal(t, goldenFPM, got)

	// The same bytes are kept as a file for other tools (fuzz seeds, sim checks).
	file, err := os.ReadFile("testdata/fpm/golden_v1.hex")
	require.NoError(t, err)
	require.Equal(t, goldenHex, strings.TrimSpace(string(file)))
}

func TestAppendFPMEncodings(t *testing.T) {
	uuid := "0f8fad5b-d9cb-469f-a165-70867728950e" // 36 bytes: str8
	tests := []struct {
		name string
		f    perf.FPM
		want string // hex that must appear in the encoding
	}{
		{"str8 worker id", perf.FPM{WorkerID: uuid}, key("worker_id") + "d924" + hex.EncodeToString([]byte(uuid))},
		{"uint8 dp rank", perf.FPM{DPRank: 255}, key("dp_rank") + "ccff"},
		{"fixint 127", perf.FPM{DPRank: 127}, key("dp_rank") + "7f"},
		{"uint64 counter", perf.FPM{CounterID: 1 << 40}, key("counter_id") + "cf0000010000000000"},
		{"negative fixint", perf.FPM{DPRank: -1}, key("dp_rank") + "ff"},
		{"int8", perf.FPM{DPRank: -100}, key("dp_rank") + "d09c"},
		{"float64 even when float32-exact", perf.FPM{WallTime: 0.5}, key("wall_time") + "cb3fe0000000000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, hex.EncodeToString(AppendFPM(nil, &tc.f)), tc.want)
		})
	}
}

// enc builds msgpack test inputs.
type enc []byte

func (e enc) m(n uint32) enc      { return msgp.AppendMapHeader(e, n) }
func (e enc) a(n uint32) enc      { return msgp.AppendArrayHeader(e, n) }
func (e enc) s(v string) enc      { return msgp.AppendString(e, v) }
func (e enc) i(v int64) enc       { return msgp.AppendInt64(e, v) }
func (e enc) u(v uint64) enc      { return msgp.AppendUint64(e, v) }
func (e enc) f(v float64) enc     { return msgp.AppendFloat64(e, v) }
func (e enc) f32(v float32) enc   { return msgp.AppendFloat32(e, v) }
func (e enc) null() enc           { return msgp.AppendNil(e) }
func (e enc) bytes(v []byte) enc  { return msgp.AppendBytes(e, v) }
func (e enc) boolean(v bool) enc  { return msgp.AppendBool(e, v) }
func (e enc) kv(k string) enc     { return e.s(k) }
func (e enc) sched(n uint32) enc  { return e.kv("scheduled_requests").m(n) }
func (e enc) wall(v float64) enc  { return e.kv("wall_time").f(v) }
func (e enc) worker(v string) enc { return e.kv("worker_id").s(v) }
func (e enc) counter(v int64) enc { return e.kv("counter_id").i(v) }
func (e enc) rank(v int64) enc    { return e.kv("dp_rank").i(v) }

// raw appends hex-written bytes.
func (e enc) raw(h string) enc {
	b, err := hex.DecodeString(h)
	if err != nil {
		panic(err)
	}
	return append(e, b...)
}

func TestDecodeFPMForms(t *testing.T) {
	positional := enc{}.a(7).i(1).s("w1").i(0).i(300).f(0.025).
		a(7).i(2).i(4096).f(1.5).i(200).i(0).i(70000).f(0).
		a(6).i(1).i(3000).f(0).i(0).i(0).f(0)
	tests := []struct {
		name string
		in   []byte
		want perf.FPM
	}{
		{"golden map", mustHex(t, goldenHex), goldenFPM},
		{"positional array", positional, goldenFPM},
		{"short positional array keeps defaults",
			enc{}.a(3).i(1).s("w2").i(3),
			perf.FPM{Version: 1, WorkerID: "w2", DPRank: 3}},
		{"positional extra trailing elements ignored",
			enc{}.a(9).i(1).s("w").i(0).i(5).f(0.1).null().a(7).i(4).i(0).f(0).i(0).i(0).i(0).f(0).s("future").m(0),
			perf.FPM{Version: 1, WorkerID: "w", CounterID: 5, WallTime: 0.1, Queued: perf.QueuedRequests{NumPrefillRequests: 4}}},
		{"legacy v0 without version and counter_id",
			enc{}.m(3).worker("old").rank(1).wall(0.01),
			perf.FPM{WorkerID: "old", DPRank: 1, WallTime: 0.01}},
		{"unknown keys of any type ignored, nested too",
			enc{}.m(5).kv("future_map").m(1).s("x").a(2).i(1).s("y").
				worker("w").kv("blob").bytes([]byte{1, 2}).
				sched(2).kv("future").boolean(true).kv("num_decode_requests").i(7).
				kv("ts").raw("d40109"),
			perf.FPM{WorkerID: "w", Scheduled: perf.ScheduledRequests{NumDecodeRequests: 7}}},
		{"nil nested structs are defaults",
			enc{}.m(3).worker("w").kv("scheduled_requests").null().kv("queued_requests").null(),
			perf.FPM{WorkerID: "w"}},
		{"nested arrays inside a map",
			enc{}.m(2).worker("w").kv("queued_requests").a(2).i(3).i(9000),
			perf.FPM{WorkerID: "w", Queued: perf.QueuedRequests{NumPrefillRequests: 3, SumPrefillTokens: 9000}}},
		{"int widths: int8 int16 int32 int64 uint8 uint16 uint32 uint64",
			enc{}.m(4).kv("version").raw("d001").kv("dp_rank").raw("d10002").kv("counter_id").raw("cf0000000100000000").
				sched(5).kv("num_prefill_requests").raw("d200000003").kv("sum_prefill_tokens").raw("d30000000000000004").
				kv("sum_prefill_kv_tokens").raw("cc05").kv("num_decode_requests").raw("cd0006").kv("sum_decode_kv_tokens").raw("ce00000007"),
			perf.FPM{Version: 1, DPRank: 2, CounterID: 1 << 32, Scheduled: perf.ScheduledRequests{
				NumPrefillRequests: 3, SumPrefillTokens: 4, SumPrefillKVTokens: 5, NumDecodeRequests: 6, SumDecodeKVTokens: 7}}},
		{"ints and float32 for float fields",
			enc{}.m(2).kv("wall_time").i(2).sched(2).kv("var_prefill_length").f32(0.5).kv("var_decode_kv_tokens").u(300),
			perf.FPM{WallTime: 2, Scheduled: perf.ScheduledRequests{VarPrefillLength: 0.5, VarDecodeKVTokens: 300}}},
		{"map16 header and duplicate key (last wins)",
			enc{}.raw("de0002").counter(1).counter(2),
			perf.FPM{CounterID: 2}},
		{"empty map is all defaults", enc{}.m(0), perf.FPM{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := perf.FPM{Version: 9, WorkerID: "junk", WallTime: 3, Queued: perf.QueuedRequests{NumDecodeRequests: 4}}
			require.NoError(t, DecodeFPM(tc.in, &dst))
			require.Equal(t, tc.want, dst)
		})
	}
}

func TestDecodeFPMMalformed(t *testing.T) {
	golden := mustHex(t, goldenHex)
	tests := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"empty", nil, "empty payload"},
		{"string message", enc{}.s("hello"), "want a map or an array"},
		{"invalid prefix", []byte{0xc1}, "invalid msgpack prefix"},
		{"wall_time string", enc{}.m(1).kv("wall_time").s("0.1"), "wall_time is a msgpack str"},
		{"wall_time NaN", enc{}.m(1).wall(math.NaN()), "wall_time is NaN"},
		{"wall_time +Inf", enc{}.m(1).wall(math.Inf(1)), "wall_time is +Inf"},
		{"wall_time negative", enc{}.m(1).wall(-0.5), "wall_time is -0.5"},
		{"variance NaN as float32", enc{}.m(1).sched(1).kv("var_prefill_length").f32(float32(math.NaN())), "var_prefill_length is NaN"},
		{"negative counter", enc{}.m(1).counter(-1), "counter_id is negative"},
		{"negative count in nested array", enc{}.a(6).i(1).s("w").i(0).i(0).f(0).a(1).i(-3), "num_prefill_requests is negative"},
		{"uint64 beyond int64", enc{}.m(1).kv("dp_rank").raw("cfffffffffffffffff"), "dp_rank: msgp: 18446744073709551615 overflows"},
		{"worker_id int", enc{}.m(1).kv("worker_id").i(5), "worker_id is a msgpack int"},
		{"worker_id invalid utf8", enc{}.m(1).kv("worker_id").raw("a2fffe"), "not valid UTF-8"},
		{"worker_id binary", enc{}.m(1).kv("worker_id").bytes([]byte("w")), "worker_id is a msgpack bin"},
		{"nil scalar", enc{}.m(1).kv("version").null(), "version is a msgpack nil"},
		{"bool scalar", enc{}.m(1).kv("dp_rank").boolean(true), "dp_rank is a msgpack bool"},
		{"int key", enc{}.m(1).i(1).i(1), "map key is a msgpack int"},
		{"nested string", enc{}.m(1).kv("queued_requests").s("x"), "queued_requests is a msgpack str"},
		{"nested wrong type field", enc{}.m(1).sched(1).kv("num_decode_requests").f(1), "num_decode_requests is a msgpack float64"},
		{"trailing bytes", append(append([]byte{}, golden...), 0x00), "1 trailing bytes"},
		{"two messages", append(append([]byte{}, golden...), golden...), "trailing bytes"},
		{"map header claims more entries", enc{}.m(3).counter(1), "map key: message truncated"},
		{"truncated map32 header", []byte{0xdf, 0x00}, "message map header"},
		{"truncated unknown value", enc{}.m(1).kv("x").raw("c4ff01"), "value of unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := goldenFPM
			err := DecodeFPM(tc.in, &dst)
			require.ErrorIs(t, err, ErrMalformedFPM)
			require.Contains(t, err.Error(), tc.msg)
			require.Equal(t, perf.FPM{}, dst, "a failed decode leaves dst zeroed, never half-read")
		})
	}
}

func TestDecodeFPMEveryTruncationFails(t *testing.T) {
	golden := mustHex(t, goldenHex)
	for n := range len(golden) {
		var dst perf.FPM
		require.ErrorIs(t, DecodeFPM(golden[:n], &dst), ErrMalformedFPM, "prefix of %d bytes", n)
	}
}

func TestDecodeFPMZeroAllocs(t *testing.T) {
	golden := mustHex(t, goldenHex)
	var dst perf.FPM
	require.NoError(t, DecodeFPM(golden, &dst))
	allocs := testing.AllocsPerRun(1000, func() {
		if err := DecodeFPM(golden, &dst); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, goldenFPM, dst)

	// A different worker id allocates exactly its string, once.
	other := AppendFPM(nil, &perf.FPM{WorkerID: "another-worker"})
	allocs = testing.AllocsPerRun(100, func() {
		dst.WorkerID = "w1"
		if err := DecodeFPM(other, &dst); err != nil {
			panic(err)
		}
	})
	require.Equal(t, 1.0, allocs)
}

func BenchmarkDecodeFPM(b *testing.B) {
	payload := AppendFPM(nil, &goldenFPM)
	var dst perf.FPM
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if err := DecodeFPM(payload, &dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkAppendFPM(b *testing.B) {
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFPM(buf[:0], &goldenFPM)
	}
}
