package fpmpub

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/perf"
)

// rawSub connects a plain SUB socket to ep (the test's view of the wire).
func rawSub(t *testing.T, ep string) *zmq.Socket {
	t.Helper()
	sub, err := zmq.NewSocket(zmq.SUB)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	require.NoError(t, sub.SetLinger(0))
	require.NoError(t, sub.SetRcvtimeo(3*time.Second))
	require.NoError(t, sub.SetSubscribe(""))
	require.NoError(t, sub.Connect(ep))
	return sub
}

// recv reads one multipart message and checks the framing.
func recv(t *testing.T, sub *zmq.Socket) (uint64, perf.FPM) {
	t.Helper()
	frames, err := sub.RecvMessageBytes(0)
	require.NoError(t, err)
	require.Len(t, frames, 3)
	require.Empty(t, frames[0], "topic frame")
	require.Len(t, frames[1], 8, "sequence frame")
	var f perf.FPM
	require.NoError(t, observe.DecodeFPM(frames[2], &f))
	return binary.BigEndian.Uint64(frames[1]), f
}

func TestPublisherWireFormatAndHeartbeat(t *testing.T) {
	p, err := New("tcp://127.0.0.1:*", "worker-a", 2, Options{HeartbeatInterval: 30 * time.Millisecond})
	require.NoError(t, err)
	require.Regexp(t, `^tcp://127\.0\.0\.1:\d+$`, p.Endpoint())
	sub := rawSub(t, p.Endpoint())

	// The first message seen (after the slow-joiner delay) is an idle heartbeat.
	seq, hb := recv(t, sub)
	require.Equal(t, perf.FPM{Version: 1, WorkerID: "worker-a", DPRank: 2, CounterID: int64(seq)}, hb)

	in := perf.FPM{Version: 7, WorkerID: "ignored", DPRank: 9, CounterID: 1000, WallTime: 0.031,
		Scheduled: perf.ScheduledRequests{NumPrefillRequests: 3, SumPrefillTokens: 8192}}
	for range 3 {
		p.Publish(in)
	}
	var got []perf.FPM
	last := seq
	for len(got) < 3 {
		s, f := recv(t, sub)
		require.Equal(t, last+1, s, "sequence numbers are consecutive")
		require.Equal(t, int64(s), f.CounterID, "counter_id is the sequence")
		last = s
		if !f.IsHeartbeat() {
			got = append(got, f)
		}
	}
	for _, f := range got {
		want := in
		want.Version, want.WorkerID, want.DPRank, want.CounterID = 1, "worker-a", 2, f.CounterID
		require.Equal(t, want, f)
	}

	// Idle again: heartbeats keep coming, about one per interval.
	start := time.Now()
	for range 3 {
		s, f := recv(t, sub)
		require.True(t, f.IsHeartbeat())
		require.Equal(t, last+1, s)
		last = s
	}
	require.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "heartbeats faster than the interval")
	// The counters are updated just after the send: wait for them.
	require.Eventually(t, func() bool {
		st := p.Stats()
		return st.Heartbeats >= 4 && st.Published >= last+1
	}, time.Second, time.Millisecond, "stats %+v after seq %d", p.Stats(), last)
	require.Zero(t, p.Stats().DroppedQueueFull)
	require.Zero(t, p.Stats().DroppedSend)

	require.Contains(t, goroutines(), "(*Publisher).run", "the leak check below can see the sender")
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	p.Publish(in)
	require.Equal(t, uint64(1), p.Stats().DroppedQueueFull, "publish after close is dropped and counted")
	require.Eventually(t, func() bool { return !strings.Contains(goroutines(), "(*Publisher).run") },
		2*time.Second, 10*time.Millisecond, "sender goroutine leaked:\n%s", goroutines())
}

// goroutines dumps every goroutine's stack.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

func TestPublisherQueueFullDrops(t *testing.T) {
	// No sender goroutine: the queue only fills (error-path unit test).
	p := &Publisher{queue: make(chan perf.FPM, 2)}
	for range 5 {
		p.Publish(perf.FPM{WallTime: 1})
	}
	require.Equal(t, 2, p.Pending())
	require.Equal(t, uint64(3), p.Stats().DroppedQueueFull)
}

func TestNewErrors(t *testing.T) {
	taken, err := New("tcp://127.0.0.1:*", "w", 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, taken.Close()) })
	tests := []struct {
		name     string
		endpoint string
		worker   string
		rank     int64
		msg      string
	}{
		{"empty worker", "tcp://127.0.0.1:*", "", 0, "empty worker id"},
		{"negative rank", "tcp://127.0.0.1:*", "w", -1, "negative dp rank"},
		{"bad endpoint", "not-an-endpoint", "w", 0, "bind"},
		{"port in use", taken.Endpoint(), "w", 0, "bind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.endpoint, tc.worker, tc.rank)
			require.ErrorContains(t, err, tc.msg)
			require.Nil(t, p)
		})
	}
}
