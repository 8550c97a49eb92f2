package local

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/connectortest"
	"github.com/llmplanner/planner/scaling"
)

// fakeworker is the test worker binary, built once by TestMain.
var fakeworker string

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		fakeworker = os.Getenv(fakeworkerEnv)
		os.Exit(crashHelper(dir, os.Getenv(crashScenarioEnv)))
	}
	dir, err := os.MkdirTemp("", "fakeworker")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeworker = filepath.Join(dir, "fakeworker")
	if out, err := exec.Command("go", "build", "-o", fakeworker, "./testdata/fakeworker").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fakeworker: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func n(v int) *int { return &v }

// config runs fakeworker with extra arguments in both pools, in dir, on 8 GPUs, on a fake
// clock that stands still unless the test moves it (withClock): no start or drain deadline
// runs out on its own, however slow the machine.
func config(t *testing.T, dir string, args ...string) Config {
	cfg := baseConfig(dir, slog.New(slog.NewTextHandler(t.Output(), nil)), args...)
	withClock(&cfg)
	return cfg
}

// fakeClock is the supervisor's clock in tests: it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// withClock gives cfg a new fake clock, starting now, and returns it.
func withClock(cfg *Config) *fakeClock {
	c := &fakeClock{t: time.Now()}
	cfg.now = c.Now
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// checkPasses counts the passes of a supervisor's reconcile loop.
type checkPasses struct {
	mu   sync.Mutex
	n    int
	next chan struct{} // closed at the end of the next pass
}

// watchChecks makes cfg's supervisor report the end of each pass of its reconcile loop.
func watchChecks(cfg *Config) *checkPasses {
	c := &checkPasses{next: make(chan struct{})}
	cfg.afterCheck = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n++
		close(c.next)
		c.next = make(chan struct{})
	}
	return c
}

// wait waits until n whole passes have run after the call: n+1 passes end, since the pass
// running at the call may have started before it.
func (c *checkPasses) wait(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	target := c.n + n + 1
	c.mu.Unlock()
	timeout := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		done, next := c.n >= target, c.next
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("the reconcile loop did not run %d passes within 10 s", n)
		}
	}
}

// logHas waits until a worker's log holds s.
func logHas(t *testing.T, w Worker, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(logOf(t, w), s) }, 10*time.Second, time.Millisecond,
		"%s never logged %q", w.Name, s)
}

// until waits, pass after pass of the reconcile loop, until cond holds: the passes run when
// a worker exits, so a test waiting for a drain to end waits for that event.
func (c *checkPasses) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !cond() {
		c.mu.Lock()
		next := c.next
		c.mu.Unlock()
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// drainUntilReleased makes cfg's workers drain until the test releases them one by one
// (release), and releases every worker when the test ends, before open's cleanup stops them.
// Call it before open; call the returned cleanup right after open.
func drainUntilReleased(t *testing.T, dir string) (args []string, release func(name string)) {
	release = func(name string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "release-"+name), nil, 0o644))
	}
	return drainArgs(dir), release
}

// drainArgs are the fakeworker arguments that make a worker in dir drain until the file
// release-<its name> exists in dir.
func drainArgs(dir string) []string {
	return []string{"--drain-until", filepath.Join(dir, "release-{name}")}
}

// releaseAtEnd releases every worker of l when the test ends (registered after open, it runs
// before open's cleanup).
func releaseAtEnd(t *testing.T, l *Local, release func(string)) {
	t.Cleanup(func() {
		for _, w := range l.Workers() {
			release(w.Name)
		}
	})
}

// baseConfig is config with its logger given (the crash helper has no testing.T).
func baseConfig(dir string, logger *slog.Logger, args ...string) Config {
	cmd := append([]string{fakeworker, "--name", "{name}", "--http-port", "{http_port}", "--fpm-port", "{fpm_port}"}, args...)
	pool := ComponentConfig{Command: cmd, ReadyURL: "http://127.0.0.1:{http_port}/healthz", Env: map[string]string{"WORKER_INDEX": "{index}"}}
	return Config{
		Namespace:     "demo",
		StateFile:     filepath.Join(dir, "state.json"),
		GPUs:          []int{0, 1, 2, 3, 4, 5, 6, 7},
		Prefill:       pool,
		Decode:        pool,
		DrainTimeout:  5 * time.Second,
		StartTimeout:  10 * time.Second,
		CheckInterval: 20 * time.Millisecond,
		ReadyTimeout:  time.Second,
		Logger:        logger,
	}
}

// open opens a supervisor and stops its workers when the test ends.
func open(t *testing.T, cfg Config, initial connectors.Targets) *Local {
	t.Helper()
	l, err := Open(cfg, initial)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, l.StopAll(ctx))
		require.NoError(t, l.Close())
	})
	return l
}

// settle waits until no worker is starting or draining.
func settle(t *testing.T, l *Local) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, l.WaitSettled(ctx))
}

// running reports whether pid is a live (not zombie) process.
func running(pid int) bool {
	st, err := readProcStat(pid)
	return err == nil && st.state != 'Z' && st.state != 'X'
}

// logOf returns a worker's log.
func logOf(t *testing.T, w Worker) string {
	t.Helper()
	data, err := os.ReadFile(w.LogFile)
	require.NoError(t, err)
	return string(data)
}

// byName returns the workers by name.
func byName(ws []Worker) map[string]Worker {
	m := map[string]Worker{}
	for _, w := range ws {
		m[w.Name] = w
	}
	return m
}

func names(ws []Worker) []string {
	var s []string
	for _, w := range ws {
		s = append(s, w.Name+":"+string(w.State))
	}
	return s
}

func TestConformance(t *testing.T) {
	connectortest.Run(t, func(t *testing.T) connectors.Connector {
		l := open(t, config(t, t.TempDir(), "--startup", "150ms"), connectors.Targets{Prefill: n(1), Decode: n(1)})
		settle(t, l)
		return l
	}, connectortest.Options{Applies: true, Settle: func(t *testing.T, c connectors.Connector) { settle(t, c.(*Local)) }})
}

func TestNamesGPUsPortsAndStateFile(t *testing.T) {
	// The supervisor's secrets are not passed on; PATH is.
	t.Setenv("TEMPORAL_API_KEY", "s3cret")
	dir := t.TempDir()
	cfg := config(t, dir)
	cfg.Prefill.GPUsPerWorker = 2
	l := open(t, cfg, connectors.Targets{Prefill: n(2), Decode: n(3)})
	settle(t, l)

	ws := l.Workers()
	require.Equal(t, []string{"demo_prefill:ready", "demo_prefill_1:ready", "demo_decode:ready", "demo_decode_1:ready", "demo_decode_2:ready"}, names(ws))
	wantGPUs := [][]int{{0, 1}, {2, 3}, {4}, {5}, {6}}
	ports := map[int]bool{}
	for i, w := range ws {
		require.Equal(t, wantGPUs[i], w.GPUs, w.Name)
		require.Contains(t, logOf(t, w), fmt.Sprintf("start name=%s pid=%d cuda=%s index=%d\n", w.Name, w.PID, joinInts(wantGPUs[i]), w.Index))
		require.Contains(t, logOf(t, w), "env api_key=\"\" path_set=true\n", "only the allowlisted environment is inherited")
		require.Equal(t, filepath.Join(dir, "logs", w.Name+".log"), w.LogFile)
		require.Equal(t, "tcp://127.0.0.1:"+strconv.Itoa(w.FPMPort), w.FPMEndpoint())
		require.Equal(t, "127.0.0.1:"+strconv.Itoa(w.HTTPPort), w.HTTPAddress())
		ports[w.HTTPPort], ports[w.FPMPort] = true, true
		require.True(t, running(w.PID))
	}
	require.Len(t, ports, 10, "two distinct ports per worker")

	inv, err := l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, connectors.Inventory{
		WorkerCounts: scaling.WorkerCounts{ReadyPrefill: n(2), ReadyDecode: n(3), ExpectedPrefill: n(2), ExpectedDecode: n(3),
			QueuedPrefill: n(0), QueuedDecode: n(0)},
		Capabilities: scaling.WorkerCapabilities{Prefill: &scaling.EngineCapabilities{NumGPU: 2}, Decode: &scaling.EngineCapabilities{NumGPU: 1}},
	}, inv)

	// The state file records the workers with their process identity.
	data, err := os.ReadFile(cfg.StateFile)
	require.NoError(t, err)
	var st state
	require.NoError(t, json.Unmarshal(data, &st))
	require.Equal(t, "demo", st.Namespace)
	require.Equal(t, poolCounts{Prefill: 2, Decode: 3}, st.Targets)
	require.Len(t, st.Workers, 5)
	for _, w := range st.Workers {
		ps, err := readProcStat(w.PID)
		require.NoError(t, err)
		require.Equal(t, ps.startTime, w.StartTime, w.Name)
		require.Equal(t, w.PID, ps.pgrp, "%s leads its own process group", w.Name)
		require.Contains(t, w.Env, "CUDA_VISIBLE_DEVICES="+joinInts(w.GPUs))
		require.Equal(t, Ready, w.State)
		require.Contains(t, w.Command, strconv.Itoa(w.HTTPPort), "placeholders expanded")
	}
}

func TestReadinessTransition(t *testing.T) {
	// The readiness endpoint is the test's: it answers 503 until the test opens it.
	var isReady atomic.Bool
	var probes atomic.Int64
	var probedPort atomic.Value
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		probedPort.Store(r.URL.Query().Get("port"))
		if !isReady.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(gate.Close)
	cfg := config(t, t.TempDir())
	cfg.Decode.ReadyURL = gate.URL + "/healthz?port={http_port}"
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Decode: n(1)})
	ws := l.Workers()
	require.Equal(t, []string{"demo_decode:starting"}, names(ws))
	inv, err := l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, n(0), inv.ReadyDecode)
	require.Equal(t, n(1), inv.ExpectedDecode)
	require.True(t, inv.DecodeScalingInProgress)
	require.Equal(t, n(0), inv.ReadyPrefill)
	require.False(t, inv.PrefillScalingInProgress)

	// Probed pass after pass and answered 503: still starting.
	passes.wait(t, 3)
	require.Equal(t, []string{"demo_decode:starting"}, names(l.Workers()), "not ready before its endpoint answers 200")
	require.GreaterOrEqual(t, probes.Load(), int64(3), "each pass probes the starting worker")
	require.Equal(t, strconv.Itoa(ws[0].HTTPPort), probedPort.Load(), "the worker's own port is probed")
	inv, err = l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, n(0), inv.ReadyDecode)
	require.True(t, inv.DecodeScalingInProgress)

	isReady.Store(true)
	settle(t, l)
	w := l.Workers()[0]
	require.Equal(t, Ready, w.State)
	require.NotNil(t, w.ReadyAt)
	inv, err = l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, n(1), inv.ReadyDecode)
	require.False(t, inv.DecodeScalingInProgress)
}

func TestScaleDownDrainsHighestSuffix(t *testing.T) {
	// The workers drain until the test creates the release file (the fake clock keeps the
	// drain timeout from cutting the drain short).
	dir := t.TempDir()
	release := filepath.Join(dir, "release-drains")
	cfg := config(t, dir, "--drain-until", release)
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Decode: n(3)})
	settle(t, l)
	before := byName(l.Workers())
	ctx := context.Background()

	require.NoError(t, l.Apply(ctx, 1, connectors.Targets{Decode: n(1)}))
	require.Equal(t, []string{"demo_decode:ready", "demo_decode_1:draining", "demo_decode_2:draining"}, names(l.Workers()))
	inv, err := l.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, n(1), inv.ReadyDecode, "draining workers are not ready")
	require.Equal(t, n(1), inv.ExpectedDecode)
	require.True(t, inv.DecodeScalingInProgress)

	for _, name := range []string{"demo_decode_1", "demo_decode_2"} {
		logHas(t, before[name], "sigterm\n")
	}
	passes.wait(t, 3)
	for _, name := range []string{"demo_decode_1", "demo_decode_2"} {
		require.True(t, running(before[name].PID), "%s still runs while it drains", name)
	}
	require.Equal(t, []string{"demo_decode:ready", "demo_decode_1:draining", "demo_decode_2:draining"}, names(l.Workers()))

	require.NoError(t, os.WriteFile(release, nil, 0o644))
	settle(t, l)
	for _, name := range []string{"demo_decode_1", "demo_decode_2"} {
		require.False(t, running(before[name].PID), name)
		require.Contains(t, logOf(t, before[name]), "sigterm\nexit\n")
	}
	after := l.Workers()
	require.Equal(t, []string{"demo_decode:ready"}, names(after))
	require.Equal(t, before["demo_decode"].PID, after[0].PID, "the first worker was left alone")
	require.NotContains(t, logOf(t, after[0]), "sigterm")

	// The drained workers' names and GPUs are free again.
	require.NoError(t, l.Apply(ctx, 2, connectors.Targets{Decode: n(3)}))
	again := byName(l.Workers())
	require.Len(t, again, 3)
	require.NotEqual(t, before["demo_decode_2"].PID, again["demo_decode_2"].PID)
	require.Equal(t, []int{1}, again["demo_decode_1"].GPUs)
	require.Equal(t, []int{2}, again["demo_decode_2"].GPUs)
}

// TestDrainsRecordedBeforeSignalled: a scale-down starts no worker, so no start writes the
// state file; the drains are still recorded before any is signalled, so a supervisor stopped
// between the two leaves a file that agrees with the new target.
func TestDrainsRecordedBeforeSignalled(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release-drains")
	cfg := config(t, dir, "--drain-until", release)
	l := open(t, cfg, connectors.Targets{Decode: n(3)})
	settle(t, l)
	var recorded []string
	beforeDrainSignals = func() {
		st, _, err := readState(cfg.StateFile)
		require.NoError(t, err)
		for _, w := range st.Workers {
			recorded = append(recorded, fmt.Sprintf("%s:%s", w.Name, w.State))
		}
	}
	defer func() { beforeDrainSignals = nil }()
	require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(1)}))
	require.Equal(t, []string{"demo_decode:ready", "demo_decode_1:draining", "demo_decode_2:draining"}, recorded,
		"the state file before the first SIGTERM")
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	settle(t, l)
}

func TestDrainTimeoutKills(t *testing.T) {
	cfg := config(t, t.TempDir(), "--ignore-term")
	cfg.DrainTimeout = time.Minute
	clock := withClock(&cfg)
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Decode: n(1)})
	settle(t, l)
	victim := l.Workers()[0]

	require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(0)}))
	logHas(t, victim, "sigterm\n")
	// Just before the drain timeout: not killed.
	clock.Advance(time.Minute - time.Millisecond)
	passes.wait(t, 3)
	require.True(t, running(victim.PID), "killed before the drain timeout")
	w := l.Workers()[0]
	require.Equal(t, Draining, w.State)
	require.Nil(t, w.KilledAt)

	clock.Advance(time.Second)
	settle(t, l)
	require.False(t, running(victim.PID))
	require.Empty(t, l.Workers())
	require.Contains(t, logOf(t, victim), "sigterm\n")
	require.NotContains(t, logOf(t, victim), "exit\n", "it was killed, it did not exit")
}

func TestTargetsOverThePoolAreRefused(t *testing.T) {
	dir := t.TempDir()
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	cfg.GPUs = []int{10, 11, 12}
	l := open(t, cfg, connectors.Targets{Prefill: n(1), Decode: n(1)})
	releaseAtEnd(t, l, release)
	settle(t, l)
	before := l.Workers()
	file, err := os.ReadFile(cfg.StateFile)
	require.NoError(t, err)
	ctx := context.Background()

	err = l.Apply(ctx, 1, connectors.Targets{Decode: n(3)})
	require.ErrorIs(t, err, connectors.ErrInvalidTargets)
	require.ErrorContains(t, err, "the targets (prefill 1 × 1 GPUs, decode 3 × 1 GPUs) need 4 GPUs but the pool has 3")
	require.Equal(t, before, l.Workers(), "nothing started or stopped")
	require.Empty(t, l.Pending(), "nothing pending")
	after, err := os.ReadFile(cfg.StateFile)
	require.NoError(t, err)
	require.Equal(t, string(file), string(after), "the state file is unchanged")
	logs, err := os.ReadDir(filepath.Join(dir, "logs"))
	require.NoError(t, err)
	require.Len(t, logs, 2, "no process was started")
	inv, err := l.Inventory(ctx)
	require.NoError(t, err)
	require.Zero(t, inv.AppliedDecisionID)
	require.Equal(t, n(1), inv.ExpectedDecode)

	// On a full pool with a worker draining, targets over the pool are still refused, and
	// change neither the drain nor the pending worker.
	require.NoError(t, l.Apply(ctx, 1, connectors.Targets{Decode: n(2)}), "the decision id was not used")
	settle(t, l)
	require.NoError(t, l.Apply(ctx, 2, connectors.Targets{Prefill: n(0), Decode: n(3)}))
	require.Equal(t, Counts{Ready: 2, Pending: 1}, l.Counts(scaling.Decode))
	before = l.Workers()
	err = l.Apply(ctx, 3, connectors.Targets{Prefill: n(1), Decode: n(3)})
	require.ErrorIs(t, err, connectors.ErrInvalidTargets)
	require.ErrorContains(t, err, "need 4 GPUs but the pool has 3")
	require.Equal(t, before, l.Workers())
	require.Equal(t, Counts{Ready: 2, Pending: 1}, l.Counts(scaling.Decode))
	require.Equal(t, Counts{Draining: 1}, l.Counts(scaling.Prefill))
	inv, err = l.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), inv.AppliedDecisionID)

	// A pool without a command is not deployed.
	cfg = config(t, t.TempDir())
	cfg.Prefill = ComponentConfig{}
	agg := open(t, cfg, connectors.Targets{Decode: n(1)})
	require.ErrorIs(t, agg.Apply(ctx, 1, connectors.Targets{Prefill: n(1)}), connectors.ErrInvalidTargets)
	inv, err = agg.Inventory(ctx)
	require.NoError(t, err)
	require.Nil(t, inv.ReadyPrefill)
	require.Nil(t, inv.ExpectedPrefill)
	require.Nil(t, inv.Capabilities.Prefill)
	cfg.StateFile = filepath.Join(t.TempDir(), "state.json")
	_, err = Open(cfg, connectors.Targets{Prefill: n(1)})
	require.ErrorIs(t, err, connectors.ErrInvalidTargets)
	_, err = os.Stat(cfg.StateFile)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed Open records nothing")
}

func TestMixedDecisionOnAFullPoolLeavesTheGrowthPending(t *testing.T) {
	dir := t.TempDir()
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	clock := withClock(&cfg)
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Prefill: n(4), Decode: n(4)})
	releaseAtEnd(t, l, release)
	settle(t, l)
	before := byName(l.Workers())
	ctx := context.Background()

	// Every GPU is in use: shrink prefill, grow decode. The shrink is applied at once; the
	// two new decode workers wait for the GPUs of the draining prefill workers.
	require.NoError(t, l.Apply(ctx, 1, connectors.Targets{Prefill: n(2), Decode: n(6)}))
	require.Equal(t, Counts{Ready: 2, Draining: 2}, l.Counts(scaling.Prefill))
	require.Equal(t, Counts{Ready: 4, Pending: 2}, l.Counts(scaling.Decode))
	for _, name := range []string{"demo_prefill_2", "demo_prefill_3"} {
		logHas(t, before[name], "sigterm\n")
	}
	inv, err := l.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, scaling.WorkerCounts{ReadyPrefill: n(2), ReadyDecode: n(4), ExpectedPrefill: n(2), ExpectedDecode: n(6),
		QueuedPrefill: n(0), QueuedDecode: n(2), PrefillScalingInProgress: true, DecodeScalingInProgress: true}, inv.WorkerCounts, "pending workers are expected, not ready")
	require.Equal(t, int64(1), inv.AppliedDecisionID)
	require.Equal(t, []PendingWorker{{Component: scaling.Decode, Since: clock.Now()}, {Component: scaling.Decode, Since: clock.Now()}}, l.Pending())
	st, _, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.Len(t, st.Pending, 2, "the pending workers are recorded")
	for _, p := range st.Pending {
		require.Equal(t, scaling.Decode, p.Component)
		require.True(t, p.Since.Equal(clock.Now()))
	}

	// While the drains go on, nothing starts.
	passes.wait(t, 3)
	require.Equal(t, Counts{Ready: 4, Pending: 2}, l.Counts(scaling.Decode))
	logs, err := os.ReadDir(filepath.Join(dir, "logs"))
	require.NoError(t, err)
	require.Len(t, logs, 8, "no process was started")

	// Each drained worker's GPU goes to the next pending worker when it exits.
	clock.Advance(time.Second)
	release("demo_prefill_3")
	passes.until(t, "a pending decode worker starts", func() bool { return l.Counts(scaling.Decode).Pending == 1 })
	ws := byName(l.Workers())
	require.Equal(t, []int{3}, ws["demo_decode_4"].GPUs, "the drained worker's GPU")
	require.NotContains(t, ws, "demo_decode_5")
	require.Equal(t, Counts{Ready: 2, Draining: 1}, l.Counts(scaling.Prefill))
	release("demo_prefill_2")
	settle(t, l)
	ws = byName(l.Workers())
	require.Equal(t, []int{2}, ws["demo_decode_5"].GPUs)
	require.Equal(t, []string{"demo_prefill:ready", "demo_prefill_1:ready", "demo_decode:ready", "demo_decode_1:ready",
		"demo_decode_2:ready", "demo_decode_3:ready", "demo_decode_4:ready", "demo_decode_5:ready"}, names(l.Workers()))
	inv, err = l.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, scaling.WorkerCounts{ReadyPrefill: n(2), ReadyDecode: n(6), ExpectedPrefill: n(2), ExpectedDecode: n(6),
		QueuedPrefill: n(0), QueuedDecode: n(0)}, inv.WorkerCounts)
	st, _, err = readState(cfg.StateFile)
	require.NoError(t, err)
	require.Empty(t, st.Pending)
}

func TestPendingWorkersSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	cfg.GPUs = []int{0, 1}
	first := open(t, cfg, connectors.Targets{Prefill: n(1), Decode: n(1)})
	releaseAtEnd(t, first, release)
	settle(t, first)
	require.NoError(t, first.Apply(context.Background(), 1, connectors.Targets{Prefill: n(0), Decode: n(2)}))
	require.NoError(t, first.Close())

	passes := watchChecks(&cfg)
	second := open(t, cfg, connectors.Targets{})
	releaseAtEnd(t, second, release)
	require.Equal(t, Counts{Ready: 1, Pending: 1}, second.Counts(scaling.Decode), "the pending worker is read back")
	require.Equal(t, Counts{Draining: 1}, second.Counts(scaling.Prefill))
	passes.wait(t, 3)
	require.Equal(t, Counts{Ready: 1, Pending: 1}, second.Counts(scaling.Decode))
	// The adopted draining worker's exit is seen through /proc; its GPU goes to the pending
	// worker.
	release("demo_prefill")
	settle(t, second)
	require.Equal(t, []string{"demo_decode:ready", "demo_decode_1:ready"}, names(second.Workers()))
	require.Equal(t, []int{0}, byName(second.Workers())["demo_decode_1"].GPUs)
}

func TestLowerTargetCancelsPendingWorkersFirst(t *testing.T) {
	dir := t.TempDir()
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	clock := withClock(&cfg)
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Prefill: n(4), Decode: n(4)})
	releaseAtEnd(t, l, release)
	settle(t, l)
	ctx := context.Background()

	first := clock.Now()
	require.NoError(t, l.Apply(ctx, 1, connectors.Targets{Prefill: n(1), Decode: n(6)}))
	clock.Advance(time.Second)
	require.NoError(t, l.Apply(ctx, 2, connectors.Targets{Decode: n(7)}))
	require.Equal(t, []PendingWorker{{scaling.Decode, first}, {scaling.Decode, first}, {scaling.Decode, first.Add(time.Second)}}, l.Pending())

	// Down to 5: two pending workers are cancelled, the newest first; no running one drains.
	require.NoError(t, l.Apply(ctx, 3, connectors.Targets{Decode: n(5)}))
	require.Equal(t, []PendingWorker{{scaling.Decode, first}}, l.Pending())
	require.Equal(t, Counts{Ready: 4, Pending: 1}, l.Counts(scaling.Decode))
	inv, err := l.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, n(5), inv.ExpectedDecode)
	require.Equal(t, n(4), inv.ReadyDecode)

	// Down to 3: the last pending worker is cancelled, then the highest running one drains.
	require.NoError(t, l.Apply(ctx, 4, connectors.Targets{Decode: n(3)}))
	require.Empty(t, l.Pending())
	require.Equal(t, Counts{Ready: 3, Draining: 1}, l.Counts(scaling.Decode))
	require.Equal(t, Draining, byName(l.Workers())["demo_decode_3"].State)

	// The freed GPUs start nothing.
	for _, name := range []string{"demo_prefill_1", "demo_prefill_2", "demo_prefill_3", "demo_decode_3"} {
		release(name)
	}
	settle(t, l)
	passes.wait(t, 2)
	require.Equal(t, []string{"demo_prefill:ready", "demo_decode:ready", "demo_decode_1:ready", "demo_decode_2:ready"}, names(l.Workers()))
}

func TestPendingWorkerThatCannotStartIsReported(t *testing.T) {
	dir := t.TempDir()
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	cfg.GPUs = []int{0, 1}
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Prefill: n(1), Decode: n(1)})
	releaseAtEnd(t, l, release)
	settle(t, l)
	require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Prefill: n(0), Decode: n(2)}))
	// The decode program disappears while the worker waits.
	l.mu.Lock()
	l.cfg.Decode.Command = []string{filepath.Join(dir, "missing-engine")}
	l.mu.Unlock()
	release("demo_prefill")
	passes.until(t, "the pending worker is tried", func() bool { return len(l.Pending()) == 0 })
	require.Equal(t, []string{"demo_decode:ready"}, names(l.Workers()), "no worker left behind")
	require.Equal(t, 1, l.Failures(scaling.Decode))
	inv, err := l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, n(1), inv.ReadyDecode)
	require.Equal(t, n(2), inv.ExpectedDecode)
	require.False(t, inv.DecodeScalingInProgress, "nothing in progress: the slot waits for the next apply")
	st, _, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.Empty(t, st.Pending)
	require.Len(t, st.Workers, 1, "the failed start is not recorded")
}

func TestFailedStartOfAShrinkAndGrowSignalsNoDrain(t *testing.T) {
	dir := t.TempDir()
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	l := open(t, cfg, connectors.Targets{Prefill: n(4), Decode: n(3)})
	releaseAtEnd(t, l, release)
	settle(t, l)
	before := l.Workers()
	ctx := context.Background()

	// The decode worker that could start on the free GPU cannot: the decision is undone,
	// and the prefill workers it had marked draining (recorded with the decode worker's
	// intent) were never signalled and serve on.
	l.mu.Lock()
	command := l.cfg.Decode.Command
	l.cfg.Decode.Command = []string{filepath.Join(dir, "missing-engine")}
	l.mu.Unlock()
	err := l.Apply(ctx, 1, connectors.Targets{Prefill: n(2), Decode: n(6)})
	require.ErrorContains(t, err, "missing-engine")
	require.Equal(t, before, l.Workers(), "no worker draining, none signalled (no StopAt)")
	require.Empty(t, l.Pending())
	st, _, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.Equal(t, poolCounts{Prefill: 4, Decode: 3}, st.Targets, "the targets are restored")
	require.Zero(t, st.AppliedDecisionID)
	require.Empty(t, st.Pending)
	require.Len(t, st.Workers, 7)
	for _, w := range st.Workers {
		require.Equal(t, Ready, w.State, "%s as recorded", w.Name)
		require.Nil(t, w.StopAt, "%s as recorded", w.Name)
	}

	// The retry, once the engine is back, applies the decision: the drains are signalled.
	l.mu.Lock()
	l.cfg.Decode.Command = command
	l.mu.Unlock()
	require.NoError(t, l.Apply(ctx, 1, connectors.Targets{Prefill: n(2), Decode: n(6)}))
	require.Equal(t, Counts{Ready: 2, Draining: 2}, l.Counts(scaling.Prefill))
	decode := l.Counts(scaling.Decode)
	require.Equal(t, 4, decode.Ready+decode.Starting)
	require.Equal(t, 2, decode.Pending)
	ws := byName(l.Workers())
	for _, name := range []string{"demo_prefill_2", "demo_prefill_3"} {
		require.NotNil(t, ws[name].StopAt, name)
		logHas(t, ws[name], "sigterm\n")
		release(name)
	}
	settle(t, l)
	require.Equal(t, []string{"demo_prefill:ready", "demo_prefill_1:ready", "demo_decode:ready", "demo_decode_1:ready",
		"demo_decode_2:ready", "demo_decode_3:ready", "demo_decode_4:ready", "demo_decode_5:ready"}, names(l.Workers()))
}

func TestAbsurdTargetsAreRefusedBeforeAnything(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perGPU  int // decode GPUs per worker
		targets connectors.Targets
		want    string
	}{
		{"max int64 decode, 2 GPUs per worker", 2, connectors.Targets{Decode: n(math.MaxInt64)}, "decode target 9223372036854775807 exceeds the 4 workers"},
		{"2^62 decode, 4 GPUs per worker", 4, connectors.Targets{Decode: n(1 << 62)}, "decode target 4611686018427387904 exceeds the 2 workers"},
		{"max int64 in both pools", 1, connectors.Targets{Prefill: n(math.MaxInt64), Decode: n(math.MaxInt64)}, "prefill target 9223372036854775807 exceeds the 8 workers"},
		{"2^62 prefill only", 1, connectors.Targets{Prefill: n(1 << 62)}, "prefill target 4611686018427387904 exceeds the 8 workers"},
		{"one over capacity", 2, connectors.Targets{Decode: n(5)}, "decode target 5 exceeds the 4 workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := config(t, dir)
			cfg.Decode.GPUsPerWorker = tc.perGPU
			l := open(t, cfg, connectors.Targets{Decode: n(1)})
			settle(t, l)
			before := l.Workers()
			file, err := os.ReadFile(cfg.StateFile)
			require.NoError(t, err)

			err = l.Apply(context.Background(), 1, tc.targets)
			require.ErrorIs(t, err, connectors.ErrInvalidTargets)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, before, l.Workers(), "nothing started or stopped")
			logs, err := os.ReadDir(filepath.Join(dir, "logs"))
			require.NoError(t, err)
			require.Len(t, logs, 1, "no process was started")
			after, err := os.ReadFile(cfg.StateFile)
			require.NoError(t, err)
			require.Equal(t, string(file), string(after), "the state file is unchanged")
			inv, err := l.Inventory(context.Background())
			require.NoError(t, err)
			require.Zero(t, inv.AppliedDecisionID)

			// The refused decision id is still free for targets the pool can take.
			require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(2)}))
			require.Len(t, l.Workers(), 2)
		})
	}
}

func TestRestartAdoptsLiveWorkers(t *testing.T) {
	dir := t.TempDir()
	cfg := config(t, dir, "--drain", "50ms")
	ctx := context.Background()
	first := open(t, cfg, connectors.Targets{Prefill: n(1), Decode: n(1)})
	require.NoError(t, first.Apply(ctx, 1, connectors.Targets{Decode: n(2)}))
	settle(t, first)
	before := byName(first.Workers())
	require.NoError(t, first.Close())
	require.ErrorIs(t, first.Apply(ctx, 2, connectors.Targets{Decode: n(3)}), ErrClosed)

	// A worker dies while no supervisor runs.
	dead := before["demo_decode_1"]
	require.NoError(t, syscall.Kill(dead.PID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !running(dead.PID) }, 5*time.Second, 5*time.Millisecond)

	second := open(t, cfg, connectors.Targets{Decode: n(7)})
	after := byName(second.Workers())
	require.Equal(t, []string{"demo_prefill:ready", "demo_decode:ready", "demo_decode_1:exited"}, names(second.Workers()))
	for _, name := range []string{"demo_prefill", "demo_decode"} {
		require.Equal(t, before[name].PID, after[name].PID, "%s adopted, not restarted", name)
		require.True(t, running(after[name].PID))
	}
	require.Equal(t, 1, second.Failures(scaling.Decode))
	inv, err := second.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, connectors.Inventory{
		WorkerCounts: scaling.WorkerCounts{ReadyPrefill: n(1), ReadyDecode: n(1), ExpectedPrefill: n(1), ExpectedDecode: n(2),
			QueuedPrefill: n(0), QueuedDecode: n(0)},
		Capabilities:      scaling.WorkerCapabilities{Prefill: &scaling.EngineCapabilities{NumGPU: 1}, Decode: &scaling.EngineCapabilities{NumGPU: 1}},
		AppliedDecisionID: 1,
	}, inv, "the initial targets were ignored; the dead worker shows as not ready")

	require.ErrorIs(t, second.Apply(ctx, 0, connectors.Targets{Decode: n(1)}), connectors.ErrStaleDecision)
	require.NoError(t, second.Apply(ctx, 1, connectors.Targets{Decode: n(2)}))
	require.Len(t, second.Workers(), 3, "the same decision again does not reconcile")

	// The next decision replaces the dead worker and scales up.
	require.NoError(t, second.Apply(ctx, 2, connectors.Targets{Decode: n(3)}))
	settle(t, second)
	scaled := byName(second.Workers())
	require.Equal(t, []string{"demo_prefill:ready", "demo_decode:ready", "demo_decode_1:ready", "demo_decode_2:ready"}, names(second.Workers()))
	require.Equal(t, before["demo_decode"].PID, scaled["demo_decode"].PID)
	require.NotEqual(t, dead.PID, scaled["demo_decode_1"].PID)

	// Scale-down reaches adopted workers too (their exit is seen through /proc).
	require.NoError(t, second.Apply(ctx, 3, connectors.Targets{Prefill: n(0), Decode: n(1)}))
	settle(t, second)
	require.Equal(t, []string{"demo_decode:ready"}, names(second.Workers()))
	require.False(t, running(before["demo_prefill"].PID))
	require.Contains(t, logOf(t, before["demo_prefill"]), "sigterm\nexit\n")
	require.False(t, running(scaled["demo_decode_2"].PID))
	require.True(t, running(before["demo_decode"].PID))
}

func TestPIDReuseIsNotAdopted(t *testing.T) {
	dir := t.TempDir()
	cfg := config(t, dir)
	// A recorded worker whose pid now belongs to another process (this test): same pid, other
	// start time. It must be taken as dead and never signalled.
	st := state{Version: stateVersion, Namespace: "demo", AppliedDecisionID: 4, Targets: poolCounts{Decode: 1},
		Workers: []Worker{{Name: "demo_decode", Component: scaling.Decode, PID: os.Getpid(), StartTime: 1, GPUs: []int{0},
			State: Ready, StartedAt: time.Now()}}}
	require.NoError(t, writeState(cfg.StateFile, &st))
	l := open(t, cfg, connectors.Targets{})
	require.Equal(t, []string{"demo_decode:exited"}, names(l.Workers()))
	require.NoError(t, l.Apply(context.Background(), 5, connectors.Targets{Decode: n(1)}))
	settle(t, l)
	ws := l.Workers()
	require.Equal(t, []string{"demo_decode:ready"}, names(ws))
	require.NotEqual(t, os.Getpid(), ws[0].PID)
	require.Equal(t, []int{0}, ws[0].GPUs, "the dead worker's GPU is free")
}

func TestKilledWorkerIsNotReadyAndNotRestarted(t *testing.T) {
	cfg := config(t, t.TempDir())
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Decode: n(2)})
	settle(t, l)
	victim := byName(l.Workers())["demo_decode_1"]
	require.NoError(t, syscall.Kill(victim.PID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return byName(l.Workers())["demo_decode_1"].State == Exited }, 10*time.Second, time.Millisecond)
	w := byName(l.Workers())["demo_decode_1"]
	require.Equal(t, "signal: killed", w.ExitStatus)
	require.NotNil(t, w.ExitedAt)

	passes.wait(t, 5) // five passes of the reconcile loop: still not restarted
	require.Equal(t, []string{"demo_decode:ready", "demo_decode_1:exited"}, names(l.Workers()))
	inv, err := l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, n(1), inv.ReadyDecode)
	require.Equal(t, n(2), inv.ExpectedDecode)
	require.False(t, inv.DecodeScalingInProgress)
	require.Equal(t, 1, l.Failures(scaling.Decode))

	require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(2)}))
	settle(t, l)
	require.Equal(t, []string{"demo_decode:ready", "demo_decode_1:ready"}, names(l.Workers()))
	require.NotEqual(t, victim.PID, byName(l.Workers())["demo_decode_1"].PID)
}

func TestStartTimeoutFails(t *testing.T) {
	cfg := config(t, t.TempDir(), "--startup", "1h")
	cfg.StartTimeout = time.Minute
	clock := withClock(&cfg)
	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{Decode: n(1)})
	pid := l.Workers()[0].PID
	// Just before the start timeout: still starting.
	clock.Advance(time.Minute - time.Millisecond)
	passes.wait(t, 3)
	require.Equal(t, []string{"demo_decode:starting"}, names(l.Workers()))
	require.True(t, running(pid))
	require.Zero(t, l.Failures(scaling.Decode))

	clock.Advance(time.Second)
	require.Eventually(t, func() bool {
		w := l.Workers()[0]
		return w.State == Failed && w.ExitedAt != nil
	}, 10*time.Second, time.Millisecond)
	require.False(t, running(pid))
	require.Equal(t, 1, l.Failures(scaling.Decode))
	inv, err := l.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, n(0), inv.ReadyDecode)
	require.False(t, inv.DecodeScalingInProgress)
}

func TestStopAllLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	cfg := config(t, dir, "--drain", "100ms", "--child")
	l := open(t, cfg, connectors.Targets{Prefill: n(1), Decode: n(2)})
	settle(t, l)
	childRE := regexp.MustCompile(`child pid=(\d+)`)
	var pids []int
	for _, w := range l.Workers() {
		pids = append(pids, w.PID)
		m := childRE.FindStringSubmatch(logOf(t, w))
		require.NotNil(t, m, "%s started its grandchild", w.Name)
		child, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		require.True(t, running(child))
		pids = append(pids, child)
	}
	require.Len(t, pids, 6)

	start := time.Now()
	require.NoError(t, l.StopAll(context.Background()))
	t.Logf("StopAll of 3 workers (drain 100ms) took %v", time.Since(start))
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !running(pid) }, 2*time.Second, 5*time.Millisecond, "pid %d left behind", pid)
	}
	require.Empty(t, l.Workers())
	st, ok, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, st.Workers)
	require.Equal(t, poolCounts{}, st.Targets)
	require.ErrorIs(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(1)}), ErrClosed)
}

func TestStopAllKillsAtDeadline(t *testing.T) {
	// On the fake clock the drain timeout never runs out: only the end of StopAll's context
	// can stop a worker ignoring SIGTERM. The context ends once the worker got SIGTERM.
	cfg := config(t, t.TempDir(), "--ignore-term")
	clock := withClock(&cfg)
	l := open(t, cfg, connectors.Targets{Decode: n(1)})
	settle(t, l)
	w := l.Workers()[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer cancel()
		// Give up after 10 s: the test then fails below rather than hanging.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if data, _ := os.ReadFile(w.LogFile); strings.Contains(string(data), "sigterm\n") {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	done := make(chan error, 1)
	go func() { done <- l.StopAll(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		clock.Advance(time.Hour) // the drain timeout ends StopAll: the test fails rather than hangs
		<-done
		t.Fatal("StopAll did not kill the worker when its context ended")
	}
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "killed the workers still draining")
	require.Contains(t, logOf(t, w), "sigterm\n", "SIGTERM first")
	require.NotContains(t, logOf(t, w), "exit\n")
	require.False(t, running(w.PID))
}

func TestBadStateFile(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"corrupt", "{not json", "is corrupt"},
		{"truncated", `{"version":1,"namespace":"demo","workers":[{"name":"x"`, "is corrupt"},
		{"other namespace", `{"version":1,"namespace":"other","workers":[]}`, `belongs to namespace "other"`},
		{"unknown version", `{"version":9,"namespace":"demo"}`, "version 9"},
		{"worker without pid", `{"version":1,"namespace":"demo","workers":[{"name":"demo_decode","component":"decode"}]}`, "is corrupt"},
		{"unknown worker state", `{"version":1,"namespace":"demo","workers":[{"name":"demo_decode","component":"decode","pid":1,"state":"zombie"}]}`, `unknown state "zombie"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, t.TempDir())
			require.NoError(t, os.WriteFile(cfg.StateFile, []byte(tc.content), 0o600))
			_, err := Open(cfg, connectors.Targets{Decode: n(1)})
			require.ErrorContains(t, err, cfg.StateFile)
			require.ErrorContains(t, err, tc.want)
			data, err := os.ReadFile(cfg.StateFile)
			require.NoError(t, err)
			require.Equal(t, tc.content, string(data), "never replaced")
			_, err = os.Stat(filepath.Join(filepath.Dir(cfg.StateFile), "logs"))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing started")
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(c *Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"no namespace", func(c *Config) { c.Namespace = "" }, "namespace: required"},
		{"bad namespace", func(c *Config) { c.Namespace = "a/b" }, `namespace "a/b"`},
		{"no state file", func(c *Config) { c.StateFile = "" }, "state_file: required"},
		{"duplicate gpu", func(c *Config) { c.GPUs = []int{0, 1, 1} }, "gpus: id 1 is listed twice"},
		{"negative gpu", func(c *Config) { c.GPUs = []int{-1} }, "gpus: id -1 is negative"},
		{"empty pool", func(c *Config) { c.GPUs = nil }, "gpus: the pool is empty"},
		{"no pool", func(c *Config) { c.Prefill, c.Decode = ComponentConfig{}, ComponentConfig{} }, "at least one pool"},
		{"unknown placeholder", func(c *Config) { c.Decode.Command = []string{"x", "{port}"} }, "decode.command[1]: unknown placeholder {port}"},
		{"bad ready url", func(c *Config) { c.Prefill.ReadyURL = "http://{host}/" }, "prefill.ready_url: unknown placeholder {host}"},
		{"cuda env", func(c *Config) { c.Decode.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0"} }, "set by the supervisor"},
		{"negative gpus per worker", func(c *Config) { c.Decode.GPUsPerWorker = -2 }, "decode.gpus_per_worker -2 is negative"},
		{"gpus per worker over the pool", func(c *Config) { c.Prefill.GPUsPerWorker = 9 }, "prefill.gpus_per_worker 9 is more than the pool's 8 GPUs"},
		{"huge gpus per worker", func(c *Config) { c.Decode.GPUsPerWorker = math.MaxInt }, "decode.gpus_per_worker 9223372036854775807 is more than the pool's 8 GPUs"},
		{"pool too large", func(c *Config) {
			c.GPUs = nil
			for g := range MaxGPUs + 1 {
				c.GPUs = append(c.GPUs, g)
			}
		}, "gpus: 4097 ids, at most 4096"},
		{"negative drain", func(c *Config) { c.DrainTimeout = -time.Second }, "drain_timeout -1s is negative"},
		{"ready url without command", func(c *Config) { c.Prefill.Command = nil }, "prefill: ready_url or env set but no command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, t.TempDir())
			tc.modify(&cfg)
			err := cfg.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			_, err = Open(cfg, connectors.Targets{})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParseGPUs(t *testing.T) {
	allGPUs := make([]int, MaxGPUs)
	for i := range allGPUs {
		allGPUs[i] = i
	}
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"0,1,2,3", []int{0, 1, 2, 3}, ""},
		{"0-7", []int{0, 1, 2, 3, 4, 5, 6, 7}, ""},
		{" 0-1, 4 ,6-6", []int{0, 1, 4, 6}, ""},
		{"", nil, "no GPU id"},
		{"a", nil, `"a" is not a GPU id`},
		{"3-1", nil, "empty or negative"},
		{"1-x", nil, `"1-x" is not a GPU id`},
		{"0-4095", allGPUs, ""},
		{"0-4096", nil, "more than 4096 GPU ids"},
		{"0-4095,5000", nil, "more than 4096 GPU ids"},
		{"0-9223372036854775807", nil, "more than 4096 GPU ids"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseGPUs(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestProcStat(t *testing.T) {
	st, err := readProcStat(os.Getpid())
	require.NoError(t, err)
	require.NotZero(t, st.startTime)
	alive, err := processAlive(os.Getpid(), st.startTime)
	require.NoError(t, err)
	require.True(t, alive)
	alive, err = processAlive(os.Getpid(), st.startTime+1)
	require.NoError(t, err)
	require.False(t, alive, "another start time is another process")
	_, err = readProcStat(1 << 30)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestOneSupervisorPerStateFile(t *testing.T) {
	cfg := config(t, t.TempDir())
	l := open(t, cfg, connectors.Targets{Decode: n(1)})
	_, err := Open(cfg, connectors.Targets{Decode: n(1)})
	require.ErrorContains(t, err, fmt.Sprintf("is supervised by another process (pid %d)", os.Getpid()))
	require.Len(t, l.Workers(), 1, "the refused supervisor started nothing")
	require.NoError(t, l.Close())
	l2, err := Open(cfg, connectors.Targets{Decode: n(1)})
	require.NoError(t, err, "closing releases the state file")
	require.NoError(t, l2.Close())
}

func TestCheckedArithmetic(t *testing.T) {
	for _, tc := range []struct {
		a, b         int
		mul, add     int
		mulOK, addOK bool
	}{
		{3, 4, 12, 7, true, true},
		{0, math.MaxInt, 0, math.MaxInt, true, true},
		{math.MaxInt, 1, math.MaxInt, 0, true, false},
		{math.MaxInt, 2, 0, 0, false, false},
		{1 << 62, 4, 0, 1<<62 + 4, false, true},
		{1 << 62, 1 << 62, 0, 0, false, false},
		{-1, 2, 0, 0, false, false},
	} {
		mul, ok := mulNonNeg(tc.a, tc.b)
		require.Equal(t, tc.mulOK, ok, "%d*%d", tc.a, tc.b)
		require.Equal(t, tc.mul, mul, "%d*%d", tc.a, tc.b)
		add, ok := addNonNeg(tc.a, tc.b)
		require.Equal(t, tc.addOK, ok, "%d+%d", tc.a, tc.b)
		require.Equal(t, tc.add, add, "%d+%d", tc.a, tc.b)
	}
}
