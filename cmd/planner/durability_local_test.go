package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/workflows"
)

// The local part of the randomized durability test: the faulty worker also hosts an SLA
// planner (disaggregated, throughput loop with the constant predictor, so that it follows the
// rate, the demo's H200 profile) whose local connector
// runs real worker processes (connectors/local/testdata/fakeworker), with traffic scraped
// from a frontend whose request rate the test moves every few ticks. Its decisions depend on
// when the workers become ready, so they cannot be compared with an uninterrupted run's;
// what must hold, whatever the kills interrupted, is that no apply is doubled and no process
// is orphaned:
//   - every process that carries the deployment's worker marker and still runs is a worker
//     of the connector's state file, and every worker the file holds as running runs;
//   - the workers started, over the whole run, are exactly the initial ones plus the
//     scale-ups of the decisions applied (a re-applied decision starts nothing);
//   - once the planner is paused and its last decision applied, the running workers of each
//     pool are its targets.

// localDeployment is the hosted local deployment of the faulty worker.
var localDeployment = workflows.Deployment{Namespace: "random", Name: "local"}

// faultAfterApplyLocal is faultAfterApply for the local deployment's decisions (decision ids
// of different planners are counted separately).
const faultAfterApplyLocal = "apply-local"

// localRates are the frontend's request rates (requests/s, 3000 input and 300 output tokens
// each), one per localRatePeriod ticks of the noop planner, so that the SLA planner scales
// both pools up and down several times.
var localRates = []float64{3, 25, 8, 40, 1, 18}

const localRatePeriod = 8

// rampFrontend serves dynamo_frontend_* counters growing at a rate the test sets.
type rampFrontend struct {
	mu      sync.Mutex
	rate    float64
	started float64
	last    time.Time
}

func (f *rampFrontend) setRate(r float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	f.rate = r
}

// advance adds the requests started since the last call (caller holds mu).
func (f *rampFrontend) advance() {
	now := time.Now()
	if !f.last.IsZero() {
		f.started += f.rate * now.Sub(f.last).Seconds()
	}
	f.last = now
}

func (f *rampFrontend) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	f.advance()
	n := f.started
	f.mu.Unlock()
	const labels = `{model="m",dynamo_namespace="random"`
	fmt.Fprintf(w, "# TYPE dynamo_frontend_requests_started_total counter\ndynamo_frontend_requests_started_total%s} %g\n", labels, n)
	for _, h := range []struct {
		name   string
		tokens float64
	}{{"dynamo_frontend_input_sequence_tokens", 3000}, {"dynamo_frontend_output_sequence_tokens", 300}} {
		fmt.Fprintf(w, "# TYPE %s histogram\n%s_bucket%s,le=\"+Inf\"} %g\n%s_sum%s} %g\n%s_count%s} %g\n",
			h.name, h.name, labels, n, h.name, labels, h.tokens*n, h.name, labels, n)
	}
}

// localSide is the local deployment's files and traffic.
type localSide struct {
	dir         string
	deployments string
	stateFile   string
	frontend    *rampFrontend
}

// newLocalSide writes the deployments file of the local deployment (the fakeworker binary,
// the profile, the planner config) and starts its frontend.
func newLocalSide(t *testing.T) *localSide {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakeworker")
	out, err := exec.Command("go", "build", "-o", fake, "../../connectors/local/testdata/fakeworker").CombinedOutput()
	require.NoError(t, err, "%s", out)
	profile := filepath.Join(dir, "profile")
	require.NoError(t, writeEmbedded("demodata/profile", profile))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "local.yaml"), []byte(fmt.Sprintf(`mode: disagg
environment: local
optimization_target: sla
load_predictor: constant
enable_throughput_scaling: true
enable_load_scaling: false
throughput_adjustment_interval: 3
load_adjustment_interval: 2
ttft: 300
itl: 20
max_gpu_budget: 8
profile_results_dir: %s
`, profile)), 0o644))
	side := &localSide{dir: dir, deployments: filepath.Join(dir, "deployments.yaml"), stateFile: filepath.Join(dir, "local", "state.json"),
		frontend: &rampFrontend{rate: localRates[0]}}
	srv := httptest.NewServer(side.frontend)
	t.Cleanup(srv.Close)
	pool := func(component string) string {
		return fmt.Sprintf(`        %s:
          command: [%q, --name, "{name}", --http-port, "{http_port}", --fpm-port, "{fpm_port}"]
          ready_url: "http://127.0.0.1:{http_port}/healthz"
          engine: {max_num_batched_tokens: 8192, max_num_seqs: 256, max_kv_tokens: 100000, context_length: 16384}
`, component, fake)
	}
	require.NoError(t, os.WriteFile(side.deployments, []byte(fmt.Sprintf(`deployments:
  - deployment: %s/%s
    planner_config: local.yaml
    connector:
      kind: local
      local:
        state_file: local/state.json
        gpus: [0, 1, 2, 3, 4, 5, 6, 7]
        drain_timeout: 2s
%s%s    traffic:
      model: m
      dynamo_namespace: random
      scrape: {url: %q, interval: 500ms}
`, localDeployment.Namespace, localDeployment.Name, pool("prefill"), pool("decode"), srv.URL+"/metrics")), 0o644))
	// The workers outlive the worker process that supervises them (the next one adopts
	// them): whatever runs when the test ends is stopped here.
	t.Cleanup(func() {
		procs, err := side.markedProcesses()
		if err != nil {
			t.Logf("local workers left running: %v", err)
		}
		for pid := range procs {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	return side
}

// localState is the part of the connector's state file the checks read.
type localState struct {
	Namespace         string `json:"namespace"`
	AppliedDecisionID int64  `json:"applied_decision_id"`
	Targets           struct {
		Prefill int `json:"prefill"`
		Decode  int `json:"decode"`
	} `json:"targets"`
	Workers []local.Worker `json:"workers"`
}

func (s *localSide) state() (localState, error) {
	var st localState
	b, err := os.ReadFile(s.stateFile)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// markedProcesses returns the live (not zombie) process-group leaders whose environment
// carries a worker marker of this deployment's connector, by pid, with their marker.
func (s *localSide) markedProcesses() (map[int]string, error) {
	st, err := s.state()
	if err != nil {
		return nil, err
	}
	prefix := []byte(local.WorkerMarkerEnv + "=" + st.Namespace + "/")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(v, prefix) && processLeads(pid) {
				out[pid] = string(v[len(local.WorkerMarkerEnv)+1:])
			}
		}
	}
	return out, nil
}

// processLeads reports whether pid runs (is not a zombie) and leads its process group.
func processLeads(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	return len(f) >= 3 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pid)
}

// startedWorkers returns the pids the workers' logs say were started, over the whole run.
func (s *localSide) startedWorkers(t *testing.T) []int {
	logs, err := filepath.Glob(filepath.Join(filepath.Dir(s.stateFile), "logs", "*.log"))
	require.NoError(t, err)
	startRE := regexp.MustCompile(`^start name=\S+ pid=(\d+) `)
	var pids []int
	for _, path := range logs {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m := startRE.FindStringSubmatch(sc.Text()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				pids = append(pids, pid)
			}
		}
		f.Close()
	}
	return pids
}

// decisionLog merges the local planner's recent decisions (the state keeps a window) as
// they are polled.
type decisionLog struct {
	mu   sync.Mutex
	byID map[int64]workflows.DecisionRecord
}

func (l *decisionLog) merge(v workflows.StateView) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil {
		l.byID = map[int64]workflows.DecisionRecord{}
	}
	for _, d := range v.Decisions {
		l.byID[d.ID] = d
	}
}

func (l *decisionLog) sorted() []workflows.DecisionRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.SortedFunc(maps.Values(l.byID), func(a, b workflows.DecisionRecord) int { return cmp.Compare(a.ID, b.ID) })
}

// checkLocalSide pauses the local planner, waits until its last decision is applied and its
// workers have settled, and checks that no apply was doubled and no process orphaned.
func checkLocalSide(t *testing.T, ctx context.Context, s *localSide, pc *plannerclient.Client, decisions *decisionLog) {
	for {
		_, err := pc.Pause(ctx, workflows.DirectionRequest{Reason: "durability test: settle and check"})
		if err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "pause the local planner: %v", err)
		time.Sleep(300 * time.Millisecond)
	}
	var last workflows.DecisionRecord
	var st localState
	settled := func() bool {
		v, err := stateOf(ctx, pc)
		if err != nil || len(v.Decisions) == 0 {
			return false
		}
		decisions.merge(v)
		last = v.Decisions[len(v.Decisions)-1]
		if !reached(last) {
			return false
		}
		if st, err = s.state(); err != nil || st.AppliedDecisionID != last.ID {
			return false
		}
		for _, w := range st.Workers {
			if w.State != local.Ready {
				return false // starting, draining, or a failure the next apply would replace
			}
		}
		return true
	}
	for !settled() {
		require.NoError(t, ctx.Err(), "the local planner's last decision %d (%s) applied and its workers settled (state file: %+v)", last.ID, last.Status, st)
		time.Sleep(200 * time.Millisecond)
	}

	count := map[string]int{"prefill": 0, "decode": 0}
	recorded := map[int]string{}
	for _, w := range st.Workers {
		count[string(w.Component)]++
		recorded[w.PID] = w.Marker
	}
	// No orphan: the processes carrying the deployment's marker are the recorded workers.
	procs, err := s.markedProcesses()
	require.NoError(t, err)
	require.Equal(t, recorded, procs, "the live marked processes are exactly the state file's workers")

	// No doubled apply: the workers started are the initial ones plus the scale-ups of the
	// decisions applied, in order.
	all := decisions.sorted()
	want := 2 // the connector's initial worker per pool
	prevP, prevD := 1, 1
	applied := 0
	for i, d := range all {
		require.Equal(t, int64(i+1), d.ID, "every decision of the local planner was seen (%v)", targetsOf(all))
		require.NotEqual(t, workflows.StatusFailed, d.Status, "decision %d failed: %s", d.ID, d.Error)
		if !reached(d) {
			continue
		}
		applied++
		p, dec := prevP, prevD
		if d.Targets.Prefill != nil {
			p = *d.Targets.Prefill
		}
		if d.Targets.Decode != nil {
			dec = *d.Targets.Decode
		}
		want += max(0, p-prevP) + max(0, dec-prevD)
		prevP, prevD = p, dec
	}
	// The running workers are the last decision's targets.
	require.Equal(t, map[string]int{"prefill": prevP, "decode": prevD}, count,
		"the running workers are the targets of the last decision applied (%d)", last.ID)
	require.Equal(t, last.ID, all[len(all)-1].ID)
	started := s.startedWorkers(t)
	require.Len(t, started, want, "workers started over the run, for %d applied decisions %v", applied, targetsOf(all))
	for _, pid := range started {
		if _, alive := procs[pid]; !alive {
			require.False(t, processLeads(pid), "worker pid %d runs without being recorded", pid)
		}
	}
	t.Logf("local planner: %d decisions applied %v; %d workers started over the run, %d running, none orphaned", applied, targetsOf(all), len(started), len(procs))
}

// reached reports whether the connector took the decision (applied, or already reached).
func reached(d workflows.DecisionRecord) bool {
	return d.Status == workflows.StatusApplied || d.Status == workflows.StatusDone
}

// targetsOf renders decisions' ids, targets and statuses for messages.
func targetsOf(ds []workflows.DecisionRecord) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%d:%s:%s", d.ID, d.Targets, d.Status))
	}
	return out
}
