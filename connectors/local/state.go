package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/llmplanner/planner/scaling"
)

// WorkerState is the life-cycle state of a worker.
type WorkerState string

// The worker states. Starting, Ready, Draining and Failed workers may hold a live process;
// an Exited worker's process is gone.
const (
	// Starting: the process runs but its ReadyURL has not answered 200 yet.
	Starting WorkerState = "starting"
	// Ready: the worker serves.
	Ready WorkerState = "ready"
	// Draining: the worker was scaled down and got SIGTERM; it is removed once it exits.
	Draining WorkerState = "draining"
	// Failed: the worker did not become ready within StartTimeout and is being (or was)
	// stopped; it is replaced on the next Apply.
	Failed WorkerState = "failed"
	// Exited: the process died on its own; the worker is replaced on the next Apply, never
	// silently restarted.
	Exited WorkerState = "exited"
)

// Worker is one worker process of the deployment, as recorded in the state file.
type Worker struct {
	// Name is "<namespace>_<component>" or "<namespace>_<component>_<Index>".
	Name string `json:"name"`
	// Component is the worker's pool.
	Component scaling.Component `json:"component"`
	// Index is the name's suffix (0 for the first worker, which has none).
	Index int `json:"index"`
	// Command is the argv the worker was started with (placeholders expanded).
	Command []string `json:"command"`
	// Env is the environment the supervisor added (CUDA_VISIBLE_DEVICES and the configured
	// extra variables), as KEY=value.
	Env []string `json:"env,omitempty"`
	// PID is the worker's process id, also its process group id. It is 0 in an intent: a
	// worker recorded (state starting, with its Marker) before its process is started, so
	// that a supervisor stopped before it could record the pid finds the process again.
	PID int `json:"pid"`
	// Marker is the value of WorkerMarkerEnv in the worker's environment
	// ("<namespace>/<name>/<nonce>"): the process carrying it is the worker. Empty for workers
	// recorded before markers existed.
	Marker string `json:"marker,omitempty"`
	// StartTime is the process start time (field 22 of /proc/<pid>/stat, clock ticks after
	// boot): together with PID it identifies the process across pid reuse.
	StartTime uint64 `json:"start_time"`
	// GPUs are the GPU ids of the pool given to the worker as CUDA_VISIBLE_DEVICES.
	GPUs []int `json:"gpus"`
	// HTTPPort and FPMPort are the loopback ports allocated to the worker.
	HTTPPort int `json:"http_port"`
	FPMPort  int `json:"fpm_port"`
	// State is the worker's life-cycle state.
	State WorkerState `json:"state"`
	// StartedAt is when the process was started; ReadyAt when it was first seen ready.
	StartedAt time.Time  `json:"started_at"`
	ReadyAt   *time.Time `json:"ready_at,omitempty"`
	// StopAt is when the supervisor sent SIGTERM (draining or failed workers). A draining
	// worker without one was marked by a decision whose starts were being recorded, and not
	// signalled yet (reconcile): the next supervisor to open the state file signals it.
	StopAt *time.Time `json:"stop_at,omitempty"`
	// KilledAt is when the supervisor sent SIGKILL after the drain timeout.
	KilledAt *time.Time `json:"killed_at,omitempty"`
	// ExitedAt and ExitStatus are set once the process is gone.
	ExitedAt   *time.Time `json:"exited_at,omitempty"`
	ExitStatus string     `json:"exit_status,omitempty"`
	// LogFile receives the worker's stdout and stderr.
	LogFile string `json:"log_file"`
}

// HTTPAddress is the worker's HTTP address ("127.0.0.1:<http_port>").
func (w Worker) HTTPAddress() string { return "127.0.0.1:" + strconv.Itoa(w.HTTPPort) }

// FPMEndpoint is the ZeroMQ endpoint the worker publishes its Forward Pass Metrics on
// ("tcp://127.0.0.1:<fpm_port>").
func (w Worker) FPMEndpoint() string { return "tcp://127.0.0.1:" + strconv.Itoa(w.FPMPort) }

// mayBeAlive reports whether the worker's process may still run (it holds GPUs and ports).
func (w *Worker) mayBeAlive() bool { return w.ExitedAt == nil }

// intent reports whether the worker was recorded before its process was started and its pid
// is not known yet.
func (w *Worker) intent() bool { return w.PID == 0 }

// live reports whether the worker counts towards its pool's target (starting or ready).
func (w *Worker) live() bool { return w.State == Starting || w.State == Ready }

// clone returns a deep copy.
func (w Worker) clone() Worker {
	w.Command = append([]string(nil), w.Command...)
	w.Env = append([]string(nil), w.Env...)
	w.GPUs = append([]int(nil), w.GPUs...)
	return w
}

// PendingWorker is a worker the targets ask for that waits for GPUs: the pool's free GPUs are
// held by workers still draining (or failed workers still stopping). It counts toward its
// pool's target, is not ready, and is started, oldest first, as soon as enough GPUs are free
// (Kubernetes shows such a replica as a Pending pod). It has no name, process or GPUs yet.
type PendingWorker struct {
	// Component is the pool the worker will join.
	Component scaling.Component `json:"component"`
	// Since is when the decision that asked for it was applied.
	Since time.Time `json:"since"`
}

// poolCounts are per-pool integers (targets, failure counts).
type poolCounts struct {
	Prefill int `json:"prefill"`
	Decode  int `json:"decode"`
}

// get returns the count of one pool.
func (p *poolCounts) get(c scaling.Component) *int {
	if c == scaling.Prefill {
		return &p.Prefill
	}
	return &p.Decode
}

// stateVersion is the state file's format version.
const stateVersion = 1

// state is the state file's content.
type state struct {
	Version           int        `json:"version"`
	Namespace         string     `json:"namespace"`
	AppliedDecisionID int64      `json:"applied_decision_id"`
	Targets           poolCounts `json:"targets"`
	// Failures counts workers that exited on their own or failed to start, per pool.
	Failures poolCounts `json:"failures"`
	Workers  []Worker   `json:"workers"`
	// Pending are the workers waiting for GPUs, in the order they are started (oldest
	// first).
	Pending   []PendingWorker `json:"pending,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// readState reads the state file; ok is false when it does not exist.
func readState(path string) (st state, ok bool, err error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return state{}, false, nil
	}
	if err != nil {
		return state{}, false, fmt.Errorf("read state file %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return state{}, false, fmt.Errorf("state file %s is corrupt (fix or remove it): %w", path, err)
	}
	if st.Version != stateVersion {
		return state{}, false, fmt.Errorf("state file %s: version %d, want %d", path, st.Version, stateVersion)
	}
	for i, w := range st.Workers {
		if w.Name == "" || w.PID < 0 || (w.Component != scaling.Prefill && w.Component != scaling.Decode) {
			return state{}, false, fmt.Errorf("state file %s is corrupt: worker %d (%q) has no name, pid or known component", path, i, w.Name)
		}
		switch w.State {
		case Starting, Ready, Draining, Failed, Exited:
		default:
			return state{}, false, fmt.Errorf("state file %s is corrupt: worker %q has unknown state %q", path, w.Name, w.State)
		}
		// Only an intent lacks a pid: a worker being started, with the marker to find it by.
		if w.intent() && (w.Marker == "" || w.State != Starting || w.ExitedAt != nil) {
			return state{}, false, fmt.Errorf("state file %s is corrupt: worker %d (%q) has no pid and is not a starting worker with a marker", path, i, w.Name)
		}
	}
	if len(st.Pending) > MaxGPUs {
		return state{}, false, fmt.Errorf("state file %s is corrupt: %d pending workers, at most %d", path, len(st.Pending), MaxGPUs)
	}
	for i, p := range st.Pending {
		if p.Component != scaling.Prefill && p.Component != scaling.Decode {
			return state{}, false, fmt.Errorf("state file %s is corrupt: pending worker %d has unknown component %q", path, i, p.Component)
		}
	}
	return st, true, nil
}

// writeState writes the state file atomically: a temporary file in the same folder, fsynced,
// renamed over the file, and the folder fsynced.
func writeState(path string, st *state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("sync state folder %s: %w", dir, err)
		}
	}
	return nil
}
