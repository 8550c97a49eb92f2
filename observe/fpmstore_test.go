package observe

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// busy is a non-heartbeat FPM of worker w, rank r, counter c.
func busy(w string, r, c int64) perf.FPM {
	return perf.FPM{Version: 1, WorkerID: w, DPRank: r, CounterID: c, WallTime: 0.02 + float64(c)/1000,
		Scheduled: perf.ScheduledRequests{NumDecodeRequests: 8, SumDecodeKVTokens: 1000 * c}}
}

// beat is a heartbeat of worker w, rank r, counter c.
func beat(w string, r, c int64) perf.FPM {
	return perf.FPM{Version: 1, WorkerID: w, DPRank: r, CounterID: c}
}

func TestFPMStoreForgetEngine(t *testing.T) {
	s := NewFPMStore()
	for _, f := range []perf.FPM{busy("w", 0, 0), busy("w", 1, 0), busy("x", 0, 0)} {
		require.NoError(t, s.Ingest(RoleDecode, AppendFPM(nil, &f), t0))
	}
	s.ForgetEngine("w", 1)
	s.ForgetEngine("w", 7)      // unknown rank: nothing
	s.ForgetEngine("nobody", 0) // unknown worker: nothing
	obs, _ := s.Snapshot(t0, 0)
	require.Equal(t, []perf.FPM{busy("w", 0, 0), busy("x", 0, 0)}, obs.Decode)
	s.ForgetEngine("w", 0)
	obs, _ = s.Snapshot(t0, 0)
	require.Equal(t, []perf.FPM{busy("x", 0, 0)}, obs.Decode)
	f := busy("w", 0, 5)
	require.NoError(t, s.Ingest(RoleDecode, AppendFPM(nil, &f), t0))
	obs, st := s.Snapshot(t0, 0)
	require.Len(t, obs.Decode, 2, "a forgotten engine comes back when it publishes again")
	require.Zero(t, st.Lost, "a re-added key has no counter reference")
}

type ingestStep struct {
	role Role
	fpm  perf.FPM
	raw  []byte // used instead of fpm when set
	at   time.Duration
	err  error
}

func TestFPMStoreIngestAndSnapshot(t *testing.T) {
	tests := []struct {
		name        string
		steps       []ingestStep
		forget      []string
		now         time.Duration
		maxAge      time.Duration
		wantPrefill []perf.FPM
		wantDecode  []perf.FPM
		wantSamples [2]int // prefill, decode
		want        SnapshotStats
	}{
		{
			name: "latest per key, sorted by worker then rank",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("d2", 0, 0)},
				{role: RoleDecode, fpm: busy("d1", 1, 0)},
				{role: RoleDecode, fpm: busy("d1", 0, 0)},
				{role: RoleDecode, fpm: busy("d1", 0, 1)},
				{role: RolePrefill, fpm: busy("p1", 0, 0)},
			},
			wantPrefill: []perf.FPM{busy("p1", 0, 0)},
			wantDecode:  []perf.FPM{busy("d1", 0, 1), busy("d1", 1, 0), busy("d2", 0, 0)},
			wantSamples: [2]int{1, 4},
			want: SnapshotStats{Received: 5, Prefill: RoleStats{Engines: 1, Samples: 1, SamplesSeen: 1},
				Decode: RoleStats{Engines: 3, Samples: 4, SamplesSeen: 4}},
		},
		{
			name: "heartbeats are latest state but never samples",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("d1", 0, 0)},
				{role: RoleDecode, fpm: beat("d1", 0, 1)},
			},
			wantDecode:  []perf.FPM{beat("d1", 0, 1)},
			wantSamples: [2]int{0, 1},
			want:        SnapshotStats{Received: 2, Heartbeats: 1, Decode: RoleStats{Engines: 1, Samples: 1, SamplesSeen: 1}},
		},
		{
			name: "counter gaps are lost messages, restarts are resets",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("d1", 0, 5)}, // first sight: no reference, nothing lost
				{role: RoleDecode, fpm: busy("d1", 0, 9)}, // 6,7,8 lost
				{role: RoleDecode, fpm: busy("d1", 0, 9)}, // duplicate: nothing
				{role: RoleDecode, fpm: busy("d1", 0, 0)}, // publisher restarted
				{role: RoleDecode, fpm: beat("d1", 0, 2)}, // 1 lost
			},
			wantDecode:  []perf.FPM{beat("d1", 0, 2)},
			wantSamples: [2]int{0, 4},
			want: SnapshotStats{Received: 5, Heartbeats: 1, Lost: 4, Resets: 1,
				Decode: RoleStats{Engines: 1, Samples: 4, SamplesSeen: 4}},
		},
		{
			name: "legacy v0 messages (counter 0) lose nothing",
			steps: []ingestStep{
				{role: RolePrefill, fpm: perf.FPM{WorkerID: "p", WallTime: 0.1}},
				{role: RolePrefill, fpm: perf.FPM{WorkerID: "p", WallTime: 0.2}},
			},
			wantPrefill: []perf.FPM{{WorkerID: "p", WallTime: 0.2}},
			wantSamples: [2]int{2, 0},
			want:        SnapshotStats{Received: 2, Prefill: RoleStats{Engines: 1, Samples: 2, SamplesSeen: 2}},
		},
		{
			name: "stale keys are listed, not reported; heartbeats keep a key fresh",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("old", 0, 0), at: 0},
				{role: RoleDecode, fpm: busy("old", 1, 0), at: 0},
				{role: RoleDecode, fpm: busy("idle", 0, 0), at: 0},
				{role: RoleDecode, fpm: beat("idle", 0, 1), at: 9 * time.Second},
				{role: RolePrefill, fpm: busy("p", 0, 0), at: 10 * time.Second},
			},
			now: 12 * time.Second, maxAge: 5 * time.Second,
			wantPrefill: []perf.FPM{busy("p", 0, 0)},
			wantDecode:  []perf.FPM{beat("idle", 0, 1)},
			wantSamples: [2]int{1, 3},
			want: SnapshotStats{Received: 5, Heartbeats: 1, StaleWorkers: 2, Stale: []string{"old/0", "old/1"},
				Prefill: RoleStats{Engines: 1, Samples: 1, SamplesSeen: 1}, Decode: RoleStats{Samples: 3, SamplesSeen: 3, Engines: 1}},
		},
		{
			name: "maxAge 0 disables staleness",
			steps: []ingestStep{
				{role: RoleDecode, fpm: beat("d", 0, 0), at: 0},
			},
			now:         time.Hour,
			wantDecode:  []perf.FPM{beat("d", 0, 0)},
			wantSamples: [2]int{0, 0},
			want:        SnapshotStats{Received: 1, Heartbeats: 1, Decode: RoleStats{Engines: 1}},
		},
		{
			name: "malformed input is counted, dropped and changes nothing",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("d", 0, 1)},
				{role: RoleDecode, raw: []byte{0x81, 0xa9, 'w', 'a', 'l', 'l', '_', 't', 'i', 'm', 'e', 0xa1, 'x'}, err: ErrMalformedFPM},
				{role: RoleDecode, raw: []byte{}, err: ErrMalformedFPM},
				{role: RoleDecode, fpm: perf.FPM{Version: 1, WallTime: 1}, err: ErrMissingWorkerID},
				{role: Role("mixed"), fpm: busy("d", 0, 2), err: ErrUnknownRole},
			},
			wantDecode:  []perf.FPM{busy("d", 0, 1)},
			wantSamples: [2]int{0, 1},
			want:        SnapshotStats{Received: 5, Malformed: 4, Decode: RoleStats{Engines: 1, Samples: 1, SamplesSeen: 1}},
		},
		{
			name: "forget drops every rank of a worker",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("gone", 0, 0)},
				{role: RoleDecode, fpm: busy("gone", 1, 0)},
				{role: RoleDecode, fpm: busy("kept", 0, 0)},
			},
			forget:      []string{"gone", "never-seen"},
			wantDecode:  []perf.FPM{busy("kept", 0, 0)},
			wantSamples: [2]int{0, 3},
			want:        SnapshotStats{Received: 3, Decode: RoleStats{Engines: 1, Samples: 3, SamplesSeen: 3}},
		},
		{
			name: "a worker moving role is reported in its latest role",
			steps: []ingestStep{
				{role: RoleDecode, fpm: busy("w", 0, 0)},
				{role: RolePrefill, fpm: busy("w", 0, 1)},
			},
			wantPrefill: []perf.FPM{busy("w", 0, 1)},
			wantSamples: [2]int{1, 1},
			want: SnapshotStats{Received: 2, Prefill: RoleStats{Engines: 1, Samples: 1, SamplesSeen: 1},
				Decode: RoleStats{Samples: 1, SamplesSeen: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewFPMStore()
			for i, st := range tc.steps {
				payload := st.raw
				if payload == nil {
					payload = AppendFPM(nil, &st.fpm)
				}
				err := s.Ingest(st.role, payload, t0.Add(st.at))
				if st.err != nil {
					require.ErrorIs(t, err, st.err, "step %d", i)
				} else {
					require.NoError(t, err, "step %d", i)
				}
			}
			for _, w := range tc.forget {
				s.Forget(w)
			}
			obs, stats := s.Snapshot(t0.Add(tc.now), tc.maxAge)
			require.Equal(t, tc.wantPrefill, obs.Prefill)
			require.Equal(t, tc.wantDecode, obs.Decode)
			require.Len(t, obs.PrefillSamples, tc.wantSamples[0])
			require.Len(t, obs.DecodeSamples, tc.wantSamples[1])
			for _, f := range append(obs.PrefillSamples, obs.DecodeSamples...) {
				require.False(t, f.IsHeartbeat(), "heartbeat in samples: %+v", f)
			}
			require.Equal(t, tc.want, stats)

			// Samples are handed out once; latest values and counters persist.
			obs2, stats2 := s.Snapshot(t0.Add(tc.now), tc.maxAge)
			require.Empty(t, obs2.PrefillSamples)
			require.Empty(t, obs2.DecodeSamples)
			require.Equal(t, obs.Prefill, obs2.Prefill)
			require.Equal(t, obs.Decode, obs2.Decode)
			require.Equal(t, stats.Received, stats2.Received)
		})
	}
}

func TestFPMStoreSamplesAreBoundedAndSpread(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		msgs    int
		want    int
	}{
		{"under the bound keeps all", 2, 40, 40},
		{"exactly the bound", 4, MaxSamplesPerRole, MaxSamplesPerRole},
		{"thousands round-robin over 2 workers", 2, 5000, MaxSamplesPerRole},
		{"thousands over 8 workers", 8, 20000, MaxSamplesPerRole},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewFPMStore()
			for i := range tc.msgs {
				w := fmt.Sprintf("p%d", i%tc.workers)
				f := busy(w, 0, int64(i/tc.workers))
				require.NoError(t, s.Ingest(RolePrefill, AppendFPM(nil, &f), t0))
			}
			obs, st := s.Snapshot(t0, 0)
			require.Len(t, obs.PrefillSamples, tc.want)
			require.Equal(t, uint64(tc.msgs), st.Prefill.SamplesSeen)
			require.Empty(t, obs.DecodeSamples)
			// Arrival order, and spread over the whole stream and every worker.
			perWorker := map[string]int{}
			for i, f := range obs.PrefillSamples {
				perWorker[f.WorkerID]++
				if i > 0 {
					prev := obs.PrefillSamples[i-1]
					require.Less(t, prev.CounterID*int64(tc.workers), (f.CounterID+1)*int64(tc.workers),
						"samples out of arrival order")
				}
			}
			require.Len(t, perWorker, tc.workers, "a worker was aliased away")
			if tc.msgs > 4*MaxSamplesPerRole {
				span := int64(tc.msgs / tc.workers)
				first, last := obs.PrefillSamples[0].CounterID, obs.PrefillSamples[tc.want-1].CounterID
				require.Less(t, first, span/4, "samples bunched at the end")
				require.Greater(t, last, 3*span/4, "samples bunched at the start")
			}
		})
	}
}

func TestFPMStoreKeyLimit(t *testing.T) {
	s := NewFPMStore()
	for i := range MaxEngineKeys {
		f := beat(fmt.Sprintf("w%d", i), 0, 0)
		require.NoError(t, s.Ingest(RoleDecode, AppendFPM(nil, &f), t0))
	}
	extra := beat("one-too-many", 0, 0)
	require.ErrorIs(t, s.Ingest(RoleDecode, AppendFPM(nil, &extra), t0), ErrTooManyEngines)
	known := beat("w7", 0, 1)
	require.NoError(t, s.Ingest(RoleDecode, AppendFPM(nil, &known), t0), "known keys still update")
	s.Forget("w0")
	require.NoError(t, s.Ingest(RoleDecode, AppendFPM(nil, &extra), t0), "forgetting frees a key")
	obs, st := s.Snapshot(t0, 0)
	require.Len(t, obs.Decode, MaxEngineKeys)
	require.Equal(t, uint64(1), st.Malformed)
}

func TestFPMStoreConcurrent(t *testing.T) {
	s := NewFPMStore()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for c := range 500 {
				f := busy(fmt.Sprintf("w%d", g), 0, int64(c))
				if err := s.Ingest(RoleDecode, AppendFPM(nil, &f), t0); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			s.Snapshot(t0, time.Second)
		}
	})
	wg.Wait()
	obs, st := s.Snapshot(t0, time.Second)
	require.Equal(t, uint64(2000), st.Received)
	require.Zero(t, st.Lost)
	require.Len(t, obs.Decode, 4)
	for _, f := range obs.Decode {
		require.Equal(t, int64(499), f.CounterID)
	}
}

func TestFPMStoreIngestZeroAllocs(t *testing.T) {
	s := NewFPMStore()
	var payloads [][]byte
	for w := range 8 {
		for c := range 16 {
			f := busy(fmt.Sprintf("worker-%d", w), int64(c%2), int64(c))
			payloads = append(payloads, AppendFPM(nil, &f))
		}
	}
	for _, p := range payloads {
		require.NoError(t, s.Ingest(RoleDecode, p, t0))
	}
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		if err := s.Ingest(RoleDecode, payloads[i%len(payloads)], t0); err != nil {
			panic(err)
		}
		i++
	})
	require.Zero(t, allocs)
}

// BenchmarkIngest measures decode plus aggregation: 16 engines (8 prefill, 8 decode, 2 ranks
// each worker) interleaved, as a planner worker receives them.
func BenchmarkIngest(b *testing.B) {
	type msg struct {
		role    Role
		payload []byte
	}
	var msgs []msg
	for c := range 64 {
		for w := range 8 {
			for _, role := range []Role{RolePrefill, RoleDecode} {
				f := busy(fmt.Sprintf("%s-%d", role, w), int64(c%2), int64(c/2))
				if c%10 == 9 {
					f = beat(f.WorkerID, f.DPRank, f.CounterID)
				}
				msgs = append(msgs, msg{role, AppendFPM(nil, &f)})
			}
		}
	}
	s := NewFPMStore()
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := msgs[i%len(msgs)]
		if err := s.Ingest(m.role, m.payload, now); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
