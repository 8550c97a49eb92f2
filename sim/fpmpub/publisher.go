// Package fpmpub publishes Forward Pass Metrics over ZeroMQ the way Dynamo's engines do
// (_FpmPublisherThread, reference §8.3): a PUB socket that binds the endpoint, a bounded
// queue, 3-frame messages [b"", 8-byte big-endian sequence, msgpack FPM] sent without
// blocking, and an idle heartbeat. The simulated engines use it; so do the subscriber tests.
package fpmpub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/perf"
)

// Defaults, as in Dynamo.
const (
	// DefaultQueueSize is the bound of the publish queue (max_queue_size).
	DefaultQueueSize = 10_000
	// DefaultHeartbeatInterval is the idle time after which a zeroed FPM is published.
	DefaultHeartbeatInterval = time.Second
	// DefaultShutdownTimeout bounds Close.
	DefaultShutdownTimeout = time.Second
)

// ErrShutdownTimeout is returned by Close when the sender did not stop in time.
var ErrShutdownTimeout = errors.New("FPM publisher shutdown timed out")

// Options tune a Publisher; zero fields take the defaults.
type Options struct {
	// QueueSize bounds the publish queue.
	QueueSize int
	// HeartbeatInterval is the idle time before a heartbeat.
	HeartbeatInterval time.Duration
	// ShutdownTimeout bounds Close.
	ShutdownTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	return o
}

// Stats are a Publisher's cumulative counters.
type Stats struct {
	// Published counts the messages handed to the socket, heartbeats included.
	Published uint64 `json:"published"`
	// Heartbeats counts the idle heartbeats published.
	Heartbeats uint64 `json:"heartbeats"`
	// DroppedQueueFull counts Publish calls dropped because the queue was full (or the
	// publisher closed).
	DroppedQueueFull uint64 `json:"dropped_queue_full"`
	// DroppedSend counts messages the socket refused (EAGAIN or another send error).
	DroppedSend uint64 `json:"dropped_send"`
}

// Publisher is one engine scheduler's FPM publisher. Publish may be called from any
// goroutine; the socket is owned by the publisher's own goroutine.
type Publisher struct {
	workerID string
	dpRank   int64
	endpoint string
	opts     Options

	queue     chan perf.FPM
	stop      chan struct{}
	done      chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	published, heartbeats, droppedQueue, droppedSend atomic.Uint64
}

// New binds a PUB socket on endpoint (e.g. "tcp://127.0.0.1:5557", or
// "tcp://127.0.0.1:*" for any free port; Endpoint reports the bound address) and starts the
// sender. Every message is stamped with workerID, dpRank, version 1 and the sequence number.
func New(endpoint, workerID string, dpRank int64, opts ...Options) (*Publisher, error) {
	if workerID == "" {
		return nil, errors.New("new FPM publisher: empty worker id")
	}
	if dpRank < 0 {
		return nil, fmt.Errorf("new FPM publisher: negative dp rank %d", dpRank)
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o = o.withDefaults()
	p := &Publisher{
		workerID: workerID,
		dpRank:   dpRank,
		opts:     o,
		queue:    make(chan perf.FPM, o.QueueSize),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	ready := make(chan error, 1)
	go p.run(endpoint, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return p, nil
}

// bind creates and binds the socket; called on the sender goroutine.
func (p *Publisher) bind(endpoint string) (*zmq.Socket, error) {
	sock, err := zmq.NewSocket(zmq.PUB)
	if err != nil {
		return nil, fmt.Errorf("new FPM publisher %s: PUB socket: %w", endpoint, err)
	}
	fail := func(what string, err error) (*zmq.Socket, error) {
		_ = sock.Close()
		return nil, fmt.Errorf("new FPM publisher %s: %s: %w", endpoint, what, err)
	}
	if err := sock.SetLinger(p.opts.ShutdownTimeout); err != nil {
		return fail("set linger", err)
	}
	if err := sock.SetSndhwm(p.opts.QueueSize); err != nil {
		return fail("set SNDHWM", err)
	}
	if err := sock.Bind(endpoint); err != nil {
		return fail("bind", err)
	}
	bound, err := sock.GetLastEndpoint()
	if err != nil {
		return fail("last endpoint", err)
	}
	p.endpoint = bound
	return sock, nil
}

func (p *Publisher) run(endpoint string, ready chan<- error) {
	defer close(p.done)
	sock, err := p.bind(endpoint)
	ready <- err
	if err != nil {
		return
	}
	defer func() { _ = sock.Close() }()

	var (
		seq     uint64
		payload []byte
		seqBuf  [8]byte
	)
	send := func(f perf.FPM) {
		f.Version = perf.FPMVersion
		f.WorkerID = p.workerID
		f.DPRank = p.dpRank
		f.CounterID = int64(seq)
		payload = observe.AppendFPM(payload[:0], &f)
		binary.BigEndian.PutUint64(seqBuf[:], seq)
		if err := sendFrames(sock, seqBuf[:], payload); err != nil {
			p.droppedSend.Add(1)
			return
		}
		seq++
		p.published.Add(1)
	}
	idle := time.NewTimer(p.opts.HeartbeatInterval)
	defer idle.Stop()
	for {
		select {
		case <-p.stop:
			deadline := time.Now().Add(p.opts.ShutdownTimeout / 2)
			for time.Now().Before(deadline) {
				select {
				case f := <-p.queue:
					send(f)
					continue
				default:
				}
				break
			}
			return
		case f := <-p.queue:
			send(f)
			idle.Reset(p.opts.HeartbeatInterval)
		case <-idle.C:
			send(perf.FPM{})
			p.heartbeats.Add(1)
			idle.Reset(p.opts.HeartbeatInterval)
		}
	}
}

// sendFrames sends one 3-frame message without blocking. A PUB socket never splits a
// multipart message: once the first frame is accepted the others are too.
func sendFrames(sock *zmq.Socket, seq, payload []byte) error {
	if _, err := sock.SendBytes(nil, zmq.SNDMORE|zmq.DONTWAIT); err != nil {
		if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) {
			return fmt.Errorf("send FPM: socket full: %w", err)
		}
		return fmt.Errorf("send FPM topic frame: %w", err)
	}
	if _, err := sock.SendBytes(seq, zmq.SNDMORE|zmq.DONTWAIT); err != nil {
		return fmt.Errorf("send FPM sequence frame: %w", err)
	}
	if _, err := sock.SendBytes(payload, zmq.DONTWAIT); err != nil {
		return fmt.Errorf("send FPM payload frame: %w", err)
	}
	return nil
}

// Publish queues f without blocking; when the queue is full (or the publisher is closed) f
// is dropped and counted. Version, WorkerID, DPRank and CounterID are overwritten.
func (p *Publisher) Publish(f perf.FPM) {
	if p.closed.Load() {
		p.droppedQueue.Add(1)
		return
	}
	select {
	case p.queue <- f:
	default:
		p.droppedQueue.Add(1)
	}
}

// Pending returns the number of queued messages not yet sent (for callers that pace
// themselves instead of dropping).
func (p *Publisher) Pending() int { return len(p.queue) }

// Endpoint returns the bound endpoint, with the actual port when bound to "*".
func (p *Publisher) Endpoint() string { return p.endpoint }

// Stats returns the publisher's counters.
func (p *Publisher) Stats() Stats {
	return Stats{
		Published:        p.published.Load(),
		Heartbeats:       p.heartbeats.Load(),
		DroppedQueueFull: p.droppedQueue.Load(),
		DroppedSend:      p.droppedSend.Load(),
	}
}

// Close flushes what is queued (for at most half the shutdown timeout), closes the socket
// and waits for the sender, at most the shutdown timeout. It is safe to call more than once.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.stop)
		select {
		case <-p.done:
		case <-time.After(p.opts.ShutdownTimeout):
			p.closeErr = fmt.Errorf("close FPM publisher %s: %w", p.endpoint, ErrShutdownTimeout)
		}
	})
	return p.closeErr
}
