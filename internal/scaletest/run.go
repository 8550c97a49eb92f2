// Package scaletest measures how many planner workflows one worker keeps on schedule: it
// starts a Temporal dev server (the temporal CLI, SQLite in a temporary directory), one or
// more planner workers as child processes (RunWorker: the code `planner worker` runs, with
// scripted observations), and N advisory planners (environment noop, decode-only threshold
// target, ticking every interval); it samples the workers' and the server's CPU and memory
// from /proc, reads every planner's state when the window ends, then stops the workers and
// reads every planner's history for the time each tick decided and was due, and summarises
// the tick lateness, the ticks run against those expected, the resources and every failure
// it can see. cmd/planner-scale is its command; docs/scale.md has the method and the numbers.
package scaletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

// Options configure Run.
type Options struct {
	// Planners is the number of planner workflows.
	Planners int
	// Duration is the measured window, after every planner started and the warm-up.
	Duration time.Duration
	// Interval is each planner's load_adjustment_interval_seconds (whole seconds).
	Interval time.Duration
	// Workers is the number of worker processes polling the task queue.
	Workers int
	// Warmup is the time between the last planner's start and the window.
	Warmup time.Duration
	// Sample is the period of the /proc samples.
	Sample time.Duration
	// ReadConcurrency bounds the state queries and history reads in flight after the window.
	ReadConcurrency int
	// StateQueries is the number of planners, spread over all, whose state is queried when
	// the window ends (0: every planner). Each waits up to 20 s for a worker to answer.
	StateQueries int
	// StartConcurrency bounds the planner starts in flight.
	StartConcurrency int
	// StartWithUpdate starts each planner with worker.StartPlanner, as `planner start` does:
	// an update-with-start that returns once a worker has run the planner's first workflow
	// task. Without it, each planner is created with ExecuteWorkflow and the same input,
	// which does not wait for the worker: on a saturated server the update-with-start of
	// planner N waits behind the ticks of the N-1 already running.
	StartWithUpdate bool
	// HalfPeriod is the ticks between the observations' busy and quiet phases (Observations).
	HalfPeriod int
	// OutDir receives summary.json, samples.csv, the observation script and the logs.
	OutDir string
	// TemporalCLI is the temporal CLI binary whose dev server is started.
	TemporalCLI string
	// InMemory runs the dev server without a SQLite file (its default, in-memory SQLite),
	// which loses everything when it stops: to tell the file's cost from the server's.
	InMemory bool
	// ServerArgs are passed on to `temporal server start-dev` (--sqlite-pragma,
	// --dynamic-config-value, ...).
	ServerArgs []string
	// Executable is the program run as each worker process, with the arguments "worker
	// --task-queue Q --metrics-address ADDR --script FILE --log-level L" (cmd/planner-scale
	// runs itself).
	Executable string
	// WorkerLogLevel is the workers' --log-level.
	WorkerLogLevel string
	// Progress receives a line per step and per progress period (nil: discarded).
	Progress io.Writer
	// ProgressEvery is the period of the progress lines during the window.
	ProgressEvery time.Duration
}

func (o *Options) defaults() error {
	if o.Planners < 1 {
		return fmt.Errorf("planners must be at least 1, got %d", o.Planners)
	}
	if o.Interval < time.Second || o.Interval%time.Second != 0 {
		return fmt.Errorf("interval must be a whole number of seconds, at least 1s (load_adjustment_interval_seconds), got %s", o.Interval)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("duration must be positive, got %s", o.Duration)
	}
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.Sample <= 0 {
		o.Sample = 5 * time.Second
	}
	if o.ReadConcurrency < 1 {
		o.ReadConcurrency = 16
	}
	if o.StartConcurrency < 1 {
		o.StartConcurrency = 16
	}
	if o.HalfPeriod < 1 {
		o.HalfPeriod = 6
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 30 * time.Second
	}
	if o.WorkerLogLevel == "" {
		o.WorkerLogLevel = "info"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.TemporalCLI == "" {
		return errors.New("no temporal CLI given")
	}
	if o.Executable == "" {
		return errors.New("no worker executable given")
	}
	return nil
}

// Deployment is the i-th planner's deployment (i from 0).
func Deployment(i int) workflows.Deployment {
	return workflows.Deployment{Namespace: "scale", Name: fmt.Sprintf("p%05d", i)}
}

// PlannerConfig is the configuration of every planner: decode-only, environment noop
// (advisory), threshold (throughput) target, a load tick every interval, an 8-GPU budget.
func PlannerConfig(interval time.Duration) (config.Config, error) {
	js := fmt.Sprintf(`{"mode": "decode", "environment": "noop", "optimization_target": "throughput", "load_adjustment_interval_seconds": %d, "max_gpu_budget": 8}`,
		int(interval/time.Second))
	cfg, _, err := config.Load(js, func(string) (string, bool) { return "", false })
	if err != nil {
		return config.Config{}, fmt.Errorf("scale-test planner config: %w", err)
	}
	return cfg, nil
}

// InitialDecode is the decode replicas each planner starts with: the busy phase advises
// one more and the quiet phase one fewer, so the advice alternates.
const InitialDecode = 3

// Run starts the server, the workers and the planners, measures for the window and returns
// the summary, also written to OutDir/summary.json.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	cfg, err := PlannerConfig(o.Interval)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	r := &runner{o: o, cfg: cfg}
	defer r.cleanup()
	return r.run(ctx)
}

type runner struct {
	o   Options
	cfg config.Config

	server  *child
	workers []*child
	client  client.Client
	address string
	metrics []string // the workers' /metrics URLs
	srvMet  string   // the server's /metrics URL

	samplesMu sync.Mutex
	samples   []Sample

	stops []func()
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.o.Progress, "scale: "+format+"\n", args...)
}

func (r *runner) cleanup() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

func (r *runner) run(ctx context.Context) (*Summary, error) {
	sum := &Summary{Planners: r.o.Planners, Workers: r.o.Workers, IntervalS: r.o.Interval.Seconds(), HalfPeriodTicks: r.o.HalfPeriod,
		NumCPU: numCPU(), Config: r.cfg, InMemory: r.o.InMemory, ServerArgs: r.o.ServerArgs, StartWithUpdate: r.o.StartWithUpdate}
	sum.Started = time.Now().UTC()
	if err := r.startServer(ctx); err != nil {
		return nil, err
	}
	script := filepath.Join(r.o.OutDir, "observations.json")
	expectedTicks := int64((r.o.Duration+r.o.Warmup)/r.o.Interval) + 1000
	data, err := json.MarshalIndent(Observations(r.o.HalfPeriod, 2*expectedTicks), "", " ")
	if err != nil {
		return nil, fmt.Errorf("observation script: %w", err)
	}
	if err := os.WriteFile(script, data, 0o644); err != nil {
		return nil, fmt.Errorf("observation script: %w", err)
	}
	for i := range r.o.Workers {
		if err := r.startWorker(ctx, i+1, script); err != nil {
			return nil, err
		}
	}
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	var sampling sync.WaitGroup
	sampling.Go(func() { r.sample(sampleCtx) })
	r.stops = append(r.stops, func() { stopSampling(); sampling.Wait() })
	defer stopSampling()

	startBegin := time.Now()
	started, failed, firstErr := r.startPlanners(ctx)
	sum.StartSeconds = time.Since(startBegin).Seconds()
	sum.StartFailures = failed
	if firstErr != nil {
		sum.StartError = firstErr.Error()
	}
	r.say("started %d planners in %.1fs (%d failed%s)", started, sum.StartSeconds, failed, errSuffix(firstErr))
	if started == 0 {
		return nil, fmt.Errorf("no planner started: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	r.say("warm-up %s, then measuring for %s", r.o.Warmup, r.o.Duration)
	if !sleepCtx(ctx, r.o.Warmup) {
		return nil, ctx.Err()
	}
	wStart := time.Now()
	metStart := r.scrapeWorkers(ctx)
	srvStart, _ := Scrape(ctx, r.srvMet)
	sum.WindowStart = wStart.UTC()
	end := wStart.Add(r.o.Duration)
	progress := time.NewTicker(r.o.ProgressEvery)
	defer progress.Stop()
	prev, prevAt := metStart, wStart
wait:
	for {
		select {
		case <-ctx.Done():
			sum.Interrupted = true
			break wait
		case now := <-progress.C:
			cur := r.scrapeWorkers(ctx)
			r.progress(wStart, prevAt, now, prev, cur)
			prev, prevAt = cur, now
		case <-time.After(time.Until(end)):
			break wait
		}
	}
	wEnd := time.Now()
	sum.WindowEnd = wEnd.UTC()
	sum.DurationS = wEnd.Sub(wStart).Seconds()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Minute)
	defer cancel()
	metEnd := r.scrapeWorkers(fctx)
	srvEnd, _ := Scrape(fctx, r.srvMet)
	stopSampling()
	sampling.Wait()
	r.samplesMu.Lock()
	sum.Resources = Resources(r.samples, wStart, wEnd)
	r.samplesMu.Unlock()
	sum.SDK = SDKFrom(metEnd.Sub(metStart), metEnd)
	sum.Server = ServerFrom(srvEnd.Sub(srvStart))

	r.say("window over: querying the state of %d planners (the workers still run)", r.stateQueries())
	t0 := time.Now()
	sum.End = r.readStates(fctx, wEnd)
	sum.End.ReadSeconds = time.Since(t0).Seconds()
	sum.Failures.WorkerExits = r.exits()
	r.say("stopping the workers, then reading every planner's history")
	r.stopWorkers()
	t0 = time.Now()
	ticks, hist := r.readHistories(fctx, unix(wStart)-r.o.Warmup.Seconds())
	sum.History = hist
	sum.History.ReadSeconds = time.Since(t0).Seconds()
	sum.Ticks = Measure(ticks, Window{Start: unix(wStart), End: unix(wEnd)}, r.o.Interval.Seconds())

	sum.Failures.StartFailures = failed
	sum.Failures.NotRunning = r.notRunning(fctx)
	sum.Failures.WorkflowTaskFailures = sum.SDK.WorkflowTaskFailures
	sum.Failures.ActivityFailures = sum.SDK.ActivityFailures
	sum.Failures.LocalActivityFailures = sum.SDK.LocalActivityFailures
	sum.Failures.TickFailures = sum.Ticks.Failures
	for i, wk := range r.workers {
		l, err := ScanLog(wk.logPath)
		if err != nil {
			r.say("worker %d log: %v", i+1, err)
			continue
		}
		sum.Failures.WorkerLog = sum.Failures.WorkerLog.Add(l)
	}
	if err := r.writeSamples(filepath.Join(r.o.OutDir, "samples.csv")); err != nil {
		r.say("%v", err)
	}
	out, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return sum, fmt.Errorf("summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.o.OutDir, "summary.json"), append(out, '\n'), 0o644); err != nil {
		return sum, fmt.Errorf("summary: %w", err)
	}
	return sum, nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; first error: " + err.Error()
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// child is a process the scale test started.
type child struct {
	what    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	stopped atomic.Bool
	stop    func()
}

// start runs cmd in its own process group with its output in logPath and a parent-death
// signal, so it cannot outlive the scale test.
func (r *runner) start(what string, cmd *exec.Cmd, logPath string, stopTimeout time.Duration) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", what, err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	c := &child{what: what, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	c.stop = sync.OnceFunc(func() {
		c.stopped.Store(true)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	})
	r.stops = append(r.stops, c.stop)
	return c, nil
}

// stopWorkers stops the worker processes (SIGTERM, SIGKILL after their stop timeout).
func (r *runner) stopWorkers() {
	for _, w := range r.workers {
		w.stop()
	}
}

// exited reports whether the process ended (and how) while it was not being stopped.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return !c.stopped.Load(), c.err
	default:
		return false, nil
	}
}

func (r *runner) exits() []string {
	var out []string
	for _, w := range r.workers {
		if ok, err := w.exited(); ok {
			out = append(out, fmt.Sprintf("%s exited: %v (see %s)", w.what, err, w.logPath))
		}
	}
	if ok, err := r.server.exited(); ok {
		out = append(out, fmt.Sprintf("%s exited: %v (see %s)", r.server.what, err, r.server.logPath))
	}
	return out
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServer starts `temporal server start-dev` on free loopback ports with its SQLite
// file in a temporary directory, and waits until it answers.
func (r *runner) startServer(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "planner-scale-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	r.stops = append(r.stops, func() { _ = os.RemoveAll(dir) })
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	metAddr, err := freeAddr()
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(addr)
	_, metPort, _ := net.SplitHostPort(metAddr)
	db := filepath.Join(dir, "temporal.db")
	args := []string{"server", "start-dev", "--ip", host, "--port", port, "--headless", "--metrics-port", metPort, "--log-level", "warn",
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		"--search-attribute", workflows.SearchAttributeDeployment + "=Keyword", "--search-attribute", workflows.SearchAttributeMode + "=Keyword"}
	if r.o.InMemory {
		db = "in memory"
	} else {
		args = append(args, "--db-filename", db)
	}
	cmd := exec.Command(r.o.TemporalCLI, append(args, r.o.ServerArgs...)...)
	logPath := filepath.Join(r.o.OutDir, "temporal.log")
	c, err := r.start("the Temporal dev server", cmd, logPath, 20*time.Second)
	if err != nil {
		return err
	}
	r.server, r.address, r.srvMet = c, addr, "http://"+metAddr+"/metrics"
	deadline := time.Now().Add(90 * time.Second)
	for {
		cl, err := client.Dial(client.Options{HostPort: addr, Namespace: "default", Logger: quietLogger{}})
		if err == nil {
			hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err = cl.CheckHealth(hctx, &client.CheckHealthRequest{})
			cancel()
			if err == nil {
				r.client = cl
				r.stops = append(r.stops, cl.Close)
				break
			}
			cl.Close()
		}
		if ok, werr := c.exited(); ok {
			return fmt.Errorf("the Temporal dev server exited (%v): see %s", werr, logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal dev server did not answer on %s within 90 s: %w", addr, err)
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
	r.say("Temporal dev server on %s (pid %d, SQLite %s, log %s; arguments %q)", addr, c.cmd.Process.Pid, db, logPath, cmd.Args[1:])
	return nil
}

// startWorker starts the i-th worker process and waits until its /healthz answers.
func (r *runner) startWorker(ctx context.Context, i int, script string) error {
	metAddr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(r.o.Executable, "worker", "--task-queue", workflows.TaskQueue, "--metrics-address", metAddr,
		"--script", script, "--log-level", r.o.WorkerLogLevel)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+r.address, "TEMPORAL_NAMESPACE=default")
	logPath := filepath.Join(r.o.OutDir, fmt.Sprintf("worker-%d.log", i))
	c, err := r.start(fmt.Sprintf("worker %d", i), cmd, logPath, 15*time.Second)
	if err != nil {
		return err
	}
	r.workers = append(r.workers, c)
	r.metrics = append(r.metrics, "http://"+metAddr+"/metrics")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := Scrape(ctx, "http://"+metAddr+"/metrics"); err == nil {
			break
		}
		if ok, werr := c.exited(); ok {
			return fmt.Errorf("worker %d exited (%v): see %s", i, werr, logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %d did not serve /metrics within 60 s: see %s", i, logPath)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	r.say("worker %d: pid %d, task queue %s, /metrics on %s, log %s", i, c.cmd.Process.Pid, workflows.TaskQueue, metAddr, logPath)
	return nil
}

// startPlanners starts every planner, a few at a time.
func (r *runner) startPlanners(ctx context.Context) (started, failed int, firstErr error) {
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	for range r.o.StartConcurrency {
		wg.Go(func() {
			for i := range next {
				sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				err := r.startPlanner(sctx, i)
				cancel()
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					started++
					if started%max(1, r.o.Planners/10) == 0 {
						r.say("  %d planners started", started)
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range r.o.Planners {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return started, failed, firstErr
}

// startPlanner starts the i-th planner: with worker.StartPlanner (StartWithUpdate), else
// with ExecuteWorkflow and the input StartPlanner sends, its search attributes and summary.
func (r *runner) startPlanner(ctx context.Context, i int) error {
	d := Deployment(i)
	if r.o.StartWithUpdate {
		_, err := worker.StartPlanner(ctx, r.client, "default", worker.StartOptions{Deployment: d, Config: r.cfg,
			TaskQueue: workflows.TaskQueue, HostTaskQueue: worker.NoHost, InitialPrefill: 0, InitialDecode: InitialDecode, WorkerWait: time.Minute})
		return err
	}
	_, err := r.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: d.WorkflowID(), TaskQueue: workflows.TaskQueue,
		StaticSummary: fmt.Sprintf("planner of %s/%s: %s, %s, %s", d.Namespace, d.Name, r.cfg.Mode, r.cfg.OptimizationTarget, r.cfg.Environment),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeDeployment).ValueSet(d.Namespace+"/"+d.Name),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeMode).ValueSet(string(r.cfg.Mode)),
		),
	}, workflows.WorkflowName, workflows.Input{Deployment: d, Config: r.cfg, InitialDecode: InitialDecode})
	if err != nil {
		return fmt.Errorf("start %s: %w", d.WorkflowID(), err)
	}
	return nil
}

// errorClass shortens a query error for counting: the message without the planner it is
// about ("context deadline exceeded", ...).
func errorClass(err error, workflowID string) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, workflowID+": "); ok {
		msg = after
	}
	return truncate(msg, 160)
}

// each runs fn for every planner, ReadConcurrency at a time.
func (r *runner) each(fn func(i int)) {
	r.some(r.o.Planners, fn)
}

// some runs fn for n planners spread evenly over all, ReadConcurrency at a time.
func (r *runner) some(n int, fn func(i int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range r.o.ReadConcurrency {
		wg.Go(func() {
			for i := range jobs {
				fn(i)
			}
		})
	}
	n = min(n, r.o.Planners)
	for k := range n {
		jobs <- k * r.o.Planners / n
	}
	close(jobs)
	wg.Wait()
}

// stateQueries is the number of planners whose state is queried after the window.
func (r *runner) stateQueries() int {
	if r.o.StateQueries <= 0 {
		return r.o.Planners
	}
	return min(r.o.StateQueries, r.o.Planners)
}

// readStates queries the state of StateQueries planners, as an operator would, once the
// window is over.
func (r *runner) readStates(ctx context.Context, at time.Time) EndState {
	var mu sync.Mutex
	end := EndState{Errors: map[string]int{}}
	var overdue []float64
	now := unix(at)
	end.Queried = r.stateQueries()
	r.some(end.Queried, func(i int) {
		id := Deployment(i).WorkflowID()
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s, err := plannerclient.New(r.client, Deployment(i)).State(qctx)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			end.Errors[errorClass(err, id)]++
		case !s.Initialized:
			end.NotInitialized++
		default:
			end.TicksTotal += s.Ticks
			overdue = append(overdue, now-s.NextTickAt)
		}
		if err == nil {
			end.Answered++
			if s.InitError != "" {
				end.InitErrors++
			}
		}
	})
	end.OverdueS = NewStats(overdue)
	if len(end.Errors) == 0 {
		end.Errors = nil
	}
	return end
}

// readHistories reads every planner's ticks from its histories (ReadTicks), and counts
// their events.
func (r *runner) readHistories(ctx context.Context, since float64) (map[string][]Tick, HistoryStats) {
	var mu sync.Mutex
	ticks := map[string][]Tick{}
	hs := HistoryStats{Events: map[string]int64{}}
	r.each(func(i int) {
		id := Deployment(i).WorkflowID()
		ts, events, err := ReadTicks(ctx, r.client, id, since)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			hs.Errors++
			if hs.Errors <= 3 {
				r.say("%v", err)
			}
			return
		}
		hs.Planners++
		hs.Ticks += int64(len(ts))
		if len(ts) == 0 {
			hs.NoTicks++
		}
		if events[localActivityMarker+":"+workflows.ActivityInit] == 0 {
			hs.NotInitialized++
		}
		ticks[id] = ts
		for k, v := range events {
			hs.Events[k] += v
		}
	})
	hs.derive()
	return ticks, hs
}

// notRunning counts the planners whose workflow is not running (failed, terminated, timed
// out, completed, continued as new without a successor); -1 when the server cannot say.
func (r *runner) notRunning(ctx context.Context) int64 {
	resp, err := r.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'Running'", workflows.WorkflowName)})
	if err != nil {
		r.say("count the planners not running: %v", err)
		return -1
	}
	n := resp.GetCount()
	if n > 0 {
		r.say("%d planner executions are not running (%s counts closed runs, including continued-as-new ones)", n, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW)
	}
	return n
}

func (r *runner) scrapeWorkers(ctx context.Context) Snapshot {
	var total Snapshot
	for _, u := range r.metrics {
		s, err := Scrape(ctx, u)
		if err != nil {
			r.say("%v", err)
			continue
		}
		total = total.Add(s)
	}
	return total
}

// observations counts the activities that run once per tick: Observe (history generation
// 3) or ObserveInventory (before; the noop planners read their inventory every tick).
func observations(s Snapshot) float64 {
	const h = "temporal_activity_execution_latency_seconds{activity_type="
	return s.Hists[h+workflows.ActivityObserve+"}"].Count + s.Hists[h+workflows.ActivityObserveInventory+"}"].Count
}

// progress prints one line: the ticks observed over the last period (the once-a-tick
// observe activities the workers ran) against those due, and the processes' CPU and memory.
func (r *runner) progress(start, from, now time.Time, prev, cur Snapshot) {
	r.samplesMu.Lock()
	res := Resources(r.samples, from, now)
	r.samplesMu.Unlock()
	dt := now.Sub(from).Seconds()
	decides := (observations(cur) - observations(prev)) / dt
	r.say("[%4.0fs] %.1f ticks/s of %.1f due · workers %.2f cores, %.0f MiB · server %.2f cores, %.0f MiB · machine %.2f of %d cores busy, load %.1f",
		now.Sub(start).Seconds(), decides, float64(r.o.Planners)/r.o.Interval.Seconds(),
		res.Workers.CPUCoresMean, res.Workers.RSSMaxMiB, res.Server.CPUCoresMean, res.Server.RSSMaxMiB,
		res.Machine.BusyCoresMean, res.Machine.NumCPU, res.Machine.Load1Max)
}

// quietLogger drops the SDK client's logs (the scale test logs what matters).
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
