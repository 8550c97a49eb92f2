package loadgen

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat"

	"github.com/llmplanner/planner/predict"
)

// counts are the requests per second of reqs over [0, seconds).
func counts(reqs []predict.Request, seconds int) []float64 {
	c := make([]float64, seconds)
	for _, r := range reqs {
		c[int(r.Arrival)]++
	}
	return c
}

func TestFromClients(t *testing.T) {
	windows := func(n int, clients ...predict.ClientWindow) [][]predict.ClientWindow {
		w := make([][]predict.ClientWindow, n)
		for i := range w {
			w[i] = clients
		}
		return w
	}
	o := ClientsOptions{Windows: windows(50, predict.ClientWindow{Rate: 2, IATCV: 1}, predict.ClientWindow{Rate: 3, IATCV: 0}),
		StepS: 60, DurationS: 3000, Scale: 2, MeanISL: 300, MeanOSL: 100, MaxTokens: 1000, Seed: 1}
	a, err := FromClients(o)
	require.NoError(t, err)
	b, err := FromClients(o)
	require.NoError(t, err)
	require.Equal(t, a, b, "seeded")
	// Two Poisson clients (cv 0 is read as 1) at (2 + 3) × 2 req/s for 3,000 s.
	require.InDelta(t, 30000, len(a), 600)
	c := counts(a, 3000)
	mean, variance := stat.MeanVariance(c, nil)
	require.InDelta(t, 1, variance/mean, 0.1, "Poisson: the counts' variance is their mean")
	for i, r := range a {
		require.GreaterOrEqual(t, r.InputTokens, 1)
		require.GreaterOrEqual(t, r.OutputTokens, 1)
		require.LessOrEqual(t, r.InputTokens+r.OutputTokens, 1000)
		require.Less(t, r.Arrival, 3000.0)
		if i > 0 {
			require.GreaterOrEqual(t, r.Arrival, a[i-1].Arrival, "in arrival order")
		}
	}

	// A bursty client keeps its mean rate but not Poisson's spread.
	o.Windows = windows(50, predict.ClientWindow{Rate: 5, IATCV: 4})
	bursty, err := FromClients(o)
	require.NoError(t, err)
	require.InDelta(t, 30000, len(bursty), 6000)
	mean, variance = stat.MeanVariance(counts(bursty, 3000), nil)
	require.Greater(t, variance/mean, 5.0, "cv 4: far over-dispersed")

	// An empty window sends nothing; the last window is cut at the duration, and windows past
	// it are not replayed.
	o.Windows = [][]predict.ClientWindow{{{Rate: 1, IATCV: 1}}, nil, {{Rate: 1, IATCV: 1}}, {{Rate: 1, IATCV: 1}}}
	o.DurationS, o.Scale = 150, 1
	short, err := FromClients(o)
	require.NoError(t, err)
	var third int
	for _, r := range short {
		require.False(t, r.Arrival >= 60 && r.Arrival < 120, "the empty window at %v s", r.Arrival)
		require.Less(t, r.Arrival, 150.0)
		if r.Arrival >= 120 {
			third++
		}
	}
	require.NotZero(t, third, "the window cut at the duration is replayed up to it")

	// Each window starts its clients stationary: the first arrival is a share of a
	// length-biased gap. Started at a gap's beginning, or a share of an unbiased gap, one-second
	// windows of a bursty client would send five times their rate.
	o.Windows, o.StepS, o.DurationS = windows(100_000, predict.ClientWindow{Rate: 1, IATCV: 4}), 1, 100_000
	stationary, err := FromClients(o)
	require.NoError(t, err)
	require.InEpsilon(t, 100_000, len(stationary), 0.05)

	// A rate too small to send anything, and a cv too small to be a gamma, neither panic
	// nor lose the other clients.
	o.Windows, o.StepS, o.DurationS = windows(10, predict.ClientWindow{Rate: 1e-322, IATCV: 10}, predict.ClientWindow{Rate: 5, IATCV: 1e-200}), 60, 600
	tiny, err := FromClients(o)
	require.NoError(t, err)
	require.InDelta(t, 3000, len(tiny), 30, "the regular client's 5 req/s, nearly exactly")

	ok := ClientsOptions{Windows: windows(1, predict.ClientWindow{Rate: 1}), StepS: 1, DurationS: 1, Scale: 1, MeanISL: 1, MeanOSL: 1, MaxTokens: 2}
	for name, tc := range map[string]struct {
		mutate func(*ClientsOptions)
		err    string
	}{
		"no windows":    {func(o *ClientsOptions) { o.Windows = nil }, "need windows"},
		"no step":       {func(o *ClientsOptions) { o.StepS = 0 }, "a step > 0"},
		"absurd length": {func(o *ClientsOptions) { o.DurationS = 1e9 }, "1 week"},
		"zero scale":    {func(o *ClientsOptions) { o.Scale = 0 }, "scale 0 not in"},
		"NaN scale":     {func(o *ClientsOptions) { o.Scale = math.NaN() }, "scale NaN not in"},
		"tiny context":  {func(o *ClientsOptions) { o.MaxTokens = 1 }, "max tokens"},
		"negative rate": {func(o *ClientsOptions) { o.Windows = windows(1, predict.ClientWindow{Rate: -1}) }, "window 0 has a client at rate -1"},
		"infinite cv":   {func(o *ClientsOptions) { o.Windows = windows(1, predict.ClientWindow{Rate: 1, IATCV: math.Inf(1)}) }, "cv +Inf"},
		"too many": {func(o *ClientsOptions) {
			o.Windows, o.StepS, o.DurationS = windows(1, predict.ClientWindow{Rate: 1e5}), 3600, 3600
		}, "more than 20000000"},
	} {
		bad := ok
		tc.mutate(&bad)
		_, err := FromClients(bad)
		require.ErrorContains(t, err, tc.err, name)
	}
	_, err = FromClients(ok)
	require.NoError(t, err)
}
