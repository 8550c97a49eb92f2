package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/kubernetes"
	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// Host is what a worker runs for one hosted deployment: its connector, its traffic source and
// its FPM subscriber with endpoint discovery. The planner's observe and apply activities reach
// it through the deployment's host task queue.
type Host struct {
	spec      HostedDeployment
	logger    *slog.Logger
	connector connectors.Connector
	local     *local.Local
	traffic   observe.TrafficSource
	store     *observe.FPMStore
	sub       *observe.Subscriber
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// HostOptions are what opening a host needs besides its spec.
type HostOptions struct {
	// Logger receives the host's logs (slog.Default when nil).
	Logger *slog.Logger
	// LookupEnv reads the worker's environment (tokens named by token_env); os.LookupEnv when
	// nil.
	LookupEnv func(string) (string, bool)
}

// OpenHosts opens every deployment of a file; on an error, the ones opened are closed again.
func OpenHosts(ctx context.Context, df *DeploymentsFile, o HostOptions) ([]*Host, error) {
	var hosts []*Host
	for i := range df.Deployments {
		h, err := OpenHost(ctx, df.Deployments[i], o)
		if err != nil {
			for _, h := range hosts {
				_ = h.Close()
			}
			return nil, fmt.Errorf("deployment %s: %w", df.Deployments[i].Deployment, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// OpenHost builds a deployment's connector (a local one starts its initial workers when its
// state file is new, or adopts the recorded ones), its traffic source and its FPM subscriber,
// and starts their background loops.
func OpenHost(ctx context.Context, spec HostedDeployment, o HostOptions) (_ *Host, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	h := &Host{spec: spec, logger: o.Logger.With("deployment", spec.Deployment)}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	if err := h.openConnector(ctx); err != nil {
		return nil, err
	}
	if err := h.openTraffic(o.LookupEnv); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	if s, ok := h.traffic.(*observe.ScrapeTraffic); ok {
		h.goRun("frontend scraper", func() error { return s.Run(rctx) })
	}
	if spec.FPM != nil {
		h.store = observe.NewFPMStore()
		if h.sub, err = observe.NewSubscriber(h.store, h.logger); err != nil {
			return nil, fmt.Errorf("FPM subscriber: %w", err)
		}
		h.goRun("FPM subscriber", func() error { return h.sub.Run(rctx) })
		discover, err := h.discoverer()
		if err != nil {
			return nil, err
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.followEndpoints(rctx, discover)
		}()
	}
	h.logger.Info("hosting deployment", "connector", spec.Connector.Kind, "traffic", h.trafficKind(), "fpm", h.fpmKind(),
		"host_task_queue", workflows.HostTaskQueue(spec.ID()))
	return h, nil
}

func (h *Host) openConnector(ctx context.Context) error {
	c := h.spec.Connector
	switch c.Kind {
	case ConnectorLocal:
		cfg, initial := localConfig(h.spec, h.logger)
		l, err := local.Open(cfg, initial)
		if err != nil {
			return err
		}
		h.local, h.connector = l, l
	case ConnectorKubernetes:
		k := c.Kubernetes
		rc, err := kubernetes.RESTConfig(k.Kubeconfig, k.Context)
		if err != nil {
			return err
		}
		o := kubernetes.Options{Namespace: k.Namespace, DGD: k.DGD, PrefillComponent: k.PrefillComponent,
			DecodeComponent: k.DecodeComponent, Logger: h.logger}
		if f := h.spec.FPM; f != nil { // resolved: always set for kubernetes
			o.FPMPortName, o.FPMPort = f.PortName, f.Port
		}
		kc, err := kubernetes.New(rc, o)
		if err != nil {
			return err
		}
		if err := kc.Check(ctx); err != nil {
			h.logger.Warn("the DynamoGraphDeployment cannot be read yet; the planner holds until it can", "error", err)
		}
		h.connector = kc
	}
	// virtual: the protocol lives in the workflow; noop: the activities' advisory connector.
	return nil
}

// localConfig converts the file's local connector spec.
func localConfig(spec HostedDeployment, logger *slog.Logger) (local.Config, connectors.Targets) {
	l := spec.Connector.Local
	cfg := local.Config{Namespace: spec.ID().Namespace + "_" + spec.ID().Name, StateFile: l.StateFile, GPUs: l.GPUs, LogDir: l.LogDir,
		DrainTimeout: l.DrainTimeout, StartTimeout: l.StartTimeout, Logger: logger}
	var initial connectors.Targets
	one := func() *int { n := 1; return &n }
	for _, p := range []struct {
		spec   *LocalComponentSpec
		into   *local.ComponentConfig
		target **int
		given  *int
	}{
		{l.Prefill, &cfg.Prefill, &initial.Prefill, initialOf(l.Initial, scaling.Prefill)},
		{l.Decode, &cfg.Decode, &initial.Decode, initialOf(l.Initial, scaling.Decode)},
	} {
		if p.spec == nil {
			continue
		}
		*p.into = local.ComponentConfig{Command: p.spec.Command, GPUsPerWorker: p.spec.GPUsPerWorker, Env: p.spec.Env,
			ReadyURL: p.spec.ReadyURL, Capabilities: p.spec.Engine.Capabilities()}
		*p.target = one()
		if p.given != nil {
			n := *p.given
			*p.target = &n
		}
	}
	return cfg, initial
}

func initialOf(in *InitialSpec, c scaling.Component) *int {
	if in == nil {
		return nil
	}
	if c == scaling.Prefill {
		return in.Prefill
	}
	return in.Decode
}

func (h *Host) openTraffic(lookup func(string) (string, bool)) error {
	t := h.spec.Traffic
	if t == nil {
		return nil
	}
	switch {
	case t.Prometheus != nil:
		p := t.Prometheus
		opts := observe.PrometheusOptions{URL: p.URL, Model: t.Model, Namespace: t.DynamoNamespace, BearerTokenFile: p.TokenFile,
			ExtraQueryParams: p.ExtraQueryParams, Timeout: p.Timeout, Logger: h.logger}
		if p.TokenEnv != "" {
			tok, ok := lookup(p.TokenEnv)
			if !ok || tok == "" {
				return fmt.Errorf("traffic.prometheus.token_env: %s is not set in the worker's environment", p.TokenEnv)
			}
			opts.BearerToken = tok
		}
		if p.TokenFile != "" {
			if _, err := os.Stat(p.TokenFile); err != nil {
				return fmt.Errorf("traffic.prometheus.token_file: %w", err)
			}
		}
		if p.CABundle != "" || p.InsecureSkipVerify {
			tr, err := tlsTransport(p.CABundle, p.InsecureSkipVerify)
			if err != nil {
				return fmt.Errorf("traffic.prometheus: %w", err)
			}
			opts.Transport = tr
		}
		pt, err := observe.NewPrometheusTraffic(opts)
		if err != nil {
			return err
		}
		h.traffic = pt
	case t.Scrape != nil:
		s, err := observe.NewScrapeTraffic(observe.ScrapeOptions{URL: t.Scrape.URL, Model: t.Model, Namespace: t.DynamoNamespace,
			Interval: t.Scrape.Interval, Logger: h.logger})
		if err != nil {
			return err
		}
		h.traffic = s
	}
	return nil
}

// tlsTransport is Prometheus's default transport with a CA bundle or without verification.
func tlsTransport(caBundle string, insecure bool) (http.RoundTripper, error) {
	base, ok := api.DefaultRoundTripper.(*http.Transport)
	if !ok {
		return nil, errors.New("unexpected default transport")
	}
	tr := base.Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // the operator's explicit choice
	if caBundle != "" {
		pem, err := os.ReadFile(caBundle)
		if err != nil {
			return nil, fmt.Errorf("ca_bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_bundle %s: no PEM certificate in it", caBundle)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return tr, nil
}

// discoverer returns the function that lists the FPM endpoints.
func (h *Host) discoverer() (func(context.Context) ([]connectors.Endpoint, error), error) {
	f := h.spec.FPM
	if f.Discovery == DiscoveryStatic {
		eps := make([]connectors.Endpoint, len(f.Endpoints))
		for i, e := range f.Endpoints {
			eps[i] = connectors.Endpoint{Address: e.Address, Component: scaling.Component(e.Component)}
		}
		return func(context.Context) ([]connectors.Endpoint, error) { return eps, nil }, nil
	}
	d, ok := h.connector.(connectors.EndpointDiscoverer)
	if !ok {
		return nil, fmt.Errorf("fpm.discovery connector: the %s connector does not list engines", h.spec.Connector.Kind)
	}
	return d.FPMEndpoints, nil
}

// followEndpoints keeps the subscriptions on the discovered endpoints. A failed discovery
// keeps the previous subscriptions (the engines' FPMs then age out by max_age if they stop).
func (h *Host) followEndpoints(ctx context.Context, discover func(context.Context) ([]connectors.Endpoint, error)) {
	t := time.NewTicker(h.spec.FPM.DiscoveryInterval)
	defer t.Stop()
	failing := false
	for {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		eps, err := discover(dctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				h.logger.Warn("FPM endpoint discovery failed; keeping the current subscriptions", "error", err)
			}
			failing = true
		case err == nil:
			if failing {
				h.logger.Info("FPM endpoint discovery works again", "endpoints", len(eps))
			}
			failing = false
			desired := make(map[string]observe.Role, len(eps))
			for _, e := range eps {
				desired[e.Address] = roleOf(e.Component)
			}
			if err := h.sub.SetEndpoints(desired); err != nil && ctx.Err() == nil {
				h.logger.Warn("FPM subscriptions", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func roleOf(c scaling.Component) observe.Role {
	if c == scaling.Prefill {
		return observe.RolePrefill
	}
	return observe.RoleDecode
}

func (h *Host) goRun(what string, run func() error) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := run(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, observe.ErrSubscriberClosed) {
			h.logger.Error(what+" stopped", "error", err)
		}
	}()
}

func (h *Host) trafficKind() string {
	switch {
	case h.spec.Traffic == nil:
		return "none"
	case h.spec.Traffic.Prometheus != nil:
		return "prometheus " + redacted(h.spec.Traffic.Prometheus.URL)
	default:
		return "scrape " + redacted(h.spec.Traffic.Scrape.URL)
	}
}

// redacted hides a URL's password, for logs.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func (h *Host) fpmKind() string {
	if h.spec.FPM == nil {
		return "none"
	}
	return h.spec.FPM.Discovery
}

// Spec is the hosted deployment's spec, resolved.
func (h *Host) Spec() HostedDeployment { return h.spec }

// Local is the deployment's local connector (nil for other kinds).
func (h *Host) Local() *local.Local { return h.local }

// Hosted is what the activities serve for this deployment.
func (h *Host) Hosted() activities.Hosted {
	hd := activities.Hosted{Connector: h.connector, Traffic: h.traffic}
	if h.store != nil {
		hd.FPM = fpmReader{h}
	}
	return hd
}

// fpmReader reads the FPM store for the observe activity.
type fpmReader struct{ h *Host }

// ReadFPM returns the latest FPM of every engine heard within max_age.
func (r fpmReader) ReadFPM(now time.Time) (*scaling.FPMObservations, error) {
	obs, st := r.h.store.Snapshot(now, r.h.spec.FPM.MaxAge)
	if st.StaleWorkers > 0 {
		r.h.logger.Warn("engines without a recent FPM are left out", "stale", st.Stale)
	}
	if st.Malformed > 0 {
		r.h.logger.Debug("malformed FPMs dropped so far", "count", st.Malformed)
	}
	return &obs, nil
}

// Close stops the observers and the connector's background work. The deployment keeps
// running: a local connector's workers are adopted by the next worker that opens its state
// file, and a Kubernetes deployment is untouched.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		if h.cancel != nil {
			h.cancel()
		}
		if h.sub != nil {
			_ = h.sub.Close()
		}
		h.wg.Wait()
		if h.local != nil {
			_ = h.local.Close()
		}
	})
	return nil
}

// StopDeployment stops a local deployment's workers (SIGTERM, drain, SIGKILL when ctx ends);
// other kinds have nothing this worker runs. The host is closed afterwards.
func (h *Host) StopDeployment(ctx context.Context) error {
	var err error
	if h.local != nil {
		err = h.local.StopAll(ctx)
	}
	_ = h.Close()
	return err
}
