package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/engineapi"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/router"
)

// Mode is how the frontend serves a request.
type Mode string

// Modes.
const (
	// Disaggregated sends the prompt to a prefill engine, then the generation to a decode
	// engine after the KV-transfer delay.
	Disaggregated Mode = "disagg"
	// Aggregated sends the whole request to one aggregated engine.
	Aggregated Mode = "agg"
)

// Options configure a Frontend.
type Options struct {
	Model     string
	Namespace string
	Mode      Mode
	// EngineTTL is how long an engine stays routable after its last heartbeat (default 3 s).
	EngineTTL time.Duration
	// RequestTimeout bounds one engine call (default 5 minutes).
	RequestTimeout time.Duration
	// Router is how an engine of a role is picked ("": router.LeastLoaded, by the
	// frontend's in-flight requests). router.KV scores the prefill (or aggregated) engines
	// by the request's leading hash blocks the frontend predicts they cache, from its own
	// routing decisions (Dynamo's router without KV events): a block routed to an engine
	// that registered with PrefixCaching is taken as cached there for KVIndexTTL (at most
	// the engine's PrefixCacheBlocks, at most 2^18); on an engine without a prefix cache
	// nothing is cached and a request's hit rate is 0. The prediction is dropped when the
	// engine refuses the request, expires (no heartbeat for EngineTTL), drains or
	// re-registers with another URL or cache.
	Router router.Mode
	// KVIndexTTL is how long a routed block is predicted to stay cached (default 120 s,
	// Dynamo's --no-kv-events default).
	KVIndexTTL time.Duration
	Logger     *slog.Logger
}

// DefaultKVIndexTTL is Options.KVIndexTTL's default.
const DefaultKVIndexTTL = 120 * time.Second

// maxIndexBlocks bounds the blocks the KV router predicts per engine (about 30 MB); beyond
// it, or beyond the engine's PrefixCacheBlocks, the least recently routed go first.
const maxIndexBlocks = 1 << 18

// MaxEngines bounds the engines a frontend keeps registered: a registration under a new name
// beyond it is refused (503) until an engine is forgotten (see ForgetAfterTTLs).
const MaxEngines = 4096

// ForgetAfterTTLs is how many EngineTTLs after its last heartbeat an engine is forgotten
// (removed from the frontend, no longer listed). Its KV prediction is dropped as soon as it
// expires, one EngineTTL after its last heartbeat.
const ForgetAfterTTLs = 10

// Frontend routes requests to registered engines — by default the least-loaded routable
// engine of the needed role, counted by the frontend's own in-flight requests; round robin
// or KV-aware with Options.Router — and records Dynamo's frontend metrics (and, routing
// KV-aware, the router's KV hit rate). It is an http.Handler serving /v1/completions, /v1/engines, /metrics and
// /healthz.
type Frontend struct {
	o       Options
	metrics *Metrics
	reg     *prometheus.Registry
	client  *http.Client
	mux     *http.ServeMux
	now     func() time.Time
	seq     atomic.Uint64

	mu      sync.Mutex
	engines map[string]*engineEntry
	routers map[string]*router.Router // by role
	cands   []router.Candidate        // scratch, under mu
	entries []*engineEntry            // scratch, under mu
}

type engineEntry struct {
	reg      engineapi.Registration
	lastSeen time.Time
	inflight atomic.Int64
	tokens   atomic.Int64 // prompt tokens of the requests in flight (the KV router's load)
	index    *kvIndex     // the blocks routed here (KV router, prefix-caching engines only)
}

// caches says the KV router predicts blocks cached on the engine.
func (e *engineEntry) caches() bool { return e.reg.PrefixCaching && e.reg.Role != engineapi.RoleDecode }

// New builds a frontend.
func New(o Options) (*Frontend, error) {
	if o.Model == "" || o.Namespace == "" {
		return nil, errors.New("frontend: model and namespace are required")
	}
	switch o.Mode {
	case Disaggregated, Aggregated:
	default:
		return nil, fmt.Errorf("frontend: mode %q: want disagg or agg", o.Mode)
	}
	if o.EngineTTL <= 0 {
		o.EngineTTL = 3 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Minute
	}
	mode, err := router.ParseMode(string(o.Router))
	if err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	o.Router = mode
	if o.KVIndexTTL <= 0 {
		o.KVIndexTTL = DefaultKVIndexTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, o.Model, o.Namespace)
	if err != nil {
		return nil, err
	}
	f := &Frontend{o: o, metrics: m, reg: reg, client: engineapi.NewClient(o.RequestTimeout), now: time.Now,
		engines: map[string]*engineEntry{}, routers: map[string]*router.Router{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", f.serveCompletion)
	mux.HandleFunc("POST "+engineapi.PathEngines, f.serveRegister)
	mux.HandleFunc("GET "+engineapi.PathEngines, f.serveEngines)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+engineapi.PathHealth, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	f.mux = mux
	return f, nil
}

// ServeHTTP implements http.Handler.
func (f *Frontend) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Registry is the frontend's metrics registry.
func (f *Frontend) Registry() *prometheus.Registry { return f.reg }

// EngineStatus is one registered engine as the frontend sees it.
type EngineStatus struct {
	engineapi.Registration
	Routable bool  `json:"routable"`
	Inflight int64 `json:"inflight"`
	AgeMs    int64 `json:"age_ms"`
}

// Engines lists the registered engines, sorted by name.
func (f *Frontend) Engines() []EngineStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	out := make([]EngineStatus, 0, len(f.engines))
	for _, e := range f.engines {
		age := now.Sub(e.lastSeen)
		out = append(out, EngineStatus{Registration: e.reg, Routable: !e.reg.Draining && age <= f.o.EngineTTL,
			Inflight: e.inflight.Load(), AgeMs: age.Milliseconds()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *Frontend) serveEngines(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, f.Engines())
}

func (f *Frontend) serveRegister(w http.ResponseWriter, r *http.Request) {
	var reg engineapi.Registration
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&reg); err != nil {
		http.Error(w, "bad registration: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := reg.Validate(); err != nil {
		http.Error(w, "bad registration: "+err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	now := f.now()
	f.prune(now)
	e, ok := f.engines[reg.Name]
	if !ok {
		if len(f.engines) >= MaxEngines {
			f.mu.Unlock()
			http.Error(w, fmt.Sprintf("registration refused: %d engines registered, the most a frontend keeps; "+
				"an engine is forgotten %d engine TTLs after its last heartbeat", MaxEngines, ForgetAfterTTLs),
				http.StatusServiceUnavailable)
			return
		}
		e = &engineEntry{}
		f.engines[reg.Name] = e
		f.o.Logger.Info("engine registered", "name", reg.Name, "role", reg.Role, "url", reg.URL, "prefix_caching", reg.PrefixCaching)
	} else if reg.Draining && !e.reg.Draining {
		f.o.Logger.Info("engine draining", "name", reg.Name)
	}
	// A draining engine takes no more requests, and one back with another URL or cache is
	// another process: what was predicted cached there no longer holds.
	if reg.Draining || !reg.PrefixCaching || reg.URL != e.reg.URL || reg.PrefixCacheBlocks != e.reg.PrefixCacheBlocks {
		e.index = nil
	}
	e.reg, e.lastSeen = reg, now
	f.mu.Unlock()
	writeJSON(w, map[string]string{"status": "ok"})
}

// prune drops the KV prediction of the engines without a heartbeat for EngineTTL and forgets
// those without one for ForgetAfterTTLs × EngineTTL. Called under mu.
func (f *Frontend) prune(now time.Time) {
	for name, e := range f.engines {
		switch age := now.Sub(e.lastSeen); {
		case age > ForgetAfterTTLs*f.o.EngineTTL:
			delete(f.engines, name)
			f.o.Logger.Info("engine forgotten: no heartbeat", "name", name, "age", age)
		case age > f.o.EngineTTL:
			e.index = nil
		}
	}
}

// picked is an engine pick returned for one request phase.
type picked struct {
	e         *engineEntry
	name, url string // its registration's, read under the lock
	// kv says the KV router picked it; hitRate is then the request's predicted hit rate there
	// (0 on an engine without a prefix cache) and added the hashes newly predicted cached
	// there, taken back if the engine does not accept the request.
	kv      bool
	hitRate float64
	added   []uint64
}

// pick returns the routable engine of a role the router chooses (ok false: none) and counts
// the request against it. Candidates are taken in name order, so ties go to the first name.
// Routing KV-aware to an engine that caches prompts, it records the request's blocks as
// cached there (call takes them back if the engine refuses the request).
func (f *Frontend) pick(role string, isl int, hashes []uint64) (p picked, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.prune(now)
	f.entries = f.entries[:0]
	for _, e := range f.engines {
		if e.reg.Role != role || e.reg.Draining || now.Sub(e.lastSeen) > f.o.EngineTTL {
			continue
		}
		f.entries = append(f.entries, e)
	}
	sort.Slice(f.entries, func(i, j int) bool { return f.entries[i].reg.Name < f.entries[j].reg.Name })
	kv := f.o.Router == router.KV && role != engineapi.RoleDecode
	f.cands = f.cands[:0]
	for _, e := range f.entries {
		c := router.Candidate{Load: int(e.inflight.Load()), ActiveTokens: int(e.tokens.Load())}
		if kv && e.caches() && e.index != nil {
			c.CachedBlocks = e.index.match(hashes, now)
		}
		f.cands = append(f.cands, c)
	}
	rt := f.routers[role]
	if rt == nil {
		r, _ := router.New(f.o.Router) // validated by New
		rt = &r
		f.routers[role] = rt
	}
	k := rt.Pick(f.cands)
	if k < 0 {
		return picked{}, false
	}
	best := f.entries[k]
	clear(f.entries)
	best.inflight.Add(1)
	best.tokens.Add(int64(isl))
	p = picked{e: best, name: best.reg.Name, url: best.reg.URL, kv: kv}
	if kv && best.caches() {
		p.hitRate = router.HitRate(f.cands[k].CachedBlocks, len(hashes))
		if best.index == nil {
			limit := maxIndexBlocks
			if n := best.reg.PrefixCacheBlocks; n > 0 {
				limit = min(limit, n)
			}
			best.index = newKVIndex(f.o.KVIndexTTL, limit)
		}
		p.added = best.index.add(hashes, now)
	}
	return p, true
}

// errNoEngine is a request the frontend cannot route.
type errNoEngine struct{ role string }

func (e errNoEngine) Error() string { return "no routable " + e.role + " engine" }

// callAttempts bounds how many engines one request phase tries: an engine that refuses
// (draining, gone) is marked unroutable and the next one is tried.
const callAttempts = 3

func (f *Frontend) call(ctx context.Context, role string, req engineapi.GenerateRequest) (engineapi.GenerateResponse, error) {
	var lastErr error
	for range callAttempts {
		p, ok := f.pick(role, req.ISL, req.HashIDs)
		if !ok {
			if lastErr != nil {
				return engineapi.GenerateResponse{}, lastErr
			}
			return engineapi.GenerateResponse{}, errNoEngine{role}
		}
		e := p.e
		var resp engineapi.GenerateResponse
		err := engineapi.PostJSON(ctx, f.client, p.url+engineapi.PathGenerate, req, &resp)
		e.inflight.Add(-1)
		e.tokens.Add(-int64(req.ISL))
		if err == nil {
			if p.kv {
				// The hit rate of the engine that served the request (Dynamo's router
				// observes its pick's overlap).
				f.metrics.ObserveKVHitRate(p.hitRate)
			}
			return resp, nil
		}
		lastErr = fmt.Errorf("%s engine %s: %w", role, p.name, err)
		var se *engineapi.StatusError
		rejected := errors.As(err, &se) && se.Code != http.StatusServiceUnavailable
		f.mu.Lock()
		switch {
		case ctx.Err() != nil:
			// The client went away: the engine may still run the request, and cache it.
		case rejected:
			// The engine turned the request down: it caches none of it.
			if e.index != nil {
				e.index.remove(p.added)
			}
		default:
			// Draining or gone (connection refused): stop routing there until it registers
			// again, and forget what it was predicted to cache.
			e.reg.Draining = true
			e.index = nil
		}
		f.mu.Unlock()
		if ctx.Err() != nil || rejected {
			return resp, lastErr
		}
		f.o.Logger.Info("engine refused a request: unroutable until it registers again", "name", p.name, "error", err)
	}
	return engineapi.GenerateResponse{}, lastErr
}

func (f *Frontend) serveCompletion(w http.ResponseWriter, r *http.Request) {
	start := f.now()
	var cr loadgen.CompletionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&cr); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if cr.ISL <= 0 || cr.OSL <= 0 {
		http.Error(w, fmt.Sprintf("bad request: isl (%d) and osl (%d) must be > 0", cr.ISL, cr.OSL), http.StatusBadRequest)
		return
	}
	if err := f.checkHashIDs(cr); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	f.metrics.RequestStarted()
	// TTFT and ISL are observed at the first token (the prefill's answer; an aggregated
	// engine answers only at the end), OSL at completion, as Dynamo's frontend does.
	firstSeen := false
	firstToken := func(ttftMs float64) {
		f.metrics.FirstToken(cr.ISL, time.Duration(ttftMs*float64(time.Millisecond)))
		firstSeen = true
	}
	out, err := f.complete(r.Context(), cr, start, firstToken)
	if err != nil {
		f.metrics.RequestFinished(Completed{ISL: cr.ISL, OSL: cr.OSL, Duration: f.now().Sub(start), Err: true, FirstTokenObserved: firstSeen})
		code := http.StatusBadGateway
		var ne errNoEngine
		if errors.As(err, &ne) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	f.metrics.RequestFinished(Completed{ISL: cr.ISL, OSL: cr.OSL, FirstTokenObserved: firstSeen,
		TTFT: time.Duration(out.TTFTMs * float64(time.Millisecond)), Duration: time.Duration(out.DurationMs * float64(time.Millisecond))})
	writeJSON(w, out)
}

// checkHashIDs bounds a request's prefix hash ids: never more than predict.MaxHashIDs, and,
// when the KV router reads them, at most one per 512-token block of the prompt (the
// engines' block size). Routed by load, ids hashed in other block sizes pass through: an
// engine without a prefix cache ignores them, one with a cache refuses the request (which
// the client then sees as the engine's error).
func (f *Frontend) checkHashIDs(cr loadgen.CompletionRequest) error {
	n := predict.MaxHashIDs
	if f.o.Router == router.KV {
		n = predict.MaxHashIDsFor(cr.ISL)
	}
	if len(cr.HashIDs) > n {
		if f.o.Router != router.KV {
			return fmt.Errorf("%d hash ids: at most %d", len(cr.HashIDs), n)
		}
		return fmt.Errorf("%d hash ids for isl %d: at most %d (one per %d-token block, read by the KV router)",
			len(cr.HashIDs), cr.ISL, n, predict.HashBlockTokens)
	}
	return nil
}

// complete runs a request on the engines; firstToken is called with the TTFT in milliseconds
// once the first token is known.
func (f *Frontend) complete(ctx context.Context, cr loadgen.CompletionRequest, start time.Time, firstToken func(ttftMs float64)) (loadgen.CompletionResponse, error) {
	id := strconv.FormatUint(f.seq.Add(1), 10)
	ms := func(t time.Time) float64 { return float64(t.Sub(start)) / float64(time.Millisecond) }
	if f.o.Mode == Aggregated {
		resp, err := f.call(ctx, engineapi.RoleAggregated, engineapi.GenerateRequest{ID: id, Phase: engineapi.PhaseFull, ISL: cr.ISL, OSL: cr.OSL, HashIDs: cr.HashIDs})
		if err != nil {
			return loadgen.CompletionResponse{}, err
		}
		out := loadgen.CompletionResponse{TTFTMs: ms(engineapi.UnixNano(resp.FirstTokenUnixNano)),
			DurationMs: ms(engineapi.UnixNano(resp.FinishedUnixNano)), DecodeWorker: resp.Worker}
		firstToken(out.TTFTMs)
		return out, nil
	}
	pre, err := f.call(ctx, engineapi.RolePrefill, engineapi.GenerateRequest{ID: id, Phase: engineapi.PhasePrefill, ISL: cr.ISL, OSL: cr.OSL, HashIDs: cr.HashIDs})
	if err != nil {
		return loadgen.CompletionResponse{}, err
	}
	out := loadgen.CompletionResponse{TTFTMs: ms(engineapi.UnixNano(pre.FirstTokenUnixNano)), PrefillWorker: pre.Worker}
	firstToken(out.TTFTMs)
	if cr.OSL == 1 {
		out.DurationMs = out.TTFTMs
		return out, nil
	}
	// The decode engine can start once the KV cache has arrived.
	if d := time.Duration(pre.HandoffDelayMs * float64(time.Millisecond)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, ctx.Err()
		case <-t.C:
		}
	}
	dec, err := f.call(ctx, engineapi.RoleDecode, engineapi.GenerateRequest{ID: id, Phase: engineapi.PhaseDecode, ISL: cr.ISL, OSL: cr.OSL})
	if err != nil {
		return out, err
	}
	out.DurationMs, out.DecodeWorker = ms(engineapi.UnixNano(dec.FinishedUnixNano)), dec.Worker
	return out, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
