package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/workflows"
)

// localHostOptions describe a simulated deployment run by this process: engines supervised
// by the local connector, their FPMs read over ZeroMQ, the frontend's traffic scraped.
type localHostOptions struct {
	Deployment   workflows.Deployment
	Out          string
	Self         string
	GPUs         int
	FrontendURL  string
	ProfileDir   string
	StartupDelay time.Duration
	Model        string
	Logger       *slog.Logger
	// Initial are the prefill and decode replicas to start with.
	Initial [2]int
}

// localStateFile is the local connector's state file in the demo's output folder.
const localStateFile = "local-state.json"

// localHost is what a worker hosts for one simulated deployment.
type localHost struct {
	local   *local.Local
	store   *observe.FPMStore
	sub     *observe.Subscriber
	traffic *observe.ScrapeTraffic
	logger  *slog.Logger
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startLocalHost opens the local connector (starting the initial engines), the FPM
// subscriber that follows the ready engines, and the frontend scraper.
func startLocalHost(ctx context.Context, o localHostOptions) (*localHost, error) {
	engineCmd := func(role string) []string {
		return []string{o.Self, "engine", "--role", role, "--name", "{name}", "--listen", "127.0.0.1:{http_port}",
			"--fpm-endpoint", "tcp://127.0.0.1:{fpm_port}", "--frontend", o.FrontendURL, "--profile", o.ProfileDir,
			"--startup-delay", o.StartupDelay.String()}
	}
	gpus := make([]int, o.GPUs)
	for i := range gpus {
		gpus[i] = i
	}
	// The engines run with the mocker's defaults; the KV capacity is the profile's
	// (945029 tokens) in whole 64-token blocks.
	caps := scaling.EngineCapabilities{MaxNumBatchedTokens: engine.DefaultMaxNumBatchedTokens, MaxNumSeqs: engine.DefaultMaxNumSeqs,
		MaxKVTokens: 945029 / engine.DefaultBlockSize * engine.DefaultBlockSize, ContextLength: 16384}
	cfg := local.Config{
		Namespace: o.Deployment.Namespace, StateFile: filepath.Join(o.Out, localStateFile), GPUs: gpus,
		LogDir: filepath.Join(o.Out, "logs"), DrainTimeout: 60 * time.Second, StartTimeout: o.StartupDelay + time.Minute,
		Prefill: local.ComponentConfig{Command: engineCmd("prefill"), GPUsPerWorker: 1, ReadyURL: "http://127.0.0.1:{http_port}/healthz", Capabilities: caps},
		Decode:  local.ComponentConfig{Command: engineCmd("decode"), GPUsPerWorker: 1, ReadyURL: "http://127.0.0.1:{http_port}/healthz", Capabilities: caps},
		Logger:  o.Logger,
	}
	// A previous demo's deployment in the same folder is stopped and forgotten: its engines
	// registered with a frontend that is gone.
	if _, err := os.Stat(cfg.StateFile); err == nil {
		zero := 0
		old, err := local.Open(cfg, connectors.Targets{Prefill: &zero, Decode: &zero})
		if err != nil {
			return nil, fmt.Errorf("a previous demo left %s, which cannot be read (%w): remove it", cfg.StateFile, err)
		}
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = old.StopAll(sctx)
		cancel()
		_ = old.Close()
		if err != nil {
			return nil, fmt.Errorf("stop the previous demo's engines (%s): %w", cfg.StateFile, err)
		}
		if err := os.Remove(cfg.StateFile); err != nil {
			return nil, err
		}
	}
	p, d := o.Initial[0], o.Initial[1]
	l, err := local.Open(cfg, connectors.Targets{Prefill: &p, Decode: &d})
	if err != nil {
		return nil, fmt.Errorf("local connector: %w", err)
	}
	h := &localHost{local: l, store: observe.NewFPMStore(), logger: o.Logger}
	if h.sub, err = observe.NewSubscriber(h.store, o.Logger); err != nil {
		_ = l.StopAll(context.Background())
		return nil, fmt.Errorf("FPM subscriber: %w", err)
	}
	if h.traffic, err = observe.NewScrapeTraffic(observe.ScrapeOptions{URL: o.FrontendURL + "/metrics", Model: o.Model,
		Namespace: o.Deployment.Namespace, Interval: time.Second, Logger: o.Logger}); err != nil {
		_ = h.sub.Close()
		_ = l.StopAll(context.Background())
		_ = l.Close()
		return nil, fmt.Errorf("frontend scraper: %w", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Add(3)
	go func() {
		defer h.wg.Done()
		if err := h.sub.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
			o.Logger.Error("FPM subscriber stopped", "error", err)
		}
	}()
	go func() {
		defer h.wg.Done()
		if err := h.traffic.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
			o.Logger.Error("frontend scraper stopped", "error", err)
		}
	}()
	go func() {
		defer h.wg.Done()
		h.followEngines(rctx)
	}()
	return h, nil
}

// followEngines keeps the FPM subscriptions on the ready engines (Dynamo's planner sees the
// workers its discovery lists: a starting or draining engine is not one of them).
func (h *localHost) followEngines(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		eps := map[string]observe.Role{}
		for _, w := range h.local.Workers() {
			if w.State != local.Ready {
				continue
			}
			role := observe.RoleDecode
			if w.Component == scaling.Prefill {
				role = observe.RolePrefill
			}
			eps[w.FPMEndpoint()] = role
		}
		if err := h.sub.SetEndpoints(eps); err != nil {
			h.logger.Warn("FPM subscriptions", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Hosted is what the activities need.
func (h *localHost) Hosted() activities.Hosted {
	return activities.Hosted{Connector: h.local, FPM: fpmReader{h}, Traffic: h.traffic}
}

// fpmReader reads the store for the observe activity.
type fpmReader struct{ h *localHost }

// fpmMaxAge drops an engine whose last message (heartbeats are sent every second when idle)
// is older than this.
const fpmMaxAge = 10 * time.Second

func (r fpmReader) ReadFPM(now time.Time) (*scaling.FPMObservations, error) {
	obs, st := r.h.store.Snapshot(now, fpmMaxAge)
	if st.StaleWorkers > 0 {
		r.h.logger.Warn("engines without a recent FPM are left out", "stale", st.Stale)
	}
	if st.Malformed > 0 {
		r.h.logger.Debug("malformed FPMs dropped so far", "count", st.Malformed)
	}
	return &obs, nil
}

// poolCounts are one pool's processes by state.
type poolCounts struct{ Ready, Starting, Draining int }

// Total is every provisioned replica (they all hold GPUs).
func (p poolCounts) Total() int { return p.Ready + p.Starting + p.Draining }

// String renders "3 +1 -1": ready, starting, draining.
func (p poolCounts) String() string {
	s := strconv.Itoa(p.Ready)
	if p.Starting > 0 {
		s += " +" + strconv.Itoa(p.Starting)
	}
	if p.Draining > 0 {
		s += " -" + strconv.Itoa(p.Draining)
	}
	return s
}

// Counts returns a pool's processes by state ("prefill" or "decode").
func (h *localHost) Counts(component string) poolCounts {
	var c poolCounts
	for _, w := range h.local.Workers() {
		if string(w.Component) != component {
			continue
		}
		switch w.State {
		case local.Ready:
			c.Ready++
		case local.Starting:
			c.Starting++
		case local.Draining:
			c.Draining++
		}
	}
	return c
}

// WaitReady waits until no engine is starting and at least one of each pool is ready.
func (h *localHost) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p, d := h.Counts("prefill"), h.Counts("decode")
		if p.Ready > 0 && d.Ready > 0 && p.Starting == 0 && d.Starting == 0 {
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

// Stop stops every engine (SIGTERM, drain) and the observers.
func (h *localHost) Stop(ctx context.Context) error {
	err := h.local.StopAll(ctx)
	h.cancel()
	h.wg.Wait()
	_ = h.sub.Close()
	_ = h.local.Close()
	return err
}
