package local

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/llmplanner/planner/scaling"
)

// Defaults applied to zero-valued Config fields.
const (
	// DefaultDrainTimeout is how long a worker drains after SIGTERM before SIGKILL.
	DefaultDrainTimeout = 60 * time.Second
	// DefaultStartTimeout is how long a worker may take to become ready.
	DefaultStartTimeout = 5 * time.Minute
	// DefaultCheckInterval is the reconcile loop's period.
	DefaultCheckInterval = time.Second
	// DefaultReadyTimeout bounds one readiness probe.
	DefaultReadyTimeout = 2 * time.Second
)

// MaxGPUs bounds the GPU pool of one deployment (Config.GPUs, ParseGPUs): every worker is a
// process of this machine, so a larger pool is a mistake (such as the range "0-99999999"),
// and the bound keeps every GPU and worker count far from int overflow.
const MaxGPUs = 4096

// Placeholders are the names a Command argument, an Env value or a ReadyURL may use, written
// in braces ("{http_port}"); each is replaced by the worker's value.
var Placeholders = []string{"name", "component", "index", "http_port", "fpm_port", "gpus"}

// ComponentConfig describes how to run the workers of one pool.
type ComponentConfig struct {
	// Command is the worker's argv template; empty means the pool is not deployed (its counts
	// are then unknown, and a positive target for it is refused).
	Command []string
	// GPUsPerWorker is the number of GPU ids each worker gets from the pool (0: 1).
	GPUsPerWorker int
	// Env holds extra environment variables (values are templates), given to the worker
	// together with CUDA_VISIBLE_DEVICES and the InheritedEnv variables of the supervisor's
	// own environment (nothing else of it is passed on).
	Env map[string]string
	// ReadyURL is a template of the URL whose GET answering 200 means the worker is ready;
	// empty means a worker is ready as soon as its process runs.
	ReadyURL string
	// Capabilities are the engine limits the workers run with (max_num_batched_tokens,
	// max_num_seqs, KV capacity...), reported in the inventory as a Kubernetes deployment
	// reports them from the workers' runtime config; NumGPU is always GPUsPerWorker.
	Capabilities scaling.EngineCapabilities
}

// Config configures the supervisor of one deployment.
type Config struct {
	// Namespace names the deployment; worker names are "<Namespace>_<component>[_N]".
	Namespace string
	// StateFile is the JSON file recording the deployment (written atomically).
	StateFile string
	// GPUs is the pool of GPU ids handed out as CUDA_VISIBLE_DEVICES (they may be simulated:
	// the pool is not checked against the hardware).
	GPUs []int
	// Prefill and Decode configure the two pools.
	Prefill ComponentConfig
	Decode  ComponentConfig
	// LogDir receives each worker's stdout and stderr in <LogDir>/<name>.log (default: a
	// "logs" folder next to the state file).
	LogDir string
	// DrainTimeout is how long a worker may drain after SIGTERM before it is killed
	// (default 60 s).
	DrainTimeout time.Duration
	// StartTimeout is how long a worker may take to become ready before it is reported failed
	// and stopped (default 5 min).
	StartTimeout time.Duration
	// CheckInterval is the period of the reconcile loop: readiness probes, exit detection and
	// drain deadlines (default 1 s).
	CheckInterval time.Duration
	// ReadyTimeout bounds one readiness probe (default 2 s).
	ReadyTimeout time.Duration
	// Logger receives the supervisor's logs (default slog.Default()).
	Logger *slog.Logger

	// Hooks for this package's tests. now is the clock of the workers' recorded times and of
	// the start and drain deadlines (default time.Now); afterCheck runs after each pass of the
	// reconcile loop.
	now        func() time.Time
	afterCheck func()
}

var (
	namespaceRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	placeholderRE = regexp.MustCompile(`\{([A-Za-z0-9_]*)\}`)
)

// Validate reports every problem of the configuration, joined, each naming its field.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Namespace == "" {
		add("namespace: required")
	} else if !namespaceRE.MatchString(c.Namespace) {
		add("namespace %q: only letters, digits, '_', '.' and '-' are allowed", c.Namespace)
	}
	if c.StateFile == "" {
		add("state_file: required")
	}
	if len(c.GPUs) == 0 {
		add("gpus: the pool is empty")
	}
	if len(c.GPUs) > MaxGPUs {
		add("gpus: %d ids, at most %d", len(c.GPUs), MaxGPUs)
	}
	seen := map[int]bool{}
	for _, g := range c.GPUs {
		if g < 0 {
			add("gpus: id %d is negative", g)
		}
		if seen[g] {
			add("gpus: id %d is listed twice", g)
		}
		seen[g] = true
	}
	deployed := 0
	for _, comp := range []scaling.Component{scaling.Prefill, scaling.Decode} {
		cc := c.component(comp)
		if cc.GPUsPerWorker < 0 {
			add("%s.gpus_per_worker %d is negative", comp, cc.GPUsPerWorker)
		}
		if len(cc.Command) == 0 {
			if cc.ReadyURL != "" || len(cc.Env) > 0 {
				add("%s: ready_url or env set but no command", comp)
			}
			continue
		}
		deployed++
		if cc.GPUsPerWorker > len(c.GPUs) {
			add("%s.gpus_per_worker %d is more than the pool's %d GPUs", comp, cc.GPUsPerWorker, len(c.GPUs))
		}
		if cc.Command[0] == "" {
			add("%s.command: the program is empty", comp)
		}
		for i, arg := range cc.Command {
			if err := checkTemplate(arg); err != nil {
				add("%s.command[%d]: %w", comp, i, err)
			}
		}
		for k, v := range cc.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				add("%s.env: invalid variable name %q", comp, k)
			}
			if k == "CUDA_VISIBLE_DEVICES" || k == WorkerMarkerEnv {
				add("%s.env: %s is set by the supervisor", comp, k)
			}
			if err := checkTemplate(v); err != nil {
				add("%s.env[%s]: %w", comp, k, err)
			}
		}
		if err := checkTemplate(cc.ReadyURL); err != nil {
			add("%s.ready_url: %w", comp, err)
		}
	}
	if deployed == 0 {
		add("prefill.command, decode.command: at least one pool needs a command")
	}
	for name, d := range map[string]time.Duration{"drain_timeout": c.DrainTimeout, "start_timeout": c.StartTimeout,
		"check_interval": c.CheckInterval, "ready_timeout": c.ReadyTimeout} {
		if d < 0 {
			add("%s %v is negative", name, d)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("local connector config: %w", errors.Join(errs...))
	}
	return nil
}

// checkTemplate rejects unknown placeholders.
func checkTemplate(s string) error {
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		known := false
		for _, p := range Placeholders {
			known = known || m[1] == p
		}
		if !known {
			return fmt.Errorf("unknown placeholder {%s} (known: %s)", m[1], strings.Join(Placeholders, ", "))
		}
	}
	return nil
}

// withDefaults returns the configuration with its zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.Prefill.GPUsPerWorker == 0 {
		c.Prefill.GPUsPerWorker = 1
	}
	if c.Decode.GPUsPerWorker == 0 {
		c.Decode.GPUsPerWorker = 1
	}
	if c.LogDir == "" {
		c.LogDir = filepath.Join(filepath.Dir(c.StateFile), "logs")
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.Logger = c.Logger.With("connector", "local", "namespace", c.Namespace)
	return c
}

// component returns the configuration of one pool.
func (c *Config) component(comp scaling.Component) *ComponentConfig {
	if comp == scaling.Prefill {
		return &c.Prefill
	}
	return &c.Decode
}

// ParseGPUs parses a GPU pool such as "0,1,2,3" or "0-7" (ranges and lists may be mixed:
// "0-3,6,7").
func ParseGPUs(s string) ([]int, error) {
	var ids []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("gpu pool %q: %q is not a GPU id or range: %w", s, part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("gpu pool %q: %q is not a GPU id or range: %w", s, part, err)
			}
		}
		if a < 0 || b < a {
			return nil, fmt.Errorf("gpu pool %q: range %q is empty or negative", s, part)
		}
		if b-a >= MaxGPUs-len(ids) { // b >= a >= 0: no overflow
			return nil, fmt.Errorf("gpu pool %q: more than %d GPU ids", s, MaxGPUs)
		}
		for g := a; g <= b; g++ {
			ids = append(ids, g)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("gpu pool %q: no GPU id", s)
	}
	return ids, nil
}
