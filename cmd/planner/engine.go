package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/engineapi"
	"github.com/llmplanner/planner/sim/fpmpub"
	"github.com/llmplanner/planner/sim/openai"
)

func init() {
	register(command{
		name:    "engine",
		summary: "run a simulated LLM engine (Dynamo mocker-style): HTTP requests in, Forward Pass Metrics out over ZeroMQ",
		run:     runEngine,
	})
}

func runEngine(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "prefill, decode or aggregated (required)")
	name := fs.String("name", "", "worker name, also the FPM worker_id (required)")
	listen := fs.String("listen", "127.0.0.1:0", "HTTP address: POST /v1/generate, GET /healthz")
	fpmEndpoint := fs.String("fpm-endpoint", "", "ZeroMQ endpoint the FPM publisher binds, e.g. tcp://127.0.0.1:20380 (required)")
	frontendURL := fs.String("frontend", "", "frontend base URL to register with (heartbeat every second); empty: do not register")
	profileDir := fs.String("profile", "", "pre-deployment profile directory (prefill/decode raw data, NPZ or JSON); empty: the mocker's polynomial timing")
	startup := fs.Duration("startup-delay", 0, "simulated start-up time before the engine is ready (model load)")
	drainTimeout := fs.Duration("drain-timeout", 50*time.Second, "on SIGTERM, wait at most this long for in-flight requests")
	speedup := fs.Float64("speedup", 1, "speed-up ratio of every pass (the mocker's speedup_ratio)")
	maxSeqs := fs.Int("max-num-seqs", engine.DefaultMaxNumSeqs, "max_num_seqs")
	maxTokens := fs.Int("max-num-batched-tokens", engine.DefaultMaxNumBatchedTokens, "max_num_batched_tokens")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	model := fs.String("model", "nvidia/Llama-3.1-8B-Instruct-FP8", "served model name of the OpenAI API (aggregated role)")
	maxModelLen := fs.Int("max-model-len", 16384, "context limit in tokens of the OpenAI API (prompt + max_tokens), reported by /v1/models")
	prefixCaching := fs.Bool("prefix-caching", false, "keep a prefix cache of the requests' 512-token hash blocks (prefill and aggregated roles; LRU within the KV capacity), and tell the frontend, whose KV router predicts cached blocks only on such engines")
	tp := fs.Int("tp", 1, "tensor parallelism: scale the timing model to this many GPUs (engine.TensorParallelTiming; docs/profiling.md)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner engine --role prefill|decode|aggregated --name N --fpm-endpoint tcp://... [flags]")
		fmt.Fprintln(stderr, "\nA GPU-free engine: continuous batching, chunked prefill, KV blocks with preemption, pass times")
		fmt.Fprintln(stderr, "from a measured profile. It publishes one FPM per pass (and a heartbeat when idle) like Dynamo's")
		fmt.Fprintln(stderr, "engines, and drains on SIGTERM: no new requests, in-flight ones finish, then it exits.")
		fmt.Fprintln(stderr, "An aggregated engine also speaks the OpenAI API (/v1/completions, /v1/chat/completions, streaming,")
		fmt.Fprintln(stderr, "/v1/models) and serves vLLM-style /metrics (vllm:cache_config_info), for `planner profile`.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *role == "" || *name == "" || *fpmEndpoint == "" {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	logger, err := newLogger(stderr, *level, "text")
	if err != nil {
		return err
	}
	logger = logger.With("engine", *name)
	cfg := engine.DefaultConfig(engine.Role(*role))
	cfg.WorkerID, cfg.SpeedupRatio, cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens = *name, *speedup, *maxSeqs, *maxTokens
	cfg.EnablePrefixCaching = *prefixCaching
	var timing engine.Timing = engine.MockerPolynomial()
	if *profileDir != "" {
		p, err := perf.LoadProfile(*profileDir)
		if err != nil {
			return err
		}
		if timing, err = engine.NewProfileTiming(p); err != nil {
			return err
		}
	}
	if *maxModelLen < 2 || *maxModelLen > 1<<20 {
		return fmt.Errorf("--max-model-len %d: must be in [2, %d]", *maxModelLen, 1<<20)
	}
	if *tp != 1 {
		if timing, err = engine.NewTensorParallelTiming(timing, *tp); err != nil {
			return err
		}
	}
	eng, err := engine.New(cfg, timing)
	if err != nil {
		return err
	}
	pub, err := fpmpub.New(*fpmEndpoint, *name, 0)
	if err != nil {
		return fmt.Errorf("FPM publisher on %s: %w", *fpmEndpoint, err)
	}
	defer pub.Close()
	live := engine.NewLive(eng, engine.LiveOptions{OnPass: func(p engine.Pass) { pub.Publish(p.FPM) }})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	s := &engineServer{name: *name, role: *role, live: live, logger: logger, cfg: eng.Config()}
	if s.role == engineapi.RoleAggregated {
		s.openai, err = openai.New(live, openai.Options{Model: *model, MaxModelLen: *maxModelLen,
			BlockSize: s.cfg.BlockSize, CacheBlocks: s.cfg.NumGPUBlocks, Logger: logger})
		if err != nil {
			return err
		}
	}
	s.url = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: s.mux(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP server stopped", "error", err)
		}
	}()
	logger.Info("engine starting", "role", *role, "http", s.url, "fpm", *fpmEndpoint, "startup_delay", *startup)

	// Start-up: not ready (503 on /healthz, not registered) until the delay has passed.
	select {
	case <-ctx.Done():
		_ = srv.Close()
		return nil
	case <-time.After(*startup):
	}
	s.ready.Store(true)
	logger.Info("engine ready")
	client := engineapi.NewClient(5 * time.Second)
	// The frontend's KV router predicts cached blocks only on engines that say they cache
	// prompts, and at most as many as the KV memory holds.
	caching := s.cfg.EnablePrefixCaching && s.role != engineapi.RoleDecode
	cacheBlocks := s.cfg.NumGPUBlocks / max(1, (s.cfg.HashBlockTokens+s.cfg.BlockSize-1)/s.cfg.BlockSize)
	register := func(draining bool) {
		if *frontendURL == "" {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		reg := engineapi.Registration{Name: *name, Role: *role, URL: s.url, FPMEndpoint: *fpmEndpoint, Draining: draining}
		if caching {
			reg.PrefixCaching, reg.PrefixCacheBlocks = true, cacheBlocks
		}
		if err := engineapi.PostJSON(rctx, client, *frontendURL+engineapi.PathEngines, reg, nil); err != nil {
			logger.Warn("cannot register with the frontend", "frontend", *frontendURL, "error", err)
		}
	}
	register(false)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			register(false)
		}
	}

	// Drain: tell the frontend first, so no new request is routed here, then finish in-flight
	// requests and exit.
	s.draining.Store(true)
	register(true)
	live.Drain()
	logger.Info("draining", "in_flight", live.Load().Running+live.Load().Waiting)
	select {
	case <-live.Done():
		logger.Info("drained")
	case <-time.After(*drainTimeout):
		logger.Warn("drain timeout: stopping with requests in flight", "timeout", *drainTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = live.Stop(sctx)
		cancel()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// engineServer serves an engine's HTTP API.
type engineServer struct {
	name, role, url string
	live            *engine.Live
	logger          *slog.Logger
	ready, draining atomic.Bool
	cfg             engine.Config
	openai          *openai.Server // nil unless aggregated
}

func (s *engineServer) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+engineapi.PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case s.draining.Load():
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case !s.ready.Load():
			http.Error(w, "starting", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	mux.HandleFunc("GET /v1/load", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.live.Load())
	})
	mux.HandleFunc("POST "+engineapi.PathGenerate, s.serveGenerate)
	if s.openai != nil {
		s.openai.Register(mux)
	}
	mux.Handle("GET /metrics", openai.MetricsHandler(s.live, s.cfg))
	return mux
}

func (s *engineServer) serveGenerate(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "engine starting", http.StatusServiceUnavailable)
		return
	}
	var req engineapi.GenerateRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := req.Validate(); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	want := map[string]string{engineapi.RolePrefill: engineapi.PhasePrefill, engineapi.RoleDecode: engineapi.PhaseDecode,
		engineapi.RoleAggregated: engineapi.PhaseFull}[s.role]
	if req.Phase != want {
		http.Error(w, fmt.Sprintf("bad request: a %s engine runs phase %q, not %q", s.role, want, req.Phase), http.StatusBadRequest)
		return
	}
	ch, err := s.live.SubmitWith(req.ISL, req.OSL, engine.SubmitOptions{HashIDs: req.HashIDs})
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, engine.ErrDraining) || errors.Is(err, engine.ErrStopped) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			http.Error(w, res.Err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := engineapi.GenerateResponse{FinishedUnixNano: res.Finished.UnixNano(), Worker: s.name,
			HandoffDelayMs: float64(res.HandoffDelay) / float64(time.Millisecond)}
		if !res.FirstToken.IsZero() {
			out.FirstTokenUnixNano = res.FirstToken.UnixNano()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	case <-r.Context().Done():
		// The client went away; the engine still runs the request to completion.
	}
}
