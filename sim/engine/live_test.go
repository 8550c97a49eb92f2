package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
)

// fakeClock is a clock whose Sleep advances it instantly.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return nil
}

func waitResult(t *testing.T, ch <-chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no result")
		return Result{}
	}
}

func TestLiveFakeClock(t *testing.T) {
	_, tim := profileTiming(t)
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: epoch}
	var mu sync.Mutex
	var fpms []perf.FPM
	eng := newEngine(t, DefaultConfig(RoleAggregated), tim)
	l := NewLive(eng, LiveOptions{Now: clk.Now, Sleep: clk.Sleep, OnPass: func(p Pass) {
		mu.Lock()
		fpms = append(fpms, p.FPM)
		mu.Unlock()
	}})

	// One request alone: TTFT is the profiled TTFT of its ISL, the rest is 9 decode passes.
	ch, err := l.Submit(3151, 10)
	require.NoError(t, err)
	r := waitResult(t, ch)
	require.NoError(t, r.Err)
	require.InDelta(t, 63.2148, float64(r.FirstToken.Sub(epoch))/1e6, 1e-3, "TTFT in ms")
	mu.Lock()
	require.Len(t, fpms, 10)
	decode := 0.0
	for _, f := range fpms[1:] {
		require.Equal(t, int64(1), f.Scheduled.NumDecodeRequests)
		decode += f.WallTime
	}
	mu.Unlock()
	require.InDelta(t, decode, r.Finished.Sub(r.FirstToken).Seconds(), 1e-6)
	require.Zero(t, r.HandoffDelay)

	// Many concurrent submitters.
	const n = 40
	var wg sync.WaitGroup
	results := make([]Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := l.Submit(500+i*50, 1+i%7)
			if err != nil {
				results[i].Err = err
				return
			}
			results[i] = <-ch
		}()
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.Err, "request %d", i)
		require.False(t, r.FirstToken.IsZero())
		require.False(t, r.Finished.Before(r.FirstToken))
	}

	l.Drain()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("drained runner did not exit")
	}
	_, err = l.Submit(10, 1)
	require.ErrorIs(t, err, ErrDraining)
	require.Equal(t, Load{KVBlocksTotal: 945029 / 64}, l.Load())
	require.NoError(t, l.Stop(context.Background()))
}

func TestLiveDrainFinishesInFlight(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	cfg := DefaultConfig(RolePrefill)
	l := NewLive(newEngine(t, cfg, MockerPolynomial()), LiveOptions{Now: clk.Now, Sleep: clk.Sleep})
	var chans []<-chan Result
	for range 5 {
		ch, err := l.Submit(4000, 100)
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	l.Drain()
	<-l.Done()
	for _, ch := range chans {
		r := waitResult(t, ch)
		require.NoError(t, r.Err, "drain finishes the requests in flight")
		require.Equal(t, r.FirstToken, r.Finished, "a prefill engine finishes with the first token")
		require.Equal(t, time.Duration(4000*DefaultKVBytesPerToken/DefaultKVTransferBandwidth*1e9), r.HandoffDelay)
	}
}

func TestLiveStop(t *testing.T) {
	// A real clock with a sleep that never ends on its own: the pass is in flight at Stop.
	started := make(chan struct{})
	var once sync.Once
	sleep := func(ctx context.Context, d time.Duration) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	}
	l := NewLive(newEngine(t, DefaultConfig(RoleAggregated), MockerPolynomial()), LiveOptions{Sleep: sleep})
	ch, err := l.Submit(1000, 50)
	require.NoError(t, err)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, l.Stop(ctx))
	r := waitResult(t, ch)
	require.ErrorIs(t, r.Err, ErrStopped)
	_, err = l.Submit(10, 1)
	require.ErrorIs(t, err, ErrStopped)
	<-l.Done()
}

func TestLiveRealClock(t *testing.T) {
	cfg := DefaultConfig(RoleAggregated)
	cfg.SpeedupRatio = 20
	l := NewLive(newEngine(t, cfg, MockerPolynomial()), LiveOptions{})
	defer func() { require.NoError(t, l.Stop(context.Background())) }()
	before := time.Now()
	ch, err := l.Submit(1000, 5)
	require.NoError(t, err)
	r := waitResult(t, ch)
	require.NoError(t, r.Err)
	// Prefill (32.1 ms) + 4 decodes (≥ 5.74 ms) at speedup 20: at least 2.7 ms.
	require.GreaterOrEqual(t, r.Finished.Sub(before), 2700*time.Microsecond)
	require.True(t, r.FirstToken.After(before))
	require.True(t, r.Finished.After(r.FirstToken))
}

// TestLiveLateWakeNeverStartsAPassBeforeAnArrival: a busy engine chains its passes on the
// model clock, but a request submitted while the runner woke late must not join a pass
// that began before it arrived: its TTFT is at least its prefill's profiled time.
func TestLiveLateWakeNeverStartsAPassBeforeAnArrival(t *testing.T) {
	_, tim := profileTiming(t)
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: epoch}
	eng := newEngine(t, DefaultConfig(RoleAggregated), tim)
	var l *Live
	var late <-chan Result
	var submitted time.Time
	sleeps := 0
	sleep := func(ctx context.Context, d time.Duration) error {
		if err := clk.Sleep(ctx, d); err != nil {
			return err
		}
		sleeps++
		if sleeps == 3 { // during the first request's decode: the runner wakes 50 ms late
			require.NoError(t, clk.Sleep(ctx, 50*time.Millisecond))
			submitted = clk.Now()
			ch, err := l.Submit(3151, 1)
			require.NoError(t, err)
			late = ch
		}
		return nil
	}
	l = NewLive(eng, LiveOptions{Now: clk.Now, Sleep: sleep})
	first, err := l.Submit(100, 20)
	require.NoError(t, err)
	require.NoError(t, waitResult(t, first).Err)
	require.NotNil(t, late)
	r := waitResult(t, late)
	require.NoError(t, r.Err)
	require.GreaterOrEqual(t, r.FirstToken.Sub(submitted).Seconds()*1000, 63.2148-1e-3,
		"TTFT from its submission at least the profiled prefill of ISL 3151")
	require.NoError(t, l.Stop(context.Background()))
}
