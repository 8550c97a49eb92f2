package planner_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/internal/kubetest"
	"github.com/llmplanner/planner/worker"
)

// kustomize renders a kustomization with the kustomize built into .tools/bin (make tools).
func kustomize(t *testing.T, root, dir string) []byte {
	t.Helper()
	bin := filepath.Join(root, ".tools", "bin", "kustomize")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kustomize is not built (%v): run 'make tools'", err)
	}
	out, err := exec.Command(bin, "build", dir).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, ee.Stderr)
	}
	require.NoError(t, err)
	return out
}

// TestDeployRendersAndApplies renders deploy/ with kustomize and applies every object to a
// real kube-apiserver with a server-side dry run (schema, defaulting and admission, nothing
// persisted); the rendered ConfigMap's deployments file and planner config load; the mTLS
// component patches the worker; the Prometheus scrape config passes promtool.
func TestDeployRendersAndApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("real kube-apiserver: skipped with -short")
	}
	cluster := kubetest.Start(t)
	root := cluster.Root
	cluster.Namespace(t, "dynamo")

	objs := kubetest.Objects(t, kustomize(t, root, filepath.Join(root, "deploy", "examples", "llama-disagg")))
	kinds := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		require.Equal(t, "dynamo", o.GetNamespace(), "%s %s is namespaced by the overlay", o.GetKind(), o.GetName())
		kinds[o.GetKind()] = o
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service", "DynamoGraphDeployment"} {
		require.Contains(t, kinds, k)
	}
	require.NoError(t, cluster.Apply(t, "dynamo", objs, true), "server-side dry run of the example")
	list, err := cluster.Clientset(t).AppsV1().Deployments("dynamo").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "a dry run persists nothing")

	// The worker reads the ConfigMap it mounts, by its generated name.
	cm := kinds["ConfigMap"]
	dep := kinds["Deployment"]
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	cmName, _, _ := unstructured.NestedString(vols[0].(map[string]any), "configMap", "name")
	require.Equal(t, cm.GetName(), cmName)
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	dir := t.TempDir()
	for name, content := range data {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	df, err := worker.LoadDeployments(filepath.Join(dir, "deployments.yaml"), func(string) (string, bool) { return "", false })
	require.NoError(t, err, "the shipped deployments file loads")
	require.Equal(t, "dynamo/llama", df.Deployments[0].Deployment)
	require.Equal(t, "llama", kinds["DynamoGraphDeployment"].GetName(), "the example DGD is the hosted deployment")
	cfg := df.Deployments[0].Config()
	require.NotNil(t, cfg)
	require.Equal(t, config.EnvKubernetes, cfg.Environment)
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	require.Equal(t, kinds["ServiceAccount"].GetName(), sa)

	// mTLS: an overlay with the component mounts the certificates and sets the TLS paths.
	overlay := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(overlay, filepath.Join(root, p))
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - "+rel("deploy/base")+
			"\ncomponents:\n  - "+rel("deploy/components/temporal-tls")+"\n"), 0o644))
	tls := kubetest.Objects(t, kustomize(t, root, overlay))
	require.NoError(t, cluster.Apply(t, "dynamo", tls, true))
	for _, o := range tls {
		if o.GetKind() != "Deployment" {
			continue
		}
		env, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		names := map[string]bool{}
		for _, e := range env[0].(map[string]any)["env"].([]any) {
			names[e.(map[string]any)["name"].(string)] = true
		}
		require.True(t, names["TEMPORAL_TLS_CLIENT_CERT_PATH"] && names["TEMPORAL_TLS_CLIENT_KEY_PATH"] && names["TEMPORAL_TLS_SERVER_CA_CERT_PATH"])
	}

	// Prometheus: the ServiceMonitor selects the worker's metrics Service; the scrape config is
	// a valid Prometheus configuration.
	mon := kubetest.Objects(t, kustomize(t, root, filepath.Join(root, "deploy", "prometheus")))
	require.Len(t, mon, 2)
	byKind := map[string]*unstructured.Unstructured{}
	for _, o := range mon {
		byKind[o.GetKind()] = o
	}
	require.Contains(t, byKind, "PrometheusRule", "the alert rules (checked in TestObservabilityArtifacts)")
	sel, _, _ := unstructured.NestedStringMap(byKind["ServiceMonitor"].Object, "spec", "selector", "matchLabels")
	require.Equal(t, kinds["Service"].GetLabels()["app.kubernetes.io/name"], sel["app.kubernetes.io/name"])
	if promtool, err := exec.LookPath("promtool"); err == nil {
		out, err := exec.Command(promtool, "check", "config", filepath.Join(root, "deploy", "prometheus", "scrape-config.yaml")).CombinedOutput()
		require.NoError(t, err, "%s", out)
	} else {
		t.Fatalf("promtool (Debian package prometheus, installed by scripts/apt-deps) is missing: %v", err)
	}
}
