// Package report renders a self-contained HTML report: summary tables and line charts drawn
// as inline SVG, with no script and no network asset, so the file opens anywhere offline. The
// demo and the offline simulator write their results with it.
package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Color  string // CSS colour; a palette colour when empty
	Points []Point
	// Step draws a staircase (replica counts) instead of straight segments.
	Step bool
	// Dashed draws a dashed line.
	Dashed bool
}

// HLine is a horizontal reference line (an SLA).
type HLine struct {
	Name  string
	Y     float64
	Color string
}

// Chart is one plot.
type Chart struct {
	Title  string
	XLabel string
	YLabel string
	Series []Series
	HLines []HLine
	// YMin forces the lower bound of the Y axis (default: 0 or the data minimum if negative).
	YMin *float64
}

// Table is a summary table.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	// Text left-aligns every cell (a table of prose, such as notes); numbers are
	// right-aligned otherwise.
	Text bool
}

// Page is a whole report.
type Page struct {
	Title string
	// Intro is plain text shown under the title (paragraphs split on blank lines).
	Intro  string
	Tables []Table
	Charts []Chart
	// Appendix are tables shown after the charts (long ones, which would push the charts
	// down).
	Appendix []Table
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

const (
	width, height          = 900.0, 300.0
	padL, padR, padT, padB = 70.0, 160.0, 30.0, 40.0
	plotW, plotH           = width - padL - padR, height - padT - padB
	maxPointsPerSeries     = 4000
)

// SVG renders a chart as an SVG element.
func (c Chart) SVG() string {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) {
				continue
			}
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
		}
	}
	for _, h := range c.HLines {
		ymin, ymax = math.Min(ymin, h.Y), math.Max(ymax, h.Y)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" font-family="sans-serif" font-size="11">`, width, height, width, height)
	fmt.Fprintf(&b, `<text x="%g" y="16" font-size="13" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(c.Title))
	if math.IsInf(xmin, 1) {
		fmt.Fprintf(&b, `<text x="%g" y="%g">no data</text></svg>`, padL, padT+plotH/2)
		return b.String()
	}
	if ymin > 0 {
		ymin = 0
	}
	if c.YMin != nil {
		ymin = *c.YMin
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	ymax += (ymax - ymin) * 0.05
	if xmax <= xmin {
		xmax = xmin + 1
	}
	sx := func(x float64) float64 { return padL + (x-xmin)/(xmax-xmin)*plotW }
	sy := func(y float64) float64 { return padT + plotH - (y-ymin)/(ymax-ymin)*plotH }
	// Axes and ticks.
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	for _, t := range ticks(ymin, ymax, 5) {
		y := sy(t)
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/>`, padL, y, padL+plotW, y)
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, label(t))
	}
	for _, t := range ticks(xmin, xmax, 8) {
		x := sx(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#999"/>`, x, padT+plotH, x, padT+plotH+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`, x, padT+plotH+16, label(t))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`, padL+plotW/2, height-4, template.HTMLEscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(14,%g) rotate(-90)" text-anchor="middle">%s</text>`, padT+plotH/2, template.HTMLEscapeString(c.YLabel))
	legendY := padT + 10.0
	legend := func(name, color string, dashed bool) {
		dash := ""
		if dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`, padL+plotW+10, legendY, padL+plotW+30, legendY, color, dash)
		fmt.Fprintf(&b, `<text x="%g" y="%g">%s</text>`, padL+plotW+34, legendY+4, template.HTMLEscapeString(name))
		legendY += 16
	}
	for i, h := range c.HLines {
		color := h.Color
		if color == "" {
			color = palette[(i+4)%len(palette)]
		}
		y := sy(h.Y)
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/>`, padL, y, padL+plotW, y, color)
		legend(h.Name, color, true)
	}
	for i, s := range c.Series {
		color := s.Color
		if color == "" {
			color = palette[i%len(palette)]
		}
		pts := thin(s.Points, maxPointsPerSeries)
		var path strings.Builder
		first, lastY := true, 0.0
		for _, p := range pts {
			if !finite(p.X) || !finite(p.Y) {
				first = true // a gap
				continue
			}
			x, y := sx(p.X), sy(p.Y)
			switch {
			case first:
				fmt.Fprintf(&path, "M%.1f %.1f", x, y)
				first = false
			case s.Step:
				fmt.Fprintf(&path, "H%.1fV%.1f", x, y)
			default:
				fmt.Fprintf(&path, "L%.1f %.1f", x, y)
			}
			lastY = y
		}
		if s.Step && len(pts) > 0 && !first {
			fmt.Fprintf(&path, "H%.1f", sx(xmax))
			_ = lastY
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"%s/>`, path.String(), color, dash)
		legend(s.Name, color, s.Dashed)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// thin keeps at most n points, evenly spread (always keeping the last).
func thin(pts []Point, n int) []Point {
	if len(pts) <= n {
		return pts
	}
	out := make([]Point, 0, n+1)
	step := float64(len(pts)) / float64(n)
	for i := 0.0; int(i) < len(pts); i += step {
		out = append(out, pts[int(i)])
	}
	return append(out, pts[len(pts)-1])
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// ticks returns about n round tick values covering [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	span := hi - lo
	if !(span > 0) {
		return []float64{lo}
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for t := math.Ceil(lo/step) * step; t <= hi+step*1e-9; t += step {
		out = append(out, t)
	}
	return out
}

func label(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
table.text td,table.text th{text-align:left;vertical-align:top}
svg{display:block;margin:10px 0 24px}
</style></head><body>
<h1>{{.Title}}</h1>
{{range .Paragraphs}}<p>{{.}}</p>
{{end}}{{range .Tables}}{{template "table" .}}{{end}}{{range .SVGs}}{{.}}
{{end}}{{range .Appendix}}{{template "table" .}}{{end}}</body></html>
{{define "table"}}<h2>{{.Title}}</h2>
<table{{if .Text}} class="text"{{end}}><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}`))

// Write renders the page.
func (p Page) Write(w io.Writer) error {
	data := struct {
		Title      string
		Paragraphs []string
		Tables     []Table
		SVGs       []template.HTML
		Appendix   []Table
	}{Title: p.Title, Tables: p.Tables, Appendix: p.Appendix}
	for _, para := range strings.Split(p.Intro, "\n\n") {
		if s := strings.TrimSpace(para); s != "" {
			data.Paragraphs = append(data.Paragraphs, s)
		}
	}
	for _, c := range p.Charts {
		data.SVGs = append(data.SVGs, template.HTML(c.SVG())) // #nosec: built from escaped parts
	}
	if err := page.Execute(w, data); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
