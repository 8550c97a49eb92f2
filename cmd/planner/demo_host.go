package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/worker"
)

// The demo's deployment is an ordinary hosted deployment: the demo writes a deployments file
// (deployments.yaml in its output folder) whose local connector runs simulated engines, and
// the worker hosts it exactly as `planner worker --deployments deployments.yaml` would.

// demoDeploymentsOptions are the inputs of the demo's deployments file.
type demoDeploymentsOptions struct {
	out, self, frontendURL, profileDir, plannerConfig string
	gpus                                              int
	startupDelay                                      time.Duration
	initialPrefill, initialDecode                     int
	// agg runs one pool of aggregated engines as the decode component (no prefill pool).
	agg bool
	// prefixCaching runs the prefill (or aggregated) engines with --prefix-caching.
	prefixCaching bool
}

// localStateFile is the local connector's state file in the demo's output folder.
const localStateFile = "local-state.json"

// demoLocalNamespace is the local connector's namespace of demo/llama (<namespace>_<name>).
const demoLocalNamespace = "demo_llama"

// writeDemoDeployments writes the demo's deployments file and returns its path.
func writeDemoDeployments(o demoDeploymentsOptions) (string, error) {
	engineCmd := func(role string) []string {
		return []string{o.self, "engine", "--role", role, "--name", "{name}", "--listen", "127.0.0.1:{http_port}",
			"--fpm-endpoint", "tcp://127.0.0.1:{fpm_port}", "--frontend", o.frontendURL, "--profile", o.profileDir,
			"--startup-delay", o.startupDelay.String()}
	}
	gpus := make([]int, o.gpus)
	for i := range gpus {
		gpus[i] = i
	}
	// The engines run with the mocker's defaults; the KV capacity is the profile's (945029
	// tokens) in whole 64-token blocks.
	eng := worker.EngineSpec{MaxNumBatchedTokens: engine.DefaultMaxNumBatchedTokens, MaxNumSeqs: engine.DefaultMaxNumSeqs,
		MaxKVTokens: 945029 / engine.DefaultBlockSize * engine.DefaultBlockSize, ContextLength: 16384}
	pool := func(role string) *worker.LocalComponentSpec {
		cmd := engineCmd(role)
		if o.prefixCaching && role != "decode" {
			cmd = append(cmd, "--prefix-caching")
		}
		return &worker.LocalComponentSpec{Command: cmd, GPUsPerWorker: 1, ReadyURL: "http://127.0.0.1:{http_port}/healthz", Engine: eng}
	}
	p, d := o.initialPrefill, o.initialDecode
	spec := &worker.LocalSpec{StateFile: localStateFile, GPUs: gpus, LogDir: "logs", DrainTimeout: 60 * time.Second, StartTimeout: o.startupDelay + time.Minute,
		Initial: &worker.InitialSpec{Prefill: &p, Decode: &d}, Prefill: pool("prefill"), Decode: pool("decode")}
	if o.agg {
		// Aggregated engines are the decode component, as in Dynamo: their inventory,
		// capabilities and FPMs are the decode pool's.
		spec.Initial, spec.Prefill, spec.Decode = &worker.InitialSpec{Decode: &d}, nil, pool("aggregated")
	}
	file := worker.DeploymentsFile{Deployments: []worker.HostedDeployment{{
		Deployment:    "demo/llama",
		PlannerConfig: o.plannerConfig,
		Connector:     worker.ConnectorSpec{Kind: worker.ConnectorLocal, Local: spec},
		Traffic:       &worker.TrafficSpec{Scrape: &worker.ScrapeSpec{URL: o.frontendURL + "/metrics", Interval: time.Second}},
		FPM:           &worker.FPMSpec{Discovery: worker.DiscoveryConnector},
	}}}
	data, err := yaml.Marshal(file)
	if err != nil {
		return "", err
	}
	head := "# Written by planner demo: the demo's deployment, hosted by the worker like any other\n" +
		"# (planner worker --deployments deployments.yaml). Relative paths are relative to this folder.\n"
	path := filepath.Join(o.out, "deployments.yaml")
	return path, os.WriteFile(path, append([]byte(head), data...), 0o644)
}

// stopPreviousDemo stops and forgets the engines a previous demo left in its folder: they
// registered with a frontend that is gone.
func stopPreviousDemo(ctx context.Context, out string) error {
	stateFile := filepath.Join(out, localStateFile)
	if _, err := os.Stat(stateFile); err != nil {
		return nil
	}
	zero := 0
	cfg := local.Config{Namespace: demoLocalNamespace, StateFile: stateFile, GPUs: []int{0},
		Prefill: local.ComponentConfig{Command: []string{"true"}}, Decode: local.ComponentConfig{Command: []string{"true"}}}
	old, err := local.Open(cfg, connectors.Targets{Prefill: &zero, Decode: &zero})
	if err != nil {
		return fmt.Errorf("a previous demo left %s, which cannot be read (%w): remove it", stateFile, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = old.StopAll(sctx)
	cancel()
	_ = old.Close()
	if err != nil {
		return fmt.Errorf("stop the previous demo's engines (%s): %w", stateFile, err)
	}
	return os.Remove(stateFile)
}

// poolCounts are one pool's processes by state, and its pending engines (waiting for the
// GPUs of draining ones: no process yet).
type poolCounts struct{ Ready, Starting, Draining, Pending int }

// Total is every provisioned replica (they all hold GPUs; pending ones hold none yet).
func (p poolCounts) Total() int { return p.Ready + p.Starting + p.Draining }

// String renders "3 +1 +1p -1": ready, starting, pending, draining.
func (p poolCounts) String() string {
	s := strconv.Itoa(p.Ready)
	if p.Starting > 0 {
		s += " +" + strconv.Itoa(p.Starting)
	}
	if p.Pending > 0 {
		s += " +" + strconv.Itoa(p.Pending) + "p"
	}
	if p.Draining > 0 {
		s += " -" + strconv.Itoa(p.Draining)
	}
	return s
}

// demoPools reads the local connector's processes by pool and state; agg has no prefill
// pool.
type demoPools struct {
	l   *local.Local
	agg bool
}

// Counts returns a pool's processes by state ("prefill" or "decode").
func (h demoPools) Counts(component string) poolCounts {
	return poolCounts(h.l.Counts(scaling.Component(component)))
}

// WaitReady waits until no engine is starting and at least one of each pool is ready.
func (h demoPools) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p, d := h.Counts("prefill"), h.Counts("decode")
		if (p.Ready > 0 || h.agg) && d.Ready > 0 && p.Starting == 0 && d.Starting == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("engines not ready after %s (prefill %s, decode %s): see the logs folder", timeout, p, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
