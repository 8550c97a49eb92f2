package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// SubscriberRcvHWM is the receive high-water mark of every FPM SUB socket: about ten seconds
// of a busy engine's iterations, so a slow planner tick does not make ZeroMQ drop messages.
const SubscriberRcvHWM = 100_000

// subscriberPollTimeout bounds how long Run takes to notice a cancelled context or an
// endpoint change.
const subscriberPollTimeout = 50 * time.Millisecond

// maxDrainPerPoll bounds the messages read from one socket per poll, so one busy endpoint
// does not starve the others.
const maxDrainPerPoll = 4096

// ErrSubscriberClosed is returned by Run and SetEndpoints after Close.
var ErrSubscriberClosed = errors.New("FPM subscriber closed")

// Subscriber receives Forward Pass Metrics from engine endpoints over ZeroMQ and feeds them to
// an FPMStore.
//
// It keeps one SUB socket per endpoint, rather than one socket connected to many: the socket
// a message arrives on tells its endpoint, hence its role, without trusting the payload, and
// an endpoint removal can forget exactly the engines seen only there. All sockets live in the
// goroutine that runs Run (ZeroMQ sockets are not thread safe); SetEndpoints only records the
// desired set, which Run applies within one poll interval.
type Subscriber struct {
	store *FPMStore
	log   *slog.Logger
	zctx  *zmq.Context

	mu       sync.Mutex
	desired  map[string]Role
	gen      uint64
	running  bool
	closed   bool
	runDone  chan struct{}
	stop     chan struct{}
	wake     chan struct{}
	termOnce sync.Once
	termErr  error

	connected     atomic.Int64
	messages      atomic.Uint64
	badFrames     atomic.Uint64
	ingestErrors  atomic.Uint64
	connectErrors atomic.Uint64
}

// SubscriberStats are a Subscriber's cumulative counters.
type SubscriberStats struct {
	// Connected is the number of endpoints with a connected socket.
	Connected int `json:"connected"`
	// Messages counts the multipart messages received.
	Messages uint64 `json:"messages"`
	// BadFrames counts the messages dropped for their framing (not 3 frames, or a sequence
	// frame that is not 8 bytes).
	BadFrames uint64 `json:"bad_frames"`
	// IngestErrors counts the payloads the store rejected.
	IngestErrors uint64 `json:"ingest_errors"`
	// ConnectErrors counts the endpoints that could not be connected.
	ConnectErrors uint64 `json:"connect_errors"`
}

// NewSubscriber returns a subscriber feeding store, with its own ZeroMQ context. A nil logger
// uses slog.Default().
func NewSubscriber(store *FPMStore, logger *slog.Logger) (*Subscriber, error) {
	if store == nil {
		return nil, errors.New("new FPM subscriber: nil store")
	}
	if logger == nil {
		logger = slog.Default()
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("new FPM subscriber: zmq context: %w", err)
	}
	return &Subscriber{
		store:   store,
		log:     logger.With("component", "fpm-subscriber"),
		zctx:    zctx,
		desired: map[string]Role{},
		stop:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}, nil
}

// SetEndpoints replaces the set of endpoints (ZeroMQ addresses such as
// "tcp://127.0.0.1:5557") and their roles. It is idempotent and does not block: Run connects
// the new endpoints and disconnects the removed ones, and forgets (FPMStore.ForgetEngine)
// the (worker_id, dp_rank) keys that were seen only on removed endpoints.
func (s *Subscriber) SetEndpoints(endpoints map[string]Role) error {
	for ep, r := range endpoints {
		if ep == "" {
			return errors.New("set FPM endpoints: empty endpoint")
		}
		if _, ok := roleIndex(r); !ok {
			return fmt.Errorf("set FPM endpoints: %s: %w %q", ep, ErrUnknownRole, r)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("set FPM endpoints: %w", ErrSubscriberClosed)
	}
	if maps.Equal(s.desired, endpoints) {
		return nil
	}
	s.desired = maps.Clone(endpoints)
	s.gen++
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats {
	return SubscriberStats{
		Connected:     int(s.connected.Load()),
		Messages:      s.messages.Load(),
		BadFrames:     s.badFrames.Load(),
		IngestErrors:  s.ingestErrors.Load(),
		ConnectErrors: s.connectErrors.Load(),
	}
}

// subConn is one endpoint's socket and the engine keys seen on it.
type subConn struct {
	endpoint string
	role     Role
	sock     *zmq.Socket
	keys     map[engineKey]struct{}
	warned   bool
}

// Run receives messages until ctx is done or Close is called, then closes its sockets and
// returns nil. Only one Run may be active at a time.
func (s *Subscriber) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("run FPM subscriber: %w", ErrSubscriberClosed)
	}
	if s.running {
		s.mu.Unlock()
		return errors.New("run FPM subscriber: already running")
	}
	s.running = true
	done := make(chan struct{})
	s.runDone = done
	s.mu.Unlock()

	conns := map[string]*subConn{}
	defer func() {
		for _, c := range conns {
			s.closeConn(c)
		}
		s.connected.Store(0)
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
		close(done)
	}()

	var (
		applied  uint64
		poller   *zmq.Poller
		bySocket map[*zmq.Socket]*subConn
		first    = true
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stop:
			return nil
		default:
		}
		s.mu.Lock()
		gen, desired := s.gen, s.desired
		s.mu.Unlock()
		if first || gen != applied {
			first, applied = false, gen
			s.apply(conns, desired)
			poller = zmq.NewPoller()
			bySocket = make(map[*zmq.Socket]*subConn, len(conns))
			for _, c := range conns {
				poller.Add(c.sock, zmq.POLLIN)
				bySocket[c.sock] = c
			}
			s.connected.Store(int64(len(conns)))
		}
		if len(conns) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-s.stop:
				return nil
			case <-s.wake:
			case <-time.After(subscriberPollTimeout):
			}
			continue
		}
		polled, err := poller.Poll(subscriberPollTimeout)
		if err != nil {
			if zmq.AsErrno(err) == zmq.ETERM {
				return fmt.Errorf("run FPM subscriber: poll: %w", err)
			}
			s.log.Warn("FPM poll failed", "error", err)
			continue
		}
		now := time.Now()
		for _, p := range polled {
			if c := bySocket[p.Socket]; c != nil {
				s.drain(c, now)
			}
		}
	}
}

// apply connects the desired endpoints that are not connected and closes the others.
// Called from Run's goroutine only.
func (s *Subscriber) apply(conns map[string]*subConn, desired map[string]Role) {
	var removed []*subConn
	for ep, c := range conns {
		if r, ok := desired[ep]; !ok || r != c.role {
			s.closeConn(c)
			delete(conns, ep)
			removed = append(removed, c)
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(desired)) {
		if _, ok := conns[ep]; ok {
			continue
		}
		c, err := s.connect(ep, desired[ep])
		if err != nil {
			s.connectErrors.Add(1)
			s.log.Error("FPM endpoint not connected", "endpoint", ep, "error", err)
			continue
		}
		conns[ep] = c
		s.log.Info("FPM endpoint connected", "endpoint", ep, "role", string(c.role))
	}
	for _, c := range removed {
		s.log.Info("FPM endpoint disconnected", "endpoint", c.endpoint, "role", string(c.role))
		for k := range c.keys {
			if !seenElsewhere(conns, k) {
				s.store.ForgetEngine(k.worker, k.rank)
			}
		}
	}
}

func seenElsewhere(conns map[string]*subConn, k engineKey) bool {
	for _, c := range conns {
		if _, ok := c.keys[k]; ok {
			return true
		}
	}
	return false
}

func (s *Subscriber) connect(ep string, role Role) (*subConn, error) {
	sock, err := s.zctx.NewSocket(zmq.SUB)
	if err != nil {
		return nil, fmt.Errorf("new SUB socket: %w", err)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"set linger", func() error { return sock.SetLinger(0) }},
		{"set RCVHWM", func() error { return sock.SetRcvhwm(SubscriberRcvHWM) }},
		{"subscribe", func() error { return sock.SetSubscribe("") }},
		{"connect", func() error { return sock.Connect(ep) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			_ = sock.Close()
			return nil, fmt.Errorf("%s %s: %w", st.what, ep, err)
		}
	}
	return &subConn{endpoint: ep, role: role, sock: sock, keys: map[engineKey]struct{}{}}, nil
}

func (s *Subscriber) closeConn(c *subConn) {
	if err := c.sock.Close(); err != nil {
		s.log.Warn("closing FPM socket failed", "endpoint", c.endpoint, "error", err)
	}
}

// drain reads the messages waiting on c without blocking and hands them to the store.
func (s *Subscriber) drain(c *subConn, now time.Time) {
	for range maxDrainPerPoll {
		frames, err := c.sock.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil {
			if zmq.AsErrno(err) != zmq.Errno(syscall.EAGAIN) {
				s.log.Warn("FPM receive failed", "endpoint", c.endpoint, "error", err)
			}
			return
		}
		s.messages.Add(1)
		if len(frames) != 3 || len(frames[1]) != 8 {
			s.badFrames.Add(1)
			s.store.noteMalformed()
			s.warnOnce(c, "FPM message with bad framing dropped", "frames", len(frames))
			continue
		}
		k, err := s.store.ingest(c.role, frames[2], now)
		if err != nil {
			s.ingestErrors.Add(1)
			s.warnOnce(c, "FPM message dropped", "error", err)
			continue
		}
		if _, ok := c.keys[k]; !ok {
			c.keys[k] = struct{}{}
		}
	}
}

// warnOnce logs the first bad message of an endpoint at warning level and later ones at debug
// level, so a broken publisher does not flood the log (the counters count them all).
func (s *Subscriber) warnOnce(c *subConn, msg string, args ...any) {
	args = append(args, "endpoint", c.endpoint)
	if !c.warned {
		c.warned = true
		s.log.Warn(msg, args...)
		return
	}
	s.log.Debug(msg, args...)
}

// Close stops Run (waiting for it to close its sockets) and terminates the ZeroMQ context.
// It is safe to call more than once.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	running, done := s.running, s.runDone
	s.mu.Unlock()
	if running {
		<-done
	}
	s.termOnce.Do(func() {
		if err := s.zctx.Term(); err != nil {
			s.termErr = fmt.Errorf("close FPM subscriber: terminate zmq context: %w", err)
		}
	})
	return s.termErr
}
