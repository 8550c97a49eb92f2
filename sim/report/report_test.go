package report

import (
	"bytes"
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPageIsSelfContainedAndEscaped(t *testing.T) {
	p := Page{
		Title:  "demo <run>",
		Intro:  "first paragraph\n\nsecond & last",
		Tables: []Table{{Title: "summary", Header: []string{"metric", "value"}, Rows: [][]string{{"goodput", "97.5%"}}}},
		Charts: []Chart{{
			Title: "replicas", XLabel: "s", YLabel: "replicas",
			Series: []Series{{Name: "prefill", Step: true, Points: []Point{{0, 1}, {10, 2}, {20, math.NaN()}, {30, 1}}}},
			HLines: []HLine{{Name: "SLA <200 ms>", Y: 3}},
		}, {Title: "empty"}},
		Appendix: []Table{{Title: "notes <after>", Header: []string{"s", "note"}, Rows: [][]string{{"5", "held <3>"}}, Text: true}},
	}
	var buf bytes.Buffer
	require.NoError(t, p.Write(&buf))
	out := buf.String()
	require.Contains(t, out, "demo &lt;run&gt;")
	require.Contains(t, out, "second &amp; last")
	require.Contains(t, out, "SLA &lt;200 ms&gt;")
	require.Contains(t, out, "<td>97.5%</td>")
	require.Contains(t, out, "no data")
	require.NotContains(t, strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, ""), "http", "no network asset")
	require.Equal(t, 2, strings.Count(out, "<svg"))
	require.Greater(t, strings.Index(out, "notes &lt;after&gt;"), strings.LastIndex(out, "</svg>"), "the appendix after the charts")
	require.Contains(t, out, `<table class="text"><tr><th>s</th><th>note</th></tr>`+"\n"+`<tr><td>5</td><td>held &lt;3&gt;</td></tr>`)
	require.Equal(t, 1, strings.Count(out, `class="text"`), "the summary table's numbers stay right-aligned")
	// Each SVG is well-formed XML.
	for _, part := range strings.Split(out, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")+len("</svg>")]
		require.NoError(t, xml.Unmarshal([]byte(svg), new(struct{})), svg)
	}
	// The NaN made a gap: two path segments (two M commands).
	require.Contains(t, out, `d="M70.0 187.0H293.3V114.0M740.0 187.0`)
}

func TestTicks(t *testing.T) {
	require.Equal(t, []float64{0, 2, 4, 6, 8, 10}, ticks(0, 10, 5))
	require.Equal(t, []float64{0, 50, 100, 150}, ticks(0, 180, 4))
}
