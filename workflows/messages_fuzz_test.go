package workflows

import (
	"encoding/json"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/scaling"
)

// fuzzControls are the operator messages with their validation and application, as register
// installs them (set_replicas at a fixed time).
func fuzzControls(st *State) []control {
	return []control{
		newControl(UpdateSetReplicas, "", st.ValidateSetReplicas, func(q SetReplicasRequest) string { return st.SetReplicas(1000, q) }),
		newControl(UpdateClearOverride, "", st.ValidateClearOverride, st.ClearOverride),
		newControl(UpdatePause, "", ValidateDirection, st.Pause),
		newControl(UpdateResume, "", ValidateDirection, st.Resume),
		newControl(UpdateSetSLA, "", st.ValidateSetSLA, st.SetSLA),
		newControl(UpdateSetLimits, "", st.ValidateSetLimits, st.SetLimits),
		newControl(UpdateAcknowledge, "", st.ValidateAcknowledge, st.Acknowledge),
		newControl(UpdateConfig, "", st.ValidateConfig, st.SetConfig),
	}
}

// fuzzState is a virtual disaggregated planner with a GPU budget, two engines per pool ready
// and a published decision.
func fuzzState() *State {
	cfg := config.Default()
	cfg.Mode, cfg.Environment, cfg.MaxGPUBudget = config.ModeDisagg, config.EnvVirtual, 16
	cfg.PrefillEngineNumGPU, cfg.DecodeEngineNumGPU = ptrInt(1), ptrInt(2)
	cfg.Resolve()
	v := virtual.NewState(2, 2)
	v.Decision = virtual.Decision{DecisionID: 0, NumPrefill: 3, NumDecode: 3}
	two := 2
	return &State{LogicVersion: LogicVersion, Deployment: Deployment{Namespace: "ns", Name: "llama"}, Config: cfg,
		Virtual: &v, InitialPrefill: 2, InitialDecode: 2,
		Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: &two, ReadyDecode: &two}}}
}

func ptrInt(n int) *int { return &n }

func jsonRaw(data []byte) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     data,
	})
}

// FuzzOperatorMessages decodes, validates and applies two operator messages of any kind and
// payload to a planner's state, as signals, and checks what must hold whatever they say: no
// panic; a refused message changes nothing; the configuration still validates; every
// override and acknowledged count is within the replica bound and every reason within its
// length; a set_replicas without force keeps the GPU budget; the state stays small.
func FuzzOperatorMessages(f *testing.F) {
	seeds := []struct {
		k1 uint8
		p1 string
		k2 uint8
		p2 string
	}{
		{0, `{"component":"decode","replicas":3,"ttl_seconds":60,"reason":"load test"}`, 1, `{}`},
		{0, `{"component":"prefill","replicas":9223372036854775807}`, 0, `{"component":"decode","replicas":4611686018427387904,"force":true}`},
		{2, `{"direction":"down","reason":"freeze"}`, 3, `{"direction":"both"}`},
		{4, `{"ttft_ms":300,"itl_ms":20}`, 5, `{"max_gpu_budget":4,"min_endpoint":1}`},
		{5, `{"min_endpoint":4611686018427387904}`, 6, `{"decision_id":0,"ready_decode":9223372036854775807}`},
		{6, `{"decision_id":0,"ready_prefill":3,"ready_decode":3}`, 0, `{"component":"decode","replicas":6}`},
		{7, `{"config":{"max_gpu_budgit":8}}`, 7, `{"config":{"mode":"disagg","environment":"virtual","load_predictor_history_size":5}}`},
		{0, `{"component":"decode","replicas":1,"reason":"` + string(make([]byte, 2000)) + `"}`, 2, `null`},
	}
	for _, s := range seeds {
		f.Add(s.k1, []byte(s.p1), s.k2, []byte(s.p2))
	}
	f.Fuzz(func(t *testing.T, k1 uint8, p1 []byte, k2 uint8, p2 []byte) {
		st := fuzzState()
		controls := fuzzControls(st)
		for _, m := range []struct {
			k uint8
			p []byte
		}{{k1, p1}, {k2, p2}} {
			c := controls[int(m.k)%len(controls)]
			before, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.signal(jsonRaw(m.p)); err != nil {
				after, _ := json.Marshal(st)
				if string(before) != string(after) {
					t.Fatalf("%s refused (%v) but changed the state", c.name, err)
				}
				continue
			}
			checkStateInvariants(t, st, c.name)
		}
	})
}

func checkStateInvariants(t *testing.T, st *State, applied string) {
	t.Helper()
	if _, err := withConfig(st.Config); err != nil {
		t.Fatalf("after %s the configuration no longer validates: %v", applied, err)
	}
	for _, o := range []*ReplicaOverride{st.Overrides.Prefill, st.Overrides.Decode} {
		if o == nil {
			continue
		}
		if o.Replicas < 0 || o.Replicas > config.MaxReplicas || len(o.Reason) > config.MaxReasonBytes {
			t.Fatalf("after %s an override is out of bounds: %+v", applied, *o)
		}
	}
	if len(st.Overrides.PauseReason) > config.MaxReasonBytes {
		t.Fatalf("after %s the pause reason is %d bytes", applied, len(st.Overrides.PauseReason))
	}
	for _, n := range []*int{st.Virtual.ReportedPrefill, st.Virtual.ReportedDecode} {
		if n != nil && (*n < 0 || *n > config.MaxReplicas) {
			t.Fatalf("after %s a reported ready count is %d", applied, *n)
		}
	}
	if applied == UpdateSetReplicas && st.Config.MaxGPUBudget >= 0 {
		for _, c := range []string{ComponentPrefill, ComponentDecode} {
			o := st.override(c)
			if o == nil || o.Forced {
				continue
			}
			total := 0
			for _, p := range []string{ComponentPrefill, ComponentDecode} {
				total += st.current(p) * st.gpuCost(p)
			}
			if total > st.Config.MaxGPUBudget {
				t.Fatalf("an unforced override uses %d GPUs in all, over the budget of %d", total, st.Config.MaxGPUBudget)
			}
		}
	}
	if b, _ := json.Marshal(st); len(b) > 64<<10 {
		t.Fatalf("after %s the state is %d bytes", applied, len(b))
	}
}
