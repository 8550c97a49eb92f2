package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkStep runs decode passes of a batch of 128 requests on a decode engine with the
// H200 profile timing; finished requests are replaced, so the batch stays at 128.
func BenchmarkStep(b *testing.B) {
	_, tim := profileTiming(b)
	e := newEngine(b, DefaultConfig(RoleDecode), tim)
	next := uint64(0)
	submit := func() {
		isl := 500 + int(next%128)*20
		require.NoError(b, e.Submit(Request{ID: next, ISL: isl, OSL: 100 + int(next%61)}))
		next++
	}
	for range 128 {
		submit()
	}
	now := 0.0
	step := func() {
		p, _ := e.Step(now)
		now = p.End()
		for _, ev := range p.Events {
			if ev.Kind == EventFinished {
				submit()
			}
		}
	}
	for range 1000 { // warm up: pools and slices at their steady size
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.StopTimer()
	// A request submitted when another finished waits for the next pass's admission.
	l := e.Load()
	require.Equal(b, 128, l.Running+l.Waiting)
}

// BenchmarkOffline pushes 10 minutes of 10 req/s (ISL 3000, OSL 300, evenly spaced)
// through one aggregated engine with the H200 profile timing as fast as possible, and
// reports simulated seconds per wall second.
func BenchmarkOffline(b *testing.B) { benchmarkOffline(b, false) }

// BenchmarkOfflinePrefixCache is BenchmarkOffline with the prefix cache on: every request
// has six hash blocks, the first four shared by the requests of its session (50 sessions).
func BenchmarkOfflinePrefixCache(b *testing.B) { benchmarkOffline(b, true) }

func benchmarkOffline(b *testing.B, prefix bool) {
	_, tim := profileTiming(b)
	const (
		rate     = 10.0
		duration = 600.0
		n        = int(rate * duration)
	)
	cfg := DefaultConfig(RoleAggregated)
	hashes := make([][]uint64, n)
	if prefix {
		cfg.EnablePrefixCaching = true
		for i := range hashes {
			sess := uint64(i % 50)
			hashes[i] = []uint64{sess * 4, sess*4 + 1, sess*4 + 2, sess*4 + 3, 1000 + 2*uint64(i), 1001 + 2*uint64(i)}
		}
	}
	var simulated, wall float64
	var passes, preempted int
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		e := newEngine(b, cfg, tim)
		now, next, finished := 0.0, 0, 0
		for next < n || !e.Idle() {
			if e.Idle() && now < float64(next)/rate {
				now = float64(next) / rate
			}
			for next < n && float64(next)/rate <= now {
				if err := e.Submit(Request{ID: uint64(next), ISL: 3000, OSL: 300, Arrival: float64(next) / rate, HashIDs: hashes[next]}); err != nil {
					b.Fatal(err)
				}
				next++
			}
			p, _ := e.Step(now)
			now = p.End()
			passes++
			preempted += p.Preempted
			for _, ev := range p.Events {
				if ev.Kind == EventFinished {
					finished++
				}
			}
		}
		if finished != n {
			b.Fatalf("finished %d of %d requests", finished, n)
		}
		simulated += now
		wall += time.Since(start).Seconds()
	}
	b.ReportMetric(simulated/wall, "sim-s/wall-s")
	b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
	b.ReportMetric(float64(preempted)/float64(b.N), "preemptions/op")
	b.ReportMetric(simulated/float64(b.N), "sim-s/op")
}
