package predict

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// ClientWindow is one client's traffic in one ServeGen window: its mean request rate and
// the coefficient of variation of its inter-arrival times (0 when the window has too few
// requests to measure one).
type ClientWindow struct {
	Rate, IATCV float64
}

// ClientSeries is one model's per-client windows from the ServeGen client CSV.
type ClientSeries struct {
	// Category and Model identify the series ("language", "m-large").
	Category, Model string
	// StepSeconds is the window length (600 s in the published data).
	StepSeconds float64
	// Windows are the windows in time order, each with the clients that sent requests in it
	// (rate > 0), in the file's order.
	Windows [][]ClientWindow
}

// Bounds on the client CSV: the published file has 648,576 rows, 5 series of at most 2,016
// windows each and at most 162 clients a model; a window's rate is far below the bound.
const (
	maxServeGenRows    = 10_000_000
	maxServeGenSeries  = 1_000
	maxServeGenWindows = 1_000_000 // window slots over all series
	maxServeGenRate    = 1e5
	maxServeGenIATCV   = 1e6
)

// ReadServeGenClients reads servegen_client_windows_10min.csv[.gz] (columns category,
// model, client_id, timestamp_s, rate_rps, iat_cv, ...; other columns ignored): one series
// per (category, model), in order of first appearance, windows of 600 s from timestamp 0.
// Rows may come in any order; two rows of one client and window are two clients, and a
// window no row names is empty. A timestamp that is not a whole window, a negative or
// non-finite rate or cv, or a file past the bounds (rows, series, window slots over all
// series) is an error naming the file and line.
func ReadServeGenClients(path string) ([]ClientSeries, error) {
	const step = 600.0
	r, err := openData(path)
	if err != nil {
		return nil, fmt.Errorf("predict: read servegen clients: %w", err)
	}
	defer r.Close()
	cr, col, err := csvWithColumns(path, r, "category", "model", "timestamp_s", "rate_rps", "iat_cv")
	if err != nil {
		return nil, err
	}
	var out []ClientSeries
	index := map[[2]string]int{}
	slots := 0 // windows over all series
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("predict: %s:%d: %w", path, line, err)
		}
		if line-1 > maxServeGenRows {
			return nil, fmt.Errorf("predict: %s: more than %d rows", path, maxServeGenRows)
		}
		ts, err1 := strconv.ParseFloat(rec[col["timestamp_s"]], 64)
		rate, err2 := strconv.ParseFloat(rec[col["rate_rps"]], 64)
		cv, err3 := strconv.ParseFloat(rec[col["iat_cv"]], 64)
		switch {
		case err1 != nil || !finite(ts) || ts < 0 || math.Mod(ts, step) != 0 || ts/step >= maxServeGenWindows:
			return nil, fmt.Errorf("predict: %s:%d: timestamp_s %q is not a whole %v s window below %d of them", path, line, rec[col["timestamp_s"]], step, maxServeGenWindows)
		case err2 != nil || !finite(rate) || rate < 0 || rate > maxServeGenRate:
			return nil, fmt.Errorf("predict: %s:%d: rate_rps %q not in [0, %g]", path, line, rec[col["rate_rps"]], maxServeGenRate)
		case err3 != nil || !finite(cv) || cv < 0 || cv > maxServeGenIATCV:
			return nil, fmt.Errorf("predict: %s:%d: iat_cv %q not in [0, %g]", path, line, rec[col["iat_cv"]], maxServeGenIATCV)
		}
		key := [2]string{rec[col["category"]], rec[col["model"]]}
		i, ok := index[key]
		if !ok {
			if len(out) == maxServeGenSeries {
				return nil, fmt.Errorf("predict: %s:%d: more than %d series (category, model)", path, line, maxServeGenSeries)
			}
			i = len(out)
			index[key] = i
			out = append(out, ClientSeries{Category: key[0], Model: key[1], StepSeconds: step})
		}
		w := int(ts / step)
		if grow := w + 1 - len(out[i].Windows); grow > 0 {
			if slots+grow > maxServeGenWindows {
				return nil, fmt.Errorf("predict: %s:%d: more than %d windows over all series", path, line, maxServeGenWindows)
			}
			slots += grow
			out[i].Windows = append(out[i].Windows, make([][]ClientWindow, grow)...)
		}
		if rate > 0 {
			out[i].Windows[w] = append(out[i].Windows[w], ClientWindow{Rate: rate, IATCV: cv})
		}
	}
	return out, nil
}

// RecordingGapShare is the share of a series' median window rate under which a ServeGen
// window is a gap in the recording, not traffic. In the published files 139 of the 6,336
// windows are under 1.4% of their series' median — runs of 1 to 24 windows in the two
// language models m-mid and m-small, at 0–25 req/s where the windows either side carry
// hundreds to thousands — and no window lies between that and 25% of its series' median.
const RecordingGapShare = 0.05

// RecordingGaps reports which windows of a series of per-window rates (or counts) are gaps
// in its recording: those under RecordingGapShare of the series' median window (the upper
// of the two middle windows when their number is even). A series whose median is 0 has none.
func RecordingGaps(rates []float64) []bool {
	gaps := make([]bool, len(rates))
	if len(rates) == 0 {
		return gaps
	}
	sorted := slices.Sorted(slices.Values(rates))
	floor := RecordingGapShare * sorted[len(sorted)/2]
	for i, r := range rates {
		gaps[i] = r < floor
	}
	return gaps
}

// Gaps reports which of the series' windows are gaps in its recording (RecordingGaps of
// the window counts).
func (s RateSeries) Gaps() []bool { return RecordingGaps(s.Counts) }

// Gaps reports which of the series' windows are gaps in its recording (RecordingGaps of
// each window's total rate over its clients).
func (s ClientSeries) Gaps() []bool {
	totals := make([]float64, len(s.Windows))
	for i, w := range s.Windows {
		for _, c := range w {
			totals[i] += c.Rate
		}
	}
	return RecordingGaps(totals)
}
