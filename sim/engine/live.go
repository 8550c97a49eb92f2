package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrStopped is the error of the results of requests still in flight when a Live runner
// is stopped.
var ErrStopped = errors.New("engine: live runner stopped")

// LiveOptions configures a Live runner. Every field is optional.
type LiveOptions struct {
	// Now reads the clock (time.Now by default).
	Now func() time.Time
	// Sleep waits for d or until ctx is done, returning ctx's error then (a timer by
	// default). A test can pass a fake clock's Now and a Sleep that advances it.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnPass is called from the runner goroutine at the end of every pass (after the
	// sleep), before the pass's results are delivered; it is where the FPM is published.
	// The pass's Events slice is only valid during the call.
	OnPass func(Pass)
}

// Result is the outcome of a request submitted to a Live runner, delivered once on the
// channel Submit returned.
type Result struct {
	// FirstToken is when the first token was produced (zero on a decode engine, whose first
	// token came from the prefill engine).
	FirstToken time.Time
	// Finished is when the last token was produced (on a prefill engine, the first).
	Finished time.Time
	// HandoffDelay is the KV transfer delay a prefill engine reports with the first token.
	HandoffDelay time.Duration
	// Err is ErrStopped when the runner stopped before the request finished; nil otherwise.
	Err error
}

// liveWaiter is the completion state of one Live request.
type liveWaiter struct {
	ch      chan Result
	res     Result
	onToken func(time.Time)
}

// SubmitOptions are the optional settings of a request submitted with SubmitWith.
type SubmitOptions struct {
	// CachedTokens is the request's prefix-cache hit (see Request.CachedTokens).
	CachedTokens int
	// HashIDs are the prompt's block hashes for the engine's prefix cache (see
	// Request.HashIDs); the engine keeps the slice.
	HashIDs []uint64
	// OnToken, if set, is called with the time of every output token as it is produced
	// (the first, the intermediate ones and the last), in order, from the runner
	// goroutine with the runner's lock held: it must return quickly and must not call
	// the Live.
	OnToken func(time.Time)
}

// Live runs an Engine in real time in its own goroutine: it waits for work, runs a pass
// starting now (or, while the engine stays busy, when the previous pass ended, so that
// wake-up latency does not accumulate), sleeps until the pass ends, calls OnPass and
// delivers the first-token, token and completion times to the requests. Engine time is
// seconds since the runner started. It is the only part of the package that reads a
// clock. Submit, SubmitWith, Drain, Load and Stop are safe for concurrent use.
type Live struct {
	eng    *Engine
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	onPass func(Pass)
	epoch  time.Time
	// lastEnd is the engine time the last pass ended (runner goroutine only).
	lastEnd float64
	// lastArrival is the engine time of the newest submitted request (under mu): a chained
	// pass starts no earlier, so no request joins a pass that began before it arrived.
	lastArrival float64

	mu      sync.Mutex
	nextID  uint64
	waiters map[uint64]*liveWaiter

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLive starts running eng in real time. The runner owns eng from now on: use it only
// through the Live.
func NewLive(eng *Engine, opts LiveOptions) *Live {
	l := &Live{
		eng:     eng,
		now:     opts.Now,
		sleep:   opts.Sleep,
		onPass:  opts.OnPass,
		waiters: make(map[uint64]*liveWaiter),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.sleep == nil {
		l.sleep = sleepCtx
	}
	l.epoch = l.now()
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// engineTime is the engine time, in seconds, of t.
func (l *Live) engineTime(t time.Time) float64 { return t.Sub(l.epoch).Seconds() }

// wallTime is the clock time of engine time s.
func (l *Live) wallTime(s float64) time.Time {
	return l.epoch.Add(time.Duration(s * float64(time.Second)))
}

// Submit queues a request of isl prompt tokens and osl output tokens, arriving now. The
// returned channel receives its Result once. Errors are the Engine's (ErrDraining after
// Drain, ErrInvalidRequest, ErrTooLong) and ErrStopped after Stop.
func (l *Live) Submit(isl, osl int) (<-chan Result, error) {
	return l.SubmitWith(isl, osl, SubmitOptions{})
}

// SubmitWith is Submit with options: a prefix-cache hit and a per-token callback.
func (l *Live) SubmitWith(isl, osl int, opts SubmitOptions) (<-chan Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.eng.Draining() {
		return nil, ErrDraining
	}
	if l.ctx.Err() != nil {
		return nil, ErrStopped
	}
	id := l.nextID
	req := Request{ID: id, ISL: isl, OSL: osl, Arrival: l.engineTime(l.now()),
		CachedTokens: opts.CachedTokens, HashIDs: opts.HashIDs, TokenEvents: opts.OnToken != nil}
	if err := l.eng.Submit(req); err != nil {
		return nil, err
	}
	l.lastArrival = max(l.lastArrival, req.Arrival)
	l.nextID++
	w := &liveWaiter{ch: make(chan Result, 1), onToken: opts.OnToken}
	l.waiters[id] = w
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return w.ch, nil
}

// Load returns the engine's occupancy now, the requests of the pass running counted until it
// ends (Engine.LoadAt).
func (l *Live) Load() Load {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.eng.LoadAt(l.engineTime(time.Now()))
}

// PrefixStats returns the engine's prefix-cache counters.
func (l *Live) PrefixStats() PrefixStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.eng.PrefixStats()
}

// Drain stops accepting requests; the runner finishes the ones it holds, then exits and
// closes Done.
func (l *Live) Drain() {
	l.mu.Lock()
	l.eng.Drain()
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Done is closed when the runner has exited: after a Drain, once every request held has
// finished, or after Stop.
func (l *Live) Done() <-chan struct{} { return l.done }

// Stop stops the runner without waiting for the requests in flight, whose results get
// ErrStopped, and waits for the runner to exit or ctx to be done (then returning a
// wrapped ctx error). Stop after the runner exited returns nil.
func (l *Live) Stop(ctx context.Context) error {
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: stop live runner: %w", ctx.Err())
	}
}

func (l *Live) run() {
	defer close(l.done)
	defer l.failPending()
	chained := false // the previous pass ended with work left: the next one follows it at once
	for {
		l.mu.Lock()
		if l.eng.Idle() {
			chained = false
			draining := l.eng.Draining()
			l.mu.Unlock()
			if draining {
				return
			}
			select {
			case <-l.wake:
				continue
			case <-l.ctx.Done():
				return
			}
		}
		if l.ctx.Err() != nil {
			l.mu.Unlock()
			return
		}
		// Only this goroutine calls Step, so pass.Events stays valid until the next
		// iteration even though the lock is released.
		// A busy engine runs its passes back to back on the model clock: the next pass
		// starts when the previous one ended, not when this goroutine woke up, so
		// scheduling latency (a loaded machine) delays the delivery of a pass's events
		// but never accumulates into the engine's timeline. It starts no earlier than the
		// newest request's arrival, so a request that arrived while this goroutine was late
		// never gets a first token before it was submitted.
		now := l.engineTime(l.now())
		if chained {
			now = math.Min(now, math.Max(l.lastEnd, l.lastArrival))
		}
		pass, _ := l.eng.Step(now)
		l.lastEnd, chained = pass.End(), true
		l.mu.Unlock()
		if d := l.wallTime(pass.End()).Sub(l.now()); d > 0 {
			if err := l.sleep(l.ctx, d); err != nil {
				return
			}
		}
		if l.onPass != nil {
			l.onPass(pass)
		}
		l.deliver(pass.Events)
	}
}

// deliver records first tokens and completes finished requests.
func (l *Live) deliver(events []Event) {
	if len(events) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range events {
		w := l.waiters[ev.ID]
		if w == nil {
			continue
		}
		t := l.wallTime(ev.Time)
		switch ev.Kind {
		case EventFirstToken:
			w.res.FirstToken = t
			w.res.HandoffDelay = time.Duration(ev.HandoffDelay * float64(time.Second))
			if w.onToken != nil {
				w.onToken(t)
			}
		case EventToken:
			if w.onToken != nil {
				w.onToken(t)
			}
		case EventFinished:
			if w.onToken != nil && !t.Equal(w.res.FirstToken) {
				w.onToken(t) // the last token, unless it was the first
			}
			w.res.Finished = t
			w.ch <- w.res
			delete(l.waiters, ev.ID)
		}
	}
}

// failPending completes every request still in flight with ErrStopped.
func (l *Live) failPending() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel() // no Submit is accepted from now on
	for id, w := range l.waiters {
		w.res.Err = ErrStopped
		w.ch <- w.res
		delete(l.waiters, id)
	}
}
