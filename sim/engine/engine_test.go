package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
)

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig(RoleAggregated).Validate())
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"role", func(c *Config) { c.Role = "both" }, `role "both"`},
		{"budget", func(c *Config) { c.MaxNumBatchedTokens = 0 }, "max_num_batched_tokens 0"},
		{"seqs", func(c *Config) { c.MaxNumSeqs = -1 }, "max_num_seqs -1"},
		{"block size", func(c *Config) { c.BlockSize = 0 }, "block_size 0"},
		{"blocks", func(c *Config) { c.NumGPUBlocks = -5 }, "num_gpu_blocks -5"},
		{"preemption", func(c *Config) { c.Preemption = "fifo" }, `preemption mode "fifo"`},
		{"speedup", func(c *Config) { c.SpeedupRatio = 0 }, "speedup_ratio 0"},
		{"speedup NaN", func(c *Config) { c.SpeedupRatio = math.NaN() }, "speedup_ratio NaN"},
		{"decode speedup", func(c *Config) { c.DecodeSpeedupRatio = math.Inf(1) }, "decode_speedup_ratio +Inf"},
		{"kv bytes", func(c *Config) { c.KVBytesPerToken = -1 }, "kv_bytes_per_token -1"},
		{"bandwidth", func(c *Config) { c.KVTransferBandwidth = 0 }, "kv_transfer_bandwidth 0"},
		{"dp rank", func(c *Config) { c.DPRank = -1 }, "dp_rank -1"},
		{"hash block", func(c *Config) { c.HashBlockTokens = 0 }, "hash_block_tokens 0"},
		{"zero value", func(c *Config) { *c = Config{} }, "max_num_batched_tokens 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig(RoleAggregated)
			tc.mutate(&c)
			err := c.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, tc.want)
			_, err = New(c, MockerPolynomial())
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
}

func TestNewNumGPUBlocks(t *testing.T) {
	_, prof := profileTiming(t)
	tests := []struct {
		name   string
		blocks int
		block  int
		timing Timing
		want   int
	}{
		{"profile capacity / 64", 0, 64, prof, 945029 / 64},
		{"profile capacity / 16", 0, 16, prof, 945029 / 16},
		{"polynomial default", 0, 64, MockerPolynomial(), DefaultNumGPUBlocks},
		{"explicit wins", 100, 64, prof, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(RoleAggregated)
			cfg.NumGPUBlocks, cfg.BlockSize = tc.blocks, tc.block
			e := newEngine(t, cfg, tc.timing)
			require.Equal(t, tc.want, e.Config().NumGPUBlocks)
			require.Equal(t, Load{KVBlocksTotal: tc.want}, e.Load())
			require.True(t, e.Idle())
			_, ok := e.Step(0)
			require.False(t, ok, "idle engine runs no pass")
		})
	}
	_, err := New(DefaultConfig(RoleAggregated), nil)
	require.ErrorContains(t, err, "nil timing")
	_, err = NewProfileTiming(&perf.Profile{Dir: "x", Prefill: loadProfile(t).Prefill})
	require.ErrorContains(t, err, "needs both a prefill and a decode part")
	_, err = NewProfileTiming(nil)
	require.ErrorContains(t, err, "nil profile")
}

func TestSubmitErrors(t *testing.T) {
	small := func(role Role, chunked bool) *Engine {
		cfg := DefaultConfig(role)
		cfg.BlockSize, cfg.NumGPUBlocks, cfg.MaxNumBatchedTokens = 16, 100, 512 // 1600 KV tokens
		cfg.EnableChunkedPrefill = chunked
		return newEngine(t, cfg, MockerPolynomial())
	}
	tests := []struct {
		name    string
		eng     *Engine
		req     Request
		wantErr error
		want    string
	}{
		{"zero isl", small(RoleAggregated, true), Request{ISL: 0, OSL: 1}, ErrInvalidRequest, "isl 0"},
		{"zero osl", small(RoleAggregated, true), Request{ISL: 5, OSL: 0}, ErrInvalidRequest, "osl 0 must be ≥ 1"},
		{"decode osl 1", small(RoleDecode, true), Request{ISL: 5, OSL: 1}, ErrInvalidRequest, "osl 1 must be ≥ 2 on a decode engine"},
		{"NaN arrival", small(RoleAggregated, true), Request{ISL: 5, OSL: 1, Arrival: math.NaN()}, ErrInvalidRequest, "arrival NaN"},
		{"prompt beyond KV", small(RolePrefill, true), Request{ISL: 1601, OSL: 1}, ErrTooLong, "needs up to 1601 KV tokens, more than the engine's 1600"},
		{"prompt+output beyond KV", small(RoleAggregated, true), Request{ISL: 1500, OSL: 102}, ErrTooLong, "needs up to 1601 KV tokens"},
		{"beyond budget unchunked", small(RoleAggregated, false), Request{ISL: 500, OSL: 14}, ErrTooLong, "exceeds max_num_batched_tokens 512"},
		{"overflow", small(RoleAggregated, true), Request{ISL: 5, OSL: math.MaxInt}, ErrInvalidRequest, "overflows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.eng.Submit(tc.req)
			require.ErrorIs(t, err, tc.wantErr)
			require.ErrorContains(t, err, tc.want)
			require.True(t, tc.eng.Idle(), "a rejected request is not queued")
		})
	}
	// The limits themselves are accepted.
	require.NoError(t, small(RolePrefill, true).Submit(Request{ISL: 1600, OSL: 1000}))
	require.NoError(t, small(RoleAggregated, true).Submit(Request{ISL: 1500, OSL: 101}))
	require.NoError(t, small(RoleAggregated, false).Submit(Request{ISL: 500, OSL: 13}))
}

func TestChunkedPrefill(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 10, PrefillPerToken: 0.01, DecodeFixed: 5}
	e := newEngine(t, DefaultConfig(RoleAggregated), tim)
	require.NoError(t, e.Submit(Request{ID: 7, ISL: 20000, OSL: 3, Arrival: 1}))
	passes := runAll(t, e, 1)
	require.Len(t, passes, 5, "3 prefill chunks, then 2 decode steps")

	wantChunks := []struct{ tokens, kv int64 }{{8192, 0}, {8192, 8192}, {3616, 16384}}
	for i, w := range wantChunks {
		s := passes[i].FPM.Scheduled
		require.Equal(t, int64(1), s.NumPrefillRequests, "pass %d", i)
		require.Equal(t, w.tokens, s.SumPrefillTokens, "pass %d", i)
		require.Equal(t, w.kv, s.SumPrefillKVTokens, "pass %d", i)
		require.Zero(t, s.NumDecodeRequests)
		require.InDelta(t, (10+0.01*float64(w.tokens))/1000, passes[i].Duration, 1e-12)
	}
	require.Empty(t, passes[0].Events)
	require.Empty(t, passes[1].Events)
	require.Equal(t, []Event{{Kind: EventFirstToken, ID: 7, Arrival: 1, Time: passes[2].End()}}, passes[2].Events)
	for i := 3; i < 5; i++ {
		s := passes[i].FPM.Scheduled
		require.Equal(t, int64(1), s.NumDecodeRequests)
		require.Equal(t, int64(20000+i-2), s.SumDecodeKVTokens, "context = prompt + tokens so far")
		require.InDelta(t, 0.005, passes[i].Duration, 1e-12)
	}
	require.Equal(t, []Event{{Kind: EventFinished, ID: 7, Arrival: 1, Time: passes[4].End()}}, passes[4].Events)
	require.Equal(t, 0, e.Load().KVBlocksUsed, "finished request freed its blocks")

	// Without chunked prefill a prompt that does not fit the remaining budget waits.
	cfg := DefaultConfig(RoleAggregated)
	cfg.EnableChunkedPrefill = false
	e = newEngine(t, cfg, tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 5000, OSL: 1}))
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 5000, OSL: 1}))
	p, ok := e.Step(0)
	require.True(t, ok)
	require.Equal(t, int64(5000), p.FPM.Scheduled.SumPrefillTokens, "the second prompt is not chunked in")
	require.Equal(t, int64(1), p.FPM.Queued.NumPrefillRequests)
}

func TestAdmissionLimits(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 10, DecodeFixed: 5}
	cfg := DefaultConfig(RoleAggregated)
	cfg.MaxNumSeqs = 2
	e := newEngine(t, cfg, tim)
	for i := range 5 {
		require.NoError(t, e.Submit(Request{ID: uint64(i), ISL: 10 * (i + 1), OSL: 3}))
	}
	p, _ := e.Step(0)
	p.Events = append([]Event(nil), p.Events...) // the next Step reuses the slice
	require.Equal(t, int64(2), p.FPM.Scheduled.NumPrefillRequests, "max_num_seqs caps admission")
	require.Equal(t, int64(30), p.FPM.Scheduled.SumPrefillTokens)
	require.Equal(t, perf.QueuedRequests{NumPrefillRequests: 3, SumPrefillTokens: 120, VarPrefillLength: 200.0 / 3}, p.FPM.Queued)
	require.Equal(t, Load{Running: 2, Waiting: 3, WaitingTokens: 120, KVBlocksUsed: 2, KVBlocksTotal: DefaultNumGPUBlocks}, e.Load())
	passes := append([]Pass{p}, runAll(t, e, p.End())...)
	evs := eventsOf(passes)
	finished := 0
	for _, ev := range evs {
		if ev.Kind == EventFinished {
			finished++
		}
	}
	require.Equal(t, 5, finished)
	for _, p := range passes {
		require.LessOrEqual(t, p.FPM.Scheduled.NumPrefillRequests+p.FPM.Scheduled.NumDecodeRequests, int64(2))
	}

	// The token budget: the third prompt gets the budget's remainder as a chunk, the
	// fourth nothing.
	cfg = DefaultConfig(RoleAggregated)
	cfg.MaxNumBatchedTokens = 100
	e = newEngine(t, cfg, tim)
	for i := range 4 {
		require.NoError(t, e.Submit(Request{ID: uint64(i), ISL: 40, OSL: 2}))
	}
	p, _ = e.Step(0)
	require.Equal(t, int64(3), p.FPM.Scheduled.NumPrefillRequests)
	require.Equal(t, int64(100), p.FPM.Scheduled.SumPrefillTokens)
	require.Equal(t, int64(1), p.FPM.Queued.NumPrefillRequests)
	require.Len(t, p.Events, 2, "two prompts complete, the chunked one does not")
	p, _ = e.Step(p.End())
	// Running first: 2 decodes + the 20-token rest of the chunked prompt; then the fourth
	// prompt within the remaining 78 tokens.
	require.Equal(t, int64(2), p.FPM.Scheduled.NumDecodeRequests)
	require.Equal(t, int64(2), p.FPM.Scheduled.NumPrefillRequests)
	require.Equal(t, int64(60), p.FPM.Scheduled.SumPrefillTokens)
	require.Equal(t, int64(20), p.FPM.Scheduled.SumPrefillKVTokens)
}

func TestPreemption(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 10, DecodeFixed: 5}
	cfg := DefaultConfig(RoleAggregated)
	cfg.BlockSize, cfg.NumGPUBlocks = 4, 10 // 40 KV tokens
	e := newEngine(t, cfg, tim)
	const osl = 20
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 16, OSL: osl}))
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 16, OSL: osl}))
	passes := runAll(t, e, 0)

	firstPreempt := -1
	var decodeSteps, recomputes int64
	for i, p := range passes {
		if p.Preempted > 0 && firstPreempt < 0 {
			firstPreempt = i
			require.Equal(t, 1, p.Preempted)
			require.Equal(t, int64(1), p.FPM.Queued.NumDecodeRequests, "the victim had output tokens: a queued decode")
			require.Equal(t, int64(1), p.FPM.Scheduled.NumDecodeRequests, "only the oldest request runs")
			require.Zero(t, p.FPM.Scheduled.NumPrefillRequests, "no admission in a pass with preemption")
		}
		decodeSteps += p.FPM.Scheduled.NumDecodeRequests
		if i > 0 && p.FPM.Scheduled.NumPrefillRequests > 0 {
			recomputes++
			require.Equal(t, int64(0), p.FPM.Scheduled.SumPrefillKVTokens)
		}
		require.LessOrEqual(t, p.FPM.Scheduled.SumDecodeKVTokens+p.FPM.Scheduled.SumPrefillTokens, int64(40))
	}
	require.Positive(t, firstPreempt, "KV exhaustion preempts")
	require.Equal(t, int64(1), recomputes, "the victim is recomputed once")

	// Tokens sampled: 2 first tokens + 1 by the recompute + decode steps = 2·OSL.
	require.Equal(t, int64(2*osl), decodeSteps+2+recomputes)
	var kinds []EventKind
	var ids []uint64
	for _, ev := range eventsOf(passes) {
		kinds, ids = append(kinds, ev.Kind), append(ids, ev.ID)
	}
	require.Equal(t, []EventKind{EventFirstToken, EventFirstToken, EventFinished, EventFinished}, kinds,
		"one first token each (not re-emitted after recompute), then completions")
	require.Equal(t, []uint64{1, 2, 1, 2}, ids, "the preempted request finishes last")
	require.Equal(t, Load{KVBlocksTotal: 10}, e.Load())
}

func TestFPMHandComputed(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 20, PrefillPerToken: 0.1, DecodeFixed: 8}
	cfg := DefaultConfig(RoleAggregated)
	cfg.MaxNumSeqs, cfg.WorkerID, cfg.DPRank, cfg.SpeedupRatio = 2, "w-3", 1, 2
	e := newEngine(t, cfg, tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 100, OSL: 3}))
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 300, OSL: 3}))
	p1, _ := e.Step(0)
	require.Equal(t, perf.FPM{
		Version: 1, WorkerID: "w-3", DPRank: 1, CounterID: 0, WallTime: (20 + 0.1*400) / 2 / 1000,
		Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 400, VarPrefillLength: 10000},
	}, p1.FPM)
	require.Equal(t, []PrefillBatch{{NumRequests: 2, NewTokens: 400}}, tim.prefills)

	require.NoError(t, e.Submit(Request{ID: 3, ISL: 50, OSL: 3}))
	require.NoError(t, e.Submit(Request{ID: 4, ISL: 150, OSL: 3}))
	p2, _ := e.Step(p1.End())
	require.Equal(t, p1.End(), p2.Start)
	require.Equal(t, perf.FPM{
		Version: 1, WorkerID: "w-3", DPRank: 1, CounterID: 1, WallTime: 8.0 / 2 / 1000,
		Scheduled: perf.ScheduledRequests{NumDecodeRequests: 2, SumDecodeKVTokens: 402, VarDecodeKVTokens: 10000},
		Queued:    perf.QueuedRequests{NumPrefillRequests: 2, SumPrefillTokens: 200, VarPrefillLength: 2500},
	}, p2.FPM)
	// KV after the pass: 101 + 301 tokens in ceil(101/64) + ceil(301/64) blocks.
	require.Equal(t, []DecodeBatch{{NumRequests: 2, SumContext: 402, ActiveKVTokens: 402, ActiveBlocks: 7,
		TotalBlocks: DefaultNumGPUBlocks, BlockSize: 64}}, tim.decodes)
	require.Equal(t, p2.PrefillTime+p2.DecodeTime, p2.Duration)

	// A Step called before the previous pass ended starts at its end.
	p3, _ := e.Step(0)
	require.Equal(t, p2.End(), p3.Start)
}

func TestDrain(t *testing.T) {
	e := newEngine(t, DefaultConfig(RoleAggregated), MockerPolynomial())
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 1000, OSL: 10}))
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 2000, OSL: 5}))
	_, ok := e.Step(0)
	require.True(t, ok)
	require.False(t, e.Draining())
	e.Drain()
	require.True(t, e.Draining())
	require.ErrorIs(t, e.Submit(Request{ID: 3, ISL: 10, OSL: 1}), ErrDraining)
	require.False(t, e.Idle(), "in-flight requests remain")
	passes := runAll(t, e, 1)
	fin := map[uint64]bool{}
	for _, ev := range eventsOf(passes) {
		if ev.Kind == EventFinished {
			fin[ev.ID] = true
		}
	}
	require.Equal(t, map[uint64]bool{1: true, 2: true}, fin)
	require.True(t, e.Idle())
}

func TestDisaggregatedHandoff(t *testing.T) {
	_, tim := profileTiming(t)
	tests := []struct {
		name        string
		isl         int
		bytes, bw   float64
		wantHandoff float64
	}{
		{"defaults, Llama-3.1-8B bf16 KV at 64 GB/s", 3000, DefaultKVBytesPerToken, DefaultKVTransferBandwidth, 3000 * 131072 / 64e9},
		{"NVLink 450 GB/s", 8000, 131072, 450e9, 8000 * 131072 / 450e9},
		{"no KV bytes", 100, 0, 64e9, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(RolePrefill)
			cfg.KVBytesPerToken, cfg.KVTransferBandwidth = tc.bytes, tc.bw
			e := newEngine(t, cfg, tim)
			require.NoError(t, e.Submit(Request{ID: 9, ISL: tc.isl, OSL: 50, Arrival: 2}))
			passes := runAll(t, e, 2)
			require.Len(t, passes, 1)
			require.Zero(t, passes[0].DecodeTime, "the first token is part of the prefill pass")
			end := passes[0].End()
			require.Equal(t, []Event{
				{Kind: EventFirstToken, ID: 9, Arrival: 2, Time: end, HandoffDelay: tc.wantHandoff},
				{Kind: EventFinished, ID: 9, Arrival: 2, Time: end},
			}, passes[0].Events)
		})
	}

	// The decode side: KV allocated on admission, OSL−1 decode steps, no first token.
	cfg := DefaultConfig(RoleDecode)
	e := newEngine(t, cfg, tim)
	require.NoError(t, e.Submit(Request{ID: 4, ISL: 1000, OSL: 4, Arrival: 3}))
	passes := runAll(t, e, 3)
	require.Len(t, passes, 3)
	for i, p := range passes {
		require.Equal(t, int64(1), p.FPM.Scheduled.NumDecodeRequests)
		require.Zero(t, p.FPM.Scheduled.NumPrefillRequests)
		require.Equal(t, int64(1001+i), p.FPM.Scheduled.SumDecodeKVTokens)
		require.Zero(t, p.PrefillTime)
	}
	require.Equal(t, []Event{{Kind: EventFinished, ID: 4, Arrival: 3, Time: passes[2].End()}}, eventsOf(passes))

	// A queued transferred request counts as a queued decode.
	cfg.MaxNumSeqs = 1
	e = newEngine(t, cfg, tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 100, OSL: 4}))
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 200, OSL: 4}))
	p, _ := e.Step(0)
	require.Equal(t, perf.QueuedRequests{NumDecodeRequests: 1, SumDecodeKVTokens: 201}, p.FPM.Queued)
}

func TestSpeedupRatio(t *testing.T) {
	run := func(speedup, decodeSpeedup float64) []Pass {
		cfg := DefaultConfig(RoleAggregated)
		cfg.SpeedupRatio, cfg.DecodeSpeedupRatio = speedup, decodeSpeedup
		e := newEngine(t, cfg, MockerPolynomial())
		require.NoError(t, e.Submit(Request{ID: 1, ISL: 1000, OSL: 3}))
		return runAll(t, e, 0)
	}
	base, fast, fastDecode := run(1, 1), run(4, 1), run(1, 2)
	require.Len(t, base, 3)
	for i := range base {
		require.InDelta(t, base[i].PrefillTime/4, fast[i].PrefillTime, 1e-15)
		require.InDelta(t, base[i].DecodeTime/4, fast[i].DecodeTime, 1e-15)
		require.InDelta(t, base[i].PrefillTime, fastDecode[i].PrefillTime, 1e-15)
		require.InDelta(t, base[i].DecodeTime/2, fastDecode[i].DecodeTime, 1e-15)
	}
	require.Positive(t, base[0].PrefillTime)
	require.Positive(t, base[1].DecodeTime)
}

func TestPolynomialTiming(t *testing.T) {
	p := MockerPolynomial()
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"prefill T=1000", p.PrefillMs(PrefillBatch{NumRequests: 2, NewTokens: 1000}), 4.209989e-07*1e6 + 15.18344 + 16.50142},
		{"prefill T=0", p.PrefillMs(PrefillBatch{}), 0},
		{"decode p=0.5", p.DecodeMs(DecodeBatch{NumRequests: 1, ActiveBlocks: 50, TotalBlocks: 100}), -25.74*0.25 + 54.01*0.5 + 5.74},
		{"decode p=0", p.DecodeMs(DecodeBatch{NumRequests: 1, TotalBlocks: 100}), 5.74},
		{"decode p clamped to 1", p.DecodeMs(DecodeBatch{NumRequests: 1, ActiveBlocks: 300, TotalBlocks: 100}), -25.74 + 54.01 + 5.74},
		{"decode no requests", p.DecodeMs(DecodeBatch{}), 0},
		{"decode floor", PolynomialTiming{DecodeC: -3}.DecodeMs(DecodeBatch{NumRequests: 1, TotalBlocks: 1}), MinDecodeMs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, tc.got, 1e-9)
		})
	}
}

// workload submits a seeded random workload to e while stepping it, returning every pass.
func workload(t *testing.T, e *Engine, seed uint64, n int) []Pass {
	rng := rand.New(rand.NewPCG(seed, 1))
	type arr struct {
		at       float64
		isl, osl int
	}
	arrivals := make([]arr, n)
	at := 0.0
	for i := range arrivals {
		at += rng.ExpFloat64() / 20
		arrivals[i] = arr{at, 100 + rng.IntN(12000), 1 + rng.IntN(600)}
	}
	var passes []Pass
	now, next := 0.0, 0
	for next < len(arrivals) || !e.Idle() {
		if e.Idle() && now < arrivals[next].at {
			now = arrivals[next].at
		}
		for next < len(arrivals) && arrivals[next].at <= now {
			a := arrivals[next]
			require.NoError(t, e.Submit(Request{ID: uint64(next), ISL: a.isl, OSL: a.osl, Arrival: a.at}))
			next++
		}
		p, ok := e.Step(now)
		require.True(t, ok)
		p.Events = append([]Event(nil), p.Events...)
		passes = append(passes, p)
		now = p.End()
	}
	return passes
}

func TestDeterminism(t *testing.T) {
	_, tim := profileTiming(t)
	cfg := DefaultConfig(RoleAggregated)
	cfg.NumGPUBlocks = 2000 // 128k tokens: forces preemptions
	a := workload(t, newEngine(t, cfg, tim), 42, 400)
	b := workload(t, newEngine(t, cfg, tim), 42, 400)
	require.Equal(t, a, b)
	preempted, finished := 0, 0
	for _, p := range a {
		preempted += p.Preempted
		for _, ev := range p.Events {
			if ev.Kind == EventFinished {
				finished++
			}
		}
	}
	require.Equal(t, 400, finished)
	require.Positive(t, preempted, "the workload exercises preemption")
	t.Logf("%d passes, %d preemptions, simulated %.1f s", len(a), preempted, a[len(a)-1].End())
}

func TestStats(t *testing.T) {
	var m moments
	var w welford
	xs := []int{1_000_000, 1_000_001, 1_000_003, 999_990, 5}
	for _, x := range xs {
		m.add(x)
		w.add(float64(x))
	}
	mean, ss := 0.0, 0.0
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		ss += (float64(x) - mean) * (float64(x) - mean)
	}
	require.InDelta(t, ss/5, m.variance(), 1e-9*ss/5)
	require.InDelta(t, ss/5, w.variance(), 1e-9*ss/5)
	m.remove(5)
	require.InDelta(t, 25.25, m.variance(), 1e-12, "exact after removal despite the 1e12 squares")
	m.remove(1_000_000)
	m.remove(1_000_001)
	m.remove(1_000_003)
	require.Zero(t, m.variance())
	require.Equal(t, moments{n: 1, sum: 999_990, sumSq: 999_990 * 999_990}, m)
}

func TestClone(t *testing.T) {
	_, tim := profileTiming(t)
	cfg := DefaultConfig(RoleAggregated)
	cfg.NumGPUBlocks = 2000 // forces preemptions, so the clone carries preempted requests
	e := newEngine(t, cfg, tim)
	for i := range 60 {
		require.NoError(t, e.Submit(Request{ID: uint64(i), ISL: 1500 + 37*i, OSL: 200 + 11*i}))
	}
	now := 0.0
	for range 40 { // part-way: some running, some waiting
		p, ok := e.Step(now)
		require.True(t, ok)
		now = p.End()
	}
	before := e.Load()
	c := e.Clone()
	require.Equal(t, before, c.Load())

	// Running the clone to the end leaves the original where it was ...
	fromClone := runAll(t, c, now)
	require.True(t, c.Idle())
	require.Equal(t, before, e.Load())
	// ... and the original then does exactly what the clone did.
	require.Equal(t, fromClone, runAll(t, e, now))
	require.NotEmpty(t, eventsOf(fromClone))
}

// TestLoadAt: a prefill engine lets go of the prompts a pass completes when Step computes the
// pass, but LoadAt counts them, and their KV blocks, until the pass ends.
func TestLoadAt(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 10, PrefillPerToken: 0.01, DecodeFixed: 5}
	e := newEngine(t, DefaultConfig(RolePrefill), tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 2000, OSL: 10}))
	require.NoError(t, e.Submit(Request{ID: 2, ISL: 1000, OSL: 10}))
	require.Equal(t, Load{Waiting: 2, WaitingTokens: 3000, KVBlocksTotal: e.Config().NumGPUBlocks}, e.LoadAt(0), "before any pass")
	p, ok := e.Step(1)
	require.True(t, ok)
	require.Len(t, p.Events, 4, "both prompts complete in the pass: a first token and a finish each")
	blocks := e.blocksFor(2000) + e.blocksFor(1000)
	require.Zero(t, e.Load().Running, "Step let go of them")
	require.Zero(t, e.Load().KVBlocksUsed)
	for _, now := range []float64{1, (1 + p.End()) / 2} {
		l := e.LoadAt(now)
		require.Equal(t, 2, l.Running, "at %g, during the pass", now)
		require.Equal(t, blocks, l.KVBlocksUsed, "at %g", now)
	}
	require.Equal(t, e.Load(), e.LoadAt(p.End()), "from the pass's end")
}

// TestLoadAt_DecodeAndAggregated: a decode or aggregated engine's pass that finishes one of
// its requests keeps it, and its KV blocks, in LoadAt until the pass ends, beside the request
// that goes on.
func TestLoadAt_DecodeAndAggregated(t *testing.T) {
	tests := []struct {
		role   Role
		done   Request // finishes in the first pass
		tokens int     // the KV tokens it holds at its end
	}{
		{RoleDecode, Request{ID: 1, ISL: 500, OSL: 2}, 501},     // one token to generate
		{RoleAggregated, Request{ID: 1, ISL: 500, OSL: 1}, 500}, // done at its first token
	}
	for _, tc := range tests {
		t.Run(string(tc.role), func(t *testing.T) {
			tim := &fixedTiming{PrefillFixed: 10, PrefillPerToken: 0.01, DecodeFixed: 5}
			e := newEngine(t, DefaultConfig(tc.role), tim)
			require.NoError(t, e.Submit(tc.done))
			require.NoError(t, e.Submit(Request{ID: 2, ISL: 500, OSL: 10}))
			p, ok := e.Step(1)
			require.True(t, ok)
			require.Equal(t, 1, e.Load().Running, "Step let go of the finished request")
			for _, now := range []float64{1, (1 + p.End()) / 2} {
				l := e.LoadAt(now)
				require.Equal(t, 2, l.Running, "at %g, during the pass", now)
				require.Equal(t, e.Load().KVBlocksUsed+e.blocksFor(tc.tokens), l.KVBlocksUsed, "at %g: its KV blocks too", now)
			}
			require.Equal(t, e.Load(), e.LoadAt(p.End()), "from the pass's end")
		})
	}
}
