package worker

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/workflows"
)

func noEnv(string) (string, bool) { return "", false }

func TestParseDeploymentsResolvesDefaultsAndPaths(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planner.yaml"), []byte(`
mode: disagg
environment: kubernetes
namespace: dynamo-llama
model_name: Llama
optimization_target: throughput
load_adjustment_interval: 5
`), 0o644))
	df, err := ParseDeployments([]byte(`
deployments:
  - deployment: dynamo/llama
    planner_config: planner.yaml
    connector: {kind: kubernetes}
    traffic:
      prometheus: {url: "http://prometheus:9090", token_file: token}
  - deployment: lab/local
    connector:
      kind: local
      local:
        state_file: state/local.json
        gpus: [0, 1, 2, 3]
        decode:
          command: [engine, --port, "{http_port}"]
          engine: {max_num_seqs: 256}
  - deployment: ext/virtual
    connector: {kind: virtual}
    fpm:
      endpoints: [{address: "tcp://10.0.0.1:20380", component: decode}]
`), dir, noEnv)
	require.NoError(t, err)
	require.Len(t, df.Deployments, 3)

	k := df.Deployments[0]
	require.Equal(t, workflows.Deployment{Namespace: "dynamo", Name: "llama"}, k.ID())
	require.Equal(t, "dynamo", k.Connector.Kubernetes.Namespace, "the DGD's namespace defaults to the deployment's")
	require.Equal(t, "llama", k.Connector.Kubernetes.DGD)
	require.Equal(t, "Llama", k.Traffic.Model, "the model comes from the planner config")
	require.Equal(t, "dynamo-llama", k.Traffic.DynamoNamespace)
	require.Equal(t, filepath.Join(dir, "token"), k.Traffic.Prometheus.TokenFile, "relative to the file's folder")
	require.Equal(t, DiscoveryConnector, k.FPM.Discovery, "kubernetes discovers its engines")
	require.Equal(t, "fpm", k.FPM.PortName)
	require.Equal(t, DefaultFPMMaxAge, k.FPM.MaxAge)
	require.NotNil(t, k.Config())

	l := df.Deployments[1]
	require.Equal(t, filepath.Join(dir, "state/local.json"), l.Connector.Local.StateFile)
	require.Nil(t, l.Traffic)
	require.Equal(t, DiscoveryConnector, l.FPM.Discovery)
	cfg, initial := localConfig(l, nil)
	require.Equal(t, "lab_local", cfg.Namespace)
	require.Nil(t, initial.Prefill, "no prefill pool")
	require.Equal(t, 1, *initial.Decode, "one worker per pool to begin with")
	require.Equal(t, int64(256), cfg.Decode.Capabilities.MaxNumSeqs)
	require.Nil(t, l.Config())

	v := df.Deployments[2]
	require.Equal(t, DiscoveryStatic, v.FPM.Discovery, "endpoints listed: static")
}

func TestParseDeploymentsRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "noop.yaml"), []byte(`{"mode": "decode", "environment": "noop", "optimization_target": "throughput", "load_adjustment_interval": 2}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "oversized.yaml"), []byte(`{"mode": "decode", "environment": "noop", "min_endpoint": 9, "max_gpu_budget": 8}`), 0o644))
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"empty", ``, []string{"empty: want a list under deployments"}},
		{"unknown key", "deployments:\n  - deployment: a/b\n    conector: {kind: noop}\n", []string{"field conector not found"}},
		{"no deployments", "deployments: []\n", []string{"deployments: the list is empty"}},
		{"bad name", "deployments:\n  - deployment: ab\n    connector: {kind: noop}\n", []string{`deployment "ab": want <namespace>/<name>`}},
		{"slash in name", "deployments:\n  - deployment: a/b/c\n    connector: {kind: noop}\n", []string{`must not contain '/'`}},
		{"duplicate", "deployments:\n  - {deployment: a/b, connector: {kind: noop}}\n  - {deployment: a/b, connector: {kind: noop}}\n",
			[]string{"deployments[1]: deployment a/b is also deployments[0]'s"}},
		{"one DGD twice", "deployments:\n  - {deployment: a/b, connector: {kind: kubernetes}}\n  - {deployment: x/y, connector: {kind: kubernetes, kubernetes: {namespace: a, dgd: b}}}\n",
			[]string{"deployments[1]: DynamoGraphDeployment a/b is also deployments[0]'s"}},
		{"one state file twice", "deployments:\n  - {deployment: a/b, connector: {kind: local, local: {state_file: s.json, gpus: [0], decode: {command: [x]}}}}\n" +
			"  - {deployment: a/c, connector: {kind: local, local: {state_file: ./s.json, gpus: [1], decode: {command: [x]}}}}\n",
			[]string{"deployments[1]: local state file"}},
		{"kubernetes names", "deployments:\n  - {deployment: Prod/Llama_1, connector: {kind: kubernetes}}\n",
			[]string{`connector.kubernetes.namespace "Prod": not a Kubernetes namespace name`, `connector.kubernetes.dgd "Llama_1": not a Kubernetes object name`}},
		{"unknown kind", "deployments:\n  - {deployment: a/b, connector: {kind: slurm}}\n", []string{`connector.kind "slurm": want kubernetes, local, virtual or noop`}},
		{"no kind", "deployments:\n  - {deployment: a/b}\n", []string{"connector.kind: required"}},
		{"local without its settings", "deployments:\n  - {deployment: a/b, connector: {kind: local}}\n", []string{"connector.local: required for kind local"}},
		{"local settings", "deployments:\n  - deployment: a/b\n    connector:\n      kind: local\n      local: {gpus: [0], initial: {decode: 3}, decode: {gpus_per_worker: 2}}\n",
			[]string{"connector.local.state_file: required", "connector.local.decode.command: required",
				"connector.local.decode.gpus_per_worker 2: want 0 (1) to 1", "connector.local.initial.decode 3: want 0 to 1"}},
		{"settings of another kind", "deployments:\n  - deployment: a/b\n    connector: {kind: noop, local: {state_file: x}}\n",
			[]string{`connector.local: set, but the kind is "noop"`}},
		{"traffic without a source", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, traffic: {model: m, dynamo_namespace: n}}\n",
			[]string{"traffic: set prometheus (url, token_file...) or scrape (url)"}},
		{"traffic without model", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, traffic: {scrape: {url: 'http://f/metrics'}}}\n",
			[]string{"traffic.model: required", "traffic.dynamo_namespace: required"}},
		{"two token sources", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, traffic: {model: m, dynamo_namespace: n, prometheus: {url: 'http://p', token_file: t, token_env: T}}}\n",
			[]string{"token_file and token_env are both set"}},
		{"bad url", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, traffic: {model: m, dynamo_namespace: n, prometheus: {url: 'ftp://p'}}}\n",
			[]string{`traffic.prometheus.url: "ftp://p": want http(s)://host`}},
		{"fpm discovery on noop", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, fpm: {discovery: connector}}\n",
			[]string{"fpm.discovery connector: the noop connector knows no engines"}},
		{"bad endpoint", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, fpm: {endpoints: [{address: '10.0.0.1:5', component: encode}]}}\n",
			[]string{`fpm.endpoints[0].address "10.0.0.1:5": want tcp://host:port`, `fpm.endpoints[0].component "encode": want prefill or decode`}},
		{"planner config of another environment", "deployments:\n  - {deployment: a/b, planner_config: noop.yaml, connector: {kind: virtual}}\n",
			[]string{`planner_config: environment "noop", but the connector is "virtual"`}},
		{"scrape slower than the ticks", "deployments:\n  - {deployment: a/b, planner_config: noop.yaml, connector: {kind: noop}, traffic: {model: m, dynamo_namespace: n, scrape: {url: 'http://f/metrics', interval: 2s}}}\n",
			[]string{"traffic.scrape.interval 2s: at most half the planner's shortest traffic window (2s)"}},
		{"minimum over the budget", "deployments:\n  - {deployment: a/b, planner_config: oversized.yaml, connector: {kind: noop}}\n",
			[]string{"planner_config: the minimum endpoints (decode 9 × 1 GPUs) need 9 GPUs, over max_gpu_budget 8"}},
		{"missing planner config", "deployments:\n  - {deployment: a/b, planner_config: nope.yaml, connector: {kind: noop}}\n",
			[]string{"planner_config: planner config: open"}},
		{"absurd string", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, traffic: {model: " + strings.Repeat("m", 5000) + ", dynamo_namespace: n, scrape: {url: 'http://f'}}}\n",
			[]string{"traffic.model: 5000 characters, at most 4096"}},
		{"absurd durations", "deployments:\n  - {deployment: a/b, connector: {kind: noop}, fpm: {endpoints: [{address: 'tcp://a:1', component: decode}], max_age: 1ms, discovery_interval: 1000h}}\n",
			[]string{"fpm.max_age 1ms: want 1s to 10m", "fpm.discovery_interval 1000h0m0s: want 100ms to 10m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDeployments([]byte(tc.file), dir, noEnv)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestLoadDeploymentsBoundsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, []byte("# "+strings.Repeat("x", MaxDeploymentsFileBytes)), 0o644))
	_, err := LoadDeployments(path, noEnv)
	require.ErrorContains(t, err, "larger than the 1048576-byte limit")
	_, err = LoadDeployments(filepath.Join(t.TempDir(), "absent.yaml"), noEnv)
	require.ErrorContains(t, err, "deployments file: open")
	var b strings.Builder
	b.WriteString("deployments:\n")
	for i := range MaxDeployments + 1 {
		b.WriteString("  - {deployment: a/b" + strings.Repeat("x", i%3) + ", connector: {kind: noop}}\n")
	}
	_, err = ParseDeployments([]byte(b.String()), t.TempDir(), noEnv)
	require.ErrorContains(t, err, "at most 256 per worker")
}

func TestScrapeIntervalDefault(t *testing.T) {
	df, err := ParseDeployments([]byte("deployments:\n  - {deployment: a/b, connector: {kind: noop}, traffic: {model: m, dynamo_namespace: n, scrape: {url: 'http://f/metrics'}}}\n"), t.TempDir(), noEnv)
	require.NoError(t, err)
	require.Equal(t, DefaultScrapeInterval, df.Deployments[0].Traffic.Scrape.Interval, "the default scrape interval")
	require.Equal(t, 2*time.Second, DefaultScrapeInterval)
}

// TestDeploymentsFileLogsConfigWarnings: the warnings of loading a deployment's planner
// config (older options, settings not acted on) are kept and logged by the worker.
func TestDeploymentsFileLogsConfigWarnings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planner.yaml"), []byte(`
mode: decode
environment: noop
optimization_target: latency
metric-pulling-interval: 1
control_api_port: 9100
`), 0o644))
	df, err := ParseDeployments([]byte("deployments:\n  - {deployment: a/b, planner_config: planner.yaml, connector: {kind: noop}}\n"), dir, noEnv)
	require.NoError(t, err)
	warns := df.Deployments[0].ConfigWarnings()
	require.Len(t, warns, 2)
	require.Contains(t, warns[0], "line 5: metric-pulling-interval: ignored")
	require.Contains(t, warns[1], "line 6: control_api_port is accepted for compatibility with Dynamo and ignored")

	var buf bytes.Buffer
	df.LogWarnings(slog.New(slog.NewJSONHandler(&buf, nil)))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	for i, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		require.Equal(t, "WARN", rec["level"])
		require.Equal(t, "a/b", rec["deployment"])
		require.Equal(t, warns[i], rec["warning"])
	}
}
