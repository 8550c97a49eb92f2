package kubernetes

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llmplanner/planner/scaling"
)

// WorkerMetadataResource is DynamoWorkerMetadata: the model deployment cards (MDC) Dynamo's
// workers publish, with their engines' runtime limits.
var WorkerMetadataResource = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "dynamoworkermetadatas"}

// mdcCapabilities reads the engines' limits from the DGD's DynamoWorkerMetadata (names
// starting "<dgd>-"): per role, the first Model card (LoRA cards skipped) whose worker_type is
// prefill (prefill) or not (decode), and whose component, when both are known, is the role's
// runtime component. A missing CRD or a 403 leaves the limits unknown (logged once).
func (c *Connector) mdcCapabilities(ctx context.Context, g *graph) map[scaling.Component]scaling.EngineCapabilities {
	list, err := c.dyn.Resource(WorkerMetadataResource).Namespace(c.o.Namespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if !c.warnedMDC.Swap(true) {
			c.log.Info("no DynamoWorkerMetadata CRD: the engines' limits come from the planner config or stay unknown")
		}
		return nil
	case apierrors.IsForbidden(err):
		if !c.warnedMDC.Swap(true) {
			c.log.Warn("listing DynamoWorkerMetadata is forbidden: the engines' limits stay unknown until dynamoworkermetadatas list is granted", "error", err)
		}
		return nil
	case err != nil:
		c.log.Debug("DynamoWorkerMetadata", "error", err)
		return nil
	}
	out := map[scaling.Component]scaling.EngineCapabilities{}
	for _, role := range []scaling.Component{scaling.Prefill, scaling.Decode} {
		comp := g.roles.of(role)
		if comp == nil {
			continue
		}
		want := statusOf(g.dgd, comp.name).runtimeComponentName
		for _, item := range list.Items {
			if !strings.HasPrefix(item.GetName(), c.o.DGD+"-") {
				continue
			}
			if caps, ok := cardOf(&item, role, want); ok {
				out[role] = caps
				break
			}
		}
	}
	return out
}

// cardOf finds a role's Model card in one DynamoWorkerMetadata.
func cardOf(item *unstructured.Unstructured, role scaling.Component, component string) (scaling.EngineCapabilities, bool) {
	data, found, _ := unstructured.NestedFieldNoCopy(item.Object, "spec", "data")
	if !found {
		return scaling.EngineCapabilities{}, false
	}
	dm, ok := jsonObject(data)
	if !ok {
		return scaling.EngineCapabilities{}, false
	}
	var cards []any
	mc := dm["model_cards"]
	if s, ok := mc.(string); ok {
		var v any
		if len(s) > maxCardJSON || json.Unmarshal([]byte(s), &v) != nil {
			return scaling.EngineCapabilities{}, false
		}
		mc = v
	}
	switch v := mc.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			cards = append(cards, v[k])
		}
	case []any:
		cards = v
	}
	for _, w := range cards {
		wrapper, ok := w.(map[string]any)
		if !ok || wrapper["type"] != "Model" {
			continue
		}
		card, ok := jsonObject(wrapper["card_json"])
		if !ok {
			continue
		}
		wt, _ := card["worker_type"].(string)
		if strings.EqualFold(wt, "prefill") != (role == scaling.Prefill) {
			continue
		}
		if comp, _ := wrapper["component"].(string); comp != "" && component != "" && comp != component {
			continue
		}
		return capabilitiesOf(card), true
	}
	return scaling.EngineCapabilities{}, false
}

// capabilitiesOf reads a card's runtime_config: max_num_batched_tokens, max_num_seqs,
// context_length (else architectural_max_context_length), total_kv_blocks ×
// kv_cache_block_size, and the speculative-decoding nextn.
func capabilitiesOf(card map[string]any) scaling.EngineCapabilities {
	num := func(m map[string]any, k string) int64 {
		if m == nil {
			return 0
		}
		n, err := nonNegativeInt(m[k])
		if err != nil || n > 1<<40 {
			return 0
		}
		return n
	}
	rc, _ := card["runtime_config"].(map[string]any)
	caps := scaling.EngineCapabilities{MaxNumBatchedTokens: num(rc, "max_num_batched_tokens"), MaxNumSeqs: num(rc, "max_num_seqs"),
		ContextLength: num(rc, "context_length")}
	if caps.ContextLength == 0 {
		caps.ContextLength = num(card, "architectural_max_context_length")
	}
	if blocks, size := num(rc, "total_kv_blocks"), num(card, "kv_cache_block_size"); blocks > 0 && size > 0 && blocks <= (1<<40)/size {
		caps.MaxKVTokens = blocks * size
	}
	if rd, ok := rc["runtime_data"].(map[string]any); ok {
		if sd, ok := rd["spec_decode"].(map[string]any); ok {
			if n := num(sd, "nextn"); n > 0 && n < 64 {
				caps.SpeculativeNextn = int(n)
			}
		}
	}
	return caps
}

// maxCardJSON bounds a model-card document given as a JSON string.
const maxCardJSON = 1 << 20

// jsonObject is v as an object: a map, or a JSON string holding one (Dynamo's
// DynamoWorkerMetadata may carry its data either way).
func jsonObject(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case string:
		var m map[string]any
		if len(x) > maxCardJSON || json.Unmarshal([]byte(x), &m) != nil {
			return nil, false
		}
		return m, true
	}
	return nil, false
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
