// Package kubetest starts a real Kubernetes control plane for tests: kube-apiserver and etcd
// built from the Go module proxy into .tools/bin by scripts/build-kube (`make kube`), run by
// controller-runtime's envtest with RBAC on, the CRDs of deploy/crds installed. Nothing is
// downloaded: a missing binary fails the test with the command that builds it.
package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	memory "k8s.io/client-go/discovery/cached"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/llmplanner/planner/internal/repo"
)

// Cluster is a running control plane.
type Cluster struct {
	// Admin is a client configuration in the system:masters group.
	Admin *rest.Config
	// AdminKubeconfig is a kubeconfig file for Admin.
	AdminKubeconfig string
	// Root is the module root (deploy/ lives there).
	Root string

	env *envtest.Environment
}

// AssetsDir is where kube-apiserver and etcd are: $PLANNER_KUBE_ASSETS, else .tools/bin at the
// module root.
func AssetsDir(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PLANNER_KUBE_ASSETS"); p != "" {
		return p
	}
	root := ModuleRoot(t)
	dir := filepath.Join(root, ".tools", "bin")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("%s is not built (%v): run 'make kube' (builds kube-apiserver and etcd from the Go module proxy, about 4 minutes once)", b, err)
		}
	}
	return dir
}

// ModuleRoot is the folder holding go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Start starts a control plane with the CRDs of deploy/crds; it stops when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	root := ModuleRoot(t)
	env := &envtest.Environment{
		BinaryAssetsDirectory: AssetsDir(t),
		CRDDirectoryPaths:     []string{filepath.Join(root, "deploy", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop the control plane: %v", err)
		}
	})
	c := &Cluster{Admin: cfg, Root: root, env: env}
	c.AdminKubeconfig = c.kubeconfig(t, "admin", []string{"system:masters"})
	t.Logf("kube-apiserver %s ready in %s", cfg.Host, time.Since(start).Round(time.Millisecond))
	return c
}

// kubeconfig writes a kubeconfig file for a user of the given groups.
func (c *Cluster) kubeconfig(t testing.TB, name string, groups []string) string {
	t.Helper()
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("add user %s: %v", name, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", name, err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+filepath.Base(name))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ServiceAccount returns a client configuration and a kubeconfig file authenticating as the
// service account namespace/name (the identity RBAC bindings of a ServiceAccount subject
// match), without any permission of its own.
func (c *Cluster) ServiceAccount(t testing.TB, namespace, name string) (*rest.Config, string) {
	t.Helper()
	user := "system:serviceaccount:" + namespace + ":" + name
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}}, nil)
	if err != nil {
		t.Fatalf("add user %s: %v", user, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-sa-"+namespace+"-"+name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return u.Config(), path
}

// Namespace creates a namespace.
func (c *Cluster) Namespace(t testing.TB, name string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// Dynamic is an admin dynamic client.
func (c *Cluster) Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Clientset is an admin typed client.
func (c *Cluster) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Objects decodes a multi-document YAML stream into objects (empty documents skipped).
func Objects(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode YAML: %v", err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// Apply server-side applies objects as the admin, in namespace ns for namespaced kinds
// (ServiceAccount subjects of role bindings included); with dryRun nothing is persisted, but
// the API server validates and admits every object as it would for real.
func (c *Cluster) Apply(t testing.TB, ns string, objs []*unstructured.Unstructured, dryRun bool) error {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Admin)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn := c.Dynamic(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			obj.SetNamespace(ns)
			res = dyn.Resource(m.Resource).Namespace(ns)
			if gvk.Kind == "RoleBinding" {
				subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
				for _, s := range subjects {
					if sm, ok := s.(map[string]any); ok && sm["kind"] == "ServiceAccount" && sm["namespace"] == nil {
						sm["namespace"] = ns
					}
				}
				_ = unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
			}
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{FieldManager: "kubetest", Force: ptr.To(true)}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
