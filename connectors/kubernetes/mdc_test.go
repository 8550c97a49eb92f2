package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplanner/planner/scaling"
)

func TestModelCards(t *testing.T) {
	prefillCard := map[string]any{"worker_type": "prefill", "kv_cache_block_size": int64(16),
		"runtime_config": map[string]any{"total_kv_blocks": int64(1000), "max_num_seqs": int64(64), "max_num_batched_tokens": int64(4096),
			"runtime_data": map[string]any{"spec_decode": map[string]any{"nextn": int64(3)}}},
		"architectural_max_context_length": int64(8192)}
	decodeCard := `{"worker_type": "decode", "kv_cache_block_size": 64, "runtime_config": {"total_kv_blocks": 100, "max_num_seqs": 256, "context_length": 16384}}`
	item := func(data any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"data": data}}}
	}
	cards := map[string]any{
		"a-lora": map[string]any{"type": "LoRA", "card_json": map[string]any{"worker_type": "decode"}},
		"b":      map[string]any{"type": "Model", "component": "prefill", "card_json": prefillCard},
		"c":      map[string]any{"type": "Model", "component": "backend", "card_json": decodeCard},
	}
	tests := []struct {
		name      string
		data      any
		role      scaling.Component
		component string
		want      scaling.EngineCapabilities
		found     bool
	}{
		{"prefill card, context from the architecture", map[string]any{"model_cards": cards}, scaling.Prefill, "",
			scaling.EngineCapabilities{MaxNumBatchedTokens: 4096, MaxNumSeqs: 64, ContextLength: 8192, MaxKVTokens: 16000, SpeculativeNextn: 3}, true},
		{"decode card given as a JSON string; LoRA cards skipped", map[string]any{"model_cards": cards}, scaling.Decode, "backend",
			scaling.EngineCapabilities{MaxNumSeqs: 256, ContextLength: 16384, MaxKVTokens: 6400}, true},
		{"another runtime component", map[string]any{"model_cards": cards}, scaling.Decode, "decode", scaling.EngineCapabilities{}, false},
		{"data as a JSON string, cards as a list", `{"model_cards": [{"type": "Model", "card_json": ` + decodeCard + `}]}`, scaling.Decode, "",
			scaling.EngineCapabilities{MaxNumSeqs: 256, ContextLength: 16384, MaxKVTokens: 6400}, true},
		{"model_cards as a JSON string", map[string]any{"model_cards": `{"x": {"type": "Model", "card_json": ` + decodeCard + `}}`}, scaling.Decode, "",
			scaling.EngineCapabilities{MaxNumSeqs: 256, ContextLength: 16384, MaxKVTokens: 6400}, true},
		{"malformed", "{not json", scaling.Decode, "", scaling.EngineCapabilities{}, false},
		{"absurd numbers are unknown", map[string]any{"model_cards": map[string]any{"x": map[string]any{"type": "Model",
			"card_json": map[string]any{"worker_type": "decode", "kv_cache_block_size": int64(1 << 30),
				"runtime_config": map[string]any{"total_kv_blocks": int64(1 << 30), "max_num_seqs": int64(-5), "max_num_batched_tokens": 1.5}}}}},
			scaling.Decode, "", scaling.EngineCapabilities{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, found := cardOf(item(tc.data), tc.role, tc.component)
			require.Equal(t, tc.found, found)
			require.Equal(t, tc.want, got)
		})
	}
}
