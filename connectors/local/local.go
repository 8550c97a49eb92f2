// Package local is the local connector: a process supervisor running the prefill and decode
// worker processes of one deployment on this machine (what Dynamo's old local backend did).
//
// Workers are named "<namespace>_<component>" and "<namespace>_<component>_N", get
// CUDA_VISIBLE_DEVICES from a pool of (possibly simulated) GPU ids and two free loopback ports
// (HTTP and FPM), run in their own process group with their output in <LogDir>/<name>.log,
// and survive a restart of the supervisor, which re-adopts them from its state file (a JSON
// file written atomically). A worker is recorded in the state file before its process is
// started, and the process carries a marker in its environment (WorkerMarkerEnv): a
// supervisor stopped before it could record the pid finds the process by its marker when it
// opens again, rather than starting a second one. A decision's drains are recorded before its
// first start, so a supervisor stopped in the middle of a decision leaves a state file that
// agrees with the new targets (extra workers draining, new ones started or pending); they are
// signalled once its starts succeeded (a failed start undoes the decision, drains included),
// and a supervisor opening the state file signals the draining workers that were not.
// Scale-down drains the highest-suffix workers: SIGTERM to the group, SIGKILL after the drain
// timeout. A background reconcile loop probes readiness (ReadyURL answering 200), detects
// workers that died (reported, never silently restarted), enforces drain and start
// deadlines, and frees the GPUs and ports of drained workers.
//
// A decision is applied at once when its targets fit the pool of GPUs, even when the GPUs the
// new workers need are still held by draining workers (a decision shrinking one pool and
// growing the other on a full pool): the extra workers drain now, and the new ones are
// pending (PendingWorker) until the drains free their GPUs, when the reconcile loop starts
// them, oldest first. A pending worker counts toward its pool's target and is not ready, as a
// Kubernetes cluster shows a Pending pod; a later lower target cancels pending workers first.
// Only targets the pool could never hold are refused (connectors.ErrInvalidTargets).
//
// The loop runs in the background rather than on each Inventory call because its work is
// time-driven (SIGKILL at the drain deadline, reaping exited children, start timeouts) and
// must happen even when nobody asks for the inventory; Inventory is then a cheap read that
// never blocks on a probe.
package local

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/scaling"
)

// components lists the pools in reporting order.
var components = []scaling.Component{scaling.Prefill, scaling.Decode}

// ErrClosed is returned by Apply after Close or StopAll.
var ErrClosed = errors.New("local connector is closed")

// Local supervises the worker processes of one deployment. It implements
// connectors.Connector and is safe for concurrent use.
type Local struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client

	mu       sync.Mutex
	st       state
	children map[int]*child // workers this process started, by pid
	closed   bool

	kick      chan struct{}
	stop      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
	// lock holds the state file's lock (<state file>.lock) while this supervisor is open.
	lock *os.File
}

// lockState takes the exclusive lock of a state file: one supervisor per deployment, or two
// would start and stop the same workers.
func lockState(stateFile string) (*os.File, error) {
	path := stateFile + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local connector: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("local connector: %s is supervised by another process (pid %s): one worker hosts a local deployment",
				stateFile, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("local connector: lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

var (
	_ connectors.Connector          = (*Local)(nil)
	_ connectors.EndpointDiscoverer = (*Local)(nil)
)

// Open starts supervising the deployment. When the state file exists, it adopts the recorded
// workers that still run (same pid and same process start time), marks those that died
// meanwhile as exited (replaced on the next Apply), keeps the pending workers (the reconcile
// loop starts them when GPUs are free) and ignores initial; a state file that
// cannot be read is an error naming it, never replaced. Otherwise it starts the initial
// targets as decision 0 (a nil target is 0 workers). Open does not wait for readiness.
func Open(cfg Config, initial connectors.Targets) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Local{
		cfg:      cfg,
		log:      cfg.Logger,
		client:   &http.Client{Timeout: cfg.ReadyTimeout},
		children: map[int]*child{},
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	if err := os.MkdirAll(filepath.Dir(cfg.StateFile), 0o755); err != nil {
		return nil, fmt.Errorf("local connector: state folder: %w", err)
	}
	lock, err := lockState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	l.lock = lock
	opened := false
	defer func() {
		if !opened {
			_ = l.lock.Close()
		}
	}()
	st, found, err := readState(cfg.StateFile)
	if err != nil {
		return nil, fmt.Errorf("local connector: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if found {
		if st.Namespace != cfg.Namespace {
			return nil, fmt.Errorf("local connector: state file %s belongs to namespace %q, not %q", cfg.StateFile, st.Namespace, cfg.Namespace)
		}
		l.st = st
		if err := l.adopt(); err != nil {
			return nil, fmt.Errorf("local connector: %s: %w", cfg.StateFile, err)
		}
	} else {
		if err := initial.Validate(); err != nil {
			return nil, fmt.Errorf("local connector: initial targets: %w: %w", connectors.ErrInvalidTargets, err)
		}
		l.st = state{Version: stateVersion, Namespace: cfg.Namespace}
		var targets poolCounts
		for _, c := range components {
			if p := pick(initial, c); p != nil {
				*targets.get(c) = *p
			}
		}
		if err := l.reconcile(targets); err != nil {
			l.forgetStarted()
			return nil, fmt.Errorf("local connector: start initial targets (%s): %w", initial, err)
		}
	}
	if err := l.persist(); err != nil {
		if !found {
			l.forgetStarted()
		}
		return nil, fmt.Errorf("local connector: %w", err)
	}
	opened = true
	go l.loop()
	return l, nil
}

// forgetStarted kills the workers this supervisor started and removes the state file their
// intents created (used when Open fails on a new state file, so nothing is left behind and
// the next Open starts the initial targets). Called with the lock held.
func (l *Local) forgetStarted() {
	for pid, c := range l.children {
		_ = signalGroup(pid, syscall.SIGKILL)
		<-c.done
	}
	l.children = map[int]*child{}
	if err := os.Remove(l.cfg.StateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.log.Error("cannot remove the state file of a failed open", "err", err)
	}
}

// pick returns the target of one pool.
func pick(t connectors.Targets, c scaling.Component) *int {
	if c == scaling.Prefill {
		return t.Prefill
	}
	return t.Decode
}

// adopt checks the workers read from the state file: live ones are adopted (a draining one
// not signalled yet gets its SIGTERM), dead ones are marked exited (drained ones are
// dropped). An intent (a worker recorded before its start, whose pid was never recorded) is
// resolved by its marker: the process carrying it is adopted; without one the intent is
// dropped, so the next apply starts the worker once. It fails only when the processes cannot
// be listed to look for an intent's process (dropping the intent could then start a worker
// twice). Called with the lock held.
func (l *Local) adopt() error {
	now := l.cfg.now()
	kept := l.st.Workers[:0]
	for _, w := range l.st.Workers {
		if w.intent() {
			pid, startTime, found, err := findMarked(w.Marker)
			if err != nil {
				return fmt.Errorf("look for worker %s, whose start was not recorded: %w", w.Name, err)
			}
			if !found {
				l.log.Warn("worker being started when the supervisor stopped does not run; the next apply starts it",
					"worker", w.Name, "marker", w.Marker)
				continue
			}
			w.PID, w.StartTime = pid, startTime
			l.log.Info("adopted worker started before the supervisor stopped", "worker", w.Name, "pid", w.PID, "marker", w.Marker)
			kept = append(kept, w)
			continue
		}
		if !w.mayBeAlive() {
			kept = append(kept, w)
			continue
		}
		alive, err := processAlive(w.PID, w.StartTime)
		if err != nil {
			l.log.Warn("cannot check a recorded worker; assuming it runs", "worker", w.Name, "pid", w.PID, "err", err)
		}
		if alive {
			if (w.State == Draining || w.State == Failed) && w.StopAt == nil {
				// Recorded stopping but not signalled: the supervisor stopped between
				// recording a decision's drains and recording their SIGTERM (reconcile,
				// then Apply's write). It gets its SIGTERM now (a second one if the first
				// was sent but not recorded: the drain it asks for is the same), and the
				// drain deadline counts from now.
				l.log.Info("worker recorded draining was not signalled before the supervisor stopped; stopping it",
					"worker", w.Name, "pid", w.PID)
				l.stopWorker(&w, w.State, now)
			}
			l.log.Info("adopted running worker", "worker", w.Name, "pid", w.PID, "state", w.State)
			kept = append(kept, w)
			continue
		}
		w.ExitedAt, w.ExitStatus = &now, "exited while the supervisor was down"
		switch w.State {
		case Draining:
			l.log.Info("worker drained while the supervisor was down", "worker", w.Name, "pid", w.PID)
			continue
		case Starting, Ready:
			w.State = Exited
			*l.st.Failures.get(w.Component)++
			l.log.Error("worker died while the supervisor was down; it is replaced on the next apply", "worker", w.Name, "pid", w.PID)
		}
		kept = append(kept, w)
	}
	l.st.Workers = kept
	return nil
}

// Apply brings the deployment to the targets (a nil target leaves the pool alone): it cancels
// pending workers a pool no longer needs, starts the missing workers the free GPUs can take
// (dead ones are replaced), leaves the others pending until draining workers free their GPUs,
// and drains the extra ones, highest suffix first (recorded as draining before the first
// start is, signalled once every start succeeded), then records the decision in the state
// file. It returns once the new processes are started and the state written, without waiting
// for readiness, drains or pending workers. The newest decision again is a no-op, an older
// one fails with ErrStaleDecision; targets the pool of GPUs could never hold (more GPUs than
// it has, a pool without a command) fail with ErrInvalidTargets and change nothing.
func (l *Local) Apply(ctx context.Context, decisionID int64, targets connectors.Targets) error {
	if err := targets.Validate(); err != nil {
		return fmt.Errorf("local connector: decision %d: %w: %w", decisionID, connectors.ErrInvalidTargets, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local connector: decision %d: %w", decisionID, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("local connector: decision %d: %w", decisionID, ErrClosed)
	}
	switch last := l.st.AppliedDecisionID; {
	case decisionID == last:
		return nil
	case decisionID < last:
		return fmt.Errorf("local connector: %w: decision %d, newest %d", connectors.ErrStaleDecision, decisionID, last)
	}
	next := l.st.Targets
	for _, c := range components {
		if p := pick(targets, c); p != nil {
			*next.get(c) = *p
		}
	}
	if err := l.reconcile(next); err != nil {
		return fmt.Errorf("local connector: decision %d (%s): %w", decisionID, targets, err)
	}
	prev := l.st.AppliedDecisionID
	l.st.AppliedDecisionID = decisionID
	if err := l.persist(); err != nil {
		// The processes run and stay recorded in memory: a retry of this decision finds
		// nothing to start and writes the file again.
		l.st.AppliedDecisionID = prev
		return fmt.Errorf("local connector: decision %d: %w", decisionID, err)
	}
	l.log.Info("applied decision", "decision_id", decisionID, "targets", targets.String(),
		"prefill", l.st.Targets.Prefill, "decode", l.st.Targets.Decode,
		"pending_prefill", l.pendingOf(scaling.Prefill), "pending_decode", l.pendingOf(scaling.Decode))
	return nil
}

// reconcile makes the workers match targets: it drops dead workers, cancels the pending
// workers a pool no longer needs (newest first), queues the missing ones, marks the extra
// running ones draining (highest suffix first), starts the queued workers the free GPUs can
// take now, and only then signals the drains. A worker whose GPUs are still held by a
// draining (or failed, stopping) worker stays pending and is started by the reconcile loop
// when they free (startPending). It checks the targets before changing anything: an error
// wrapping ErrInvalidTargets (targets the pool of GPUs could never hold) leaves the
// deployment as it was, and so does a failed start (no drain was signalled). Called with the
// lock held.
func (l *Local) reconcile(targets poolCounts) error {
	live := map[scaling.Component][]Worker{} // copies: the slice is compacted below
	for i := range l.st.Workers {
		if w := &l.st.Workers[i]; w.live() {
			live[w.Component] = append(live[w.Component], *w)
		}
	}
	total := 0
	for _, c := range components {
		n := *targets.get(c)
		cc := l.cfg.component(c)
		if n > 0 && len(cc.Command) == 0 {
			return fmt.Errorf("%w: the %s pool is not deployed (no command configured)", connectors.ErrInvalidTargets, c)
		}
		// Bound the target before any arithmetic on it: a pool never holds more workers
		// than its GPUs divided by the GPUs per worker (Validate makes that at least 1).
		if limit := len(l.cfg.GPUs) / cc.GPUsPerWorker; n < 0 || n > limit {
			return fmt.Errorf("%w: the %s target %d exceeds the %d workers the pool of %d GPUs holds at %d GPUs per worker",
				connectors.ErrInvalidTargets, c, n, limit, len(l.cfg.GPUs), cc.GPUsPerWorker)
		}
		gpus, ok := mulNonNeg(n, cc.GPUsPerWorker)
		if ok {
			total, ok = addNonNeg(total, gpus)
		}
		if !ok {
			return fmt.Errorf("%w: the %s target's GPU count overflows", connectors.ErrInvalidTargets, c)
		}
	}
	// Once the draining workers have exited, the running workers are those the targets ask
	// for: the targets fit when their GPUs do. Whether they fit now only decides which new
	// workers start at once and which wait.
	if total > len(l.cfg.GPUs) {
		return fmt.Errorf("%w: the targets (prefill %d × %d GPUs, decode %d × %d GPUs) need %d GPUs but the pool has %d",
			connectors.ErrInvalidTargets, targets.Prefill, l.cfg.Prefill.GPUsPerWorker, targets.Decode, l.cfg.Decode.GPUsPerWorker, total, len(l.cfg.GPUs))
	}

	// Commit: drop dead workers, turn failed ones still stopping into draining ones.
	kept := l.st.Workers[:0]
	for _, w := range l.st.Workers {
		if !w.mayBeAlive() {
			delete(l.children, w.PID)
			continue
		}
		if w.State == Failed {
			w.State = Draining
		}
		kept = append(kept, w)
	}
	l.st.Workers = kept
	prevTargets, prevPending := l.st.Targets, slices.Clone(l.st.Pending)
	l.st.Targets = targets // recorded with the intents

	now := l.cfg.now()
	for _, c := range components {
		n, pending := *targets.get(c), l.pendingOf(c)
		// A lower target cancels pending workers first, newest first.
		for extra := len(live[c]) + pending - n; extra > 0 && pending > 0; extra-- {
			for i := len(l.st.Pending) - 1; i >= 0; i-- {
				if l.st.Pending[i].Component == c {
					l.st.Pending = slices.Delete(l.st.Pending, i, i+1)
					break
				}
			}
			pending--
			l.log.Info("cancelled pending worker", "component", c)
		}
		for add := n - len(live[c]) - pending; add > 0; add-- {
			l.st.Pending = append(l.st.Pending, PendingWorker{Component: c, Since: now})
		}
	}

	// The drains are recorded before the starts: the extra running workers, highest suffix
	// first, are marked draining before startPending records the first intent (each start
	// writes the state file), so every state file this reconcile writes agrees with the new
	// targets. A supervisor that dies at any point of it leaves the extra workers draining
	// (the next one signals them, adopt) and the new ones started or pending: never a pool
	// over its target, nor a pending worker that waits for GPUs no drain will free.
	//
	// They are signalled only once every start succeeded: a failed start undoes the whole
	// decision (unstart), and a SIGTERM cannot be taken back, so until then a marked worker
	// (draining, no StopAt) still serves and goes back to what it was. An apply whose start
	// failed then changed nothing, as the Connector contract says: the planner retries the decision or
	// decides again from the deployment as it was, with no capacity lost to a decision that
	// was not applied.
	var drains []drainMark
	for _, c := range components {
		ws := live[c]
		slices.SortFunc(ws, func(a, b Worker) int { return b.Index - a.Index })
		for _, w := range ws[:max(0, len(ws)-*targets.get(c))] {
			if rec := l.find(w.PID); rec != nil {
				rec.State = Draining // StopAt stays nil: not signalled yet
				drains = append(drains, drainMark{pid: w.PID, was: w.State})
			}
		}
	}
	started, err := l.startPending(false)
	if err != nil {
		return l.unstart(started, drains, prevTargets, prevPending, err)
	}
	if len(drains) > 0 && len(started) == 0 {
		// No start wrote the state file (a scale-down, or every new worker pending on a full
		// pool): the drains are recorded before they are signalled, for the same reason.
		if err := l.persist(); err != nil {
			return l.unstart(nil, drains, prevTargets, prevPending, fmt.Errorf("record the drains: %w", err))
		}
	}
	if beforeDrainSignals != nil && len(drains) > 0 {
		beforeDrainSignals()
	}
	for _, d := range drains {
		if w := l.find(d.pid); w != nil {
			l.stopWorker(w, Draining, now)
			l.log.Info("draining worker", "worker", w.Name, "pid", w.PID)
		}
	}
	for _, c := range components {
		if p := l.pendingOf(c); p > 0 {
			l.log.Info("workers pending: waiting for GPUs held by draining workers", "component", c, "pending", p)
		}
	}
	return nil
}

// pendingOf counts pool c's pending workers. Called with the lock held.
func (l *Local) pendingOf(c scaling.Component) int {
	n := 0
	for _, p := range l.st.Pending {
		if p.Component == c {
			n++
		}
	}
	return n
}

// freeGPUs returns the pool's GPUs no worker that may be alive holds, in the pool's order.
// Called with the lock held.
func (l *Local) freeGPUs() []int {
	used := map[int]bool{}
	for i := range l.st.Workers {
		if w := &l.st.Workers[i]; w.mayBeAlive() {
			for _, g := range w.GPUs {
				used[g] = true
			}
		}
	}
	var free []int
	for _, g := range l.cfg.GPUs {
		if !used[g] {
			free = append(free, g)
		}
	}
	return free
}

// startPending starts the pending workers the free GPUs can take, oldest first; one needing
// more GPUs than are free does not hold back a later one that fits. A worker leaves the queue
// when its start is tried. On a failed start, an apply (inLoop false) stops and returns the
// error with the markers of the workers it recorded, the failed one's too when its intent was
// recorded, for the caller to undo them (unstart). The reconcile loop (inLoop true, after GPUs
// freed) forgets the failed worker, counts it as a failure of its pool and goes on: like a
// worker that exited, it is replaced on the next apply, never silently retried. Called with
// the lock held.
func (l *Local) startPending(inLoop bool) ([]string, error) {
	var started []string
	free := l.freeGPUs()
	for i := 0; i < len(l.st.Pending); {
		p := l.st.Pending[i]
		cc := l.cfg.component(p.Component)
		if len(free) < cc.GPUsPerWorker {
			i++
			continue
		}
		gpus := free[:cc.GPUsPerWorker:cc.GPUsPerWorker]
		l.st.Pending = slices.Delete(l.st.Pending, i, i+1)
		var marker string
		var err error
		if len(cc.Command) == 0 {
			// Queued under a configuration that deployed the pool.
			err = fmt.Errorf("start a pending %s worker: the pool is not deployed (no command configured)", p.Component)
		} else {
			marker, err = l.startWorker(p.Component, gpus)
			if err != nil {
				err = fmt.Errorf("start a %s worker: %w", p.Component, err)
			}
		}
		if err == nil {
			free = free[cc.GPUsPerWorker:]
			started = append(started, marker)
			if inLoop {
				l.log.Info("pending worker started", "component", p.Component, "waited", l.cfg.now().Sub(p.Since).Round(time.Millisecond))
			}
			continue
		}
		if !inLoop {
			if marker != "" {
				started = append(started, marker)
			}
			return started, err
		}
		if marker != "" {
			l.forget([]string{marker})
		}
		*l.st.Failures.get(p.Component)++
		l.log.Error("pending worker failed to start; its slot stays not ready until the next apply", "component", p.Component, "err", err)
	}
	return started, nil
}

// drainMark is a worker a reconcile marked draining before its starts, not signalled yet,
// and the state it had.
type drainMark struct {
	pid int
	was WorkerState
}

// unstart undoes a reconcile whose start failed: it kills the workers recorded with the
// given markers and forgets them, gives the workers marked draining (not signalled yet) their
// state back, restores the targets and the pending workers, records that in the state file
// (best effort: the file already holds the intents, and the drains, when a start was
// recorded) and returns cause. Called with the lock held.
func (l *Local) unstart(markers []string, drains []drainMark, targets poolCounts, pending []PendingWorker, cause error) error {
	l.forget(markers)
	for _, d := range drains {
		if w := l.find(d.pid); w != nil && w.State == Draining && w.StopAt == nil {
			w.State = d.was
		}
	}
	l.st.Targets, l.st.Pending = targets, pending
	if len(markers) > 0 {
		if err := l.persist(); err != nil {
			l.log.Error("cannot record the workers' state", "err", err)
		}
	}
	return cause
}

// forget kills the workers recorded with the given markers and removes them from the
// recorded workers. Called with the lock held.
func (l *Local) forget(markers []string) {
	for _, w := range l.st.Workers {
		if w.Marker == "" || !slices.Contains(markers, w.Marker) {
			continue
		}
		if w.intent() {
			continue
		}
		_ = signalGroup(w.PID, syscall.SIGKILL)
		if c, ok := l.children[w.PID]; ok {
			<-c.done
			delete(l.children, w.PID)
		}
	}
	l.st.Workers = slices.DeleteFunc(l.st.Workers, func(w Worker) bool { return w.Marker != "" && slices.Contains(markers, w.Marker) })
}

// find returns the recorded worker with pid among those that may be alive.
func (l *Local) find(pid int) *Worker {
	for i := range l.st.Workers {
		if w := &l.st.Workers[i]; w.PID == pid && w.mayBeAlive() {
			return w
		}
	}
	return nil
}

// stopWorker sends SIGTERM to the worker's group and moves it to state. Called with the
// lock held.
func (l *Local) stopWorker(w *Worker, to WorkerState, now time.Time) {
	if w == nil {
		return
	}
	w.State, w.StopAt = to, &now
	if gone, _ := l.gone(w); gone {
		return // the next check records the exit
	}
	if err := signalGroup(w.PID, syscall.SIGTERM); err != nil {
		l.log.Error("cannot stop worker", "worker", w.Name, "pid", w.PID, "err", err)
	}
}

// beforeDrainSignals, set by tests, runs when a reconcile is about to signal the workers it
// drains (what the state file holds then is what a supervisor stopped there leaves).
var beforeDrainSignals func()

// afterSpawn, set by tests, runs after a worker's process is started and before its pid is
// recorded: the window in which a supervisor that dies leaves a worker it cannot know by pid.
var afterSpawn func(pid int)

// startWorker starts one worker of pool c on gpus, write-ahead: the worker is first appended
// to the recorded workers as an intent (state starting, no pid, a new marker) and the state
// file written, then its process is started with the marker in its environment, then its pid
// is recorded (in memory; the caller writes the file). It returns the worker's marker once
// the intent is recorded, also with an error (the caller then undoes the starts, unstart).
// Called with the lock held.
func (l *Local) startWorker(c scaling.Component, gpus []int) (string, error) {
	usedIdx, usedPort := map[int]bool{}, map[int]bool{}
	for _, w := range l.st.Workers {
		if w.Component == c {
			usedIdx[w.Index] = true
		}
		if w.mayBeAlive() {
			usedPort[w.HTTPPort], usedPort[w.FPMPort] = true, true
		}
	}
	idx := 0
	for usedIdx[idx] {
		idx++
	}
	ports, err := freePorts(2, usedPort)
	if err != nil {
		return "", err
	}
	w := Worker{
		Name:      workerName(l.cfg.Namespace, c, idx),
		Component: c,
		Index:     idx,
		GPUs:      slices.Clone(gpus),
		HTTPPort:  ports[0],
		FPMPort:   ports[1],
		State:     Starting,
		StartedAt: l.cfg.now(),
	}
	w.Marker = l.cfg.Namespace + "/" + w.Name + "/" + rand.Text()
	w.LogFile = filepath.Join(l.cfg.LogDir, w.Name+".log")
	cc := l.cfg.component(c)
	r := l.replacer(&w)
	for _, arg := range cc.Command {
		w.Command = append(w.Command, r.Replace(arg))
	}
	w.Env = append(w.Env, "CUDA_VISIBLE_DEVICES="+joinInts(gpus))
	for _, k := range slices.Sorted(maps.Keys(cc.Env)) {
		w.Env = append(w.Env, k+"="+r.Replace(cc.Env[k]))
	}
	w.Env = append(w.Env, WorkerMarkerEnv+"="+w.Marker)

	l.st.Workers = append(l.st.Workers, w)
	i := len(l.st.Workers) - 1
	if err := l.persist(); err != nil {
		return w.Marker, fmt.Errorf("worker %s: record it before starting it: %w", w.Name, err)
	}
	cmd, ch, startTime, err := spawn(w.Command, append(inheritedEnv(), w.Env...), w.LogFile, l.wake)
	if err != nil {
		return w.Marker, fmt.Errorf("worker %s: %w", w.Name, err)
	}
	if afterSpawn != nil {
		afterSpawn(cmd.Process.Pid)
	}
	rec := &l.st.Workers[i]
	rec.PID, rec.StartTime, rec.StartedAt = cmd.Process.Pid, startTime, l.cfg.now()
	l.children[rec.PID] = ch
	l.log.Info("started worker", "worker", rec.Name, "pid", rec.PID, "gpus", joinInts(gpus),
		"http_port", rec.HTTPPort, "fpm_port", rec.FPMPort, "log", rec.LogFile)
	return rec.Marker, nil
}

// mulNonNeg returns a*b for non-negative a and b, and false when the product overflows an
// int.
func mulNonNeg(a, b int) (int, bool) {
	if a < 0 || b < 0 || (b != 0 && a > math.MaxInt/b) {
		return 0, false
	}
	return a * b, true
}

// addNonNeg returns a+b for non-negative a and b, and false when the sum overflows an int.
func addNonNeg(a, b int) (int, bool) {
	if a < 0 || b < 0 || a > math.MaxInt-b {
		return 0, false
	}
	return a + b, true
}

// workerName is Dynamo's local naming: "<ns>_<component>" for the first worker,
// "<ns>_<component>_N" for the next.
func workerName(ns string, c scaling.Component, idx int) string {
	if idx == 0 {
		return ns + "_" + string(c)
	}
	return ns + "_" + string(c) + "_" + strconv.Itoa(idx)
}

// joinInts renders ids as "0,1,2".
func joinInts(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// replacer expands the placeholders for worker w.
func (l *Local) replacer(w *Worker) *strings.Replacer {
	return strings.NewReplacer("{name}", w.Name, "{component}", string(w.Component), "{index}", strconv.Itoa(w.Index),
		"{http_port}", strconv.Itoa(w.HTTPPort), "{fpm_port}", strconv.Itoa(w.FPMPort), "{gpus}", joinInts(w.GPUs))
}

// gone reports whether the worker's process has exited, and how: by the reaper's result
// for children of this supervisor, by /proc (same pid and start time) for adopted ones.
func (l *Local) gone(w *Worker) (bool, string) {
	if c, ok := l.children[w.PID]; ok {
		if c.exited() {
			return true, c.status()
		}
		return false, ""
	}
	alive, err := processAlive(w.PID, w.StartTime)
	if err != nil {
		l.log.Warn("cannot check worker; assuming it runs", "worker", w.Name, "pid", w.PID, "err", err)
	}
	if alive {
		return false, ""
	}
	return true, "exited (adopted process: exit status unknown)"
}

// wake asks the reconcile loop for an early check (a child exited).
func (l *Local) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// loop runs the checks every CheckInterval and when a child exits, until Close.
func (l *Local) loop() {
	defer close(l.loopDone)
	t := time.NewTicker(l.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
		}
		l.check()
		if l.cfg.afterCheck != nil {
			l.cfg.afterCheck()
		}
	}
}

// check probes the starting workers' readiness (without the lock), then records exits,
// readiness, start failures and drain deadlines, starts the pending workers the GPUs freed by
// exits can take, and writes the state file if anything changed.
func (l *Local) check() {
	type probe struct {
		pid int
		url string
	}
	var probes []probe
	l.mu.Lock()
	for i := range l.st.Workers {
		w := &l.st.Workers[i]
		if url := l.cfg.component(w.Component).ReadyURL; w.State == Starting && w.mayBeAlive() && url != "" {
			probes = append(probes, probe{w.PID, l.replacer(w).Replace(url)})
		}
	}
	l.mu.Unlock()
	ready := make([]bool, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() { ready[i] = l.probe(p.url) })
	}
	wg.Wait()
	readyPID := map[int]bool{}
	for i, p := range probes {
		readyPID[p.pid] = ready[i]
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	changed := l.update(readyPID, l.cfg.now())
	if len(l.st.Pending) > 0 && !l.closed {
		// Workers that exited may have freed the GPUs pending workers wait for.
		before := len(l.st.Pending)
		_, _ = l.startPending(true) // failures are handled and reported inside
		changed = changed || len(l.st.Pending) != before
	}
	if changed {
		if err := l.persist(); err != nil {
			l.log.Error("cannot record the workers' state", "err", err)
		}
	}
}

// probe reports whether url answers 200.
func (l *Local) probe(url string) bool {
	resp, err := l.client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// update applies one round of checks; it reports whether anything changed. Called with the
// lock held.
func (l *Local) update(readyPID map[int]bool, now time.Time) bool {
	changed := false
	kept := l.st.Workers[:0]
	for _, w := range l.st.Workers {
		if !w.mayBeAlive() {
			kept = append(kept, w)
			continue
		}
		if gone, status := l.gone(&w); gone {
			changed = true
			w.ExitedAt, w.ExitStatus = &now, status
			_ = signalGroup(w.PID, syscall.SIGKILL) // what is left of its group
			switch w.State {
			case Draining:
				l.log.Info("worker drained", "worker", w.Name, "pid", w.PID, "status", status)
				delete(l.children, w.PID)
				continue // its GPUs and ports are free
			case Starting, Ready:
				*l.st.Failures.get(w.Component)++
				l.log.Error("worker exited; its slot stays not ready until the next apply", "worker", w.Name,
					"pid", w.PID, "state", w.State, "status", status, "log", w.LogFile)
				w.State = Exited
			case Failed:
				l.log.Info("failed worker stopped", "worker", w.Name, "pid", w.PID, "status", status)
			}
			kept = append(kept, w)
			continue
		}
		switch w.State {
		case Starting:
			if readyPID[w.PID] || l.cfg.component(w.Component).ReadyURL == "" {
				w.State, w.ReadyAt, changed = Ready, &now, true
				l.log.Info("worker ready", "worker", w.Name, "pid", w.PID, "after", now.Sub(w.StartedAt).Round(time.Millisecond))
			} else if now.Sub(w.StartedAt) > l.cfg.StartTimeout {
				*l.st.Failures.get(w.Component)++
				l.log.Error("worker not ready within the start timeout; stopping it", "worker", w.Name, "pid", w.PID,
					"start_timeout", l.cfg.StartTimeout, "log", w.LogFile)
				l.stopWorker(&w, Failed, now)
				changed = true
			}
		case Draining, Failed:
			if w.StopAt != nil && w.KilledAt == nil && now.Sub(*w.StopAt) >= l.cfg.DrainTimeout {
				l.log.Warn("worker still running after the drain timeout; killing it", "worker", w.Name, "pid", w.PID,
					"drain_timeout", l.cfg.DrainTimeout)
				if err := signalGroup(w.PID, syscall.SIGKILL); err != nil {
					l.log.Error("cannot kill worker", "worker", w.Name, "pid", w.PID, "err", err)
				}
				w.KilledAt, changed = &now, true
			}
		}
		kept = append(kept, w)
	}
	l.st.Workers = kept
	return changed
}

// persist writes the state file. Called with the lock held.
func (l *Local) persist() error {
	l.st.UpdatedAt = time.Now().UTC()
	return writeState(l.cfg.StateFile, &l.st)
}

// Inventory reports the ready workers and targets of each deployed pool (an undeployed
// pool's counts are nil), whether a pool has a worker starting, pending or draining, the GPUs
// per worker and the newest applied decision. A pending worker is in the target (expected)
// and not ready, with the pool's scaling in progress, as a Kubernetes connector reports a
// Pending pod. It reads the supervisor's state, kept current by the reconcile loop, and never
// blocks on a probe.
func (l *Local) Inventory(context.Context) (connectors.Inventory, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	inv := connectors.Inventory{AppliedDecisionID: l.st.AppliedDecisionID}
	for _, c := range components {
		cc := l.cfg.component(c)
		if len(cc.Command) == 0 {
			continue
		}
		ready, expected, pending := 0, *l.st.Targets.get(c), l.pendingOf(c)
		busy := pending > 0
		for _, w := range l.st.Workers {
			if w.Component != c {
				continue
			}
			if w.State == Ready {
				ready++
			}
			busy = busy || w.State == Starting || w.State == Draining
		}
		caps := new(scaling.EngineCapabilities)
		*caps = cc.Capabilities
		caps.NumGPU = cc.GPUsPerWorker
		if c == scaling.Prefill {
			inv.ReadyPrefill, inv.ExpectedPrefill, inv.QueuedPrefill, inv.PrefillScalingInProgress, inv.Capabilities.Prefill = &ready, &expected, &pending, busy, caps
		} else {
			inv.ReadyDecode, inv.ExpectedDecode, inv.QueuedDecode, inv.DecodeScalingInProgress, inv.Capabilities.Decode = &ready, &expected, &pending, busy, caps
		}
	}
	return inv, nil
}

// InheritedEnv are the supervisor's environment variables a worker inherits. Nothing else is
// passed on: the supervisor is the planner worker, whose environment holds credentials
// (TEMPORAL_API_KEY, a Prometheus token) that engine processes must never see. A worker
// needing more gets it through its component's Env.
var InheritedEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "LD_LIBRARY_PATH"}

// WorkerMarkerEnv is the environment variable every worker gets, set to
// "<namespace>/<worker name>/<nonce>" (a new nonce for every start) and recorded as the
// worker's Marker before its process is started: a supervisor stopped between the start and
// the recording of the pid finds the process carrying it in /proc/<pid>/environ when it
// opens again, and adopts it instead of starting a second one.
const WorkerMarkerEnv = "PLANNER_LOCAL_WORKER"

// inheritedEnv returns the InheritedEnv variables set in the supervisor's environment.
func inheritedEnv() []string {
	var env []string
	for _, k := range InheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// FPMEndpoints lists the FPM endpoints of the ready workers (connectors.EndpointDiscoverer).
func (l *Local) FPMEndpoints(context.Context) ([]connectors.Endpoint, error) {
	var eps []connectors.Endpoint
	for _, w := range l.Workers() {
		if w.State == Ready {
			eps = append(eps, connectors.Endpoint{Address: w.FPMEndpoint(), Component: w.Component})
		}
	}
	return eps, nil
}

// Workers returns a copy of every recorded worker (starting, ready, draining, failed or
// exited), prefill first, by index.
func (l *Local) Workers() []Worker {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Worker, 0, len(l.st.Workers))
	for _, w := range l.st.Workers {
		out = append(out, w.clone())
	}
	slices.SortFunc(out, func(a, b Worker) int {
		if a.Component != b.Component {
			return slices.Index(components, a.Component) - slices.Index(components, b.Component)
		}
		return a.Index - b.Index
	})
	return out
}

// Counts are one pool's live workers by state, and its pending workers (waiting for GPUs:
// no process yet).
type Counts struct{ Ready, Starting, Draining, Pending int }

// Counts returns pool c's workers that are ready, starting, draining and pending.
func (l *Local) Counts(c scaling.Component) Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := Counts{Pending: l.pendingOf(c)}
	for _, w := range l.st.Workers {
		if w.Component != c {
			continue
		}
		switch w.State {
		case Ready:
			n.Ready++
		case Starting:
			n.Starting++
		case Draining:
			n.Draining++
		}
	}
	return n
}

// Pending returns a copy of the pending workers, oldest first.
func (l *Local) Pending() []PendingWorker {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.st.Pending)
}

// Failures returns how many workers of pool c exited on their own or failed to start since
// the state file was created.
func (l *Local) Failures(c scaling.Component) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.st.Failures.get(c)
}

// WaitSettled waits until no worker is starting, draining or pending (failed and exited
// workers do not count: nothing is in progress for them), or ctx is done.
func (l *Local) WaitSettled(ctx context.Context) error {
	for {
		l.mu.Lock()
		busy := len(l.st.Pending) > 0 || slices.ContainsFunc(l.st.Workers, func(w Worker) bool { return w.State == Starting || w.State == Draining })
		l.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("local connector: wait for workers to settle: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StopAll stops the whole deployment: SIGTERM to every worker's group, SIGKILL to those still
// running after the drain timeout (or at once when ctx is done), and waits until every
// process is gone. Pending workers are cancelled. The targets become 0 in the state file and
// Apply is refused afterwards.
// It works after Close too.
func (l *Local) StopAll(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	now := l.cfg.now()
	for i := range l.st.Workers {
		if w := &l.st.Workers[i]; w.mayBeAlive() && w.StopAt == nil {
			l.stopWorker(w, Draining, now)
		}
	}
	l.st.Targets, l.st.Pending = poolCounts{}, nil
	if err := l.persist(); err != nil {
		l.log.Error("cannot record the workers' state", "err", err)
	}
	l.mu.Unlock()
	l.log.Info("stopping all workers")

	var ctxErr error
	var killedAt time.Time
	for {
		l.mu.Lock()
		l.update(nil, l.cfg.now())
		alive := slices.ContainsFunc(l.st.Workers, func(w Worker) bool { return w.mayBeAlive() })
		if !alive {
			l.st.Workers = nil
			err := l.persist()
			l.mu.Unlock()
			if err != nil {
				return fmt.Errorf("local connector: stop all: %w", err)
			}
			if ctxErr != nil {
				return fmt.Errorf("local connector: stop all: killed the workers still draining: %w", ctxErr)
			}
			return nil
		}
		if ctxErr != nil && time.Since(killedAt) > 5*time.Second {
			l.mu.Unlock()
			return fmt.Errorf("local connector: stop all: workers survive SIGKILL for 5 s: %w", ctxErr)
		}
		if ctxErr == nil && ctx.Err() != nil {
			ctxErr, killedAt = ctx.Err(), time.Now()
			for _, w := range l.st.Workers {
				if w.mayBeAlive() {
					_ = signalGroup(w.PID, syscall.SIGKILL)
				}
			}
		}
		l.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// Close stops the reconcile loop; the workers keep running (a new Open adopts them). Apply
// is refused afterwards. Close is idempotent.
func (l *Local) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stop)
		<-l.loopDone
		if l.lock != nil {
			_ = l.lock.Close()
		}
	})
	return nil
}
