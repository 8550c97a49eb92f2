package predict

import (
	"math"
	"math/rand/v2"
	"testing"
)

// noisySine is a 50-point noisy sine around 100 (period 12), fixed seed.
func noisySine() []float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	y := make([]float64, 50)
	for i := range y {
		y[i] = 100 + 40*math.Sin(2*math.Pi*float64(i)/12) + 5*rng.NormFloat64()
	}
	return y
}

// BenchmarkARIMAFit50 is the full auto_arima (KPSS differencing test, stepwise search,
// maximum-likelihood polish) on 50 points: the Azure trace at 60 s and a noisy sine.
// Budget: 5 ms.
func BenchmarkARIMAFit50(b *testing.B) {
	for _, tc := range []struct {
		name string
		y    []float64
	}{{"azure60", azure60}, {"sine", noisySine()}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := autoARIMA(tc.y); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAddPredict is one throughput tick in steady state (Add then Predict) for every
// kind, after 100 points (ARIMA: the model.update path, not a new search).
func BenchmarkAddPredict(b *testing.B) {
	for _, k := range Kinds {
		b.Run(string(k), func(b *testing.B) {
			p, err := New(Options{Kind: k, StepSeconds: 60})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			next := func(i int) float64 {
				return math.Round(200 + 60*math.Sin(2*math.Pi*float64(i)/30) + 20*rng.NormFloat64())
			}
			for i := range 100 {
				p.Add(next(i))
				if _, err := p.Predict(); err != nil {
					b.Fatal(err)
				}
			}
			i := 100
			for b.Loop() {
				p.Add(next(i))
				i++
				if _, err := p.Predict(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
