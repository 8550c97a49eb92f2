package observe

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
)

// Role is the pool an FPM endpoint belongs to. Aggregated engines report as RoleDecode, as
// in Dynamo.
type Role string

// The roles.
const (
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
)

// MaxSamplesPerRole bounds the regression samples an FPMStore keeps per role between two
// snapshots; when more arrive, a uniform reservoir sample of them is kept (perf.FPMReservoir).
const MaxSamplesPerRole = perf.FPMReservoirSize

// MaxEngineKeys bounds the (worker_id, dp_rank) keys an FPMStore tracks, so a stream of
// garbage worker ids cannot grow it without limit.
const MaxEngineKeys = 4096

// Errors of FPMStore.Ingest besides ErrMalformedFPM.
var (
	// ErrUnknownRole is returned for a role that is neither RolePrefill nor RoleDecode.
	ErrUnknownRole = errors.New("unknown FPM endpoint role")
	// ErrMissingWorkerID is returned for a message without a worker_id: it cannot be
	// attributed to an engine.
	ErrMissingWorkerID = errors.New("FPM without worker_id")
	// ErrTooManyEngines is returned when a new key would exceed MaxEngineKeys.
	ErrTooManyEngines = errors.New("too many FPM engine keys")
)

// FPMStore aggregates the Forward Pass Metrics stream: the latest message per
// (worker_id, dp_rank), the time it arrived, and a bounded sample of non-heartbeat messages
// for the performance regression. It is safe for concurrent use; Ingest does not allocate
// once a key has been seen.
type FPMStore struct {
	mu      sync.Mutex
	workers map[string]*workerSlots
	nkeys   int
	scratch perf.FPM
	intern  internFunc
	rng     *rand.Rand
	samples [2]perf.FPMReservoir
	totals  counters
}

// counters are the store's cumulative counters.
type counters struct {
	received, malformed, heartbeats, lost, resets uint64
}

type workerSlots struct {
	id    string
	ranks []*engineSlot
}

type engineSlot struct {
	fpm  perf.FPM
	recv time.Time
	role Role
}

// NewFPMStore returns an empty store. Sampling is deterministic (fixed seed).
func NewFPMStore() *FPMStore {
	s := &FPMStore{
		workers: make(map[string]*workerSlots),
		rng:     rand.New(rand.NewPCG(0x6670, 0x6d)),
	}
	s.intern = s.lookupWorker
	return s
}

// lookupWorker interns worker ids: the map lookup with a string(bytes) key does not
// allocate. Called with s.mu held.
func (s *FPMStore) lookupWorker(b []byte) (string, bool) {
	if w, ok := s.workers[string(b)]; ok {
		return w.id, true
	}
	return "", false
}

func roleIndex(r Role) (int, bool) {
	switch r {
	case RolePrefill:
		return 0, true
	case RoleDecode:
		return 1, true
	}
	return 0, false
}

// Ingest decodes one FPM payload received from an endpoint of the given role at recvTime and
// records it as the latest state of its (worker_id, dp_rank). Non-heartbeat messages also
// enter the role's regression sample. Counter-id jumps are counted as lost messages. A
// malformed payload is counted and dropped: the store is unchanged and the error wraps
// ErrMalformedFPM (or ErrUnknownRole, ErrMissingWorkerID, ErrTooManyEngines).
func (s *FPMStore) Ingest(role Role, payload []byte, recvTime time.Time) error {
	_, err := s.ingest(role, payload, recvTime)
	return err
}

// engineKey identifies one engine scheduler.
type engineKey struct {
	worker string
	rank   int64
}

// ingest is Ingest returning the key of the accepted message (its worker id interned).
func (s *FPMStore) ingest(role Role, payload []byte, recvTime time.Time) (engineKey, error) {
	ri, ok := roleIndex(role)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.received++
	if !ok {
		s.totals.malformed++
		return engineKey{}, fmt.Errorf("ingest FPM: %w %q", ErrUnknownRole, role)
	}
	f := &s.scratch
	if err := decodeFPM(payload, f, s.intern); err != nil {
		s.totals.malformed++
		return engineKey{}, fmt.Errorf("ingest %s FPM: %w", role, err)
	}
	if f.WorkerID == "" {
		s.totals.malformed++
		return engineKey{}, fmt.Errorf("ingest %s FPM (dp_rank %d): %w", role, f.DPRank, ErrMissingWorkerID)
	}
	w := s.workers[f.WorkerID]
	var sl *engineSlot
	if w != nil {
		for _, r := range w.ranks {
			if r.fpm.DPRank == f.DPRank {
				sl = r
				break
			}
		}
	}
	if sl == nil {
		if s.nkeys >= MaxEngineKeys {
			s.totals.malformed++
			return engineKey{}, fmt.Errorf("ingest %s FPM from %s/%d: %w (limit %d)", role, f.WorkerID, f.DPRank,
				ErrTooManyEngines, MaxEngineKeys)
		}
		if w == nil {
			w = &workerSlots{id: f.WorkerID}
			s.workers[w.id] = w
		}
		sl = &engineSlot{}
		w.ranks = append(w.ranks, sl)
		s.nkeys++
	} else {
		last := sl.fpm.CounterID
		switch {
		case f.CounterID > last+1:
			s.totals.lost += uint64(f.CounterID - last - 1)
		case f.CounterID < last:
			s.totals.resets++ // publisher restarted
		}
	}
	sl.fpm = *f
	sl.recv = recvTime
	sl.role = role
	if f.IsHeartbeat() {
		s.totals.heartbeats++
	} else {
		s.samples[ri].Add(f, s.rng)
	}
	return engineKey{w.id, f.DPRank}, nil
}

// noteMalformed counts a message dropped before decoding (bad multipart framing).
func (s *FPMStore) noteMalformed() {
	s.mu.Lock()
	s.totals.received++
	s.totals.malformed++
	s.mu.Unlock()
}

// Forget drops every key of a worker (the engine was removed). Samples it already
// contributed stay in the current sample.
func (s *FPMStore) Forget(workerID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workers[workerID]; ok {
		s.nkeys -= len(w.ranks)
		delete(s.workers, workerID)
	}
}

// ForgetEngine drops one (worker_id, dp_rank) key (its endpoint was removed).
func (s *FPMStore) ForgetEngine(workerID string, dpRank int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workers[workerID]
	if !ok {
		return
	}
	for i, r := range w.ranks {
		if r.fpm.DPRank == dpRank {
			w.ranks = slices.Delete(w.ranks, i, i+1)
			s.nkeys--
			break
		}
	}
	if len(w.ranks) == 0 {
		delete(s.workers, workerID)
	}
}

// RoleStats are one role's part of SnapshotStats.
type RoleStats struct {
	// Engines is the number of fresh (worker_id, dp_rank) keys reported.
	Engines int `json:"engines"`
	// Samples is the number of regression samples returned.
	Samples int `json:"samples"`
	// SamplesSeen is the number of non-heartbeat messages since the previous snapshot, of
	// which Samples were kept.
	SamplesSeen uint64 `json:"samples_seen"`
}

// SnapshotStats describe the stream. Counters are cumulative since the store was created;
// Stale and the role stats are about this snapshot.
type SnapshotStats struct {
	// Received counts every message handed to the store, malformed ones included.
	Received uint64 `json:"received"`
	// Malformed counts the messages dropped as malformed.
	Malformed uint64 `json:"malformed"`
	// Heartbeats counts the idle heartbeats accepted.
	Heartbeats uint64 `json:"heartbeats"`
	// Lost counts the messages missing from counter_id sequences.
	Lost uint64 `json:"lost"`
	// Resets counts counter_id sequences that restarted (publisher restarts).
	Resets uint64 `json:"resets"`
	// StaleWorkers is len(Stale).
	StaleWorkers int `json:"stale_workers"`
	// Stale lists the keys, as "<worker_id>/<dp_rank>", skipped because their last message
	// is older than maxAge, sorted.
	Stale []string `json:"stale,omitempty"`
	// Prefill and Decode are the per-role counts.
	Prefill RoleStats `json:"prefill"`
	Decode  RoleStats `json:"decode"`
}

// Snapshot returns the latest FPM of every fresh key per role, sorted by (worker_id,
// dp_rank), and the regression samples collected since the previous snapshot (in arrival
// order; they are then cleared). A key whose last message, heartbeats included, arrived more
// than maxAge before now is stale: not reported, listed in the stats. maxAge <= 0 disables
// the staleness check.
func (s *FPMStore) Snapshot(now time.Time, maxAge time.Duration) (scaling.FPMObservations, SnapshotStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var obs scaling.FPMObservations
	st := SnapshotStats{
		Received:   s.totals.received,
		Malformed:  s.totals.malformed,
		Heartbeats: s.totals.heartbeats,
		Lost:       s.totals.lost,
		Resets:     s.totals.resets,
	}
	for _, w := range s.workers {
		for _, sl := range w.ranks {
			if maxAge > 0 && now.Sub(sl.recv) > maxAge {
				st.Stale = append(st.Stale, w.id+"/"+strconv.FormatInt(sl.fpm.DPRank, 10))
				continue
			}
			if sl.role == RolePrefill {
				obs.Prefill = append(obs.Prefill, sl.fpm)
			} else {
				obs.Decode = append(obs.Decode, sl.fpm)
			}
		}
	}
	byKey := func(a, b perf.FPM) int {
		return cmp.Or(cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DPRank, b.DPRank))
	}
	slices.SortFunc(obs.Prefill, byKey)
	slices.SortFunc(obs.Decode, byKey)
	slices.Sort(st.Stale)
	st.StaleWorkers = len(st.Stale)
	st.Prefill.SamplesSeen = s.samples[0].Seen()
	st.Decode.SamplesSeen = s.samples[1].Seen()
	obs.PrefillSamples = s.samples[0].Take()
	obs.DecodeSamples = s.samples[1].Take()
	st.Prefill.Engines, st.Prefill.Samples = len(obs.Prefill), len(obs.PrefillSamples)
	st.Decode.Engines, st.Decode.Samples = len(obs.Decode), len(obs.DecodeSamples)
	return obs, st
}
