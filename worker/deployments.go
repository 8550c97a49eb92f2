package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// Bounds on a deployments file: it is read at start, from a path an operator (or a ConfigMap
// mount) gives, and everything in it is checked before anything is started.
const (
	// MaxDeploymentsFileBytes bounds the file.
	MaxDeploymentsFileBytes = 1 << 20
	// MaxDeployments bounds the deployments one worker hosts.
	MaxDeployments = 256
	// maxStringLen bounds every string of the file.
	maxStringLen = 4096
	// maxListLen bounds every list of the file (commands, endpoints, GPU ids).
	maxListLen = 1024
)

// Connector kinds of a hosted deployment.
const (
	ConnectorKubernetes = "kubernetes"
	ConnectorLocal      = "local"
	ConnectorVirtual    = "virtual"
	ConnectorNoop       = "noop"
)

// FPM endpoint discovery modes.
const (
	// DiscoveryConnector asks the connector for its engines' endpoints (kubernetes: the
	// ready pods; local: the ready worker processes).
	DiscoveryConnector = "connector"
	// DiscoveryStatic subscribes to a fixed list of endpoints.
	DiscoveryStatic = "static"
)

// Defaults of a hosted deployment's observation.
const (
	// DefaultFPMMaxAge drops an engine whose last FPM (heartbeats come every second when
	// idle) is older than this.
	DefaultFPMMaxAge = 10 * time.Second
	// DefaultDiscoveryInterval is how often FPM endpoints are rediscovered.
	DefaultDiscoveryInterval = 2 * time.Second
	// DefaultFPMPortName is the container port name that carries a pod's FPM publisher.
	DefaultFPMPortName = "fpm"
	// DefaultScrapeInterval is the direct frontend scrape period.
	DefaultScrapeInterval = 2 * time.Second
)

// DeploymentsFile lists the deployments a worker hosts (`planner worker --deployments FILE`).
// For each: the connector that moves its replicas, the traffic source and the FPM source,
// all built on the worker, so credentials never leave it. Relative paths in the file are
// relative to the file's folder (a ConfigMap mounted as a folder works as is).
type DeploymentsFile struct {
	// Deployments are the hosted deployments.
	Deployments []HostedDeployment `yaml:"deployments"`
}

// HostedDeployment is one deployment a worker hosts.
type HostedDeployment struct {
	// Deployment is "<namespace>/<name>"; the planner is workflow planner/<namespace>/<name>
	// and its observe and apply activities run on this worker's host task queue
	// (workflows.HostTaskQueue). For kubernetes the names default to the namespace and the
	// DynamoGraphDeployment.
	Deployment string `yaml:"deployment"`
	// PlannerConfig, when set, is the planner configuration file: the worker starts the
	// planner when it starts (or, when it runs, replaces its configuration), exactly as
	// `planner start -f PlannerConfig --deployment Deployment` does.
	PlannerConfig string `yaml:"planner_config,omitempty"`
	// Connector moves the replicas.
	Connector ConnectorSpec `yaml:"connector"`
	// Traffic is where the throughput loop reads the frontend traffic (nil: not observed, the
	// throughput loop holds with no_traffic_data).
	Traffic *TrafficSpec `yaml:"traffic,omitempty"`
	// FPM is where the load loop reads the engines' Forward Pass Metrics (nil: discovered
	// from the connector for kubernetes and local, not observed otherwise).
	FPM *FPMSpec `yaml:"fpm,omitempty"`

	// id is the parsed Deployment.
	id workflows.Deployment
	// plannerConfig is the loaded PlannerConfig (nil when not set).
	plannerConfig *config.Config
	// configWarnings are the warnings of loading PlannerConfig.
	configWarnings []string
}

// ID is the deployment's identity.
func (d HostedDeployment) ID() workflows.Deployment { return d.id }

// Config is the planner configuration the worker starts the planner with (nil: none).
func (d HostedDeployment) Config() *config.Config { return d.plannerConfig }

// ConfigWarnings are the warnings of loading the planner configuration (config.Load's):
// settings accepted but not acted on as Dynamo would, and older options read or ignored.
func (d HostedDeployment) ConfigWarnings() []string { return d.configWarnings }

// LogWarnings logs every deployment's planner configuration warnings, one record each, so
// an operator sees them where the worker runs.
func (df *DeploymentsFile) LogWarnings(logger *slog.Logger) {
	for _, d := range df.Deployments {
		for _, w := range d.configWarnings {
			logger.Warn("planner config setting not acted on as Dynamo would", "deployment", d.Deployment, "planner_config", d.PlannerConfig, "warning", w)
		}
	}
}

// ConnectorSpec selects and configures the connector.
type ConnectorSpec struct {
	// Kind is kubernetes, local, virtual or noop.
	Kind string `yaml:"kind"`
	// Kubernetes configures kind kubernetes.
	Kubernetes *KubernetesSpec `yaml:"kubernetes,omitempty"`
	// Local configures kind local.
	Local *LocalSpec `yaml:"local,omitempty"`
}

// KubernetesSpec configures the Kubernetes connector.
type KubernetesSpec struct {
	// Namespace is the DynamoGraphDeployment's namespace (default: the deployment's
	// namespace).
	Namespace string `yaml:"namespace,omitempty"`
	// DGD is the DynamoGraphDeployment's name (default: the deployment's name).
	DGD string `yaml:"dgd,omitempty"`
	// Kubeconfig is a kubeconfig file (default: the in-cluster service account, else
	// $KUBECONFIG, else ~/.kube/config).
	Kubeconfig string `yaml:"kubeconfig,omitempty"`
	// Context is the kubeconfig context (default: its current context).
	Context string `yaml:"context,omitempty"`
	// PrefillComponent and DecodeComponent name the components explicitly (default: the
	// component whose type is prefill, and decode, or worker for an aggregated graph).
	PrefillComponent string `yaml:"prefill_component,omitempty"`
	DecodeComponent  string `yaml:"decode_component,omitempty"`
}

// LocalSpec configures the local process supervisor (connectors/local).
type LocalSpec struct {
	// StateFile records the workers (required).
	StateFile string `yaml:"state_file"`
	// GPUs are the GPU ids handed out as CUDA_VISIBLE_DEVICES (required).
	GPUs []int `yaml:"gpus"`
	// LogDir receives the workers' output (default: logs next to the state file).
	LogDir string `yaml:"log_dir,omitempty"`
	// DrainTimeout, StartTimeout: see local.Config (defaults 60s, 5m).
	DrainTimeout time.Duration `yaml:"drain_timeout,omitempty"`
	StartTimeout time.Duration `yaml:"start_timeout,omitempty"`
	// Initial are the workers started when the state file does not exist yet (default 1 per
	// configured pool).
	Initial *InitialSpec `yaml:"initial,omitempty"`
	// Prefill and Decode configure the pools (at least one).
	Prefill *LocalComponentSpec `yaml:"prefill,omitempty"`
	Decode  *LocalComponentSpec `yaml:"decode,omitempty"`
}

// InitialSpec are initial worker counts.
type InitialSpec struct {
	Prefill *int `yaml:"prefill,omitempty"`
	Decode  *int `yaml:"decode,omitempty"`
}

// LocalComponentSpec configures one pool of the local supervisor.
type LocalComponentSpec struct {
	// Command is the worker's argv, with placeholders {name}, {component}, {index},
	// {http_port}, {fpm_port} and {gpus}.
	Command []string `yaml:"command"`
	// GPUsPerWorker is the GPUs each worker gets (default 1).
	GPUsPerWorker int `yaml:"gpus_per_worker,omitempty"`
	// Env adds environment variables (templates). The worker's own environment is not
	// passed on except local.InheritedEnv (PATH, HOME, USER, LANG, LC_ALL, TZ, TMPDIR,
	// LD_LIBRARY_PATH).
	Env map[string]string `yaml:"env,omitempty"`
	// ReadyURL answers 200 when a worker is ready (template; empty: ready once running).
	ReadyURL string `yaml:"ready_url,omitempty"`
	// Engine are the engine limits the workers run with, reported to the planner.
	Engine EngineSpec `yaml:"engine,omitempty"`
}

// EngineSpec are an engine's limits (Dynamo's runtime config).
type EngineSpec struct {
	MaxNumBatchedTokens int64 `yaml:"max_num_batched_tokens,omitempty"`
	MaxNumSeqs          int64 `yaml:"max_num_seqs,omitempty"`
	MaxKVTokens         int64 `yaml:"max_kv_tokens,omitempty"`
	ContextLength       int64 `yaml:"context_length,omitempty"`
}

// Capabilities converts the limits for the decision core.
func (e EngineSpec) Capabilities() scaling.EngineCapabilities {
	return scaling.EngineCapabilities{MaxNumBatchedTokens: e.MaxNumBatchedTokens, MaxNumSeqs: e.MaxNumSeqs,
		MaxKVTokens: e.MaxKVTokens, ContextLength: e.ContextLength}
}

// TrafficSpec selects the traffic source: Prometheus with Dynamo's queries, or a direct scrape
// of the frontend's /metrics. Model and DynamoNamespace select the series; they default to the
// planner config's model_name and namespace.
type TrafficSpec struct {
	Prometheus      *PrometheusSpec `yaml:"prometheus,omitempty"`
	Scrape          *ScrapeSpec     `yaml:"scrape,omitempty"`
	Model           string          `yaml:"model,omitempty"`
	DynamoNamespace string          `yaml:"dynamo_namespace,omitempty"`
}

// PrometheusSpec configures the Prometheus traffic source. The bearer token is read on the
// worker, from TokenFile (re-read before every query) or from the environment variable
// TokenEnv; it is never part of the planner's workflow input or history.
type PrometheusSpec struct {
	URL                string            `yaml:"url"`
	TokenFile          string            `yaml:"token_file,omitempty"`
	TokenEnv           string            `yaml:"token_env,omitempty"`
	CABundle           string            `yaml:"ca_bundle,omitempty"`
	InsecureSkipVerify bool              `yaml:"insecure_skip_verify,omitempty"`
	ExtraQueryParams   map[string]string `yaml:"extra_query_params,omitempty"`
	Timeout            time.Duration     `yaml:"timeout,omitempty"`
}

// ScrapeSpec configures a direct scrape of the frontend's metrics endpoint.
type ScrapeSpec struct {
	// URL is the frontend's metrics URL (http://frontend:8000/metrics).
	URL string `yaml:"url"`
	// Interval is the scrape period (default 2s).
	Interval time.Duration `yaml:"interval,omitempty"`
}

// FPMSpec configures the FPM subscriber.
type FPMSpec struct {
	// Discovery is connector (default for kubernetes and local) or static.
	Discovery string `yaml:"discovery,omitempty"`
	// Endpoints are the static endpoints (discovery static).
	Endpoints []StaticEndpoint `yaml:"endpoints,omitempty"`
	// PortName is the container port carrying a pod's FPM publisher (kubernetes; default
	// "fpm"); Port is used for pods without a port of that name.
	PortName string `yaml:"port_name,omitempty"`
	Port     int    `yaml:"port,omitempty"`
	// MaxAge drops engines whose newest FPM is older (default 10s).
	MaxAge time.Duration `yaml:"max_age,omitempty"`
	// DiscoveryInterval is how often endpoints are rediscovered (default 2s).
	DiscoveryInterval time.Duration `yaml:"discovery_interval,omitempty"`
}

// StaticEndpoint is one engine's FPM publisher.
type StaticEndpoint struct {
	// Address is the ZeroMQ address (tcp://host:port).
	Address string `yaml:"address"`
	// Component is prefill or decode.
	Component string `yaml:"component"`
}

// LoadDeployments reads, checks and resolves a deployments file: every problem is reported
// with its place in the file, and nothing is started. Planner configs named in it are loaded
// with env (the worker's environment).
func LoadDeployments(path string, env config.LookupEnv) (*DeploymentsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("deployments file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDeploymentsFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("deployments file %s: %w", path, err)
	}
	if len(data) > MaxDeploymentsFileBytes {
		return nil, fmt.Errorf("deployments file %s: larger than the %d-byte limit", path, MaxDeploymentsFileBytes)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	df, err := ParseDeployments(data, filepath.Dir(abs), env)
	if err != nil {
		return nil, fmt.Errorf("deployments file %s:\n%w", path, err)
	}
	return df, nil
}

// ParseDeployments decodes a deployments file strictly (unknown keys are errors), resolves
// relative paths against dir and validates it, returning every problem.
func ParseDeployments(data []byte, dir string, env config.LookupEnv) (*DeploymentsFile, error) {
	var df DeploymentsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&df); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty: want a list under deployments")
		}
		return nil, fmt.Errorf("not a valid deployments file: %w", err)
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(df.Deployments) == 0 {
		add("deployments: the list is empty")
	}
	if len(df.Deployments) > MaxDeployments {
		add("deployments: %d entries, at most %d per worker", len(df.Deployments), MaxDeployments)
		return nil, errors.Join(errs...)
	}
	seen := map[string]int{}
	// Two entries must not drive one target: two planners would fight over its replicas.
	once := func(i int, key, what string) {
		if j, dup := seen[key]; dup {
			add("deployments[%d]: %s is also deployments[%d]'s", i, what, j)
			return
		}
		seen[key] = i
	}
	for i := range df.Deployments {
		d := &df.Deployments[i]
		at := fmt.Sprintf("deployments[%d]", i)
		for _, err := range d.resolve(dir, env) {
			add("%s: %w", at, err)
		}
		if d.Deployment != "" {
			once(i, "deployment "+d.Deployment, "deployment "+d.Deployment)
		}
		if k := d.Connector.Kubernetes; k != nil && d.Connector.Kind == ConnectorKubernetes {
			once(i, "dgd "+k.Kubeconfig+"|"+k.Context+"|"+k.Namespace+"/"+k.DGD, "DynamoGraphDeployment "+k.Namespace+"/"+k.DGD)
		}
		if l := d.Connector.Local; l != nil && l.StateFile != "" {
			once(i, "state "+l.StateFile, "local state file "+l.StateFile)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &df, nil
}

var (
	envNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	dnsLabelRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
)

// resolve checks one deployment, fills its defaults and resolves its paths.
func (d *HostedDeployment) resolve(dir string, env config.LookupEnv) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	path := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	for name, s := range d.strings() {
		if len(s) > maxStringLen {
			add("%s: %d characters, at most %d", name, len(s), maxStringLen)
		}
	}
	ns, name, ok := strings.Cut(d.Deployment, "/")
	d.id = workflows.Deployment{Namespace: ns, Name: name}
	switch {
	case d.Deployment == "":
		add("deployment: required, as <namespace>/<name>")
	case !ok:
		add("deployment %q: want <namespace>/<name>", d.Deployment)
	default:
		if err := d.id.Validate(); err != nil {
			add("deployment %q: %w", d.Deployment, err)
		}
	}
	if d.PlannerConfig != "" {
		path(&d.PlannerConfig)
		cfg, warnings, err := config.LoadFile(d.PlannerConfig, env)
		d.configWarnings = warnings
		switch {
		case err != nil:
			add("planner_config: %w", err)
		case cfg.CheckFootprint() != nil:
			add("planner_config: %w", cfg.CheckFootprint())
		default:
			d.plannerConfig = &cfg
		}
	}
	errs = append(errs, d.resolveConnector(path)...)
	errs = append(errs, d.resolveTraffic(path)...)
	errs = append(errs, d.resolveFPM()...)
	if cfg := d.plannerConfig; cfg != nil {
		if cfg.Environment != config.Environment(d.Connector.Kind) && d.Connector.Kind != "" {
			add("planner_config: environment %q, but the connector is %q: they must agree", cfg.Environment, d.Connector.Kind)
		}
		if t := d.Traffic; t != nil && t.Scrape != nil {
			// A traffic window is the tick's interval; the scrape history must cover half of it.
			shortest := shortestWindow(cfg)
			if shortest > 0 && t.Scrape.Interval > shortest/2 {
				add("traffic.scrape.interval %s: at most half the planner's shortest traffic window (%s), or windows cannot be read",
					t.Scrape.Interval, shortest)
			}
		}
	}
	return errs
}

// strings lists the file's free-form strings of the deployment, for the length bound.
func (d *HostedDeployment) strings() map[string]string {
	m := map[string]string{"deployment": d.Deployment, "planner_config": d.PlannerConfig, "connector.kind": d.Connector.Kind}
	if k := d.Connector.Kubernetes; k != nil {
		for n, v := range map[string]string{"namespace": k.Namespace, "dgd": k.DGD, "kubeconfig": k.Kubeconfig, "context": k.Context,
			"prefill_component": k.PrefillComponent, "decode_component": k.DecodeComponent} {
			m["connector.kubernetes."+n] = v
		}
	}
	if l := d.Connector.Local; l != nil {
		m["connector.local.state_file"], m["connector.local.log_dir"] = l.StateFile, l.LogDir
		for role, c := range map[string]*LocalComponentSpec{"prefill": l.Prefill, "decode": l.Decode} {
			if c == nil {
				continue
			}
			m["connector.local."+role+".ready_url"] = c.ReadyURL
			for i, a := range c.Command {
				m[fmt.Sprintf("connector.local.%s.command[%d]", role, i)] = a
			}
			for k, v := range c.Env {
				m["connector.local."+role+".env."+k] = k + v
			}
		}
	}
	if t := d.Traffic; t != nil {
		m["traffic.model"], m["traffic.dynamo_namespace"] = t.Model, t.DynamoNamespace
		if p := t.Prometheus; p != nil {
			m["traffic.prometheus.url"], m["traffic.prometheus.token_file"], m["traffic.prometheus.token_env"], m["traffic.prometheus.ca_bundle"] =
				p.URL, p.TokenFile, p.TokenEnv, p.CABundle
			for k, v := range p.ExtraQueryParams {
				m["traffic.prometheus.extra_query_params."+k] = k + v
			}
		}
		if s := t.Scrape; s != nil {
			m["traffic.scrape.url"] = s.URL
		}
	}
	if f := d.FPM; f != nil {
		m["fpm.discovery"], m["fpm.port_name"] = f.Discovery, f.PortName
		for i, e := range f.Endpoints {
			m[fmt.Sprintf("fpm.endpoints[%d].address", i)] = e.Address
		}
	}
	return m
}

func (d *HostedDeployment) resolveConnector(path func(*string)) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	c := &d.Connector
	if c.Kind != ConnectorKubernetes && c.Kubernetes != nil {
		add("connector.kubernetes: set, but the kind is %q", c.Kind)
	}
	if c.Kind != ConnectorLocal && c.Local != nil {
		add("connector.local: set, but the kind is %q", c.Kind)
	}
	switch c.Kind {
	case ConnectorKubernetes:
		if c.Kubernetes == nil {
			c.Kubernetes = &KubernetesSpec{}
		}
		k := c.Kubernetes
		if k.Namespace == "" {
			k.Namespace = d.id.Namespace
		}
		if k.DGD == "" {
			k.DGD = d.id.Name
		}
		if !dnsLabelRE.MatchString(k.Namespace) || len(k.Namespace) > 63 {
			add("connector.kubernetes.namespace %q: not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)", k.Namespace)
		}
		if !dnsSubdomainRE.MatchString(k.DGD) || len(k.DGD) > 253 {
			add("connector.kubernetes.dgd %q: not a Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253)", k.DGD)
		}
		path(&k.Kubeconfig)
	case ConnectorLocal:
		if c.Local == nil {
			add("connector.local: required for kind local (state_file, gpus, prefill and/or decode)")
			break
		}
		l := c.Local
		if l.StateFile == "" {
			add("connector.local.state_file: required")
		}
		path(&l.StateFile)
		path(&l.LogDir)
		if len(l.GPUs) == 0 {
			add("connector.local.gpus: required (the GPU ids handed out, e.g. [0, 1, 2, 3])")
		}
		if len(l.GPUs) > maxListLen {
			add("connector.local.gpus: %d ids, at most %d", len(l.GPUs), maxListLen)
		}
		if l.Prefill == nil && l.Decode == nil {
			add("connector.local: prefill or decode (or both) must be configured")
		}
		for role, cc := range map[string]*LocalComponentSpec{"prefill": l.Prefill, "decode": l.Decode} {
			if cc == nil {
				continue
			}
			if len(cc.Command) == 0 {
				add("connector.local.%s.command: required", role)
			}
			if len(cc.Command) > maxListLen || len(cc.Env) > maxListLen {
				add("connector.local.%s: at most %d command arguments and environment variables", role, maxListLen)
			}
			if cc.GPUsPerWorker < 0 || cc.GPUsPerWorker > len(l.GPUs) {
				add("connector.local.%s.gpus_per_worker %d: want 0 (1) to %d, the GPUs listed", role, cc.GPUsPerWorker, len(l.GPUs))
			}
			for n, v := range map[string]int64{"max_num_batched_tokens": cc.Engine.MaxNumBatchedTokens, "max_num_seqs": cc.Engine.MaxNumSeqs,
				"max_kv_tokens": cc.Engine.MaxKVTokens, "context_length": cc.Engine.ContextLength} {
				if v < 0 || v > 1<<40 {
					add("connector.local.%s.engine.%s %d: want 0 (unknown) to 2^40", role, n, v)
				}
			}
		}
		if in := l.Initial; in != nil {
			for role, n := range map[string]*int{"prefill": in.Prefill, "decode": in.Decode} {
				if n != nil && (*n < 0 || *n > len(l.GPUs)) {
					add("connector.local.initial.%s %d: want 0 to %d, the GPUs listed", role, *n, len(l.GPUs))
				}
			}
		}
		for n, v := range map[string]time.Duration{"drain_timeout": l.DrainTimeout, "start_timeout": l.StartTimeout} {
			if v < 0 || v > 24*time.Hour {
				add("connector.local.%s %s: want 0 (the default) to 24h", n, v)
			}
		}
	case ConnectorVirtual, ConnectorNoop:
	case "":
		add("connector.kind: required (kubernetes, local, virtual or noop)")
	default:
		add("connector.kind %q: want kubernetes, local, virtual or noop", c.Kind)
	}
	return errs
}

func (d *HostedDeployment) resolveTraffic(path func(*string)) []error {
	t := d.Traffic
	if t == nil {
		return nil
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if cfg := d.plannerConfig; cfg != nil {
		if t.Model == "" && cfg.ModelName != nil {
			t.Model = *cfg.ModelName
		}
		if t.DynamoNamespace == "" {
			t.DynamoNamespace = cfg.Namespace
		}
	}
	if t.Model == "" {
		add("traffic.model: required (or model_name in the planner_config): the frontend's series are selected by model")
	}
	if t.DynamoNamespace == "" {
		add("traffic.dynamo_namespace: required (or namespace in the planner_config): the frontend's series are selected by it")
	}
	switch {
	case t.Prometheus != nil && t.Scrape != nil:
		add("traffic: prometheus and scrape are both set; choose one")
	case t.Prometheus != nil:
		p := t.Prometheus
		if err := httpURL(p.URL); err != nil {
			add("traffic.prometheus.url: %w", err)
		}
		if p.TokenFile != "" && p.TokenEnv != "" {
			add("traffic.prometheus: token_file and token_env are both set; choose one")
		}
		if p.TokenEnv != "" && !envNameRE.MatchString(p.TokenEnv) {
			add("traffic.prometheus.token_env %q: not an environment variable name", p.TokenEnv)
		}
		path(&p.TokenFile)
		path(&p.CABundle)
		if len(p.ExtraQueryParams) > maxListLen {
			add("traffic.prometheus.extra_query_params: at most %d", maxListLen)
		}
		if p.Timeout < 0 || p.Timeout > 10*time.Minute {
			add("traffic.prometheus.timeout %s: want 0 (10s) to 10m", p.Timeout)
		}
	case t.Scrape != nil:
		if err := httpURL(t.Scrape.URL); err != nil {
			add("traffic.scrape.url: %w", err)
		}
		if t.Scrape.Interval < 0 || t.Scrape.Interval > time.Minute {
			add("traffic.scrape.interval %s: want 0 (2s) to 1m", t.Scrape.Interval)
		}
		if t.Scrape.Interval == 0 {
			t.Scrape.Interval = DefaultScrapeInterval
		}
	default:
		add("traffic: set prometheus (url, token_file...) or scrape (url)")
	}
	return errs
}

func (d *HostedDeployment) resolveFPM() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if d.FPM == nil {
		if d.Connector.Kind != ConnectorKubernetes && d.Connector.Kind != ConnectorLocal {
			return nil
		}
		d.FPM = &FPMSpec{}
	}
	f := d.FPM
	if f.Discovery == "" {
		f.Discovery = DiscoveryConnector
		if len(f.Endpoints) > 0 {
			f.Discovery = DiscoveryStatic
		}
	}
	switch f.Discovery {
	case DiscoveryConnector:
		if d.Connector.Kind != ConnectorKubernetes && d.Connector.Kind != ConnectorLocal {
			add("fpm.discovery connector: the %s connector knows no engines; list fpm.endpoints (discovery static)", d.Connector.Kind)
		}
		if len(f.Endpoints) > 0 {
			add("fpm.endpoints: only for discovery static")
		}
	case DiscoveryStatic:
		if len(f.Endpoints) == 0 {
			add("fpm.endpoints: required for discovery static")
		}
		if len(f.Endpoints) > maxListLen {
			add("fpm.endpoints: %d, at most %d", len(f.Endpoints), maxListLen)
		}
		for i, e := range f.Endpoints {
			if !strings.HasPrefix(e.Address, "tcp://") && !strings.HasPrefix(e.Address, "ipc://") {
				add("fpm.endpoints[%d].address %q: want tcp://host:port (or ipc://path)", i, e.Address)
			}
			if e.Component != string(scaling.Prefill) && e.Component != string(scaling.Decode) {
				add("fpm.endpoints[%d].component %q: want prefill or decode", i, e.Component)
			}
		}
	default:
		add("fpm.discovery %q: want connector or static", f.Discovery)
	}
	if f.PortName == "" {
		f.PortName = DefaultFPMPortName
	}
	if f.Port < 0 || f.Port > 65535 {
		add("fpm.port %d: want 1 to 65535 (0: only pods with a port named %q are subscribed)", f.Port, f.PortName)
	}
	if f.MaxAge == 0 {
		f.MaxAge = DefaultFPMMaxAge
	}
	if f.MaxAge < time.Second || f.MaxAge > 10*time.Minute {
		add("fpm.max_age %s: want 1s to 10m", f.MaxAge)
	}
	if f.DiscoveryInterval == 0 {
		f.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if f.DiscoveryInterval < 100*time.Millisecond || f.DiscoveryInterval > 10*time.Minute {
		add("fpm.discovery_interval %s: want 100ms to 10m", f.DiscoveryInterval)
	}
	return errs
}

// shortestWindow is the shortest traffic window a planner asks for: its load interval when
// the load loop runs, its throughput interval when the throughput loop runs (0: none).
func shortestWindow(cfg *config.Config) time.Duration {
	var w time.Duration
	for _, on := range []struct {
		enabled bool
		seconds float64
	}{{cfg.EnableLoadScaling, float64(cfg.LoadAdjustmentIntervalSeconds)}, {cfg.EnableThroughputScaling, float64(cfg.ThroughputAdjustmentIntervalSeconds)}} {
		d := time.Duration(on.seconds * float64(time.Second))
		if on.enabled && d > 0 && (w == 0 || d < w) {
			w = d
		}
	}
	return w
}

// httpURL checks an http(s) URL with a host.
func httpURL(s string) error {
	if s == "" {
		return errors.New("required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want http(s)://host[:port][/path]", s)
	}
	return nil
}
