package local

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/scaling"
)

// crashHelperEnv, set to a folder, makes the test binary a supervisor of a deployment in that
// folder which dies (SIGKILL to itself) right after starting a worker and before recording its
// pid (crashScenarioEnv says which decision it applies). fakeworkerEnv passes it the
// fakeworker binary.
const (
	crashHelperEnv   = "LOCAL_TEST_CRASH_HELPER"
	crashScenarioEnv = "LOCAL_TEST_CRASH_SCENARIO"
	fakeworkerEnv    = "LOCAL_TEST_FAKEWORKER"
)

// The crash helper's scenarios.
const (
	// crashScaleUp: from no worker, decision 1 starts one decode worker; the helper dies
	// before recording its pid (the crash window of a scale-up).
	crashScaleUp = "scale-up"
	// crashShrinkAndGrow: on 8 GPUs at 4 prefill and 3 decode workers, decision 1 asks for 2
	// prefill and 6 decode (every GPU): one decode worker starts on the free GPU, two wait for
	// the GPUs of the two prefill workers to drain; the helper dies once the decode worker is
	// started, before Apply returns (the window between a start and the drains of the same
	// decision). The workers drain until the test releases them (drainArgs).
	crashShrinkAndGrow = "shrink-and-grow"
)

// crashHelper runs the crash scenario in dir. It returns only on failure.
func crashHelper(dir, scenario string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var cfg Config
	var initial, targets connectors.Targets
	switch scenario {
	case crashScaleUp:
		cfg = baseConfig(dir, logger)
		initial, targets = connectors.Targets{Prefill: n(0), Decode: n(0)}, connectors.Targets{Decode: n(1)}
	case crashShrinkAndGrow:
		cfg = baseConfig(dir, logger, drainArgs(dir)...)
		initial, targets = connectors.Targets{Prefill: n(4), Decode: n(3)}, connectors.Targets{Prefill: n(2), Decode: n(6)}
	default:
		fmt.Fprintf(os.Stderr, "crash helper: unknown scenario %q\n", scenario)
		return 2
	}
	l, err := Open(cfg, initial)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitSettled(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 2
	}
	afterSpawn = func(pid int) {
		fmt.Fprintf(os.Stderr, "crash helper: worker pid %d started, dying before recording it\n", pid)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	err = l.Apply(context.Background(), 1, targets)
	fmt.Fprintln(os.Stderr, "crash helper: apply returned instead of dying:", err)
	return 3
}

// runCrashHelper runs the crash helper's scenario in dir and checks that it died by SIGKILL
// where it should.
func runCrashHelper(t *testing.T, dir, scenario string) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), crashHelperEnv+"="+dir, crashScenarioEnv+"="+scenario, fakeworkerEnv+"="+fakeworker)
	out, err := helper.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the helper should die: %s", out)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the helper should die by SIGKILL: %s", out)
	require.Contains(t, string(out), "dying before recording it")
}

// workerPIDs returns the pids the log of worker name says it started with, waiting for the
// first start line.
func workerPIDs(t *testing.T, dir, name string) []int {
	t.Helper()
	logFile := filepath.Join(dir, "logs", name+".log")
	startRE := regexp.MustCompile(`start name=` + regexp.QuoteMeta(name) + ` pid=(\d+)`)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(logFile)
		return startRE.Match(data)
	}, 10*time.Second, 5*time.Millisecond, "%s never started", name)
	data, err := os.ReadFile(logFile)
	require.NoError(t, err)
	var pids []int
	for _, m := range startRE.FindAllStringSubmatch(string(data), -1) {
		pid, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

func TestCrashBetweenStartAndRecordAdoptsTheWorker(t *testing.T) {
	dir := t.TempDir()
	runCrashHelper(t, dir, crashScaleUp)

	// The helper recorded the worker before starting it: an intent, without a pid.
	cfg := config(t, dir)
	st, ok, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, st.AppliedDecisionID, "decision 1 was not recorded as applied")
	require.Len(t, st.Workers, 1)
	intent := st.Workers[0]
	require.Equal(t, "demo_decode", intent.Name)
	require.Equal(t, Starting, intent.State)
	require.Zero(t, intent.PID)
	require.True(t, strings.HasPrefix(intent.Marker, "demo/demo_decode/"), intent.Marker)
	require.Contains(t, intent.Env, WorkerMarkerEnv+"="+intent.Marker)

	// The worker outlived the helper; the next supervisor adopts it by its marker.
	pids := workerPIDs(t, dir, "demo_decode")
	require.Len(t, pids, 1)
	orphan := pids[0]
	proc, err := readProcStat(orphan)
	require.NoError(t, err)
	t.Cleanup(func() { // should the test fail before the supervisor owns it
		if alive, _ := processAlive(orphan, proc.startTime); alive {
			_ = signalGroup(orphan, syscall.SIGKILL)
		}
	})
	require.True(t, running(orphan))
	l := open(t, cfg, connectors.Targets{Decode: n(1)})
	ws := l.Workers()
	require.Len(t, ws, 1)
	require.Equal(t, orphan, ws[0].PID, "the worker started before the crash is adopted")
	require.Equal(t, intent.Marker, ws[0].Marker)

	// The retried decision starts nothing: the pool has its worker.
	require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(1)}))
	settle(t, l)
	ws = l.Workers()
	require.Equal(t, []string{"demo_decode:ready"}, names(ws))
	require.Equal(t, orphan, ws[0].PID)
	require.Equal(t, []int{orphan}, workerPIDs(t, dir, "demo_decode"), "started once")
	logs, err := os.ReadDir(filepath.Join(dir, "logs"))
	require.NoError(t, err)
	require.Len(t, logs, 1, "no other worker was started")
	st, _, err = readState(cfg.StateFile)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.AppliedDecisionID)
	require.Equal(t, orphan, st.Workers[0].PID, "the adopted pid is recorded")
	require.Equal(t, 0, l.Failures(scaling.Decode))
}

// startMarked starts a fakeworker on the given ports carrying marker in its environment, in
// its own process group or in the test's, and waits until /proc shows the marker; it is
// killed when the test ends.
func startMarked(t *testing.T, marker string, ports []int, ownGroup bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(fakeworker, "--name", "marked", "--http-port", strconv.Itoa(ports[0]), "--fpm-port", strconv.Itoa(ports[1]))
	cmd.Env = append(inheritedEnv(), WorkerMarkerEnv+"="+marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	environ := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "environ")
	require.Eventually(t, func() bool {
		env, _ := os.ReadFile(environ)
		return slices.Contains(strings.Split(string(env), "\x00"), WorkerMarkerEnv+"="+marker)
	}, 10*time.Second, time.Millisecond, "the process never carried its marker")
	return cmd
}

func TestIntentIsResolvedByMarker(t *testing.T) {
	// A new marker for each run: the supervisor looks for it in every process of the machine,
	// which may run this test in another binary at the same time.
	marker := "demo/demo_decode/" + rand.Text()
	for _, tc := range []struct {
		name string
		// run starts the processes present when the supervisor opens; it returns the pid
		// that must be adopted (0: none).
		run func(t *testing.T, ports []int) int
	}{
		{"the marked worker runs", func(t *testing.T, ports []int) int {
			return startMarked(t, marker, ports, true).Process.Pid
		}},
		{"no process carries the marker", func(*testing.T, []int) int { return 0 }},
		{"an earlier worker of the same name", func(t *testing.T, ports []int) int {
			startMarked(t, "demo/demo_decode/EARLIERSTART000", ports, true)
			return 0
		}},
		{"a process not leading its group", func(t *testing.T, ports []int) int {
			startMarked(t, marker, ports, false)
			return 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := config(t, dir)
			ports, err := freePorts(2, nil)
			require.NoError(t, err)
			want := tc.run(t, ports)
			st := state{Version: stateVersion, Namespace: "demo", Targets: poolCounts{Decode: 1},
				Workers: []Worker{{Name: "demo_decode", Component: scaling.Decode, Marker: marker, GPUs: []int{0},
					HTTPPort: ports[0], FPMPort: ports[1], State: Starting, StartedAt: time.Now(),
					LogFile: filepath.Join(dir, "logs", "demo_decode.log")}}}
			require.NoError(t, writeState(cfg.StateFile, &st))

			l := open(t, cfg, connectors.Targets{})
			if want != 0 {
				ws := l.Workers()
				require.Len(t, ws, 1)
				require.Equal(t, want, ws[0].PID, "adopted")
				proc, err := readProcStat(want)
				require.NoError(t, err)
				require.Equal(t, proc.startTime, ws[0].StartTime)
			} else {
				require.Empty(t, l.Workers(), "the intent without a process is dropped")
			}
			require.Equal(t, 0, l.Failures(scaling.Decode), "a worker that never ran is no failure")

			// The next apply starts the worker once, and only when it was not adopted.
			require.NoError(t, l.Apply(context.Background(), 1, connectors.Targets{Decode: n(1)}))
			settle(t, l)
			ws := l.Workers()
			require.Equal(t, []string{"demo_decode:ready"}, names(ws))
			if want != 0 {
				require.Equal(t, want, ws[0].PID, "not started again")
				_, err := os.Stat(filepath.Join(dir, "logs", "demo_decode.log"))
				require.ErrorIs(t, err, os.ErrNotExist, "the supervisor started no process")
				return
			}
			require.Equal(t, []int{ws[0].PID}, workerPIDs(t, dir, "demo_decode"), "started once")
			require.NotEqual(t, marker, ws[0].Marker, "a new start has a new marker")
		})
	}
}

func TestStateFileWithoutMarkersLoads(t *testing.T) {
	// A state file written before intents and markers existed: its workers have a pid and
	// no marker.
	dir := t.TempDir()
	cfg := config(t, dir)
	ports, err := freePorts(2, nil)
	require.NoError(t, err)
	w := startMarked(t, "unused", ports, true)
	proc, err := readProcStat(w.Process.Pid)
	require.NoError(t, err)
	old := fmt.Sprintf(`{
  "version": 1,
  "namespace": "demo",
  "applied_decision_id": 3,
  "targets": {"prefill": 0, "decode": 1},
  "failures": {"prefill": 0, "decode": 0},
  "workers": [
    {"name": "demo_decode", "component": "decode", "index": 0, "command": ["fakeworker"],
     "env": ["CUDA_VISIBLE_DEVICES=0"], "pid": %d, "start_time": %d, "gpus": [0],
     "http_port": %d, "fpm_port": %d, "state": "ready", "started_at": "2025-01-01T00:00:00Z",
     "ready_at": "2025-01-01T00:00:01Z", "log_file": "%s"}
  ],
  "updated_at": "2025-01-01T00:00:01Z"
}
`, w.Process.Pid, proc.startTime, ports[0], ports[1], filepath.Join(dir, "logs", "demo_decode.log"))
	require.NoError(t, os.WriteFile(cfg.StateFile, []byte(old), 0o644))
	l := open(t, cfg, connectors.Targets{})
	ws := l.Workers()
	require.Equal(t, []string{"demo_decode:ready"}, names(ws))
	require.Equal(t, w.Process.Pid, ws[0].PID)
	require.Empty(t, ws[0].Marker)
	require.NoError(t, l.Apply(context.Background(), 4, connectors.Targets{Decode: n(1)}))
	require.Equal(t, w.Process.Pid, l.Workers()[0].PID)
}

func TestIntentWithoutMarkerIsCorrupt(t *testing.T) {
	for _, tc := range []struct{ name, worker string }{
		{"no marker", `{"name":"demo_decode","component":"decode","pid":0,"state":"starting"}`},
		{"not starting", `{"name":"demo_decode","component":"decode","pid":0,"marker":"demo/demo_decode/x","state":"ready"}`},
		{"negative pid", `{"name":"demo_decode","component":"decode","pid":-1,"marker":"demo/demo_decode/x","state":"starting"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, t.TempDir())
			content := `{"version":1,"namespace":"demo","workers":[` + tc.worker + `]}`
			require.NoError(t, os.WriteFile(cfg.StateFile, []byte(content), 0o600))
			_, err := Open(cfg, connectors.Targets{})
			require.ErrorContains(t, err, "is corrupt")
		})
	}
}

func TestSignalGroupRefusesNonWorkerPIDs(t *testing.T) {
	// kill(0, sig) would reach the test's own process group, kill(-1, sig) every process.
	for _, pid := range []int{0, -1} {
		require.ErrorContains(t, signalGroup(pid, syscall.Signal(0)), "not a worker's pid")
	}
}

func TestFailedStartUndoesTheRecordedStarts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := config(t, dir)
	cfg.Decode.Command = []string{filepath.Join(dir, "no-such-engine")}
	l := open(t, cfg, connectors.Targets{Prefill: n(1)})
	settle(t, l)
	before := l.Workers()

	// The prefill worker starts (recorded first), the decode worker cannot: both are undone.
	err := l.Apply(ctx, 1, connectors.Targets{Prefill: n(2), Decode: n(1)})
	require.ErrorContains(t, err, "no-such-engine")
	require.Equal(t, before, l.Workers())
	st, _, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.Equal(t, poolCounts{Prefill: 1}, st.Targets, "the targets are restored")
	require.Len(t, st.Workers, 1, "no intent or undone worker is left recorded")
	require.Equal(t, before[0].PID, st.Workers[0].PID)
	// The undone worker was killed and reaped before Apply returned (if it got to log its pid).
	data, _ := os.ReadFile(filepath.Join(dir, "logs", "demo_prefill_1.log"))
	for _, m := range regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(string(data), -1) {
		pid, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		require.False(t, running(pid), "the undone worker is killed")
	}

	// A new state file is not left behind by an Open that fails to start its workers: the
	// next Open starts the initial targets.
	cfg.StateFile = filepath.Join(t.TempDir(), "state.json")
	_, err = Open(cfg, connectors.Targets{Prefill: n(1), Decode: n(1)})
	require.ErrorContains(t, err, "no-such-engine")
	_, err = os.Stat(cfg.StateFile)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed Open records nothing")
}

// killAtEnd kills the process group of pid when the test ends, if the same process still runs
// (should the test fail before a supervisor owns it).
func killAtEnd(t *testing.T, pid int) {
	t.Helper()
	proc, err := readProcStat(pid)
	require.NoError(t, err)
	t.Cleanup(func() {
		if alive, _ := processAlive(pid, proc.startTime); alive {
			_ = signalGroup(pid, syscall.SIGKILL)
		}
	})
}

// poolShape is what a pool holds: live workers (starting or ready), draining workers and
// pending workers.
type poolShape struct{ live, draining, pending int }

// shapeOf counts the pool shapes of st.
func shapeOf(st state) map[scaling.Component]poolShape {
	shapes := map[scaling.Component]poolShape{}
	for _, w := range st.Workers {
		s := shapes[w.Component]
		switch {
		case w.live():
			s.live++
		case w.State == Draining:
			s.draining++
		}
		shapes[w.Component] = s
	}
	for _, p := range st.Pending {
		s := shapes[p.Component]
		s.pending++
		shapes[p.Component] = s
	}
	return shapes
}

// requireConsistent checks that st agrees with its targets: no pool holds more live workers
// than its target, live and pending workers together are the target, and no GPU is held by
// two workers that may still run, nor one outside the pool.
func requireConsistent(t *testing.T, st state, pool []int, what string) {
	t.Helper()
	shapes := shapeOf(st)
	for _, c := range components {
		target := *st.Targets.get(c)
		s := shapes[c]
		require.LessOrEqual(t, s.live, target, "%s: %s holds %d live workers (%d draining), over its target %d", what, c, s.live, s.draining, target)
		require.Equal(t, target, s.live+s.pending, "%s: %s live and pending workers (%+v) against its target", what, c, s)
	}
	holder := map[int]string{}
	for _, w := range st.Workers {
		if !w.mayBeAlive() {
			continue
		}
		for _, g := range w.GPUs {
			require.Contains(t, pool, g, "%s: %s holds GPU %d, outside the pool", what, w.Name, g)
			require.NotContains(t, holder, g, "%s: GPU %d given to %s and %s", what, g, holder[g], w.Name)
			holder[g] = w.Name
		}
	}
}

func TestCrashBetweenStartAndDrainAdoptsAConsistentState(t *testing.T) {
	// A shrink-and-grow decision on a full pool of 8 GPUs: 4P 3D to 2P 6D. One decode worker
	// can start at once (GPU 7), two wait for the GPUs of the two prefill workers that drain.
	// The supervisor dies right after starting the decode worker.
	dir := t.TempDir()
	runCrashHelper(t, dir, crashShrinkAndGrow)
	args, release := drainUntilReleased(t, dir)
	cfg := config(t, dir, args...)
	crashed, ok, err := readState(cfg.StateFile)
	require.NoError(t, err)
	require.True(t, ok)
	started := map[string]int{} // the helper's workers' pids, by name
	for _, w := range crashed.Workers {
		pid := w.PID
		if w.intent() {
			pids := workerPIDs(t, dir, w.Name)
			require.Len(t, pids, 1, w.Name)
			pid = pids[0]
		}
		started[w.Name] = pid
		killAtEnd(t, pid)
	}
	require.Len(t, started, 8, "4 prefill, 3 decode and the decode worker being started: %v", started)

	passes := watchChecks(&cfg)
	l := open(t, cfg, connectors.Targets{})
	releaseAtEnd(t, l, release)
	ctx := context.Background()

	// The adopted state: the surplus prefill workers drain, the decode worker started before
	// the crash is adopted, and the two others are pending.
	adopted := func() state {
		l.mu.Lock()
		defer l.mu.Unlock()
		st := l.st
		st.Workers, st.Pending = slices.Clone(st.Workers), slices.Clone(st.Pending)
		return st
	}
	st := adopted()
	require.Equal(t, poolCounts{Prefill: 2, Decode: 6}, st.Targets, "the decision's targets were recorded with the start")
	require.Zero(t, st.AppliedDecisionID, "decision 1 was not recorded as applied")
	for _, tc := range []struct {
		pool scaling.Component
		want poolShape
	}{
		{scaling.Prefill, poolShape{live: 2, draining: 2}},
		{scaling.Decode, poolShape{live: 4, pending: 2}},
	} {
		require.Equal(t, tc.want, shapeOf(st)[tc.pool], "%s after the restart", tc.pool)
	}
	requireConsistent(t, st, cfg.GPUs, "after the restart")
	ws := byName(l.Workers())
	for _, name := range []string{"demo_prefill_2", "demo_prefill_3"} {
		require.Equal(t, Draining, ws[name].State, name)
		require.Equal(t, started[name], ws[name].PID, "%s adopted", name)
		logHas(t, ws[name], "sigterm\n")
	}
	require.Equal(t, started["demo_decode_3"], ws["demo_decode_3"].PID, "the worker started before the crash is adopted")
	require.Equal(t, []int{7}, ws["demo_decode_3"].GPUs)

	// The state file the crashed supervisor left already agreed with the decision's targets:
	// the drains were recorded with the decode worker's intent, before their SIGTERM.
	requireConsistent(t, crashed, cfg.GPUs, "the state file left by the crash")
	for _, w := range crashed.Workers {
		if w.Name == "demo_prefill_2" || w.Name == "demo_prefill_3" {
			require.Equal(t, Draining, w.State, "%s as the crash left it", w.Name)
			require.Nil(t, w.StopAt, "%s was not signalled before the crash", w.Name)
		}
	}

	// The planner's retry of the decision starts and drains nothing more.
	require.NoError(t, l.Apply(ctx, 1, connectors.Targets{Prefill: n(2), Decode: n(6)}))
	st = adopted()
	require.Equal(t, int64(1), st.AppliedDecisionID)
	requireConsistent(t, st, cfg.GPUs, "after the retried decision")
	logs, err := os.ReadDir(filepath.Join(dir, "logs"))
	require.NoError(t, err)
	require.Len(t, logs, 8, "no process was started")

	// The drains free their GPUs for the pending decode workers.
	passes.wait(t, 1)
	require.Equal(t, 2, l.Counts(scaling.Decode).Pending, "nothing starts while the drains go on")
	release("demo_prefill_3")
	release("demo_prefill_2")
	settle(t, l)
	require.Equal(t, []string{"demo_prefill:ready", "demo_prefill_1:ready", "demo_decode:ready", "demo_decode_1:ready",
		"demo_decode_2:ready", "demo_decode_3:ready", "demo_decode_4:ready", "demo_decode_5:ready"}, names(l.Workers()))
	requireConsistent(t, adopted(), cfg.GPUs, "once settled")
	require.Equal(t, []int{started["demo_decode_3"]}, workerPIDs(t, dir, "demo_decode_3"), "started once")
	require.Equal(t, 0, l.Failures(scaling.Prefill))
	require.Equal(t, 0, l.Failures(scaling.Decode))
}
