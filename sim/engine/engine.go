package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/llmplanner/planner/perf"
)

// Submission errors.
var (
	// ErrDraining is returned by Submit after Drain.
	ErrDraining = errors.New("engine: draining, not accepting requests")
	// ErrInvalidRequest is wrapped by Submit errors about a request's lengths or arrival.
	ErrInvalidRequest = errors.New("engine: invalid request")
	// ErrTooLong is wrapped by Submit errors about a request that can never run: its peak
	// KV need exceeds the whole KV capacity, or (without chunked prefill) its sequence
	// exceeds one pass's token budget.
	ErrTooLong = errors.New("engine: request too long")
)

// Request is one request submitted to an engine.
type Request struct {
	// ID identifies the request in events; the engine does not check uniqueness.
	ID uint64
	// ISL is the prompt length in tokens (≥ 1).
	ISL int
	// OSL is the number of output tokens of the whole request (≥ 1; ≥ 2 on a decode
	// engine, whose first token was produced by the prefill engine).
	OSL int
	// Arrival is the submission time in seconds on the caller's clock. The engine only
	// carries it into the request's events.
	Arrival float64
	// CachedTokens is the number of leading prompt tokens whose KV is already available
	// when the request is admitted (a prefix-cache hit, decided by the caller): they are
	// not computed again, so they cost no prefill time, but they still hold KV blocks and
	// count as the batch's cached tokens in the prefill timing. 0 ≤ CachedTokens < ISL;
	// ignored on a decode engine. A preempted request recomputes its whole sequence.
	CachedTokens int
	// HashIDs are the prompt's block hashes, one per Config.HashBlockTokens tokens (at
	// most ISL/HashBlockTokens + 1; nil: none). With Config.EnablePrefixCaching on a
	// prefill or aggregated engine, the longest leading run of them found in the engine's
	// prefix cache when the request is admitted is not computed again (see the package
	// documentation). The engine keeps the slice: the caller must not modify it.
	HashIDs []uint64
	// TokenEvents asks for an EventToken for every output token after the first except
	// the last (which has EventFinished), so a caller can stream the tokens as they are
	// produced. Off, a request costs no per-token event.
	TokenEvents bool
}

// EventKind is the kind of an Event.
type EventKind uint8

// The event kinds.
const (
	// EventFirstToken: the request's first token was produced (its prefill completed). A
	// decode engine never emits it (the first token came from the prefill engine).
	EventFirstToken EventKind = iota + 1
	// EventFinished: the request produced its last token (on a prefill engine, its first
	// token) and left the engine.
	EventFinished
	// EventToken: the request produced an output token other than its first and its last
	// (only for requests submitted with TokenEvents).
	EventToken
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventFirstToken:
		return "first_token"
	case EventFinished:
		return "finished"
	case EventToken:
		return "token"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is something that happened to a request at the end of a pass. Per-token events
// are only emitted for requests submitted with TokenEvents; otherwise a caller derives
// the mean ITL of a request as (finish − first token)/(OSL − 1).
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// ID and Arrival are the request's.
	ID      uint64
	Arrival float64
	// Time is when it happened, in seconds: the end of the pass.
	Time float64
	// HandoffDelay is, for the first token on a prefill engine, the KV transfer delay in
	// seconds before a decode engine may start the request (ISL × KVBytesPerToken /
	// KVTransferBandwidth); 0 otherwise.
	HandoffDelay float64
}

// Pass is one forward pass run by Step.
type Pass struct {
	// Start is when the pass started, in seconds; Duration is its length in seconds
	// (PrefillTime + DecodeTime), so the pass ends at Start+Duration.
	Start, Duration float64
	// PrefillTime and DecodeTime are the two parts of the pass, run in that order.
	PrefillTime, DecodeTime float64
	// Preempted is the number of requests preempted in this pass.
	Preempted int
	// FPM is the pass's Forward Pass Metrics (reference/dynamo-planner.md §8.1): version 1,
	// the configured worker id and dp rank, CounterID the engine's pass number (from 0; a
	// publisher may overwrite it with its own sequence number), WallTime = Duration.
	FPM perf.FPM
	// Events are the first-token and completion events at the pass end. The slice is
	// reused by the next Step: a caller that keeps events must copy them first.
	Events []Event
}

// End is when the pass ends, in seconds.
func (p *Pass) End() float64 { return p.Start + p.Duration }

// Load is a snapshot of an engine's occupancy, for routing decisions.
type Load struct {
	// Running is the number of running requests; Waiting the number of waiting ones.
	Running, Waiting int
	// WaitingTokens is the number of tokens the waiting requests must compute.
	WaitingTokens int
	// KVBlocksUsed and KVBlocksTotal are the KV blocks allocated and the capacity.
	KVBlocksUsed, KVBlocksTotal int
}

// seq is the engine's state of one request.
type seq struct {
	id        uint64
	arrival   float64
	isl, osl  int
	seqLen    int        // tokens known: prompt + tokens generated so far
	computed  int        // tokens whose KV is computed
	generated int        // output tokens produced (including the prefill engine's, on decode)
	blocks    int        // KV blocks held
	tokens    bool       // emit EventToken
	pfx       *seqPrefix // its hash ids, with the prefix cache on (nil otherwise)
}

// seqPrefix is a request's prefix-cache state, apart from seq so that requests without
// hash ids (or with the cache off) carry one pointer only.
type seqPrefix struct {
	hashes []uint64
	held   int // leading hashes whose prefix-cache blocks it references
}

// clone is an independent copy of s.
func (s *seq) clone() *seq {
	cp := *s
	if s.pfx != nil {
		p := *s.pfx
		cp.pfx = &p
	}
	return &cp
}

// queued reports whether a waiting request counts as a queued decode (it already has
// output tokens: preempted, or transferred to a decode engine) and the tokens it is counted
// with in the FPM: its KV context for a decode, its prompt for a prefill.
func (s *seq) queued() (decode bool, tokens int) {
	if s.generated > 0 {
		return true, s.seqLen
	}
	return false, s.isl
}

// scheduled is one request's share of a pass.
type scheduled struct {
	s        *seq
	n        int // tokens computed this pass
	decode   bool
	computed int // computed tokens before the pass
}

// Engine is one simulated engine. It is not safe for concurrent use (Live serialises
// access to one).
type Engine struct {
	cfg        Config
	timing     Timing
	freeBlocks int
	usedBlocks int

	running []*seq
	waiting deque
	// queued statistics of the waiting queue, kept incrementally.
	qPrefill, qDecode moments
	waitingTokens     int

	sched    []scheduled
	events   []Event
	pool     []*seq
	draining bool
	passes   int64
	busyTill float64
	// finishing and finishingBlocks are the requests the last pass finished and the KV blocks
	// they held: Step lets go of them when it computes the pass, at its start, but they hold
	// the engine until the pass ends at busyTill (LoadAt).
	finishing, finishingBlocks int
	cache                      *prefixCache // nil: prefix caching off
}

// New builds an engine. A Config.NumGPUBlocks of 0 is derived from the timing model (see
// Config).
func New(cfg Config, timing Timing) (*Engine, error) {
	if timing == nil {
		return nil, errors.New("engine: nil timing model")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NumGPUBlocks == 0 {
		cfg.NumGPUBlocks = DefaultNumGPUBlocks
		if c, ok := timing.(KVCapacity); ok && c.KVCapacityTokens() >= cfg.BlockSize {
			cfg.NumGPUBlocks = c.KVCapacityTokens() / cfg.BlockSize
		}
	}
	e := &Engine{
		cfg:        cfg,
		timing:     timing,
		freeBlocks: cfg.NumGPUBlocks,
		busyTill:   math.Inf(-1),
	}
	if cfg.EnablePrefixCaching && cfg.Role != RoleDecode {
		e.cache = newPrefixCache(e.blocksFor(cfg.HashBlockTokens))
	}
	return e, nil
}

// Clone returns an independent copy of the engine in its current state: the requests it
// holds, its KV occupancy and its drain flag (the timing model, which is read-only, is
// shared). Stepping or submitting to either leaves the other unchanged. Call it between
// passes: the events of the last Pass returned belong to the original.
func (e *Engine) Clone() *Engine {
	c := *e
	c.running = make([]*seq, len(e.running))
	for i, s := range e.running {
		c.running[i] = s.clone()
	}
	c.waiting = deque{}
	for i := 0; i < e.waiting.size; i++ {
		c.waiting.pushBack(e.waiting.buf[(e.waiting.head+i)%len(e.waiting.buf)].clone())
	}
	c.sched, c.events, c.pool = nil, nil, nil
	if e.cache != nil {
		c.cache = e.cache.clone()
	}
	return &c
}

// Config returns the engine's configuration, with NumGPUBlocks resolved.
func (e *Engine) Config() Config { return e.cfg }

// Drain stops the engine accepting requests; the ones it holds still run to completion.
func (e *Engine) Drain() { e.draining = true }

// Draining reports whether Drain was called.
func (e *Engine) Draining() bool { return e.draining }

// Idle reports whether the engine holds no request (Step would return false).
func (e *Engine) Idle() bool { return len(e.running) == 0 && e.waiting.len() == 0 }

// LoadAt returns the engine's occupancy at now (seconds, the clock Step is given): Load,
// plus the requests the pass in flight finishes and their KV blocks until it ends. A router
// or a gauge reading Load while a pass runs would otherwise see a prefill engine that is
// computing its last prompts as empty.
func (e *Engine) LoadAt(now float64) Load {
	l := e.Load()
	if now < e.busyTill {
		l.Running += e.finishing
		l.KVBlocksUsed += e.finishingBlocks
	}
	return l
}

// Load returns the engine's occupancy after the last pass computed: the requests that pass
// finishes are already gone (LoadAt keeps them until it ends).
func (e *Engine) Load() Load {
	return Load{
		Running:       len(e.running),
		Waiting:       e.waiting.len(),
		WaitingTokens: e.waitingTokens,
		KVBlocksUsed:  e.usedBlocks,
		KVBlocksTotal: e.cfg.NumGPUBlocks,
	}
}

// blocksFor is the number of KV blocks that hold tokens tokens.
func (e *Engine) blocksFor(tokens int) int { return (tokens + e.cfg.BlockSize - 1) / e.cfg.BlockSize }

// Submit queues a request at the back of the waiting queue. On a decode engine the
// request's prompt is already prefilled (its KV is allocated when it is admitted) and its
// first token produced, so it generates OSL−1 tokens. Errors: ErrDraining after Drain,
// ErrInvalidRequest for bad lengths or arrival, ErrTooLong for a request that can never
// run.
func (e *Engine) Submit(r Request) error {
	if e.draining {
		return ErrDraining
	}
	minOSL := 1
	if e.cfg.Role == RoleDecode {
		minOSL = 2
	}
	switch {
	case r.ISL < 1:
		return fmt.Errorf("%w: request %d: isl %d must be ≥ 1", ErrInvalidRequest, r.ID, r.ISL)
	case r.OSL < minOSL:
		return fmt.Errorf("%w: request %d: osl %d must be ≥ %d on a %s engine", ErrInvalidRequest, r.ID, r.OSL, minOSL, e.cfg.Role)
	case math.IsNaN(r.Arrival) || math.IsInf(r.Arrival, 0):
		return fmt.Errorf("%w: request %d: arrival %v must be finite", ErrInvalidRequest, r.ID, r.Arrival)
	case r.CachedTokens < 0 || r.CachedTokens >= r.ISL:
		return fmt.Errorf("%w: request %d: cached tokens %d must be in [0, isl %d)", ErrInvalidRequest, r.ID, r.CachedTokens, r.ISL)
	case e.cache != nil && len(r.HashIDs) > r.ISL/e.cfg.HashBlockTokens+1: // without a cache the ids are not read
		return fmt.Errorf("%w: request %d: %d hash ids for isl %d: at most %d (one per %d-token block)",
			ErrInvalidRequest, r.ID, len(r.HashIDs), r.ISL, r.ISL/e.cfg.HashBlockTokens+1, e.cfg.HashBlockTokens)
	}
	// Peak KV: the prompt on a prefill engine; the prompt and every generated token but
	// the last (which is sampled, never fed back) otherwise.
	peak := r.ISL
	if e.cfg.Role != RolePrefill {
		peak = r.ISL + r.OSL - 1
		if peak < r.ISL { // overflow
			return fmt.Errorf("%w: request %d: isl %d + osl %d overflows", ErrInvalidRequest, r.ID, r.ISL, r.OSL)
		}
	}
	if need := e.blocksFor(peak); need > e.cfg.NumGPUBlocks || need < 0 {
		return fmt.Errorf("%w: request %d needs up to %d KV tokens, more than the engine's %d (%d blocks of %d)",
			ErrTooLong, r.ID, peak, e.cfg.NumGPUBlocks*e.cfg.BlockSize, e.cfg.NumGPUBlocks, e.cfg.BlockSize)
	}
	if !e.cfg.EnableChunkedPrefill && peak > e.cfg.MaxNumBatchedTokens {
		return fmt.Errorf("%w: request %d: sequence of up to %d tokens exceeds max_num_batched_tokens %d without chunked prefill",
			ErrTooLong, r.ID, peak, e.cfg.MaxNumBatchedTokens)
	}
	s := e.newSeq()
	*s = seq{id: r.ID, arrival: r.Arrival, isl: r.ISL, osl: r.OSL, seqLen: r.ISL, computed: r.CachedTokens, tokens: r.TokenEvents}
	if e.cfg.Role == RoleDecode {
		s.generated, s.seqLen, s.computed = 1, r.ISL+1, r.ISL
	} else if e.cache != nil {
		if len(r.HashIDs) > 0 {
			s.pfx = &seqPrefix{hashes: r.HashIDs}
		}
	}
	e.waiting.pushBack(s)
	e.enqueued(s)
	return nil
}

func (e *Engine) newSeq() *seq {
	if n := len(e.pool); n > 0 {
		s := e.pool[n-1]
		e.pool = e.pool[:n-1]
		return s
	}
	return new(seq)
}

// enqueued and dequeued keep the waiting-queue statistics.
func (e *Engine) enqueued(s *seq) {
	e.waitingTokens += s.seqLen - s.computed
	if dec, tok := s.queued(); dec {
		e.qDecode.add(tok)
	} else {
		e.qPrefill.add(tok)
	}
}

func (e *Engine) dequeued(s *seq) {
	e.waitingTokens -= s.seqLen - s.computed
	if dec, tok := s.queued(); dec {
		e.qDecode.remove(tok)
	} else {
		e.qPrefill.remove(tok)
	}
}

// handoffDelay is a prefill engine's KV transfer delay of a prompt, in seconds (0 on the
// other roles).
func (e *Engine) handoffDelay(isl int) float64 {
	if e.cfg.Role != RolePrefill {
		return 0
	}
	return float64(isl) * e.cfg.KVBytesPerToken / e.cfg.KVTransferBandwidth
}

// preemptNewest preempts the newest running request: frees its blocks, resets its
// computed tokens and puts it at the front of the waiting queue. It returns the victim.
func (e *Engine) preemptNewest() *seq {
	n := len(e.running) - 1
	v := e.running[n]
	e.running[n] = nil
	e.running = e.running[:n]
	e.freeBlocks += v.blocks
	e.usedBlocks -= v.blocks
	v.blocks, v.computed = 0, 0
	e.unheld(v)
	e.waiting.pushFront(v)
	e.enqueued(v)
	return v
}

// Step runs one pass if the engine holds work and returns it; it returns false, and does
// nothing, when the engine is idle. The pass starts at now, or at the end of the previous
// pass if that is later. The returned Pass.Events slice is reused by the next Step.
func (e *Engine) Step(now float64) (Pass, bool) {
	if e.Idle() {
		return Pass{}, false
	}
	start := math.Max(now, e.busyTill)
	e.sched = e.sched[:0]
	budget := e.cfg.MaxNumBatchedTokens
	preempted := 0

	// 1. Running requests, in admission order.
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(s.seqLen-s.computed, budget)
		need := e.blocksFor(s.computed+n) - s.blocks
		victimSelf := false
		for need > e.freeBlocks {
			v := e.preemptNewest()
			preempted++
			if v == s {
				victimSelf = true
				break
			}
		}
		if victimSelf {
			break // s was the last running request
		}
		e.take(need)
		s.blocks += need
		e.sched = append(e.sched, scheduled{s: s, n: n, decode: s.generated > 0 && s.seqLen-s.computed == 1, computed: s.computed})
		budget -= n
	}

	// 2. Waiting requests, first come first served.
	if preempted == 0 {
		for e.waiting.len() > 0 && len(e.running) < e.cfg.MaxNumSeqs && budget > 0 {
			s := e.waiting.front()
			hit, computed := e.lookup(s)
			n := s.seqLen - computed
			if n > budget {
				if !e.cfg.EnableChunkedPrefill {
					break
				}
				n = budget
			}
			need := e.blocksFor(computed + n)
			if need > e.freeBlocks {
				break
			}
			e.waiting.popFront()
			e.dequeued(s)
			e.admitted(s, hit, computed)
			e.take(need)
			s.blocks = need
			e.running = append(e.running, s)
			e.sched = append(e.sched, scheduled{s: s, n: n, decode: s.generated > 0 && s.seqLen-s.computed == 1, computed: s.computed})
			budget -= n
		}
	}

	// 3. Time the pass and fill its FPM.
	var pb PrefillBatch
	var db DecodeBatch
	var pLen welford // the ahead policy reads its variance
	var dKV moments
	for i := range e.sched {
		sc := &e.sched[i]
		if sc.decode {
			db.NumRequests++
			db.SumContext += sc.s.seqLen
			dKV.add(sc.s.seqLen)
		} else {
			pb.NumRequests++
			pb.NewTokens += sc.n
			pb.CachedTokens += sc.computed
			pLen.add(float64(sc.s.isl))
		}
	}
	activeKV := 0
	for _, s := range e.running {
		activeKV += s.computed
	}
	for i := range e.sched {
		activeKV += e.sched[i].n
	}
	db.ActiveKVTokens = activeKV
	db.ActiveBlocks = e.usedBlocks
	db.TotalBlocks = e.cfg.NumGPUBlocks
	db.BlockSize = e.cfg.BlockSize

	var prefillMs, decodeMs float64
	if pb.NumRequests > 0 {
		prefillMs = e.timing.PrefillMs(pb) / e.cfg.SpeedupRatio
	}
	if db.NumRequests > 0 {
		decodeMs = e.timing.DecodeMs(db) / (e.cfg.SpeedupRatio * e.cfg.DecodeSpeedupRatio)
	}
	pass := Pass{
		Start:       start,
		PrefillTime: prefillMs / 1000,
		DecodeTime:  decodeMs / 1000,
		Preempted:   preempted,
	}
	pass.Duration = pass.PrefillTime + pass.DecodeTime
	end := start + pass.Duration
	e.busyTill = end
	pass.FPM = perf.FPM{
		Version:   perf.FPMVersion,
		WorkerID:  e.cfg.WorkerID,
		DPRank:    int64(e.cfg.DPRank),
		CounterID: e.passes,
		WallTime:  pass.Duration,
		Scheduled: perf.ScheduledRequests{
			NumPrefillRequests: int64(pb.NumRequests),
			SumPrefillTokens:   int64(pb.NewTokens),
			VarPrefillLength:   pLen.variance(),
			SumPrefillKVTokens: int64(pb.CachedTokens),
			NumDecodeRequests:  int64(db.NumRequests),
			SumDecodeKVTokens:  int64(db.SumContext),
			VarDecodeKVTokens:  dKV.variance(),
		},
		Queued: perf.QueuedRequests{
			NumPrefillRequests: int64(e.qPrefill.n),
			SumPrefillTokens:   int64(e.qPrefill.sum),
			VarPrefillLength:   e.qPrefill.variance(),
			NumDecodeRequests:  int64(e.qDecode.n),
			SumDecodeKVTokens:  int64(e.qDecode.sum),
			VarDecodeKVTokens:  e.qDecode.variance(),
		},
	}
	e.passes++

	// 4. Apply the pass: computed tokens, sampled tokens, events, completions.
	e.events = e.events[:0]
	e.finishing, e.finishingBlocks = 0, 0
	finished := 0
	for i := range e.sched {
		sc := &e.sched[i]
		s := sc.s
		s.computed += sc.n
		if s.computed < s.seqLen {
			continue // an unfinished chunk samples nothing
		}
		s.generated++
		s.seqLen++
		if s.generated == 1 {
			e.prefilled(s)
			e.events = append(e.events, Event{Kind: EventFirstToken, ID: s.id, Arrival: s.arrival, Time: end,
				HandoffDelay: e.handoffDelay(s.isl)})
		}
		if s.generated > 1 && s.tokens && s.generated < s.osl {
			e.events = append(e.events, Event{Kind: EventToken, ID: s.id, Arrival: s.arrival, Time: end})
		}
		if e.cfg.Role == RolePrefill || s.generated >= s.osl {
			e.events = append(e.events, Event{Kind: EventFinished, ID: s.id, Arrival: s.arrival, Time: end})
			e.finishing++
			e.finishingBlocks += s.blocks
			e.freeBlocks += s.blocks
			e.usedBlocks -= s.blocks
			s.blocks = 0
			e.unheld(s)
			s.osl = -1 // marks it finished for the compaction below
			finished++
		}
	}
	if finished > 0 {
		k := 0
		for _, s := range e.running {
			if s.osl == -1 {
				e.pool = append(e.pool, s)
				continue
			}
			e.running[k] = s
			k++
		}
		clear(e.running[k:])
		e.running = e.running[:k]
	}
	for i := range e.sched {
		e.sched[i].s = nil
	}
	pass.Events = e.events
	return pass, true
}

// deque is a ring-buffer double-ended queue of requests.
type deque struct {
	buf        []*seq
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) grow() {
	n := max(16, 2*len(d.buf))
	buf := make([]*seq, n)
	for i := 0; i < d.size; i++ {
		buf[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = buf, 0
}

func (d *deque) pushBack(s *seq) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.size)%len(d.buf)] = s
	d.size++
}

func (d *deque) pushFront(s *seq) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = s
	d.size++
}

func (d *deque) front() *seq { return d.buf[d.head] }

func (d *deque) popFront() *seq {
	s := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return s
}
