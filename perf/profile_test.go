package perf

import (
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npy"
	"github.com/sbinet/npyio/npz"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
)

// updateFixtures regenerates the derived fixtures under testdata/profiles from the H200
// profile: go test ./perf -run TestGenerateFixtures -update-fixtures
var updateFixtures = flag.Bool("update-fixtures", false, "rewrite the generated profile fixtures under testdata/profiles")

const (
	profilesDir = "testdata/profiles"
	// h200Dir is a copy of ../shared/data/profiles/h200-llama3.1-8b-fp8-tp1 (Dynamo's
	// H200_TP1P_TP1D test profile, Apache-2.0), so the tests do not depend on that folder.
	h200Dir = profilesDir + "/h200-llama3.1-8b-fp8-tp1"
)

// loadH200 loads the bundled H200 profile (NPZ).
func loadH200(tb testing.TB) *Profile {
	tb.Helper()
	p, err := LoadProfile(h200Dir)
	require.NoError(tb, err)
	return p
}

func TestLoadProfileLayouts(t *testing.T) {
	tests := []struct {
		name                    string
		dir                     string
		prefillFile, decodeFile string
	}{
		{"bundled NPZ", h200Dir, h200Dir + "/prefill_raw_data.npz", h200Dir + "/decode_raw_data.npz"},
		{"Dynamo profiler layout", profilesDir + "/dynamo-layout",
			profilesDir + "/dynamo-layout/selected_prefill_interpolation/raw_data.npz",
			profilesDir + "/dynamo-layout/selected_decode_interpolation/raw_data.npz"},
		{"JSON fallback", profilesDir + "/json-only",
			profilesDir + "/json-only/prefill_raw_data.json", profilesDir + "/json-only/decode_raw_data.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadProfile(tt.dir)
			require.NoError(t, err)
			require.Equal(t, tt.dir, p.Dir)
			require.Equal(t, tt.prefillFile, p.PrefillFile)
			require.Equal(t, tt.decodeFile, p.DecodeFile)
			require.Nil(t, p.Encode)
			require.Empty(t, p.EncodeFile)
			require.Len(t, p.Prefill.ISL, 17)
			require.Len(t, p.Decode.KVUsage, 41)
			require.Equal(t, 100.0, p.Prefill.ISL[0])
			require.Equal(t, 16372.0, p.Prefill.ISL[16])
			require.Equal(t, int64(945029), p.Decode.MaxKVTokens)
			require.Equal(t, 13585.0, slices.Max(p.Decode.ContextLength))
		})
	}
}

// TestLoadProfileNPZAndJSONAgree checks that the two formats of the shared profile hold the
// same arrays. The JSON copy was written with 4 decimals, so values agree to 5e-5.
func TestLoadProfileNPZAndJSONAgree(t *testing.T) {
	fromNPZ := loadH200(t)
	fromJSON, err := LoadProfile(profilesDir + "/json-only")
	require.NoError(t, err)

	const rounding = 5e-5 + 1e-12
	pairs := []struct {
		name      string
		npz, json []float64
	}{
		{arrPrefillISL, fromNPZ.Prefill.ISL, fromJSON.Prefill.ISL},
		{arrPrefillTTFT, fromNPZ.Prefill.TTFTMs, fromJSON.Prefill.TTFTMs},
		{arrPrefillThpt, fromNPZ.Prefill.ThroughputPerGPU, fromJSON.Prefill.ThroughputPerGPU},
		{arrKVUsage, fromNPZ.Decode.KVUsage, fromJSON.Decode.KVUsage},
		{arrContextLength, fromNPZ.Decode.ContextLength, fromJSON.Decode.ContextLength},
		{arrITL, fromNPZ.Decode.ITLMs, fromJSON.Decode.ITLMs},
		{arrDecodeThpt, fromNPZ.Decode.ThroughputPerGPU, fromJSON.Decode.ThroughputPerGPU},
	}
	for _, p := range pairs {
		require.Len(t, p.json, len(p.npz), p.name)
		for i := range p.npz {
			require.InDelta(t, p.npz[i], p.json[i], rounding, "%s[%d]", p.name, i)
		}
	}
	// Integers are exact in both.
	require.Equal(t, fromNPZ.Prefill.ISL, fromJSON.Prefill.ISL)
	require.Equal(t, fromNPZ.Decode.ContextLength, fromJSON.Decode.ContextLength)
	require.Equal(t, fromNPZ.Decode.MaxKVTokens, fromJSON.Decode.MaxKVTokens)
	// Spot values of evaluation.md §5.1.
	require.Equal(t, 63.214755, fromNPZ.Prefill.TTFTMs[3])
	require.Equal(t, 63.2148, fromJSON.Prefill.TTFTMs[3])
}

func TestLoadProfileMaxKVTokensScalarOrArray(t *testing.T) {
	for _, dir := range []string{"max-kv-scalar-npz", "max-kv-list-json"} {
		t.Run(dir, func(t *testing.T) {
			p, err := LoadProfile(filepath.Join(profilesDir, dir))
			require.NoError(t, err)
			require.Nil(t, p.Prefill)
			require.Equal(t, int64(945029), p.Decode.MaxKVTokens)
			require.Len(t, p.Decode.ITLMs, 41)
		})
	}
}

func TestLoadProfileEncode(t *testing.T) {
	dir := profilesDir + "/encode"
	p, err := LoadProfile(dir)
	require.NoError(t, err)
	require.Equal(t, dir+"/encode_raw_data.json", p.EncodeFile)
	require.Equal(t, []float64{4, 1, 2}, p.Encode.RequestRate)
	require.Equal(t, []float64{2.5, 1, 2}, p.Encode.ThroughputPerGPU)
	require.NotNil(t, p.Prefill)
	require.Nil(t, p.Decode)
}

func TestLoadProfileNoProfile(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadProfile(dir)
	require.ErrorIs(t, err, ErrNoProfile)
	require.EqualError(t, err, "SLA-Planner requires pre-deployment profiling results to run: "+
		"no prefill or decode profile in "+dir+" (tried "+
		dir+"/selected_prefill_interpolation/raw_data.npz, "+dir+"/prefill_raw_data.npz, "+dir+"/prefill_raw_data.json, "+
		dir+"/selected_decode_interpolation/raw_data.npz, "+dir+"/decode_raw_data.npz, "+dir+"/decode_raw_data.json)")

	// An encoder profile alone is not enough.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "encode_raw_data.json"),
		[]byte(`{"encode_request_rate": [1, 2], "encode_thpt_per_gpu": [1, 2]}`), 0o600))
	_, err = LoadProfile(dir)
	require.ErrorIs(t, err, ErrNoProfile)

	// A missing directory is the same situation.
	_, err = LoadProfile(filepath.Join(dir, "nope"))
	require.ErrorIs(t, err, ErrNoProfile)
}

func TestLoadProfileMalformed(t *testing.T) {
	tests := []struct {
		dir     string
		want    string
		invalid bool // an *ArrayError (errors.Is ErrInvalidProfile)
	}{
		{"missing-array", `perf: testdata/profiles/missing-array/prefill_raw_data.npz: array "prefill_ttft": missing`, true},
		{"missing-array-json", `perf: testdata/profiles/missing-array-json/decode_raw_data.json: array "z_thpt_per_gpu": missing`, true},
		{"unequal-lengths", `perf: testdata/profiles/unequal-lengths/decode_raw_data.npz: array "z_itl": has 40 values, want 41 (the length of "x_kv_usage")`, true},
		{"nan", `perf: testdata/profiles/nan/prefill_raw_data.npz: array "prefill_ttft": value 3 is NaN, want a finite number`, true},
		{"nan-json", `perf: testdata/profiles/nan-json/decode_raw_data.json: array "z_itl": value 5 is NaN, want a finite number` + "\n" +
			`perf: testdata/profiles/nan-json/decode_raw_data.json: array "z_thpt_per_gpu": value 0 is -Inf, want a finite number`, true},
		{"bad-json", `perf: testdata/profiles/bad-json/prefill_raw_data.json: decode JSON: unexpected EOF`, false},
		{"duplicate-isl", `perf: testdata/profiles/duplicate-isl/prefill_raw_data.json: array "prefill_isl": values 1 and 2 are both 1117, want unique ISLs`, true},
		{"two-dimensional", `perf: testdata/profiles/two-dimensional/prefill_raw_data.npz: array "prefill_ttft": has shape [17 2], want a 1-D array`, true},
		{"not-zip", `perf: testdata/profiles/not-zip/prefill_raw_data.npz: read NPZ: npz: could not open zip file "testdata/profiles/not-zip/prefill_raw_data.npz": zip: not a valid zip file`, false},
		{"nested-json", `perf: testdata/profiles/nested-json/prefill_raw_data.json: array "prefill_isl": value 0 is a list, want a number (arrays must be 1-D)`, true},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			_, err := LoadProfile(filepath.Join(profilesDir, tt.dir))
			require.EqualError(t, err, tt.want)
			require.Equal(t, tt.invalid, errors.Is(err, ErrInvalidProfile))
			require.NotErrorIs(t, err, ErrNoProfile)
			if tt.invalid {
				var ae *ArrayError
				require.ErrorAs(t, err, &ae)
				require.Equal(t, filepath.Join(profilesDir, tt.dir), filepath.Dir(ae.File))
			}
		})
	}
}

// TestLoadProfileBadNPYMembers covers NPZ members the loader must reject without reading
// garbage: an unsupported dtype, a member shorter than its header says, and junk bytes.
func TestLoadProfileBadNPYMembers(t *testing.T) {
	good := loadH200(t).Prefill
	npyBytes := func(v any) []byte {
		var buf bytes.Buffer
		require.NoError(t, npy.Write(&buf, v))
		return buf.Bytes()
	}
	full := npyBytes(good.TTFTMs)
	tests := []struct {
		name string
		ttft []byte
		want string
	}{
		{"bool dtype", npyBytes([]bool{true, false}), `array "prefill_ttft": has dtype "|b1", want an integer or floating-point dtype`},
		{"complex dtype", npyBytes([]complex128{1, 2}), `array "prefill_ttft": has dtype "<c16", want an integer or floating-point dtype`},
		{"truncated", full[:len(full)-8], `array "prefill_ttft": truncated: 128 bytes of data for shape [17] of <f8`},
		{"junk", []byte("definitely not NPY data"), `array "prefill_ttft": read NPY header: npy: not a valid NumPy file format`},
		// Keys out of the order np.save writes make the npy package slice out of range.
		{"malformed header", npyHeader("{'fortran_order': False, 'shape': (2,), 'descr': '<f8', }"),
			`array "prefill_ttft": malformed NPY data: runtime error: slice bounds out of range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "prefill_raw_data.npz")
			f, err := os.Create(file)
			require.NoError(t, err)
			zw := zip.NewWriter(f)
			for name, data := range map[string][]byte{
				"prefill_isl.npy":          npyBytes(good.ISL),
				"prefill_thpt_per_gpu.npy": npyBytes(good.ThroughputPerGPU),
				"prefill_ttft.npy":         tt.ttft,
			} {
				w, err := zw.Create(name)
				require.NoError(t, err)
				_, err = w.Write(data)
				require.NoError(t, err)
			}
			require.NoError(t, zw.Close())
			require.NoError(t, f.Close())

			var p *Profile
			require.NotPanics(t, func() { p, err = LoadProfile(dir) })
			require.Nil(t, p)
			if tt.name == "malformed header" { // the rest is the runtime's panic text
				require.ErrorContains(t, err, "perf: "+file+": "+tt.want)
			} else {
				require.EqualError(t, err, "perf: "+file+": "+tt.want)
			}
			require.ErrorIs(t, err, ErrInvalidProfile)
		})
	}
}

// npyHeader returns an NPY version 1.0 preamble with the given header dictionary.
func npyHeader(dict string) []byte {
	h := dict + "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(out, h...)
}

func TestPrefillProfileValidate(t *testing.T) {
	good := func() *PrefillProfile {
		return &PrefillProfile{
			ISL:              []float64{100, 1000, 2000, 4000},
			TTFTMs:           []float64{10, 20, 40, 90},
			ThroughputPerGPU: []float64{10000, 50000, 50000, 44000},
		}
	}
	tests := []struct {
		name   string
		mutate func(p *PrefillProfile)
		want   string
	}{
		{"valid", func(*PrefillProfile) {}, ""},
		{"unsorted is valid", func(p *PrefillProfile) {
			p.ISL[0], p.ISL[3] = p.ISL[3], p.ISL[0]
		}, ""},
		{"three points", func(p *PrefillProfile) {
			p.ISL, p.TTFTMs, p.ThroughputPerGPU = p.ISL[:3], p.TTFTMs[:3], p.ThroughputPerGPU[:3]
		}, `perf: array "prefill_isl": has 3 points, want at least 4 (cubic spline)`},
		{"short TTFT", func(p *PrefillProfile) { p.TTFTMs = p.TTFTMs[:3] },
			`perf: array "prefill_ttft": has 3 values, want 4 (the length of "prefill_isl")`},
		{"zero TTFT", func(p *PrefillProfile) { p.TTFTMs[1] = 0 },
			`perf: array "prefill_ttft": value 1 is 0, want > 0`},
		{"negative throughput", func(p *PrefillProfile) { p.ThroughputPerGPU[2] = -1 },
			`perf: array "prefill_thpt_per_gpu": value 2 is -1, want > 0`},
		{"infinite ISL", func(p *PrefillProfile) { p.ISL[3] = math.Inf(1) },
			`perf: array "prefill_isl": value 3 is +Inf, want a finite number`},
		{"duplicate ISL", func(p *PrefillProfile) { p.ISL[3] = 100 },
			`perf: array "prefill_isl": values 0 and 3 are both 100, want unique ISLs`},
		{"every problem", func(p *PrefillProfile) { p.ISL[0] = -5; p.TTFTMs[0] = math.NaN() },
			`perf: array "prefill_isl": value 0 is -5, want > 0` + "\n" +
				`perf: array "prefill_ttft": value 0 is NaN, want a finite number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := good()
			tt.mutate(p)
			err := p.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
			require.ErrorIs(t, err, ErrInvalidProfile)
		})
	}
	require.EqualError(t, (*PrefillProfile)(nil).Validate(), "perf: no prefill profile")
}

func TestDecodeProfileValidate(t *testing.T) {
	good := func() *DecodeProfile {
		return &DecodeProfile{
			KVUsage:          []float64{0.01, 0.5, 0.9, 0.02, 0.6},
			ContextLength:    []float64{1000, 1000, 1000, 8000, 8000},
			ITLMs:            []float64{5, 20, 35, 6, 25},
			ThroughputPerGPU: []float64{200, 9000, 12000, 190, 2500},
			MaxKVTokens:      100000,
		}
	}
	tests := []struct {
		name   string
		mutate func(d *DecodeProfile)
		want   string
	}{
		{"valid", func(*DecodeProfile) {}, ""},
		{"zero throughput is valid", func(d *DecodeProfile) { d.ThroughputPerGPU[0] = 0 }, ""},
		{"kv usage above 1", func(d *DecodeProfile) { d.KVUsage[2] = 1.2 },
			`perf: array "x_kv_usage": value 2 is 1.2, want in [0, 1]`},
		{"negative kv usage", func(d *DecodeProfile) { d.KVUsage[0] = -0.1 },
			`perf: array "x_kv_usage": value 0 is -0.1, want in [0, 1]`},
		{"zero context", func(d *DecodeProfile) { d.ContextLength[4] = 0 },
			`perf: array "y_context_length": value 4 is 0, want > 0`},
		{"zero ITL", func(d *DecodeProfile) { d.ITLMs[1] = 0 },
			`perf: array "z_itl": value 1 is 0, want > 0`},
		{"negative throughput", func(d *DecodeProfile) { d.ThroughputPerGPU[3] = -2 },
			`perf: array "z_thpt_per_gpu": value 3 is -2, want >= 0`},
		{"NaN ITL", func(d *DecodeProfile) { d.ITLMs[2] = math.NaN() },
			`perf: array "z_itl": value 2 is NaN, want a finite number`},
		{"no max kv tokens", func(d *DecodeProfile) { d.MaxKVTokens = 0 },
			`perf: array "max_kv_tokens": is 0, want > 0`},
		{"short throughput", func(d *DecodeProfile) { d.ThroughputPerGPU = d.ThroughputPerGPU[:4] },
			`perf: array "z_thpt_per_gpu": has 4 values, want 5 (the length of "x_kv_usage")`},
		{"two points", func(d *DecodeProfile) {
			d.KVUsage, d.ContextLength, d.ITLMs, d.ThroughputPerGPU = d.KVUsage[:2], d.ContextLength[:2], d.ITLMs[:2], d.ThroughputPerGPU[:2]
		}, `perf: arrays "x_kv_usage" and "y_context_length": have 2 points, want at least 3 (triangulation)`},
		{"duplicate point", func(d *DecodeProfile) { d.KVUsage[4], d.ContextLength[4] = 0.5, 1000 },
			`perf: arrays "x_kv_usage" and "y_context_length": points 1 and 4 are both (0.5, 1000), want distinct points`},
		{"one context length", func(d *DecodeProfile) { d.ContextLength = []float64{1000, 1000, 1000, 1000, 1000} },
			`perf: arrays "x_kv_usage" and "y_context_length": all 5 points are collinear, want a 2-D spread (triangulation)`},
		{"collinear diagonal", func(d *DecodeProfile) {
			d.KVUsage = []float64{0.1, 0.2, 0.3, 0.4, 0.5}
			d.ContextLength = []float64{1000, 2000, 3000, 4000, 5000}
		}, `perf: arrays "x_kv_usage" and "y_context_length": all 5 points are collinear, want a 2-D spread (triangulation)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good()
			tt.mutate(d)
			err := d.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
			require.ErrorIs(t, err, ErrInvalidProfile)
			_, err = NewDecodeInterpolator(d)
			require.EqualError(t, err, tt.want)
		})
	}
	require.EqualError(t, (*DecodeProfile)(nil).Validate(), "perf: no decode profile")
}

func TestEncodeProfileValidate(t *testing.T) {
	tests := []struct {
		name string
		e    EncodeProfile
		want string
	}{
		{"valid", EncodeProfile{RequestRate: []float64{0, 2}, ThroughputPerGPU: []float64{1, 2}}, ""},
		{"empty", EncodeProfile{}, `perf: array "encode_request_rate": has 0 samples, want at least 2`},
		{"one sample", EncodeProfile{RequestRate: []float64{0.5}, ThroughputPerGPU: []float64{1}},
			`perf: array "encode_request_rate": has 1 samples, want at least 2`},
		{"negative rate", EncodeProfile{RequestRate: []float64{-1, 1}, ThroughputPerGPU: []float64{1, 2}},
			`perf: array "encode_request_rate": value 0 is -1, want >= 0`},
		{"negative throughput", EncodeProfile{RequestRate: []float64{1, 2}, ThroughputPerGPU: []float64{1, -2}},
			`perf: array "encode_thpt_per_gpu": value 1 is -2, want > 0`},
		{"lengths", EncodeProfile{RequestRate: []float64{1, 2}, ThroughputPerGPU: []float64{1}},
			`perf: array "encode_thpt_per_gpu": has 1 values, want 2 (the length of "encode_request_rate")`},
		{"duplicate", EncodeProfile{RequestRate: []float64{1, 1}, ThroughputPerGPU: []float64{1, 2}},
			`perf: array "encode_request_rate": values 0 and 1 are both 1, want unique rates`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestQuotePythonSpecials(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": [1, 2]}`, `{"a": [1, 2]}`},
		{`{"a": [NaN, Infinity, -Infinity]}`, `{"a": ["NaN", "Infinity", "-Infinity"]}`},
		{`{"NaN": "x NaN \" Infinity", "b": NaN}`, `{"NaN": "x NaN \" Infinity", "b": "NaN"}`},
		{`{"a\\": NaN}`, `{"a\\": "NaN"}`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, string(quotePythonSpecials([]byte(tt.in))), tt.in)
	}
}

func TestArrayErrorFormat(t *testing.T) {
	e := &ArrayError{File: "f.npz", Arrays: []string{"a", "b", "c"}, Reason: "bad"}
	require.Equal(t, `perf: f.npz: arrays "a", "b" and "c": bad`, e.Error())
	require.ErrorIs(t, e, ErrInvalidProfile)
}

// TestGenerateFixtures rewrites the fixtures derived from the H200 profile. It runs only
// with -update-fixtures; the files it writes are committed.
func TestGenerateFixtures(t *testing.T) {
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to regenerate testdata/profiles")
	}
	src := loadH200(t)
	pf, d := src.Prefill, src.Decode
	isl := make([]int64, len(pf.ISL))
	for i, v := range pf.ISL {
		isl[i] = int64(v)
	}
	write := func(dir, name string, content any) {
		t.Helper()
		dir = filepath.Join(profilesDir, dir)
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		path := filepath.Join(dir, name)
		switch c := content.(type) {
		case string:
			require.NoError(t, os.WriteFile(path, []byte(c), 0o644))
		case map[string]any:
			require.NoError(t, npz.Write(path, c))
		}
	}
	decodeArrays := func() map[string]any {
		return map[string]any{
			"x_kv_usage.npy": d.KVUsage, "y_context_length.npy": d.ContextLength,
			"z_itl.npy": d.ITLMs, "z_thpt_per_gpu.npy": d.ThroughputPerGPU,
			"max_kv_tokens.npy": []int64{d.MaxKVTokens},
		}
	}

	// Valid variants.
	scalar := decodeArrays()
	scalar["max_kv_tokens.npy"] = d.MaxKVTokens // 0-d array
	write("max-kv-scalar-npz", "decode_raw_data.npz", scalar)
	jsonDecode, err := os.ReadFile(filepath.Join(h200Dir, "decode_raw_data.json"))
	require.NoError(t, err)
	write("max-kv-list-json", "decode_raw_data.json", replaceOnce(t, string(jsonDecode), `"max_kv_tokens": 945029`, `"max_kv_tokens": [945029]`))
	jsonPrefill, err := os.ReadFile(filepath.Join(h200Dir, "prefill_raw_data.json"))
	require.NoError(t, err)
	write("encode", "prefill_raw_data.json", string(jsonPrefill))
	require.NoError(t, os.WriteFile(filepath.Join(profilesDir, "encode", "encode_raw_data.json"),
		[]byte(`{"encode_request_rate": [4, 1, 2], "encode_thpt_per_gpu": [2.5, 1, 2]}`+"\n"), 0o644))

	// Malformed variants.
	write("missing-array", "prefill_raw_data.npz", map[string]any{
		"prefill_isl.npy": isl, "prefill_thpt_per_gpu.npy": pf.ThroughputPerGPU,
	})
	unequal := decodeArrays()
	unequal["z_itl.npy"] = d.ITLMs[:40]
	write("unequal-lengths", "decode_raw_data.npz", unequal)
	nanTTFT := slices.Clone(pf.TTFTMs)
	nanTTFT[3] = math.NaN()
	write("nan", "prefill_raw_data.npz", map[string]any{
		"prefill_isl.npy": isl, "prefill_ttft.npy": nanTTFT, "prefill_thpt_per_gpu.npy": pf.ThroughputPerGPU,
	})
	write("two-dimensional", "prefill_raw_data.npz", map[string]any{
		"prefill_isl.npy": isl, "prefill_ttft.npy": mat.NewDense(17, 2, nil), "prefill_thpt_per_gpu.npy": pf.ThroughputPerGPU,
	})
	write("not-zip", "prefill_raw_data.npz", "this is not an NPZ archive\n")
	write("missing-array-json", "decode_raw_data.json",
		`{"x_kv_usage": [0.1, 0.2, 0.3], "y_context_length": [100, 200, 400], "z_itl": [5, 6, 7], "max_kv_tokens": 1000}`+"\n")
	// Python's json.dump writes NaN and -Infinity as bare literals.
	write("nan-json", "decode_raw_data.json",
		replaceOnce(t, replaceOnce(t, string(jsonDecode), "40.9643,", "NaN,"), "226.9198,", "-Infinity,"))
	write("bad-json", "prefill_raw_data.json", string(jsonPrefill[:len(jsonPrefill)/2]))
	write("duplicate-isl", "prefill_raw_data.json",
		`{"prefill_isl": [100, 1117, 1117, 3151], "prefill_ttft": [19.5, 38.5, 38.6, 63.2], "prefill_thpt_per_gpu": [5122, 29017, 29000, 49846]}`+"\n")
	write("nested-json", "prefill_raw_data.json",
		`{"prefill_isl": [[100, 1117, 2134, 3151]], "prefill_ttft": [19.5, 38.5, 50.0, 63.2], "prefill_thpt_per_gpu": [5122, 29017, 42707, 49846]}`+"\n")
}

func replaceOnce(t *testing.T, s, old, repl string) string {
	t.Helper()
	i := indexOnce(s, old)
	require.GreaterOrEqual(t, i, 0, "%q not found exactly once", old)
	return s[:i] + repl + s[i+len(old):]
}

// indexOnce returns the index of the only occurrence of sub in s, or -1.
func indexOnce(s, sub string) int {
	first := -1
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			if first >= 0 {
				return -1
			}
			first = i
		}
	}
	return first
}

func TestProfilePointsAreBounded(t *testing.T) {
	n := MaxProfilePoints + 1
	d := &DecodeProfile{KVUsage: make([]float64, n), ContextLength: make([]float64, n), ITLMs: make([]float64, n), ThroughputPerGPU: make([]float64, n), MaxKVTokens: 1000}
	for i := range n {
		d.KVUsage[i], d.ContextLength[i], d.ITLMs[i], d.ThroughputPerGPU[i] = float64(i%100)/100, float64(100+i), 10, 100
	}
	require.ErrorContains(t, d.Validate(), "has 1025 points, at most 1024")
	p := &PrefillProfile{ISL: make([]float64, n), TTFTMs: make([]float64, n), ThroughputPerGPU: make([]float64, n)}
	for i := range n {
		p.ISL[i], p.TTFTMs[i], p.ThroughputPerGPU[i] = float64(100+i), 50, 1000
	}
	require.ErrorContains(t, p.Validate(), "has 1025 points, at most 1024")
}
