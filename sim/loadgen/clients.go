package loadgen

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/llmplanner/planner/predict"
)

// ClientsOptions describe a load made of many clients' own arrival processes, as ServeGen
// measured them: each window of Windows is replayed over StepS seconds, and in it each
// client sends a stationary gamma renewal process with the client's rate × Scale and its
// inter-arrival coefficient of variation (cv 0, too few requests to measure one, is read as
// Poisson's 1; cv is kept within [MinIATCV, MaxIATCV]; a client under MinClientRate after
// scaling sends nothing). ServeGen fits a gamma or a Weibull law to each client window; the
// gamma matched on the measured rate and cv reproduces the measured cv, which is often higher
// than the cv of the Weibull fitted to the same window. Lengths are drawn as in RatesOptions.
type ClientsOptions struct {
	Windows          [][]predict.ClientWindow
	StepS, DurationS float64
	Scale            float64
	MeanISL, MeanOSL float64
	MaxTokens        int
	Seed             uint64
}

// MinIATCV and MaxIATCV bound a client window's inter-arrival cv: the gamma's shape 1/cv²
// stays within [0.01, 10⁴]. At cv 10 most of a client's requests arrive at the same instant
// as the one before (three in four): batches of requests, minutes apart.
const (
	MinIATCV = 0.01
	MaxIATCV = 10
)

// MinClientRate is the slowest client rate (req/s, after scaling) that sends requests: one
// request in about 30 years, so a slower one would send none in any load anyway.
const MinClientRate = 1e-9

// maxClientRequests bounds a load's request count.
const maxClientRequests = 20_000_000

// FromClients generates the load of o, in arrival order.
func FromClients(o ClientsOptions) ([]predict.Request, error) {
	switch {
	case len(o.Windows) == 0 || !(o.StepS > 0) || !(o.DurationS > 0) || o.DurationS > 7*24*3600:
		return nil, fmt.Errorf("loadgen: clients: need windows, a step > 0 and a duration in (0, 1 week]")
	case !(o.Scale > 0) || o.Scale > 1e6:
		return nil, fmt.Errorf("loadgen: clients: scale %v not in (0, 1e6]", o.Scale)
	case !(o.MeanISL >= 1) || !(o.MeanOSL >= 1) || o.MaxTokens < 2:
		return nil, fmt.Errorf("loadgen: clients: mean lengths must be >= 1 and max tokens >= 2")
	}
	var expected float64
	for w, clients := range o.Windows {
		for _, c := range clients {
			if !(c.Rate >= 0) || c.Rate > 1e5 || !(c.IATCV >= 0) || math.IsInf(c.IATCV, 0) {
				return nil, fmt.Errorf("loadgen: clients: window %d has a client at rate %v, cv %v (want a rate in [0, 1e5] and a finite cv >= 0)", w, c.Rate, c.IATCV)
			}
			expected += c.Rate * o.Scale * o.StepS
		}
	}
	if expected > maxClientRequests {
		return nil, fmt.Errorf("loadgen: clients: about %.0f requests, more than %d", expected, maxClientRequests)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	var out []predict.Request
	for w, clients := range o.Windows {
		from := float64(w) * o.StepS
		if from >= o.DurationS {
			break
		}
		to := math.Min(from+o.StepS, o.DurationS)
		for _, c := range clients {
			rate := c.Rate * o.Scale
			if !(rate >= MinClientRate) {
				continue
			}
			cv := c.IATCV
			if cv <= 0 {
				cv = 1
			}
			shape := 1 / math.Pow(math.Max(MinIATCV, math.Min(cv, MaxIATCV)), 2)
			gap := distuv.Gamma{Alpha: shape, Beta: shape * rate, Src: rng}
			// Stationary from the window's start: the first arrival is a uniform share of a
			// length-biased gap (a gamma of shape + 1).
			first := distuv.Gamma{Alpha: shape + 1, Beta: shape * rate, Src: rng}
			for t := from + rng.Float64()*first.Rand(); t < to; t += gap.Rand() {
				if len(out) >= maxClientRequests {
					return nil, fmt.Errorf("loadgen: clients: more than %d requests", maxClientRequests)
				}
				isl, osl := exponentialLengths(rng, o.MeanISL, o.MeanOSL, o.MaxTokens)
				out = append(out, predict.Request{Arrival: t, InputTokens: isl, OutputTokens: osl})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b predict.Request) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return out, nil
}
