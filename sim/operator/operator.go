// Package operator is a simulated Dynamo operator: it reconciles the DynamoGraphDeployments
// of a namespace on a real API server the way Dynamo's operator does as far as the planner can
// see, so the Kubernetes connector can be tested end to end without GPUs or a kubelet.
//
// Each reconcile, for every DGD:
//   - components declaring a scalingAdapter get their DynamoGraphDeploymentScalingAdapter
//     (controlled by the DGD, spec.dgdRef, labels), which then owns the desired count;
//   - the prefill and decode (or worker) components' desired counts become engine processes,
//     supervised by the local connector (connectors/local: start, readiness probe, drain);
//     without engines configured, the status follows the spec at once;
//   - every engine process is mirrored by a Pod (labels nvidia.com/dynamo-graph-deployment-name
//     and nvidia.com/dynamo-component, phase, Ready condition, IP 127.0.0.1, a container port
//     "fpm" with the engine's FPM port); a draining engine's pod is terminating (a finalizer
//     holds it until the process exits), as a kubelet would show it;
//   - the status is written: status.components.<c>.{replicas, updatedReplicas, readyReplicas,
//     availableReplicas, gpusPerEngine, gpusPerReplica}, observedGeneration, and the Ready
//     condition (every component serving its desired count, nothing starting or draining).
package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llmplanner/planner/connectors"
	k8sconn "github.com/llmplanner/planner/connectors/kubernetes"
	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/scaling"
)

// podFinalizer holds a draining engine's pod until its process exits.
const podFinalizer = "sim.llmplanner.io/engine"

// simNode is the node the mirrored pods are bound to (nothing schedules them).
const simNode = "sim-node"

// Options configure an Operator.
type Options struct {
	// Config is the API server client configuration (it needs DGDs, adapters and pods).
	Config *rest.Config
	// Namespace is the namespace whose DGDs are reconciled.
	Namespace string
	// Engines runs the engine processes; nil: no processes, the status follows the spec at
	// once (enough for the connector's own tests).
	Engines *EngineOptions
	// GPUsPerEngine is reported in status.components.<c>.gpusPerEngine (default 1).
	GPUsPerEngine int
	// Model, when set, makes the operator publish each engine component's model deployment
	// card (a DynamoWorkerMetadata named <dgd>-<component>) with Limits, as Dynamo's workers
	// do.
	Model string
	// Limits are the engines' limits the cards report (KV capacity in whole 64-token blocks).
	Limits scaling.EngineCapabilities
	// Interval is the reconcile period of Run (default 250 ms).
	Interval time.Duration
	// Logger receives the operator's logs (slog.Default when nil).
	Logger *slog.Logger
}

// EngineOptions describe the engine processes.
type EngineOptions struct {
	// StateDir holds one local-connector state file (and the engines' logs) per DGD.
	StateDir string
	// GPUs is the size of the simulated GPU pool of each DGD.
	GPUs int
	// Command is the argv template of an engine of a role, with the local connector's
	// placeholders ({name}, {http_port}, {fpm_port}, ...).
	Command func(role scaling.Component) []string
	// ReadyURL is the readiness URL template ("http://127.0.0.1:{http_port}/healthz").
	ReadyURL string
	// DrainTimeout bounds a draining engine (default 30 s).
	DrainTimeout time.Duration
	// StartTimeout bounds a starting engine (default 2 min).
	StartTimeout time.Duration
}

// Operator reconciles DGDs. It is safe for one Run at a time.
type Operator struct {
	o    Options
	dyn  dynamic.Interface
	core kubernetes.Interface
	log  *slog.Logger

	mu      sync.Mutex
	engines map[string]*deployment
}

// deployment is the engines of one DGD.
type deployment struct {
	local *local.Local
	roles map[scaling.Component]string // role -> component name
}

// New builds an operator; nothing runs until Run or ReconcileOnce.
func New(o Options) (*Operator, error) {
	if o.Namespace == "" {
		return nil, errors.New("simulated operator: namespace required")
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.GPUsPerEngine <= 0 {
		o.GPUsPerEngine = 1
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if e := o.Engines; e != nil {
		if e.StateDir == "" || e.GPUs <= 0 || e.Command == nil {
			return nil, errors.New("simulated operator: engines need a state dir, a GPU pool and a command")
		}
		if e.DrainTimeout <= 0 {
			e.DrainTimeout = 30 * time.Second
		}
		if e.StartTimeout <= 0 {
			e.StartTimeout = 2 * time.Minute
		}
	}
	dyn, err := dynamic.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	core, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	return &Operator{o: o, dyn: dyn, core: core, log: o.Logger.With("component", "sim-operator"), engines: map[string]*deployment{}}, nil
}

// Run reconciles every Interval until ctx ends. A failed reconcile is logged and retried.
func (op *Operator) Run(ctx context.Context) error {
	t := time.NewTicker(op.o.Interval)
	defer t.Stop()
	failing := false
	for {
		if err := op.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
			if !failing {
				op.log.Warn("reconcile failed", "error", err)
			}
			failing = true
		} else {
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ReconcileOnce reconciles every DGD of the namespace once.
func (op *Operator) ReconcileOnce(ctx context.Context) error {
	list, err := op.dyn.Resource(k8sconn.DGDResource).Namespace(op.o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list DGDs: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if err := op.reconcile(ctx, &list.Items[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", list.Items[i].GetName(), err))
		}
	}
	return errors.Join(errs...)
}

func (op *Operator) reconcile(ctx context.Context, dgd *unstructured.Unstructured) error {
	comps, err := k8sconn.Components(dgd)
	if err != nil {
		return err
	}
	desired := map[string]int64{}
	for _, c := range comps {
		desired[c.Name] = c.Replicas
		if c.ScalingAdapter {
			n, err := op.ensureAdapter(ctx, dgd, c)
			if err != nil {
				return err
			}
			desired[c.Name] = n
		}
	}
	counts := map[string]componentCounts{}
	if op.o.Engines == nil {
		for _, c := range comps {
			n := desired[c.Name]
			counts[c.Name] = componentCounts{replicas: n, ready: n}
		}
	} else {
		if counts, err = op.reconcileEngines(ctx, dgd, comps, desired); err != nil {
			return err
		}
	}
	for _, c := range comps {
		if c.ScalingAdapter {
			if err := op.adapterStatus(ctx, dgd, c, counts[c.Name].replicas); err != nil {
				return err
			}
		}
		if role, engine := roleOf(c.Type); engine && op.o.Model != "" {
			if err := op.ensureCard(ctx, dgd, c, role); err != nil {
				return err
			}
		}
	}
	return op.writeStatus(ctx, dgd, comps, desired, counts)
}

// componentCounts are one component's replicas as the status reports them.
type componentCounts struct {
	replicas, ready, starting, draining int64
}

// ensureAdapter creates a component's scaling adapter when missing (with the component's
// replicas) and returns its spec.replicas.
func (op *Operator) ensureAdapter(ctx context.Context, dgd *unstructured.Unstructured, c k8sconn.Component) (int64, error) {
	name := k8sconn.AdapterName(dgd.GetName(), c.Name)
	res := op.dyn.Resource(k8sconn.AdapterResource).Namespace(op.o.Namespace)
	a, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		yes := true
		a = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeploymentScalingAdapter",
			"metadata": map[string]any{"name": name, "namespace": op.o.Namespace,
				"labels": map[string]any{k8sconn.LabelDGD: dgd.GetName(), k8sconn.LabelComponent: c.Name}},
			"spec": map[string]any{"replicas": c.Replicas, "dgdRef": map[string]any{"name": dgd.GetName(), "componentName": c.Name}},
		}}
		a.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment",
			Name: dgd.GetName(), UID: dgd.GetUID(), Controller: &yes}})
		if a, err = res.Create(ctx, a, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("create scaling adapter %s: %w", name, err)
		}
		op.log.Info("scaling adapter created", "adapter", name, "replicas", c.Replicas)
	} else if err != nil {
		return 0, fmt.Errorf("get scaling adapter %s: %w", name, err)
	}
	n, _, err := unstructured.NestedInt64(a.Object, "spec", "replicas")
	if err != nil {
		return 0, fmt.Errorf("scaling adapter %s: %w", name, err)
	}
	return n, nil
}

// mdcBlockSize is the KV block size the published cards report.
const mdcBlockSize = 64

// ensureCard publishes a component's model deployment card once.
func (op *Operator) ensureCard(ctx context.Context, dgd *unstructured.Unstructured, c k8sconn.Component, role scaling.Component) error {
	name := strings.ToLower(dgd.GetName() + "-" + c.Name)
	res := op.dyn.Resource(k8sconn.WorkerMetadataResource).Namespace(op.o.Namespace)
	if _, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("worker metadata %s: %w", name, err)
	}
	l := op.o.Limits
	workerType := "decode"
	if role == scaling.Prefill {
		workerType = "prefill"
	}
	card := map[string]any{"display_name": op.o.Model, "worker_type": workerType, "kv_cache_block_size": int64(mdcBlockSize),
		"runtime_config": map[string]any{"total_kv_blocks": l.MaxKVTokens / mdcBlockSize, "max_num_seqs": l.MaxNumSeqs,
			"max_num_batched_tokens": l.MaxNumBatchedTokens, "context_length": l.ContextLength}}
	yes := true
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoWorkerMetadata",
		"metadata": map[string]any{"name": name, "namespace": op.o.Namespace},
		"spec": map[string]any{"data": map[string]any{"model_cards": map[string]any{
			c.Name + "/0": map[string]any{"type": "Model", "component": c.Name, "endpoint": "generate", "card_json": card}}}},
	}}
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment",
		Name: dgd.GetName(), UID: dgd.GetUID(), Controller: &yes}})
	if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("worker metadata %s: %w", name, err)
	}
	return nil
}

// adapterStatus writes an adapter's status (replicas and selector) when it changed.
func (op *Operator) adapterStatus(ctx context.Context, dgd *unstructured.Unstructured, c k8sconn.Component, replicas int64) error {
	name := k8sconn.AdapterName(dgd.GetName(), c.Name)
	selector := k8sconn.LabelDGD + "=" + dgd.GetName() + "," + k8sconn.LabelComponent + "=" + c.Name
	body := fmt.Sprintf(`{"status":{"replicas":%d,"selector":%q}}`, replicas, selector)
	_, err := op.dyn.Resource(k8sconn.AdapterResource).Namespace(op.o.Namespace).Patch(ctx, name, types.MergePatchType, []byte(body),
		metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("scaling adapter %s status: %w", name, err)
	}
	return nil
}

// roleOf maps a component type to the engine pool that runs it.
func roleOf(typ string) (scaling.Component, bool) {
	switch typ {
	case "prefill":
		return scaling.Prefill, true
	case "decode", "worker":
		return scaling.Decode, true
	}
	return "", false
}

// reconcileEngines moves the DGD's engine processes to the desired counts and mirrors them
// as pods; it returns each component's counts.
func (op *Operator) reconcileEngines(ctx context.Context, dgd *unstructured.Unstructured, comps []k8sconn.Component, desired map[string]int64) (map[string]componentCounts, error) {
	dep, err := op.deployment(dgd, comps)
	if err != nil {
		return nil, err
	}
	// The supervisor records the targets and the newest decision: a changed desired count is
	// the next decision.
	inv, err := dep.local.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("engines: %w", err)
	}
	var targets connectors.Targets
	changed := false
	for role, name := range dep.roles {
		n := int(desired[name])
		target, current := &targets.Decode, inv.ExpectedDecode
		if role == scaling.Prefill {
			target, current = &targets.Prefill, inv.ExpectedPrefill
		}
		*target = &n
		changed = changed || current == nil || *current != n
	}
	if changed {
		if err := dep.local.Apply(ctx, inv.AppliedDecisionID+1, targets); err != nil {
			return nil, fmt.Errorf("engines: %w", err)
		}
	}
	counts := map[string]componentCounts{}
	for role, name := range dep.roles {
		// A pending engine (waiting for a draining one's GPUs) is a replica still starting,
		// as a Pending pod is.
		n := dep.local.Counts(role)
		counts[name] = componentCounts{replicas: int64(n.Ready + n.Starting + n.Pending), ready: int64(n.Ready),
			starting: int64(n.Starting + n.Pending), draining: int64(n.Draining)}
	}
	for _, c := range comps {
		if _, ok := counts[c.Name]; !ok {
			counts[c.Name] = componentCounts{replicas: desired[c.Name], ready: desired[c.Name]}
		}
	}
	if err := op.mirrorPods(ctx, dgd, dep, dep.local.Workers()); err != nil {
		return nil, err
	}
	return counts, nil
}

// deployment returns (opening on first use) the engines of a DGD.
func (op *Operator) deployment(dgd *unstructured.Unstructured, comps []k8sconn.Component) (*deployment, error) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if d, ok := op.engines[dgd.GetName()]; ok {
		return d, nil
	}
	e := op.o.Engines
	gpus := make([]int, e.GPUs)
	for i := range gpus {
		gpus[i] = i
	}
	cfg := local.Config{Namespace: op.o.Namespace + "_" + dgd.GetName(), StateFile: filepath.Join(e.StateDir, dgd.GetName()+".json"),
		GPUs: gpus, LogDir: filepath.Join(e.StateDir, "logs"), DrainTimeout: e.DrainTimeout, StartTimeout: e.StartTimeout,
		CheckInterval: 200 * time.Millisecond, Logger: op.log}
	d := &deployment{roles: map[scaling.Component]string{}}
	var initial connectors.Targets
	for _, c := range comps {
		role, ok := roleOf(c.Type)
		if !ok {
			continue
		}
		if _, dup := d.roles[role]; dup {
			return nil, fmt.Errorf("two components run %s engines", role)
		}
		d.roles[role] = c.Name
		cc := local.ComponentConfig{Command: e.Command(role), GPUsPerWorker: op.o.GPUsPerEngine, ReadyURL: e.ReadyURL}
		zero := 0
		if role == scaling.Prefill {
			cfg.Prefill, initial.Prefill = cc, &zero
		} else {
			cfg.Decode, initial.Decode = cc, &zero
		}
	}
	if len(d.roles) == 0 {
		return nil, errors.New("no prefill, decode or worker component")
	}
	if err := os.MkdirAll(e.StateDir, 0o755); err != nil {
		return nil, err
	}
	l, err := local.Open(cfg, initial)
	if err != nil {
		return nil, fmt.Errorf("engines: %w", err)
	}
	d.local = l
	op.engines[dgd.GetName()] = d
	return d, nil
}

// podName names the pod of an engine process.
func podName(dgd, comp string, pid int) string {
	return strings.ToLower(dgd + "-" + comp + "-" + strconv.Itoa(pid))
}

// mirrorPods makes the pods match the engine processes: one pod per live process (Pending
// while starting, Running and Ready once ready, terminating while draining), none for the
// processes that are gone.
func (op *Operator) mirrorPods(ctx context.Context, dgd *unstructured.Unstructured, dep *deployment, workers []local.Worker) error {
	pods := op.core.CoreV1().Pods(op.o.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: k8sconn.LabelDGD + "=" + dgd.GetName()})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	existing := map[string]*corev1.Pod{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	want := map[string]bool{}
	for _, w := range workers {
		comp, ok := dep.roles[w.Component]
		if !ok || w.ExitedAt != nil || w.State == local.Exited {
			continue
		}
		name := podName(dgd.GetName(), comp, w.PID)
		want[name] = true
		p := existing[name]
		if p == nil {
			if w.State == local.Draining || w.State == local.Failed {
				continue
			}
			if p, err = op.createPod(ctx, dgd, comp, name, w); err != nil {
				return err
			}
		}
		switch w.State {
		case local.Starting, local.Ready:
			if err := op.podStatus(ctx, p, w.State == local.Ready); err != nil {
				return err
			}
		case local.Draining, local.Failed:
			if p.DeletionTimestamp == nil {
				if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete pod %s: %w", name, err)
				}
			}
		}
	}
	for name, p := range existing {
		if want[name] {
			continue
		}
		// The process is gone: release the finalizer and remove the pod.
		if slices.Contains(p.Finalizers, podFinalizer) {
			patch := `{"metadata":{"finalizers":null}}`
			if _, err := pods.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("release pod %s: %w", name, err)
			}
		}
		zero := int64(0)
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s: %w", name, err)
		}
	}
	return nil
}

func (op *Operator) createPod(ctx context.Context, dgd *unstructured.Unstructured, comp, name string, w local.Worker) (*corev1.Pod, error) {
	if err := op.ensureServiceAccount(ctx); err != nil {
		return nil, err
	}
	yes, no := true, false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: op.o.Namespace, Finalizers: []string{podFinalizer},
			Labels: map[string]string{k8sconn.LabelDGD: dgd.GetName(), k8sconn.LabelComponent: comp},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment",
				Name: dgd.GetName(), UID: dgd.GetUID(), Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: simNode, AutomountServiceAccountToken: &no, Containers: []corev1.Container{{
			Name: "main", Image: "simulated/engine", Args: w.Command,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(w.HTTPPort)}, {Name: "fpm", ContainerPort: int32(w.FPMPort)}},
		}}},
	}
	created, err := op.core.CoreV1().Pods(op.o.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", name, err)
	}
	return created, nil
}

// ensureServiceAccount creates the namespace's default service account, which the API
// server's admission wants for a pod (no controller manager runs to create it).
func (op *Operator) ensureServiceAccount(ctx context.Context) error {
	sas := op.core.CoreV1().ServiceAccounts(op.o.Namespace)
	if _, err := sas.Get(ctx, "default", metav1.GetOptions{}); err == nil {
		return nil
	}
	_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the default service account: %w", err)
	}
	return nil
}

// podStatus writes a pod's phase and Ready condition when they differ.
func (op *Operator) podStatus(ctx context.Context, p *corev1.Pod, ready bool) error {
	phase, cond := corev1.PodPending, corev1.ConditionFalse
	if ready {
		phase, cond = corev1.PodRunning, corev1.ConditionTrue
	}
	if p.Status.PodIP == "127.0.0.1" && p.Status.Phase == phase {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == cond {
				return nil
			}
		}
	}
	p = p.DeepCopy()
	p.Status.Phase, p.Status.PodIP, p.Status.HostIP = phase, "127.0.0.1", "127.0.0.1"
	p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: metav1.Now()}}
	if _, err := op.core.CoreV1().Pods(op.o.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("pod %s status: %w", p.Name, err)
	}
	return nil
}

// writeStatus writes the DGD's status: per component counts, GPU shape, observed generation
// and the Ready condition.
func (op *Operator) writeStatus(ctx context.Context, dgd *unstructured.Unstructured, comps []k8sconn.Component, desired map[string]int64, counts map[string]componentCounts) error {
	status := map[string]any{}
	ready := true
	var notReady []string
	for _, c := range comps {
		cc := counts[c.Name]
		cs := map[string]any{"replicas": cc.replicas, "updatedReplicas": cc.replicas, "readyReplicas": cc.ready, "availableReplicas": cc.ready}
		if _, engine := roleOf(c.Type); engine {
			cs["gpusPerEngine"], cs["gpusPerReplica"] = int64(op.o.GPUsPerEngine), int64(op.o.GPUsPerEngine)
		}
		status[c.Name] = cs
		if cc.ready != desired[c.Name] || cc.starting > 0 || cc.draining > 0 {
			ready = false
			notReady = append(notReady, fmt.Sprintf("%s %d/%d ready", c.Name, cc.ready, desired[c.Name]))
		}
	}
	slices.Sort(notReady)
	cond := map[string]any{"type": "Ready", "status": "True", "reason": "AllComponentsReady", "message": "all components are ready"}
	state := "successful"
	if !ready {
		cond = map[string]any{"type": "Ready", "status": "False", "reason": "ComponentsNotReady", "message": strings.Join(notReady, ", ")}
		state = "pending"
	}
	// Keep the transition time when the condition does not change.
	if old, ok := oldReady(dgd); ok && old["status"] == cond["status"] && old["lastTransitionTime"] != nil {
		cond["lastTransitionTime"] = old["lastTransitionTime"]
	} else {
		cond["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
	}
	newStatus := map[string]any{"observedGeneration": dgd.GetGeneration(), "state": state, "components": status,
		"conditions": []any{cond}}
	old, _, _ := unstructured.NestedMap(dgd.Object, "status")
	if equalJSON(old, newStatus) {
		return nil
	}
	u := dgd.DeepCopy()
	u.Object["status"] = newStatus
	if _, err := op.dyn.Resource(k8sconn.DGDResource).Namespace(op.o.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsConflict(err) {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

func oldReady(dgd *unstructured.Unstructured) (map[string]any, bool) {
	conds, _, _ := unstructured.NestedSlice(dgd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m, true
		}
	}
	return nil, false
}

// Stop stops every engine process (SIGTERM, drain, SIGKILL when ctx ends).
func (op *Operator) Stop(ctx context.Context) error {
	op.mu.Lock()
	defer op.mu.Unlock()
	var errs []error
	for name, d := range op.engines {
		if err := d.local.StopAll(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		_ = d.local.Close()
	}
	op.engines = map[string]*deployment{}
	return errors.Join(errs...)
}

// equalJSON compares two JSON-like values by their JSON form.
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
