package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/worker"
)

// The test binary doubles as a planner binary with test-only wiring: run with
// PLANNER_TEST_AS_MAIN=1, it is `planner` plus two worker options the real binary does not
// have — scripted observations (--observations FILE) and fault injection (PLANNER_FAULTS).
// Tests that need them start os.Args[0] as their planner process (testPlannerBinary).
const testAsMainEnv = "PLANNER_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	workerTestHooks = addTestHooks
	if os.Getenv(testAsMainEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	code := m.Run()
	removeExitDirs()
	os.Exit(code)
}

// exitDirs are the folders made by tempDirUntilExit, removed when the tests are done.
var (
	exitDirsMu sync.Mutex
	exitDirs   []string
)

// tempDirUntilExit creates a temporary folder that outlives the test making it (t.TempDir
// does not: the planner binary is built once and shared) and is removed when the test
// binary's tests are done (TestMain).
func tempDirUntilExit(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	exitDirsMu.Lock()
	defer exitDirsMu.Unlock()
	exitDirs = append(exitDirs, dir)
	return dir, nil
}

// removeExitDirs removes the folders made by tempDirUntilExit.
func removeExitDirs() {
	exitDirsMu.Lock()
	defer exitDirsMu.Unlock()
	for _, dir := range exitDirs {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s: %v\n", dir, err)
		}
	}
	exitDirs = nil
}

// exitDirHelperEnv makes TestTempDirUntilExitIsRemoved, run in a child test binary, make a
// folder with tempDirUntilExit and print its path.
const exitDirHelperEnv = "PLANNER_TEST_EXIT_DIR_HELPER"

func TestTempDirUntilExitIsRemoved(t *testing.T) {
	if os.Getenv(exitDirHelperEnv) == "1" {
		dir, err := tempDirUntilExit("planner-bin-")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "planner"), []byte("binary"), 0o755))
		fmt.Printf("exit dir: %s\n", dir)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTempDirUntilExitIsRemoved$", "-test.count=1")
	cmd.Env = append(os.Environ(), exitDirHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`exit dir: (\S+)`).FindSubmatch(out)
	require.NotNil(t, m, "the helper printed no folder: %s", out)
	dir := string(m[1])
	t.Cleanup(func() { os.RemoveAll(dir) }) // should the check below fail
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "the test binary left %s behind", dir)
}

// testPlannerBinary is the planner with test hooks: this test binary, and the environment
// variable that makes it one.
func testPlannerBinary(t *testing.T) (string, string) {
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin, testAsMainEnv + "=1"
}

// addTestHooks registers the test-only worker flags; the returned function wires them.
func addTestHooks(fs *flag.FlagSet) func(*activities.Activities, *worker.Options, *slog.Logger) error {
	script := fs.String("observations", "", "test only: scripted observations (JSON, see internal/scripted) for the deployments this worker does not host")
	return func(acts *activities.Activities, opts *worker.Options, logger *slog.Logger) error {
		if *script != "" {
			s, err := scripted.LoadScript(*script)
			if err != nil {
				return err
			}
			acts.Unhosted = s
			logger.Warn("observations come from a script, not from the deployment", "script", *script)
		}
		f, err := faultsFromEnv()
		if err != nil {
			return err
		}
		if f != nil {
			acts.Hooks = &activities.Hooks{
				AfterDecide: func(ctx context.Context, tick int64) { f.hit(ctx, faultAfterDecide, tick) },
				AfterApply: func(ctx context.Context, id int64) {
					if activity.GetInfo(ctx).WorkflowExecution.ID == localDeployment.WorkflowID() {
						f.hit(ctx, faultAfterApplyLocal, id)
						return
					}
					f.hit(ctx, faultAfterApply, id)
				},
				AfterObserve: func(ctx context.Context, tick int64) { f.hit(ctx, faultAfterObserve, tick) },
			}
			opts.Interceptors = append(opts.Interceptors, &faultInterceptor{f: f})
		}
		return nil
	}
}

// Fault points for the durability test.
const (
	faultAfterDecide = "decide"
	faultAfterApply  = "apply"
	// faultAfterObserve is just before Decide since it runs in workflow code (history
	// generation 3): the observations are read, not yet recorded.
	faultAfterObserve = "observe"
)

// faults kills the worker process at chosen points, once each: PLANNER_FAULTS lists "point@n"
// entries ("observe@5": right after the Observe activity read tick 5's observations, before
// the workflow records them and decides; "decide@5": right after the Decide local activity of
// executions older than history generation 3 computed tick 5;
// "apply@3": right after the connector applied decision 3, before the activity completes;
// "apply-local@3": the same for the local deployment of the randomized durability test),
// and a marker file per entry in PLANNER_FAULTS_DIR makes each fire once across restarts.
type faults struct {
	dir    string
	points map[string]bool
}

// faultsFromEnv reads PLANNER_FAULTS and PLANNER_FAULTS_DIR (nil when unset).
func faultsFromEnv() (*faults, error) {
	spec := strings.TrimSpace(os.Getenv("PLANNER_FAULTS"))
	if spec == "" {
		return nil, nil
	}
	f := &faults{dir: os.Getenv("PLANNER_FAULTS_DIR"), points: map[string]bool{}}
	if f.dir == "" {
		return nil, errors.New("PLANNER_FAULTS needs PLANNER_FAULTS_DIR (a directory for the once-only markers)")
	}
	for _, p := range strings.Split(spec, ",") {
		if !strings.Contains(p, "@") {
			return nil, fmt.Errorf("PLANNER_FAULTS entry %q: want point@n", p)
		}
		f.points[strings.TrimSpace(p)] = true
	}
	return f, nil
}

// hit kills the process (SIGKILL: no deferred function runs) if point@n is configured and
// has not fired yet.
func (f *faults) hit(ctx context.Context, point string, n int64) {
	key := fmt.Sprintf("%s@%d", point, n)
	if !f.points[key] {
		return
	}
	marker := filepath.Join(f.dir, strings.ReplaceAll(key, "@", "_"))
	fh, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // already fired
	}
	fh.Close()
	slog.Default().WarnContext(ctx, "fault injection: killing the worker", "point", key)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// Fault points inside workflow tasks, counted by occurrence (the n-th time, across the
// worker's lives, that a workflow task — not a replay — got there):
//   - "inline@n": Decide ran in workflow code and its decision was recorded as a side effect,
//     the task not yet completed;
//   - "update@n": an operator update was handled, the task not yet completed;
//   - "can@n": the run returned Continue-As-New, the task not yet completed.
const (
	faultInline = "inline"
	faultUpdate = "update"
	faultCAN    = "can"
)

// count records one more occurrence of point in the faults directory and returns the total.
func (f *faults) count(point string) int64 {
	path := filepath.Join(f.dir, "count_"+point)
	b, _ := os.ReadFile(path)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	n++
	_ = os.WriteFile(path, []byte(strconv.FormatInt(n, 10)), 0o644)
	return n
}

// faultInterceptor kills the worker at the fault points inside workflow tasks.
type faultInterceptor struct {
	interceptor.WorkerInterceptorBase
	f *faults
}

func (i *faultInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &faultInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, f: i.f}
}

type faultInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	f *faults
}

func (i *faultInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&faultOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, f: i.f})
}

func (i *faultInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := i.Next.ExecuteWorkflow(ctx, in)
	var can *workflow.ContinueAsNewError
	if errors.As(err, &can) && !workflow.IsReplaying(ctx) {
		i.f.hit(context.Background(), faultCAN, i.f.count(faultCAN))
	}
	return res, err
}

func (i *faultInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	res, err := i.Next.ExecuteUpdate(ctx, in)
	if !workflow.IsReplaying(ctx) {
		i.f.hit(context.Background(), faultUpdate, i.f.count(faultUpdate))
	}
	return res, err
}

type faultOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	f *faults
}

func (o *faultOutbound) SideEffect(ctx workflow.Context, f func(ctx workflow.Context) any) converter.EncodedValue {
	v := o.Next.SideEffect(ctx, f)
	if !workflow.IsReplaying(ctx) {
		o.f.hit(context.Background(), faultInline, o.f.count(faultInline))
	}
	return v
}

func TestFaultsFromEnv(t *testing.T) {
	t.Setenv("PLANNER_FAULTS", "")
	f, err := faultsFromEnv()
	require.NoError(t, err)
	require.Nil(t, f)
	t.Setenv("PLANNER_FAULTS", "decide@3")
	t.Setenv("PLANNER_FAULTS_DIR", "")
	_, err = faultsFromEnv()
	require.EqualError(t, err, "PLANNER_FAULTS needs PLANNER_FAULTS_DIR (a directory for the once-only markers)")
	t.Setenv("PLANNER_FAULTS_DIR", t.TempDir())
	t.Setenv("PLANNER_FAULTS", "decide3")
	_, err = faultsFromEnv()
	require.EqualError(t, err, `PLANNER_FAULTS entry "decide3": want point@n`)
	// A point that is not configured never fires (the test process survives).
	t.Setenv("PLANNER_FAULTS", "decide@3")
	f, err = faultsFromEnv()
	require.NoError(t, err)
	f.hit(context.Background(), faultAfterDecide, 4)
	f.hit(context.Background(), faultAfterApply, 3)
}
