package observe_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/fpmpub"
)

// goroutines dumps every goroutine's stack.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// startSubscriber runs a subscriber until the test ends and checks it leaves no goroutine
// and no open socket behind (Close terminates the ZeroMQ context, which waits for every
// socket to be closed).
func startSubscriber(t *testing.T, store *observe.FPMStore) (*observe.Subscriber, context.CancelFunc) {
	t.Helper()
	sub, err := observe.NewSubscriber(store, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-runErr:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		closed := make(chan error, 1)
		go func() { closed <- sub.Close() }()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("Close blocked: a socket was left open")
		}
		require.NotContains(t, goroutines(), "(*Subscriber).Run")
	})
	return sub, cancel
}

func newPublisher(t *testing.T, worker string, hb time.Duration) *fpmpub.Publisher {
	t.Helper()
	p, err := fpmpub.New("tcp://127.0.0.1:*", worker, 0, fpmpub.Options{HeartbeatInterval: hb})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// samplesTaken counts the regression samples the test's snapshots took, per role.
var samplesTaken = map[observe.Role]int{}

func latest(store *observe.FPMStore, role observe.Role, worker string) (perf.FPM, bool) {
	obs, _ := store.Snapshot(time.Now(), 0)
	samplesTaken[observe.RolePrefill] += len(obs.PrefillSamples)
	samplesTaken[observe.RoleDecode] += len(obs.DecodeSamples)
	list := obs.Decode
	if role == observe.RolePrefill {
		list = obs.Prefill
	}
	for _, f := range list {
		if f.WorkerID == worker {
			return f, true
		}
	}
	return perf.FPM{}, false
}

func TestSubscriberEndToEnd(t *testing.T) {
	const hb = 40 * time.Millisecond
	pre := newPublisher(t, "prefill-0", hb)
	dec := newPublisher(t, "decode-0", hb)

	// A plain PUB socket for malformed messages.
	bad, err := zmq.NewSocket(zmq.PUB)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bad.Close() })
	require.NoError(t, bad.SetLinger(0))
	require.NoError(t, bad.Bind("tcp://127.0.0.1:*"))
	badEP, err := bad.GetLastEndpoint()
	require.NoError(t, err)

	store := observe.NewFPMStore()
	sub, _ := startSubscriber(t, store)
	require.Error(t, sub.SetEndpoints(map[string]observe.Role{pre.Endpoint(): "mixed"}), "unknown role rejected")
	endpoints := map[string]observe.Role{
		pre.Endpoint(): observe.RolePrefill,
		dec.Endpoint(): observe.RoleDecode,
		badEP:          observe.RoleDecode,
	}
	require.NoError(t, sub.SetEndpoints(endpoints))
	require.NoError(t, sub.SetEndpoints(endpoints), "idempotent")
	require.Eventually(t, func() bool { return sub.Stats().Connected == 3 }, 2*time.Second, 5*time.Millisecond)

	// Heartbeats arrive from idle engines: both show up with zero load.
	require.Eventually(t, func() bool {
		p, okP := latest(store, observe.RolePrefill, "prefill-0")
		d, okD := latest(store, observe.RoleDecode, "decode-0")
		return okP && okD && p.IsHeartbeat() && d.IsHeartbeat()
	}, 3*time.Second, 5*time.Millisecond)

	// Busy iterations: the latest one wins.
	clear(samplesTaken)
	for i := range 20 {
		pre.Publish(perf.FPM{WallTime: 0.05, Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: int64(100 + i)}})
		dec.Publish(perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: int64(i + 1), SumDecodeKVTokens: 5000}})
	}
	require.Eventually(t, func() bool {
		p, _ := latest(store, observe.RolePrefill, "prefill-0")
		d, _ := latest(store, observe.RoleDecode, "decode-0")
		return p.Scheduled.SumPrefillTokens == 119 && d.Scheduled.NumDecodeRequests == 20
	}, 3*time.Second, 5*time.Millisecond)
	obs, st := store.Snapshot(time.Now(), time.Second)
	require.Len(t, obs.Prefill, 1)
	require.Len(t, obs.Decode, 1)
	require.Equal(t, 20, samplesTaken[observe.RolePrefill]+st.Prefill.Samples, "every busy prefill iteration sampled")
	require.Equal(t, 20, samplesTaken[observe.RoleDecode]+st.Decode.Samples)
	require.Zero(t, st.Lost, "no sequence gap on a local socket")
	require.Equal(t, int64(1), obs.Prefill[0].Version)

	// Idle again: heartbeats replace the busy state.
	require.Eventually(t, func() bool {
		d, _ := latest(store, observe.RoleDecode, "decode-0")
		return d.IsHeartbeat()
	}, 3*time.Second, 5*time.Millisecond)

	// Malformed multiparts from the raw publisher; a valid message first beats the slow joiner.
	good := observe.AppendFPM(nil, &perf.FPM{Version: 1, WorkerID: "raw", WallTime: 0})
	seq := make([]byte, 8)
	require.Eventually(t, func() bool {
		_, err := bad.SendMessage([]byte{}, seq, good)
		require.NoError(t, err)
		_, ok := latest(store, observe.RoleDecode, "raw")
		return ok
	}, 3*time.Second, 20*time.Millisecond)
	before := sub.Stats()
	beforeStore := func() observe.SnapshotStats { _, s := store.Snapshot(time.Now(), 0); return s }()
	binary.BigEndian.PutUint64(seq, 99)
	sends := [][]any{
		{[]byte{}, seq},                               // 2 frames
		{[]byte{}, seq, good, good},                   // 4 frames
		{[]byte{}, seq[:4], good},                     // 4-byte sequence
		{[]byte{}, seq, []byte{0x81, 0xa1, 'x'}},      // truncated payload
		{[]byte{}, seq, []byte("not msgpack at all")}, // garbage payload
	}
	for _, parts := range sends {
		_, err := bad.SendMessage(parts...)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		s := sub.Stats()
		return s.BadFrames == before.BadFrames+3 && s.IngestErrors == before.IngestErrors+2
	}, 3*time.Second, 5*time.Millisecond, "stats %+v", sub.Stats())
	_, afterStore := store.Snapshot(time.Now(), 0)
	require.Equal(t, beforeStore.Malformed+5, afterStore.Malformed)

	// Removing the prefill endpoint disconnects it and forgets its worker.
	delete(endpoints, pre.Endpoint())
	require.NoError(t, sub.SetEndpoints(endpoints))
	require.Eventually(t, func() bool {
		obs, _ := store.Snapshot(time.Now(), 0)
		return sub.Stats().Connected == 2 && len(obs.Prefill) == 0
	}, 3*time.Second, 5*time.Millisecond)
	pre.Publish(perf.FPM{WallTime: 0.05})
	// An iteration published after it on a connected endpoint arriving is the event to wait
	// for (no fixed sleep before the negative check).
	require.Eventually(t, func() bool {
		dec.Publish(perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 77, SumDecodeKVTokens: 5000}})
		d, _ := latest(store, observe.RoleDecode, "decode-0")
		return d.Scheduled.NumDecodeRequests == 77
	}, 3*time.Second, 5*time.Millisecond)
	_, ok := latest(store, observe.RolePrefill, "prefill-0")
	require.False(t, ok, "a removed endpoint is no longer read")
	_, ok = latest(store, observe.RoleDecode, "decode-0")
	require.True(t, ok, "the other endpoints are untouched")
}

func TestSubscriberRemovingOneRankKeepsTheOthers(t *testing.T) {
	// One worker with two attention-DP ranks, one port per rank, as in Dynamo.
	var pubs []*fpmpub.Publisher
	for rank := range int64(2) {
		p, err := fpmpub.New("tcp://127.0.0.1:*", "dp-worker", rank, fpmpub.Options{HeartbeatInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, p.Close()) })
		pubs = append(pubs, p)
	}
	store := observe.NewFPMStore()
	sub, _ := startSubscriber(t, store)
	require.NoError(t, sub.SetEndpoints(map[string]observe.Role{
		pubs[0].Endpoint(): observe.RoleDecode, pubs[1].Endpoint(): observe.RoleDecode}))
	require.Eventually(t, func() bool { obs, _ := store.Snapshot(time.Now(), 0); return len(obs.Decode) == 2 },
		3*time.Second, 5*time.Millisecond)
	require.NoError(t, sub.SetEndpoints(map[string]observe.Role{pubs[0].Endpoint(): observe.RoleDecode}))
	require.Eventually(t, func() bool {
		obs, _ := store.Snapshot(time.Now(), 0)
		return len(obs.Decode) == 1 && obs.Decode[0].DPRank == 0
	}, 3*time.Second, 5*time.Millisecond)
	// Rank 0 publishes several more heartbeats (an event, not a sleep): rank 1, whose
	// publisher also still beats, stays gone.
	obs, _ := store.Snapshot(time.Now(), 0)
	from := obs.Decode[0].CounterID
	require.Eventually(t, func() bool {
		obs, _ = store.Snapshot(time.Now(), 0)
		return len(obs.Decode) != 1 || obs.Decode[0].CounterID >= from+5
	}, 3*time.Second, 5*time.Millisecond)
	require.Len(t, obs.Decode, 1)
	require.Equal(t, int64(0), obs.Decode[0].DPRank)
}

func TestSubscriberLifecycle(t *testing.T) {
	store := observe.NewFPMStore()
	sub, err := observe.NewSubscriber(store, nil)
	require.NoError(t, err)

	// Run with no endpoints still notices cancellation promptly.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx) }()
	require.Eventually(t, func() bool { return strings.Contains(goroutines(), "(*Subscriber).Run") },
		time.Second, time.Millisecond)
	require.ErrorContains(t, sub.Run(ctx), "already running")
	// An endpoint that cannot be parsed is counted, not fatal.
	require.NoError(t, sub.SetEndpoints(map[string]observe.Role{"bogus://x": observe.RoleDecode}))
	require.Eventually(t, func() bool { return sub.Stats().ConnectErrors == 1 }, time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}

	require.NoError(t, sub.Close())
	require.NoError(t, sub.Close(), "Close is idempotent")
	require.ErrorIs(t, sub.Run(context.Background()), observe.ErrSubscriberClosed)
	require.ErrorIs(t, sub.SetEndpoints(nil), observe.ErrSubscriberClosed)
	require.NotContains(t, goroutines(), "(*Subscriber).Run")

	_, err = observe.NewSubscriber(nil, nil)
	require.Error(t, err)
}

func TestSubscriberCloseStopsRun(t *testing.T) {
	p := newPublisher(t, "w", 20*time.Millisecond)
	store := observe.NewFPMStore()
	sub, err := observe.NewSubscriber(store, nil)
	require.NoError(t, err)
	require.NoError(t, sub.SetEndpoints(map[string]observe.Role{p.Endpoint(): observe.RoleDecode}))
	done := make(chan error, 1)
	go func() { done <- sub.Run(context.Background()) }()
	require.Eventually(t, func() bool { _, ok := latest(store, observe.RoleDecode, "w"); return ok },
		3*time.Second, 5*time.Millisecond)
	require.NoError(t, sub.Close(), "Close waits for Run to close its sockets, then terminates the context")
	require.NoError(t, <-done)
}

// BenchmarkSocketEndToEnd measures messages per second from a Publisher to the FPMStore over
// real TCP on localhost. Timing starts once the first message has arrived (slow joiner). The
// producer keeps at most window messages in flight, so this is the lossless rate; with
// window 0 it publishes as fast as it can and ZeroMQ's PUB drops what the subscriber cannot
// take (reported as dropped, and seen by the store as lost counter ids).
func BenchmarkSocketEndToEnd(b *testing.B) {
	for _, window := range []uint64{2000, 0} {
		name := "paced"
		if window == 0 {
			name = "unpaced"
		}
		b.Run(name, func(b *testing.B) { benchSocket(b, window) })
	}
}

func benchSocket(b *testing.B, window uint64) {
	p, err := fpmpub.New("tcp://127.0.0.1:*", "bench", 0, fpmpub.Options{HeartbeatInterval: time.Hour})
	require.NoError(b, err)
	defer func() { require.NoError(b, p.Close()) }()
	store := observe.NewFPMStore()
	sub, err := observe.NewSubscriber(store, slog.New(slog.DiscardHandler))
	require.NoError(b, err)
	require.NoError(b, sub.SetEndpoints(map[string]observe.Role{p.Endpoint(): observe.RoleDecode}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(b, <-done)
		require.NoError(b, sub.Close())
	}()

	received := func() uint64 { _, st := store.Snapshot(time.Now(), 0); return st.Received }
	f := perf.FPM{WallTime: 0.02, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 64, SumDecodeKVTokens: 200_000}}
	deadline := time.Now().Add(5 * time.Second)
	for received() == 0 {
		require.True(b, time.Now().Before(deadline), "no message arrived")
		p.Publish(f)
		time.Sleep(time.Millisecond)
	}
	base := received()
	baseMsgs := sub.Stats().Messages
	b.ResetTimer()
	start := time.Now()
	for i := range uint64(b.N) {
		for p.Pending() > fpmpub.DefaultQueueSize/2 ||
			(window > 0 && i-(sub.Stats().Messages-baseMsgs) > window) {
			runtime.Gosched() // pace instead of dropping
		}
		p.Publish(f)
	}
	// Wait until the store has every message, or nothing more arrives for a second.
	last, stalled := received(), time.Now()
	for {
		st := p.Stats()
		want := uint64(b.N) - (st.DroppedQueueFull + st.DroppedSend)
		got := received()
		if got-base >= want {
			break
		}
		if got != last {
			last, stalled = got, time.Now()
		} else if time.Since(stalled) > time.Second {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	_, sst := store.Snapshot(time.Now(), 0)
	got := sst.Received - base
	st := p.Stats()
	b.ReportMetric(float64(got)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(uint64(b.N)-got), "dropped")
	b.ReportMetric(float64(sst.Lost), "lost")
	b.ReportMetric(float64(st.DroppedQueueFull+st.DroppedSend), "pubdrops")
	if window > 0 {
		require.Zero(b, uint64(b.N)-got, "paced run lost messages")
	}
}
