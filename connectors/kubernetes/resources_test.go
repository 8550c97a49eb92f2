package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplanner/planner/scaling"
)

func dgdWith(comps ...map[string]any) *unstructured.Unstructured {
	list := make([]any, len(comps))
	for i, c := range comps {
		list[i] = c
	}
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"components": list}}}
}

func comp(name, typ string) map[string]any { return map[string]any{"name": name, "type": typ} }

func TestResolveComponents(t *testing.T) {
	tests := []struct {
		name              string
		dgd               *unstructured.Unstructured
		prefill, decode   string
		explicitP, explD  string
		wantErr           string
		wantP, wantD      string
		wantPNil, wantDNl bool
	}{
		{name: "by type", dgd: dgdWith(comp("Frontend", "frontend"), comp("VllmPrefillWorker", "prefill"), comp("VllmDecodeWorker", "decode")),
			wantP: "VllmPrefillWorker", wantD: "VllmDecodeWorker"},
		{name: "aggregated: decode is the single worker", dgd: dgdWith(comp("Frontend", "frontend"), comp("VllmWorker", "worker")),
			wantPNil: true, wantD: "VllmWorker"},
		{name: "two decode components", dgd: dgdWith(comp("a", "decode"), comp("b", "decode")),
			wantErr: "2 components have type decode (a, b)"},
		{name: "two workers: no aggregated fallback", dgd: dgdWith(comp("a", "worker"), comp("b", "worker")),
			wantErr: "no prefill, decode or worker component"},
		{name: "explicit name of an untyped component", dgd: dgdWith(comp("p", ""), comp("d", "decode")), explicitP: "p",
			wantP: "p", wantD: "d"},
		{name: "explicit name of another role", dgd: dgdWith(comp("p", "decode")), explicitP: "p",
			wantErr: "component p has type \"decode\", not prefill"},
		{name: "explicit name missing", dgd: dgdWith(comp("d", "decode")), explicitP: "nope", wantErr: "no component named nope"},
		{name: "a typed match beats the name", dgd: dgdWith(comp("p", "prefill"), comp("q", "")), explicitP: "q", wantP: "p", wantDNl: true},
		{name: "replicas not an integer", dgd: dgdWith(map[string]any{"name": "d", "type": "decode", "replicas": 1.5}),
			wantErr: "replicas: 1.5 is not an integer"},
		{name: "component without a name", dgd: dgdWith(map[string]any{"type": "decode"}), wantErr: "spec.components[0]: no name"},
		{name: "v1alpha1 services", dgd: &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g"},
			"spec": map[string]any{"services": map[string]any{
				"VllmPrefillWorker": map[string]any{"componentType": "worker", "subComponentType": "prefill", "replicas": int64(2)},
				"VllmDecodeWorker":  map[string]any{"componentType": "worker", "subComponentType": "decode"}}}}},
			wantP: "VllmPrefillWorker", wantD: "VllmDecodeWorker"},
		{name: "neither form", dgd: &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g"}, "spec": map[string]any{}}},
			wantErr: "neither spec.components (v1beta1) nor spec.services (v1alpha1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Connector{o: Options{Namespace: "ns", DGD: "g", PrefillComponent: tc.explicitP, DecodeComponent: tc.explD}}
			r, err := c.roles(tc.dgd)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			name := func(c *component) string {
				if c == nil {
					return ""
				}
				return c.name
			}
			if !tc.wantPNil {
				require.Equal(t, tc.wantP, name(r.of(scaling.Prefill)))
			} else {
				require.Nil(t, r.prefill)
			}
			if !tc.wantDNl {
				require.Equal(t, tc.wantD, name(r.of(scaling.Decode)))
			} else {
				require.Nil(t, r.decode)
			}
		})
	}
}

func TestCheckAdapter(t *testing.T) {
	dgd := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "g", "uid": "u1"}}}
	good := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "g-prefill", "resourceVersion": "7",
				"labels":          map[string]any{LabelDGD: "g", LabelComponent: "Prefill"},
				"ownerReferences": []any{map[string]any{"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "name": "g", "uid": "u1", "controller": true}}},
			"spec": map[string]any{"replicas": int64(3), "dgdRef": map[string]any{"name": "g", "componentName": "Prefill"}},
		}}
	}
	n, err := checkAdapter(good(), dgd, "Prefill")
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	tests := []struct {
		name   string
		mutate func(a *unstructured.Unstructured)
		want   string
	}{
		{"another owner", func(a *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(a.Object, []any{map[string]any{"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
				"name": "g", "uid": "other", "controller": true}}, "metadata", "ownerReferences")
		}, "is not controlled by DynamoGraphDeployment g"},
		{"not the controller", func(a *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(a.Object, []any{map[string]any{"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
				"name": "g", "uid": "u1"}}, "metadata", "ownerReferences")
		}, "is not controlled"},
		{"dgdRef of another component", func(a *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(a.Object, "Decode", "spec", "dgdRef", "componentName")
		}, "spec.dgdRef names g/Decode"},
		{"label of another DGD", func(a *unstructured.Unstructured) {
			a.SetLabels(map[string]string{LabelDGD: "h"})
		}, "label nvidia.com/dynamo-graph-deployment-name=h"},
		{"being deleted", func(a *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(a.Object, "2026-01-01T00:00:00Z", "metadata", "deletionTimestamp")
		}, "is being deleted"},
		{"negative replicas", func(a *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(a.Object, int64(-1), "spec", "replicas")
		}, "spec.replicas must be a non-negative integer"},
		{"boolean replicas", func(a *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(a.Object, true, "spec", "replicas")
		}, "spec.replicas must be a non-negative integer"},
		{"no resourceVersion", func(a *unstructured.Unstructured) { a.SetResourceVersion("") }, "has no resourceVersion"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := good()
			tc.mutate(a)
			_, err := checkAdapter(a, dgd, "Prefill")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
