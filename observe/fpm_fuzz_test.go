package observe

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/llmplanner/planner/perf"
)

// FuzzDecodeFPM checks that DecodeFPM never panics and that whatever it accepts survives an
// AppendFPM round trip unchanged.
func FuzzDecodeFPM(f *testing.F) {
	golden, err := os.ReadFile("testdata/fpm/golden_v1.hex")
	if err != nil {
		f.Fatal(err)
	}
	g, err := hex.DecodeString(strings.TrimSpace(string(golden)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(g)
	f.Add(g[:len(g)/2])
	f.Add(append(append([]byte{}, g...), 0xc0))
	f.Add(AppendFPM(nil, &perf.FPM{WorkerID: "0f8fad5b-d9cb-469f-a165-70867728950e", DPRank: 3}))
	f.Add([]byte(enc{}.a(7).i(1).s("w").i(0).i(3).f(0.01).a(7).i(1).i(2).f(0).i(0).i(0).i(0).f(0).null()))
	f.Add([]byte(enc{}.m(2).kv("x").m(1).s("y").a(1).i(1).worker("w")))
	f.Add([]byte(enc{}.m(1).wall(-1)))
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x91, 0x91, 0x91, 0x91})
	f.Fuzz(func(t *testing.T, data []byte) {
		var first perf.FPM
		if err := DecodeFPM(data, &first); err != nil {
			if first != (perf.FPM{}) {
				t.Fatalf("failed decode left %+v", first)
			}
			return
		}
		again := AppendFPM(nil, &first)
		var second perf.FPM
		if err := DecodeFPM(again, &second); err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", first, err)
		}
		if first != second {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", first, second)
		}
	})
}
