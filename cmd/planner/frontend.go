package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/llmplanner/planner/sim/frontend"
	"github.com/llmplanner/planner/sim/router"
)

func init() {
	register(command{
		name:    "frontend",
		summary: "run a simulated Dynamo frontend: routes requests to registered engines, serves dynamo_frontend_* metrics",
		run:     runFrontend,
	})
}

func runFrontend(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("frontend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("listen", "127.0.0.1:8000", "HTTP address: /v1/completions, /v1/engines, /metrics, /healthz")
	model := fs.String("model", "nvidia/Llama-3.1-8B-Instruct-FP8", "model label of the metrics")
	ns := fs.String("namespace", "demo", "dynamo_namespace label of the metrics")
	mode := fs.String("mode", "disagg", "disagg (prefill then decode engines) or agg (aggregated engines)")
	ttl := fs.Duration("engine-ttl", 3*time.Second, "stop routing to an engine (and drop its KV-router prediction) this long after its last heartbeat; forget it after 10 times this")
	routerMode := fs.String("router", "least_loaded", "routing: least_loaded (fewest in-flight requests), round_robin, or kv (Dynamo's KV router: cached prefix blocks, predicted from routing decisions on engines registered with --prefix-caching, against in-flight tokens; observes dynamo_component_router_kv_hit_rate, 0 on engines without a prefix cache)")
	kvTTL := fs.Duration("kv-index-ttl", frontend.DefaultKVIndexTTL, "kv router: how long a routed prompt block is predicted to stay cached on its engine")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner frontend [flags]")
		fmt.Fprintln(stderr, "\nEngines (planner engine --frontend URL) register here; requests (POST /v1/completions {isl, osl})")
		fmt.Fprintln(stderr, "go to a routable engine of each role, as --router picks.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	logger, err := newLogger(stderr, *level, "text")
	if err != nil {
		return err
	}
	f, err := frontend.New(frontend.Options{Model: *model, Namespace: *ns, Mode: frontend.Mode(*mode), EngineTTL: *ttl,
		Router: router.Mode(*routerMode), KVIndexTTL: *kvTTL, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	logger.Info("frontend serving", "address", ln.Addr().String(), "model", *model, "namespace", *ns, "mode", *mode, "router", *routerMode)
	return serveUntilDone(ctx, ln, f)
}

// serveUntilDone serves h on ln until ctx ends, then shuts down gracefully (10 s).
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
