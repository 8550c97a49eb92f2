package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/connectortest"
	"github.com/llmplanner/planner/connectors/kubernetes"
	"github.com/llmplanner/planner/internal/kubetest"
	"github.com/llmplanner/planner/sim/operator"
)

// One control plane serves every test of this file (each uses its own namespace).
var cluster *kubetest.Cluster

// sharedCluster is the control plane TestAPIServer started.
func sharedCluster(t *testing.T) *kubetest.Cluster {
	t.Helper()
	require.NotNil(t, cluster, "run through TestAPIServer")
	return cluster
}

// TestAPIServer groups the tests that run against a real kube-apiserver, so one control plane
// (about 3 s to start) serves them all.
func TestAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real kube-apiserver: skipped with -short")
	}
	cluster = kubetest.Start(t)
	t.Cleanup(func() { cluster = nil })
	t.Run("conformance", testConformance)
	t.Run("adapter and DGD paths", testWritePaths)
	t.Run("conflicting writer", testConflictingWriter)
	t.Run("a newer decision wins on the adapter", testNewerDecisionWinsOnAdapter)
	t.Run("held while not ready", testHeldWhileNotReady)
	t.Run("startup cancellation", testStartupCancellation)
	t.Run("unready recovery", testUnreadyRecovery)
	t.Run("rbac", testRBAC)
	t.Run("fpm endpoints", testFPMEndpoints)
	t.Run("role grants exactly the calls", testRoleIsExact)
	t.Run("traced calls", testTracedCalls)
}

var nsCounter atomic.Int64

// newNamespace makes a fresh namespace with an instant simulated operator (the status follows
// the spec at once, adapters are created).
func newNamespace(t *testing.T, c *kubetest.Cluster) (string, *operator.Operator) {
	ns := fmt.Sprintf("t%d", nsCounter.Add(1))
	c.Namespace(t, ns)
	op, err := operator.New(operator.Options{Config: c.Admin, Namespace: ns, Logger: quiet()})
	require.NoError(t, err)
	return ns, op
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// createDGD creates a DGD with a frontend, a prefill component behind a scaling adapter and a
// decode component without one.
func createDGD(t *testing.T, c *kubetest.Cluster, ns, name string, prefill, decode int64) *unstructured.Unstructured {
	t.Helper()
	dgd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"components": []any{
			map[string]any{"name": "Frontend", "type": "frontend", "replicas": int64(1)},
			map[string]any{"name": "VllmPrefillWorker", "type": "prefill", "replicas": prefill, "scalingAdapter": map[string]any{}},
			map[string]any{"name": "VllmDecodeWorker", "type": "decode", "replicas": decode,
				"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "args": []any{"--model", "m"}}}}}},
		}},
	}}
	out, err := c.Dynamic(t).Resource(kubernetes.DGDResource).Namespace(ns).Create(context.Background(), dgd, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

// newDGD makes a fresh namespace with a DGD of prefill and decode replicas whose status the
// instant operator has settled.
func newDGD(t *testing.T, name string, prefill, decode int64) (*kubetest.Cluster, string, *operator.Operator) {
	t.Helper()
	c := sharedCluster(t)
	ns, op := newNamespace(t, c)
	createDGD(t, c, ns, name, prefill, decode)
	reconcile(t, op)
	return c, ns, op
}

func newConnector(t *testing.T, cfg *rest.Config, ns, name string) *kubernetes.Connector {
	t.Helper()
	k, err := kubernetes.New(cfg, kubernetes.Options{Namespace: ns, DGD: name, Logger: quiet()})
	require.NoError(t, err)
	return k
}

func reconcile(t *testing.T, op *operator.Operator) {
	t.Helper()
	require.NoError(t, op.ReconcileOnce(context.Background()))
}

func testConformance(t *testing.T) {
	c := sharedCluster(t)
	ns, op := newNamespace(t, c)
	n := 0
	connectortest.Run(t, func(t *testing.T) connectors.Connector {
		n++
		name := fmt.Sprintf("conf-%d", n)
		createDGD(t, c, ns, name, 1, 1)
		reconcile(t, op)
		return newConnector(t, c.Admin, ns, name)
	}, connectortest.Options{Applies: true, Settle: func(t *testing.T, _ connectors.Connector) { reconcile(t, op) }})
}

// recorder records the API requests a client makes.
type recorder struct {
	mu       sync.Mutex
	requests []string
	// before, when set, runs before each request is sent.
	before func(r *http.Request)
}

func (rec *recorder) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if rec.before != nil {
				rec.before(r)
			}
			resp, err := rt.RoundTrip(r)
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			rec.mu.Lock()
			rec.requests = append(rec.requests, fmt.Sprintf("%s %s %s %d", r.Method, r.URL.Path, r.Header.Get("Content-Type"), code))
			rec.mu.Unlock()
			return resp, err
		})
	})
	return cfg
}

// writes lists the recorded PATCH requests.
func (rec *recorder) writes() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.requests {
		if strings.HasPrefix(r, "PATCH") || strings.HasPrefix(r, "PUT") || strings.HasPrefix(r, "POST") {
			out = append(out, r)
		}
	}
	return out
}

func (rec *recorder) reset() {
	rec.mu.Lock()
	rec.requests = nil
	rec.mu.Unlock()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func replicasOf(t *testing.T, c *kubetest.Cluster, ns, name string) (prefillAdapter, decodeDGD int64) {
	t.Helper()
	ctx := context.Background()
	a, err := c.Dynamic(t).Resource(kubernetes.AdapterResource).Namespace(ns).Get(ctx, kubernetes.AdapterName(name, "VllmPrefillWorker"), metav1.GetOptions{})
	require.NoError(t, err)
	prefillAdapter, _, _ = unstructured.NestedInt64(a.Object, "spec", "replicas")
	dgd, err := c.Dynamic(t).Resource(kubernetes.DGDResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	comps, _, _ := unstructured.NestedSlice(dgd.Object, "spec", "components")
	decodeDGD, _, _ = unstructured.NestedInt64(comps[2].(map[string]any), "replicas")
	return prefillAdapter, decodeDGD
}

// testWritePaths checks the two write paths on the wire: one JSON Patch on the DGD that claims
// the decision (its annotation) and scales the decode component, then the adapter's scale
// subresource (a merge patch carrying the resourceVersion) for the prefill component; a
// component at its target and a repeated decision write nothing; the DGD's own spec replicas
// of the adapter-owned component is never written.
func testWritePaths(t *testing.T) {
	c, ns, op := newDGD(t, "paths", 1, 1)
	rec := &recorder{}
	k := newConnector(t, rec.wrap(c.Admin), ns, "paths")
	ctx := context.Background()
	n := func(v int) *int { return &v }

	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Prefill: n(3), Decode: n(2)}))
	require.Equal(t, []string{
		"PATCH /apis/nvidia.com/v1beta1/namespaces/" + ns + "/dynamographdeployments/paths application/json-patch+json 200",
		"PATCH /apis/nvidia.com/v1beta1/namespaces/" + ns + "/dynamographdeploymentscalingadapters/paths-vllmprefillworker/scale application/merge-patch+json 200",
	}, rec.writes(), "one DGD patch claims the decision and scales decode, then the adapter's scale")
	p, d := replicasOf(t, c, ns, "paths")
	require.Equal(t, int64(3), p)
	require.Equal(t, int64(2), d)
	dgd, err := c.Dynamic(t).Resource(kubernetes.DGDResource).Namespace(ns).Get(ctx, "paths", metav1.GetOptions{})
	require.NoError(t, err)
	comps, _, _ := unstructured.NestedSlice(dgd.Object, "spec", "components")
	prefillSpec, _, _ := unstructured.NestedInt64(comps[1].(map[string]any), "replicas")
	require.Equal(t, int64(1), prefillSpec, "the adapter owns the prefill count: the DGD's spec is not written")
	require.Equal(t, "1", dgd.GetAnnotations()[kubernetes.AnnotationDecisionID])
	args, _, _ := unstructured.NestedSlice(comps[2].(map[string]any), "podTemplate", "spec", "containers")
	require.Len(t, args, 1, "the rest of the component is kept")

	rec.reset()
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Prefill: n(3), Decode: n(2)}))
	require.Empty(t, rec.writes(), "the same decision again writes nothing")

	reconcile(t, op)
	rec.reset()
	require.NoError(t, k.Apply(ctx, 2, connectors.Targets{Prefill: n(3), Decode: n(2)}))
	require.Equal(t, []string{
		"PATCH /apis/nvidia.com/v1beta1/namespaces/" + ns + "/dynamographdeployments/paths application/json-patch+json 200",
	}, rec.writes(), "components at their targets are skipped; only the decision is recorded")

	inv, err := k.Inventory(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), inv.AppliedDecisionID)
	require.Equal(t, 3, *inv.ReadyPrefill)
	require.Equal(t, 2, *inv.ReadyDecode)
	require.Equal(t, 1, inv.Capabilities.Prefill.NumGPU, "GPU shape from status.components.<c>.gpusPerEngine")

	// A role the DGD does not have is refused before anything is written.
	agg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
		"metadata": map[string]any{"name": "agg", "namespace": ns},
		"spec":     map[string]any{"components": []any{map[string]any{"name": "VllmWorker", "type": "worker", "replicas": int64(2)}}},
	}}
	_, err = c.Dynamic(t).Resource(kubernetes.DGDResource).Namespace(ns).Create(ctx, agg, metav1.CreateOptions{})
	require.NoError(t, err)
	reconcile(t, op)
	ka := newConnector(t, rec.wrap(c.Admin), ns, "agg")
	rec.reset()
	require.ErrorIs(t, ka.Apply(ctx, 1, connectors.Targets{Prefill: n(1), Decode: n(3)}), connectors.ErrInvalidTargets)
	require.Empty(t, rec.writes())
	require.NoError(t, ka.Apply(ctx, 1, connectors.Targets{Decode: n(3)}), "aggregated: decode is the worker component")
	inv, err = ka.Inventory(ctx)
	require.NoError(t, err)
	require.Nil(t, inv.ReadyPrefill)
	require.Equal(t, 2, *inv.ReadyDecode)
	require.Nil(t, inv.ExpectedDecode, "3 desired, 2 ready: not stable, no expected count")
	require.True(t, inv.DecodeScalingInProgress)
}

// testConflictingWriter makes another writer change the DGD between the connector's read and
// its patch: the patch's resourceVersion test fails, the connector reads again and retries,
// and the other writer's change survives.
func testConflictingWriter(t *testing.T) {
	c, ns, _ := newDGD(t, "race", 1, 1)
	ctx := context.Background()
	admin := c.Dynamic(t)
	var interfered atomic.Bool
	rec := &recorder{}
	rec.before = func(r *http.Request) {
		if r.Method != http.MethodPatch || !strings.HasSuffix(r.URL.Path, "/dynamographdeployments/race") || interfered.Swap(true) {
			return
		}
		dgd, err := admin.Resource(kubernetes.DGDResource).Namespace(ns).Get(ctx, "race", metav1.GetOptions{})
		if err != nil {
			t.Errorf("interfering read: %v", err)
			return
		}
		dgd.SetLabels(map[string]string{"team": "other-writer"})
		if _, err := admin.Resource(kubernetes.DGDResource).Namespace(ns).Update(ctx, dgd, metav1.UpdateOptions{}); err != nil {
			t.Errorf("interfering write: %v", err)
		}
	}
	k := newConnector(t, rec.wrap(c.Admin), ns, "race")
	n := 3
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Decode: &n}))
	w := rec.writes()
	require.Len(t, w, 2)
	require.Contains(t, w[0], "dynamographdeployments/race application/json-patch+json 422", "the first patch fails its resourceVersion test")
	require.Contains(t, w[1], "dynamographdeployments/race application/json-patch+json 200", "read again and retried")
	dgd, err := admin.Resource(kubernetes.DGDResource).Namespace(ns).Get(ctx, "race", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "other-writer", dgd.GetLabels()["team"], "the other writer's change is not overwritten")
	_, d := replicasOf(t, c, ns, "race")
	require.Equal(t, int64(3), d)
}

// setStatus overwrites a DGD's status.
func setStatus(t *testing.T, c *kubetest.Cluster, ns, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	res := c.Dynamic(t).Resource(kubernetes.DGDResource).Namespace(ns)
	dgd, err := res.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	if _, ok := status["observedGeneration"]; !ok {
		status["observedGeneration"] = dgd.GetGeneration()
	}
	dgd.Object["status"] = status
	_, err = res.UpdateStatus(ctx, dgd, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func componentStatus(replicas, updated, ready int64) map[string]any {
	return map[string]any{"replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": ready}
}

// createPod creates a pod of a component in a phase; terminating pods keep a finalizer and
// are deleted.
func createPod(t *testing.T, c *kubetest.Cluster, ns, dgd, comp, name string, phase corev1.PodPhase, terminating bool) {
	t.Helper()
	ctx := context.Background()
	cs := c.Clientset(t)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubernetes.LabelDGD: dgd, kubernetes.LabelComponent: comp},
			Finalizers: []string{"test.llmplanner.io/hold"}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "main", Image: "x",
			Ports: []corev1.ContainerPort{{Name: "fpm", ContainerPort: 20380}}}}},
	}
	p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Status.Phase, p.Status.PodIP = phase, "10.0.0."+fmt.Sprint(len(name))
	if phase == corev1.PodRunning {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	if terminating {
		require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	}
	t.Cleanup(func() {
		_, _ = cs.CoreV1().Pods(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
}

// testHeldWhileNotReady: a scaling is held (ErrNotReady, nothing written) while the DGD is
// not Ready, while a rollout runs, and a scale-down while a pod terminates; the decision is
// not recorded, so the planner retries it.
func testHeldWhileNotReady(t *testing.T) {
	c, ns, _ := newDGD(t, "held", 2, 2)
	ctx := context.Background()
	rec := &recorder{}
	k := newConnector(t, rec.wrap(c.Admin), ns, "held")
	n := func(v int) *int { return &v }
	ready := map[string]any{"type": "Ready", "status": "True"}
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "Rollout", "message": "decode 1/2 ready"}
	comps := map[string]any{"Frontend": componentStatus(1, 1, 1), "VllmPrefillWorker": componentStatus(2, 2, 2), "VllmDecodeWorker": componentStatus(2, 2, 1)}

	setStatus(t, c, ns, "held", map[string]any{"conditions": []any{notReady}, "components": comps})
	rec.reset()
	err := k.Apply(ctx, 1, connectors.Targets{Decode: n(3)})
	require.ErrorIs(t, err, kubernetes.ErrNotReady)
	require.ErrorContains(t, err, "Ready=False Rollout decode 1/2 ready")
	require.Empty(t, rec.writes())
	inv, err := k.Inventory(ctx)
	require.NoError(t, err)
	require.Zero(t, inv.AppliedDecisionID, "a held decision is not recorded")
	require.Equal(t, 1, *inv.ReadyDecode)
	require.Nil(t, inv.ExpectedDecode)

	comps["VllmDecodeWorker"] = componentStatus(2, 2, 2)
	setStatus(t, c, ns, "held", map[string]any{"conditions": []any{ready}, "components": comps, "rollingUpdate": map[string]any{"phase": "InProgress"}})
	err = k.Apply(ctx, 1, connectors.Targets{Decode: n(1)})
	require.ErrorIs(t, err, kubernetes.ErrNotReady)
	require.ErrorContains(t, err, "a rolling update is in phase InProgress")

	setStatus(t, c, ns, "held", map[string]any{"conditions": []any{ready}, "components": comps})
	createPod(t, c, ns, "held", "VllmDecodeWorker", "held-d-old", corev1.PodRunning, true)
	err = k.Apply(ctx, 1, connectors.Targets{Decode: n(1)})
	require.ErrorIs(t, err, kubernetes.ErrNotReady)
	require.ErrorContains(t, err, "1 pod(s) of VllmDecodeWorker terminating")
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Decode: n(3)}), "a scale-up of a Ready DGD does not wait for pods")
	_, d := replicasOf(t, c, ns, "held")
	require.Equal(t, int64(3), d)
}

// testStartupCancellation: replicas that never became ready can be scaled away although the
// DGD is not Ready (Dynamo #14251): every target at most what serves and below the current
// count; a scale-down that keeps a starting replica is held.
func testStartupCancellation(t *testing.T) {
	c, ns, _ := newDGD(t, "cancel", 1, 3)
	ctx := context.Background()
	k := newConnector(t, c.Admin, ns, "cancel")
	n := func(v int) *int { return &v }
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "Scaling"}
	setStatus(t, c, ns, "cancel", map[string]any{"conditions": []any{notReady}, "components": map[string]any{
		"Frontend": componentStatus(1, 1, 1), "VllmPrefillWorker": componentStatus(1, 1, 1), "VllmDecodeWorker": componentStatus(3, 3, 1)}})
	createPod(t, c, ns, "cancel", "VllmDecodeWorker", "cancel-d-0", corev1.PodRunning, false)
	createPod(t, c, ns, "cancel", "VllmDecodeWorker", "cancel-d-1", corev1.PodPending, false)
	createPod(t, c, ns, "cancel", "VllmDecodeWorker", "cancel-d-2", corev1.PodPending, false)

	err := k.Apply(ctx, 1, connectors.Targets{Decode: n(2)})
	require.ErrorIs(t, err, kubernetes.ErrNotReady, "2 keeps a starting replica: not a cancellation, held")
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Decode: n(1)}), "the two pending replicas are cancelled")
	_, d := replicasOf(t, c, ns, "cancel")
	require.Equal(t, int64(1), d)
}

// testRBAC: without the planner's Role, the connector says which permission is missing; with
// a Role lacking pods list, it degrades and still scales.
func testRBAC(t *testing.T) {
	c, ns, op := newDGD(t, "rbac", 1, 1)
	ctx := context.Background()
	saCfg, _ := c.ServiceAccount(t, ns, "planner")
	k := newConnector(t, saCfg, ns, "rbac")
	_, err := k.Inventory(ctx)
	require.ErrorIs(t, err, kubernetes.ErrForbidden)
	require.ErrorContains(t, err, "the planner may not get dynamographdeployments in namespace "+ns+"; grant it the Role of deploy/base/rbac.yaml")

	// Everything but pods.
	cs := c.Clientset(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamographdeployments"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamographdeploymentscalingadapters"}, Verbs: []string{"get"}},
		{APIGroups: []string{"nvidia.com"}, Resources: []string{"dynamographdeploymentscalingadapters/scale"}, Verbs: []string{"patch"}},
	}}
	_, err = cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "no-pods"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "planner", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := k.Inventory(ctx); return err == nil }, 10*time.Second, 50*time.Millisecond,
		"RBAC bindings take effect")
	one, three := 1, 3
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Prefill: &three}))
	reconcile(t, op)
	require.NoError(t, k.Apply(ctx, 2, connectors.Targets{Prefill: &one}), "a scale-down of a Ready DGD without pods access: degraded, not refused")
	p, _ := replicasOf(t, c, ns, "rbac")
	require.Equal(t, int64(1), p)
	_, err = k.FPMEndpoints(ctx)
	require.ErrorIs(t, err, kubernetes.ErrForbidden)
	require.ErrorContains(t, err, "may not list pods")
}

// testFPMEndpoints: the ready pods of the prefill and decode components, at their fpm port.
func testFPMEndpoints(t *testing.T) {
	c, ns, _ := newDGD(t, "fpm", 1, 2)
	createPod(t, c, ns, "fpm", "VllmPrefillWorker", "p-a", corev1.PodRunning, false)
	createPod(t, c, ns, "fpm", "VllmDecodeWorker", "d-ab", corev1.PodRunning, false)
	createPod(t, c, ns, "fpm", "VllmDecodeWorker", "d-abc", corev1.PodPending, false)
	createPod(t, c, ns, "fpm", "VllmDecodeWorker", "d-abcd", corev1.PodRunning, true)
	createPod(t, c, ns, "fpm", "Frontend", "f-abcde", corev1.PodRunning, false)
	eps, err := newConnector(t, c.Admin, ns, "fpm").FPMEndpoints(context.Background())
	require.NoError(t, err)
	require.Equal(t, []connectors.Endpoint{
		{Address: "tcp://10.0.0.3:20380", Component: "prefill"},
		{Address: "tcp://10.0.0.4:20380", Component: "decode"},
	}, eps, "pending, terminating and frontend pods are left out")
}

// apiCall is one API request as RBAC sees it.
type apiCall struct{ group, resource, verb string }

// callOf maps a request path and method to its RBAC verb, group and resource
// ("/apis/g/v/namespaces/ns/res/name/sub" or "/api/v1/namespaces/ns/res").
func callOf(t *testing.T, method, path string) apiCall {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch parts[0] {
	case "api":
		parts = parts[2:]
	case "apis":
		group, parts = parts[1], parts[3:]
	default:
		t.Fatalf("unexpected path %s", path)
	}
	require.Equal(t, "namespaces", parts[0], "namespaced calls only: %s", path)
	parts = parts[2:]
	c := apiCall{group: group, resource: parts[0]}
	if len(parts) == 3 {
		c.resource += "/" + parts[2]
	}
	switch {
	case method == http.MethodGet && len(parts) == 1:
		c.verb = "list"
	case method == http.MethodGet:
		c.verb = "get"
	default:
		c.verb = strings.ToLower(method)
	}
	return c
}

// testRoleIsExact drives every call of the connector (inventory with an adapter-owned and a
// DGD-owned component, pods, model cards; a scale-up and a scale-down through both paths;
// FPM endpoints) as the service account of deploy/base/rbac.yaml: none is refused, and the set
// of calls is exactly the set the Role grants.
func testRoleIsExact(t *testing.T) {
	c, ns, op := newDGD(t, "llama", 1, 1)
	rbac, err := os.ReadFile(filepath.Join(c.Root, "deploy", "base", "rbac.yaml"))
	require.NoError(t, err)
	objs := kubetest.Objects(t, rbac)
	require.NoError(t, c.Apply(t, ns, objs, false))
	saCfg, _ := c.ServiceAccount(t, ns, "planner")
	rec := &recorder{}
	k := newConnector(t, rec.wrap(saCfg), ns, "llama")
	ctx := context.Background()
	require.Eventually(t, func() bool { _, err := k.Inventory(ctx); return err == nil }, 10*time.Second, 50*time.Millisecond)
	two, one := 2, 1
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Prefill: &two, Decode: &two}))
	reconcile(t, op)
	require.NoError(t, k.Apply(ctx, 2, connectors.Targets{Prefill: &one, Decode: &one}))
	_, err = k.FPMEndpoints(ctx)
	require.NoError(t, err)

	called := map[apiCall]bool{}
	rec.mu.Lock()
	for _, r := range rec.requests {
		f := strings.Fields(r)
		require.NotEqual(t, "403", f[len(f)-1], "refused: %s", r)
		called[callOf(t, f[0], f[1])] = true
	}
	rec.mu.Unlock()
	granted := map[apiCall]bool{}
	for _, o := range objs {
		if o.GetKind() != "Role" {
			continue
		}
		var role rbacv1.Role
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role))
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						granted[apiCall{g, res, v}] = true
					}
				}
			}
		}
	}
	require.Equal(t, granted, called, "the Role grants exactly what the connector calls")
}

// testNewerDecisionWinsOnAdapter: a late attempt of an older decision is about to write the
// prefill adapter when a newer decision is applied in full; the older one's scale patch fails
// on the adapter's resourceVersion, its retry finds the newer claim and gives up as stale, and
// the adapter keeps the newer decision's count.
func testNewerDecisionWinsOnAdapter(t *testing.T) {
	c, ns, _ := newDGD(t, "late", 1, 1)
	ctx := context.Background()
	newer := newConnector(t, c.Admin, ns, "late")
	var once atomic.Bool
	rec := &recorder{}
	rec.before = func(r *http.Request) {
		if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/scale") && !once.Swap(true) {
			five := 5
			if err := newer.Apply(ctx, 8, connectors.Targets{Prefill: &five}); err != nil {
				t.Errorf("the newer decision: %v", err)
			}
		}
	}
	older := newConnector(t, rec.wrap(c.Admin), ns, "late")
	three := 3
	err := older.Apply(ctx, 7, connectors.Targets{Prefill: &three})
	require.ErrorIs(t, err, connectors.ErrStaleDecision)
	require.ErrorContains(t, err, "decision 7 is older than decision 8")
	p, _ := replicasOf(t, c, ns, "late")
	require.Equal(t, int64(5), p, "the newer decision's count stands")
	w := rec.writes()
	require.Contains(t, w[len(w)-1], "/scale application/merge-patch+json 409", "the older scale patch carried a stale resourceVersion")
}

// testUnreadyRecovery: a DGD whose adapter-owned prefill was scaled to 0 is not Ready; bringing
// that one component back from 0 is allowed (its status all zero, no pod running), any other
// change is held, and a failed DGD is never recovered this way.
func testUnreadyRecovery(t *testing.T) {
	c, ns, _ := newDGD(t, "zero", 0, 1)
	ctx := context.Background()
	k := newConnector(t, c.Admin, ns, "zero")
	n := func(v int) *int { return &v }
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "NoPrefill"}
	comps := map[string]any{"Frontend": componentStatus(1, 1, 1), "VllmPrefillWorker": componentStatus(0, 0, 0), "VllmDecodeWorker": componentStatus(1, 1, 1)}
	setStatus(t, c, ns, "zero", map[string]any{"conditions": []any{notReady}, "components": comps, "state": "failed"})
	require.ErrorIs(t, k.Apply(ctx, 1, connectors.Targets{Prefill: n(1)}), kubernetes.ErrNotReady, "a failed DGD")
	setStatus(t, c, ns, "zero", map[string]any{"conditions": []any{notReady}, "components": comps})
	require.ErrorIs(t, k.Apply(ctx, 1, connectors.Targets{Prefill: n(1), Decode: n(2)}), kubernetes.ErrNotReady, "more than the recovery")
	require.NoError(t, k.Apply(ctx, 1, connectors.Targets{Prefill: n(1)}))
	p, _ := replicasOf(t, c, ns, "zero")
	require.Equal(t, int64(1), p)
}
