package kubernetes

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llmplanner/planner/scaling"
)

// The Dynamo resources the connector reads and writes (group nvidia.com).
var (
	// DGDResource is the DynamoGraphDeployment.
	DGDResource = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1beta1", Resource: "dynamographdeployments"}
	// AdapterResource is the DynamoGraphDeploymentScalingAdapter (it has a scale
	// subresource).
	AdapterResource = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1beta1", Resource: "dynamographdeploymentscalingadapters"}
)

// Labels and annotations.
const (
	// LabelDGD is the label Dynamo's operator puts on a DGD's pods and adapters: the DGD name.
	LabelDGD = "nvidia.com/dynamo-graph-deployment-name"
	// LabelComponent is the label naming a pod's (or adapter's) component.
	LabelComponent = "nvidia.com/dynamo-component"
	// LabelSnapshotJobUID and LabelSnapshotJob mark checkpoint-capture Job pods, which are not
	// serving replicas.
	LabelSnapshotJobUID = "nvidia.com/snapshot-job-uid"
	LabelSnapshotJob    = "nvidia.com/snapshot-job"
	// LabelPCSGReplicaIndex is Grove's PodCliqueScalingGroup replica index on a pod.
	LabelPCSGReplicaIndex = "grove.io/podcliquescalinggroup-replica-index"
	// AnnotationDecisionID records, on the DGD, the newest planner decision applied: it makes
	// a retried apply harmless and refuses a stale one, across planner and worker restarts.
	AnnotationDecisionID = "planner.llmplanner.io/decision-id"
)

// Component types of spec.components[].type.
const (
	typePrefill = "prefill"
	typeDecode  = "decode"
	typeWorker  = "worker"
	typePlanner = "planner"
)

// component is one resolved entry of spec.components.
type component struct {
	// index is its position in spec.components (JSON Patch paths use it).
	index int
	name  string
	typ   string
	// replicas is spec.components[i].replicas (0 when absent).
	replicas int64
	// hasAdapter is true when the component declares a scalingAdapter key (even {}).
	hasAdapter bool
	// raw is the whole component, for the JSON Patch test op.
	raw map[string]any
}

// components reads spec.components; the older spec.services.<name>{subComponentType} form
// (v1alpha1 manifests) is read too, with an index of -1 (it cannot be patched by index).
func components(dgd *unstructured.Unstructured) ([]component, error) {
	list, found, err := unstructured.NestedSlice(dgd.Object, "spec", "components")
	if err != nil {
		return nil, fmt.Errorf("spec.components: %w", err)
	}
	if !found {
		return legacyServices(dgd)
	}
	out := make([]component, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.components[%d]: want an object, got %T", i, item)
		}
		c := component{index: i, raw: m}
		c.name, _ = m["name"].(string)
		c.typ, _ = m["type"].(string)
		if c.name == "" {
			return nil, fmt.Errorf("spec.components[%d]: no name", i)
		}
		_, c.hasAdapter = m["scalingAdapter"]
		if r, ok := m["replicas"]; ok && r != nil {
			n, err := nonNegativeInt(r)
			if err != nil {
				return nil, fmt.Errorf("spec.components[%d] (%s).replicas: %w", i, c.name, err)
			}
			c.replicas = n
		}
		out = append(out, c)
	}
	return out, nil
}

// legacyServices reads the v1alpha1 form spec.services.<name>{componentType,
// subComponentType, replicas}.
func legacyServices(dgd *unstructured.Unstructured) ([]component, error) {
	services, found, err := unstructured.NestedMap(dgd.Object, "spec", "services")
	if err != nil {
		return nil, fmt.Errorf("spec.services: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("the DynamoGraphDeployment has neither spec.components (v1beta1) nor spec.services (v1alpha1)")
	}
	var out []component
	for name, v := range services {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.services.%s: want an object", name)
		}
		c := component{index: -1, name: name, raw: m}
		c.typ, _ = m["subComponentType"].(string)
		if c.typ == "" {
			if ct, _ := m["componentType"].(string); ct == typePlanner || ct == typeWorker {
				c.typ = ct
			}
		}
		_, c.hasAdapter = m["scalingAdapter"]
		if r, ok := m["replicas"]; ok && r != nil {
			n, err := nonNegativeInt(r)
			if err != nil {
				return nil, fmt.Errorf("spec.services.%s.replicas: %w", name, err)
			}
			c.replicas = n
		}
		out = append(out, c)
	}
	return out, nil
}

// resolve finds the component of a role: the one whose type is the role (two are an error);
// for decode, else the single component of type worker (an aggregated graph); else the
// explicit name when its type is "", worker or the role. A typed match beats the name.
func resolve(comps []component, role scaling.Component, explicit string) (*component, error) {
	var typed, workers []*component
	for i := range comps {
		c := &comps[i]
		switch c.typ {
		case string(role):
			typed = append(typed, c)
		case typeWorker:
			workers = append(workers, c)
		}
	}
	switch {
	case len(typed) > 1:
		names := make([]string, len(typed))
		for i, c := range typed {
			names[i] = c.name
		}
		return nil, fmt.Errorf("%d components have type %s (%s): the planner cannot tell which to scale", len(typed), role, strings.Join(names, ", "))
	case len(typed) == 1:
		return typed[0], nil
	case role == scaling.Decode && len(workers) == 1 && explicit == "":
		return workers[0], nil
	}
	if explicit != "" {
		for i := range comps {
			c := &comps[i]
			if c.name != explicit {
				continue
			}
			if c.typ == "" || c.typ == typeWorker || c.typ == string(role) {
				return c, nil
			}
			return nil, fmt.Errorf("component %s has type %q, not %s", explicit, c.typ, role)
		}
		return nil, fmt.Errorf("no component named %s", explicit)
	}
	return nil, nil
}

// componentStatus is status.components.<name>.
type componentStatus struct {
	replicas, updated, ready, available *int64
	gpusPerEngine                       *int64
	componentKind, runtimeComponentName string
}

// statusOf reads status.components.<name> (v1alpha1: status.services.<name>).
func statusOf(dgd *unstructured.Unstructured, name string) componentStatus {
	m, found, _ := unstructured.NestedMap(dgd.Object, "status", "components", name)
	if !found {
		m, found, _ = unstructured.NestedMap(dgd.Object, "status", "services", name)
	}
	var s componentStatus
	if !found {
		return s
	}
	get := func(k string) *int64 {
		v, ok := m[k]
		if !ok || v == nil {
			return nil
		}
		n, err := nonNegativeInt(v)
		if err != nil {
			return nil
		}
		return &n
	}
	s.replicas, s.updated, s.ready, s.available = get("replicas"), get("updatedReplicas"), get("readyReplicas"), get("availableReplicas")
	s.gpusPerEngine = get("gpusPerEngine")
	s.componentKind, _ = m["componentKind"].(string)
	s.runtimeComponentName, _ = m["runtimeComponentName"].(string)
	return s
}

// serving is availableReplicas, else readyReplicas, else 0.
func (s componentStatus) serving() int64 {
	switch {
	case s.available != nil:
		return *s.available
	case s.ready != nil:
		return *s.ready
	}
	return 0
}

// updatedCount is updatedReplicas, else 0.
func (s componentStatus) updatedCount() int64 {
	if s.updated == nil {
		return 0
	}
	return *s.updated
}

// allZero reports whether replicas, updatedReplicas and the ready/available counts present
// are all 0 (at least one of ready and available present): a component that serves nothing
// and has nothing in progress.
func (s componentStatus) allZero() bool {
	if s.replicas == nil || s.updated == nil || *s.replicas != 0 || *s.updated != 0 {
		return false
	}
	if s.ready == nil && s.available == nil {
		return false
	}
	return (s.ready == nil || *s.ready == 0) && (s.available == nil || *s.available == 0)
}

// readyCondition reads status.conditions[type=Ready]: whether it is "True", and its reason
// and message for errors.
func readyCondition(dgd *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(dgd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return status == "True", strings.TrimSpace(fmt.Sprintf("Ready=%s %s %s", status, reason, msg))
	}
	return false, "no Ready condition"
}

// generationObserved reports status.observedGeneration >= metadata.generation.
func generationObserved(dgd *unstructured.Unstructured) bool {
	observed, found, err := unstructured.NestedInt64(dgd.Object, "status", "observedGeneration")
	if err != nil || !found {
		return false
	}
	return observed >= dgd.GetGeneration()
}

// rolloutPhase is status.rollingUpdate.phase ("" when absent).
func rolloutPhase(dgd *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(dgd.Object, "status", "rollingUpdate", "phase")
	return p
}

// failed reports status.state == failed (any case).
func failed(dgd *unstructured.Unstructured) bool {
	s, _, _ := unstructured.NestedString(dgd.Object, "status", "state")
	return strings.EqualFold(s, "failed")
}

// appliedDecisionID reads the decision-id annotation (0 when absent); a malformed one is an
// error (someone else wrote it: the planner will not guess).
func appliedDecisionID(dgd *unstructured.Unstructured) (int64, error) {
	v, ok := dgd.GetAnnotations()[AnnotationDecisionID]
	if !ok {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("annotation %s=%q is not a decision id", AnnotationDecisionID, v)
	}
	return id, nil
}

// nonNegativeInt reads a JSON number that must be a non-negative integer (bools are not).
func nonNegativeInt(v any) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		n = int64(x)
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		n = i
	default:
		return 0, fmt.Errorf("want an integer, got %T", v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%d is negative", n)
	}
	return n, nil
}

// checkAdapter checks that an adapter belongs to the DGD's component before its count is
// trusted: name, not being deleted, a resourceVersion, the DGD as controller owner,
// spec.dgdRef naming the DGD and the component, and matching labels when present. It returns
// spec.replicas.
func checkAdapter(a *unstructured.Unstructured, dgd *unstructured.Unstructured, comp string) (int64, error) {
	want := AdapterName(dgd.GetName(), comp)
	fail := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("scaling adapter %s: %s", want, fmt.Sprintf(format, args...))
	}
	if a.GetName() != want {
		return fail("the object is named %s", a.GetName())
	}
	if a.GetDeletionTimestamp() != nil {
		return fail("is being deleted")
	}
	if a.GetResourceVersion() == "" {
		return fail("has no resourceVersion")
	}
	owned := false
	for _, o := range a.GetOwnerReferences() {
		if o.APIVersion == "nvidia.com/v1beta1" && o.Kind == "DynamoGraphDeployment" && o.Name == dgd.GetName() &&
			o.UID == dgd.GetUID() && o.Controller != nil && *o.Controller {
			owned = true
		}
	}
	if !owned {
		return fail("is not controlled by DynamoGraphDeployment %s (uid %s)", dgd.GetName(), dgd.GetUID())
	}
	ref, _, _ := unstructured.NestedString(a.Object, "spec", "dgdRef", "name")
	refComp, _, _ := unstructured.NestedString(a.Object, "spec", "dgdRef", "componentName")
	if refComp == "" {
		refComp, _, _ = unstructured.NestedString(a.Object, "spec", "dgdRef", "serviceName")
	}
	if ref != dgd.GetName() || refComp != comp {
		return fail("spec.dgdRef names %s/%s, not %s/%s", ref, refComp, dgd.GetName(), comp)
	}
	labels := a.GetLabels()
	if v, ok := labels[LabelDGD]; ok && v != dgd.GetName() {
		return fail("label %s=%s", LabelDGD, v)
	}
	if v, ok := labels[LabelComponent]; ok && v != comp {
		return fail("label %s=%s", LabelComponent, v)
	}
	r, found, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "replicas")
	if !found {
		return fail("has no spec.replicas")
	}
	n, err := nonNegativeInt(r)
	if err != nil {
		return fail("spec.replicas must be a non-negative integer: %v", err)
	}
	return n, nil
}

// Component is one component of a DGD's spec, as the planner reads it.
type Component struct {
	// Name is spec.components[].name (v1alpha1: the spec.services key).
	Name string
	// Type is spec.components[].type (prefill, decode, worker, frontend, planner...; v1alpha1:
	// subComponentType).
	Type string
	// Replicas is spec.components[].replicas (0 when absent).
	Replicas int64
	// ScalingAdapter is true when the component declares a scalingAdapter: its
	// DynamoGraphDeploymentScalingAdapter owns the count.
	ScalingAdapter bool
}

// Components reads a DGD's components (spec.components, or the older spec.services form).
func Components(dgd *unstructured.Unstructured) ([]Component, error) {
	comps, err := components(dgd)
	if err != nil {
		return nil, err
	}
	out := make([]Component, len(comps))
	for i, c := range comps {
		out[i] = Component{Name: c.name, Type: c.typ, Replicas: c.replicas, ScalingAdapter: c.hasAdapter}
	}
	return out, nil
}

// AdapterName is the scaling adapter of a DGD's component: <dgd>-<lower(component)>.
func AdapterName(dgd, component string) string { return dgd + "-" + strings.ToLower(component) }
