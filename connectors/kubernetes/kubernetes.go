// Package kubernetes is the Kubernetes connector: it scales a DynamoGraphDeployment (DGD) the
// way Dynamo's planner does (../shared/reference/kubernetes-connector.md is the contract).
//
//   - The prefill and decode components are found in spec.components by type (prefill,
//     decode; decode falls back to the single worker of an aggregated graph), or by explicit
//     name; the older spec.services.<name>.subComponentType form is read too.
//   - A component declaring a scalingAdapter is scaled through its
//     DynamoGraphDeploymentScalingAdapter's scale subresource (checked to belong to the DGD,
//     written with its resourceVersion); the others through one JSON Patch on the DGD that
//     tests the resourceVersion and the whole component before it adds replicas. A
//     conflicting writer makes the write fail (and the connector read again and retry), never
//     be overwritten.
//   - Every target is resolved before the first write; a component already at its target is
//     skipped.
//   - A scaling is held (an error the planner retries on a later tick) while the DGD is not
//     Ready or, for a scale-down, while pods terminate or a rollout runs; except a startup
//     cancellation (scaling down replicas that never became ready) and the recovery of an
//     adapter-owned component at 0.
//   - Counts come from status.components: ready = availableReplicas (else readyReplicas);
//     expected = ready when the component is stable (desired == updated == ready, no
//     terminating pods), else unknown and "scaling in progress". The GPU shape comes from
//     status.components.<c>.gpusPerEngine when the status is current; the engines' limits
//     from the workers' model cards (DynamoWorkerMetadata).
//   - Each decision is claimed in the DGD's annotation planner.llmplanner.io/decision-id, in
//     the same resourceVersion-tested patch as the DGD-owned components, before any adapter is
//     written; an adapter is written only while its decision's claim holds. An older decision
//     is refused; the same decision again converges to its targets (nothing to write when it
//     is complete), so a retry finishes a decision a crash interrupted.
//   - A 403 on listing pods degrades (no pod checks, no startup cancellation, no FPM
//     discovery) with one warning; a 403 on the DGD is an error that says which permission is
//     missing.
//
// It implements connectors.Connector and connectors.EndpointDiscoverer (the ready pods'
// FPM ports).
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/internal/tracing"
	"github.com/llmplanner/planner/scaling"
)

// FieldManager names the planner's writes (managedFields, audit logs).
const FieldManager = "planner"

// conflictRetries is how many times Apply reads the DGD again after a conflicting write.
const conflictRetries = 3

// ErrNotReady is connectors.ErrNotReady: the DGD cannot take a scaling now (a rollout,
// terminating pods, not Ready); the decision is held, never forced.
var ErrNotReady = connectors.ErrNotReady

// ErrForbidden wraps a 403 from the API server: the planner's identity lacks a permission.
var ErrForbidden = errors.New("forbidden")

// Options configure a Connector.
type Options struct {
	// Namespace and DGD name the DynamoGraphDeployment.
	Namespace, DGD string
	// PrefillComponent and DecodeComponent name components explicitly (default: by type).
	PrefillComponent, DecodeComponent string
	// FPMPortName is the container port carrying a pod's FPM publisher (default "fpm");
	// FPMPort is used for pods without it (0: such pods are not subscribed).
	FPMPortName string
	FPMPort     int
	// Logger receives warnings (slog.Default when nil).
	Logger *slog.Logger
}

// Connector scales one DynamoGraphDeployment. It is safe for concurrent use; applies are
// serialised.
type Connector struct {
	o    Options
	dyn  dynamic.Interface
	pods corev1client.PodsGetter
	log  *slog.Logger

	applyMu       sync.Mutex
	podsForbidden atomic.Bool
	warnedPorts   atomic.Bool
	warnedMDC     atomic.Bool
}

var (
	_ connectors.Connector          = (*Connector)(nil)
	_ connectors.EndpointDiscoverer = (*Connector)(nil)
)

// RESTConfig is the client configuration: the kubeconfig file when given, else the
// in-cluster service account, else $KUBECONFIG or ~/.kube/config; kubeContext picks a context.
func RESTConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	if kubeconfig == "" && kubeContext == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (not in a cluster, kubeconfig %q): %w", kubeconfigName(rules), err)
	}
	return cfg, nil
}

func kubeconfigName(rules *clientcmd.ClientConfigLoadingRules) string {
	if rules.ExplicitPath != "" {
		return rules.ExplicitPath
	}
	return strings.Join(rules.Precedence, string(filepath.ListSeparator))
}

// New builds a connector; it does not contact the API server (Check does).
func New(cfg *rest.Config, o Options) (*Connector, error) {
	if o.Namespace == "" || o.DGD == "" {
		return nil, fmt.Errorf("kubernetes connector: namespace (%q) and DGD name (%q) are required", o.Namespace, o.DGD)
	}
	if o.FPMPortName == "" {
		o.FPMPortName = "fpm"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "planner"
	}
	// Each API call of a traced activity (observe, apply) gets a client span.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tracing.Transport("kubernetes", rt) })
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes connector: %w", err)
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes connector: %w", err)
	}
	return &Connector{o: o, dyn: dyn, pods: core, log: o.Logger.With("dgd", o.Namespace+"/"+o.DGD)}, nil
}

// Check reads the DGD and resolves its prefill and decode components.
func (c *Connector) Check(ctx context.Context) error {
	dgd, err := c.get(ctx)
	if err != nil {
		return err
	}
	_, err = c.roles(dgd)
	return err
}

// what names the DGD in messages.
func (c *Connector) what() string {
	return fmt.Sprintf("DynamoGraphDeployment %s/%s", c.o.Namespace, c.o.DGD)
}

// apiError turns an API error into one an operator can act on.
func (c *Connector) apiError(verb, resource string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: the planner may not %s %s in namespace %s; grant it the Role of deploy/base/rbac.yaml: %v",
			ErrForbidden, verb, resource, c.o.Namespace, err)
	case apierrors.IsNotFound(err) && resource == DGDResource.Resource:
		return fmt.Errorf("%s not found: %w", c.what(), err)
	}
	return fmt.Errorf("%s %s: %w", verb, resource, err)
}

func (c *Connector) get(ctx context.Context) (*unstructured.Unstructured, error) {
	dgd, err := c.dyn.Resource(DGDResource).Namespace(c.o.Namespace).Get(ctx, c.o.DGD, metav1.GetOptions{})
	if err != nil {
		return nil, c.apiError("get", DGDResource.Resource, err)
	}
	return dgd, nil
}

// roleComponents are the resolved prefill and decode components (nil when the DGD has none).
type roleComponents struct {
	prefill, decode *component
	all             []component
}

func (r roleComponents) of(role scaling.Component) *component {
	if role == scaling.Prefill {
		return r.prefill
	}
	return r.decode
}

func (c *Connector) roles(dgd *unstructured.Unstructured) (roleComponents, error) {
	comps, err := components(dgd)
	if err != nil {
		return roleComponents{}, fmt.Errorf("%s: %w", c.what(), err)
	}
	r := roleComponents{all: comps}
	if r.prefill, err = resolve(comps, scaling.Prefill, c.o.PrefillComponent); err != nil {
		return r, fmt.Errorf("%s: prefill: %w", c.what(), err)
	}
	if r.decode, err = resolve(comps, scaling.Decode, c.o.DecodeComponent); err != nil {
		return r, fmt.Errorf("%s: decode: %w", c.what(), err)
	}
	if r.prefill == nil && r.decode == nil {
		return r, fmt.Errorf("%s: no prefill, decode or worker component", c.what())
	}
	if r.prefill != nil && r.decode != nil && r.prefill.name == r.decode.name {
		return r, fmt.Errorf("%s: prefill and decode resolve to the same component %s", c.what(), r.prefill.name)
	}
	return r, nil
}

// desired is a component's desired count: its adapter's spec.replicas when it declares one
// (the adapter checked), else its spec.replicas. With an adapter, it returns it too.
func (c *Connector) desired(ctx context.Context, dgd *unstructured.Unstructured, comp *component) (int64, *unstructured.Unstructured, error) {
	if !comp.hasAdapter {
		return comp.replicas, nil, nil
	}
	a, err := c.dyn.Resource(AdapterResource).Namespace(c.o.Namespace).Get(ctx, AdapterName(dgd.GetName(), comp.name), metav1.GetOptions{})
	if err != nil {
		return 0, nil, c.apiError("get", AdapterResource.Resource, err)
	}
	n, err := checkAdapter(a, dgd, comp.name)
	if err != nil {
		return 0, nil, err
	}
	return n, a, nil
}

// podView is the DGD's pods (snapshot-capture Job pods left out) and the terminating ones per
// component; known is false when listing pods is forbidden.
type podView struct {
	known       bool
	pods        []corev1.Pod
	terminating map[string]int
}

// listPods lists the DGD's pods (checkpoint-capture Job pods left out); a 403 degrades to
// an unknown view, with one warning.
func (c *Connector) listPods(ctx context.Context) (podView, error) {
	list, err := c.pods.Pods(c.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelDGD + "=" + c.o.DGD})
	if apierrors.IsForbidden(err) {
		if !c.podsForbidden.Swap(true) {
			c.log.Warn("pod list forbidden: scale-down checks on pods, startup cancellation and FPM discovery are off until pods list is granted", "error", err)
		}
		return podView{}, nil
	}
	if err != nil {
		return podView{}, c.apiError("list", "pods", err)
	}
	c.podsForbidden.Store(false)
	v := podView{known: true, terminating: map[string]int{}}
	for _, p := range list.Items {
		if snapshotPod(&p) {
			continue
		}
		v.pods = append(v.pods, p)
		if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			v.terminating[p.Labels[LabelComponent]]++
		}
	}
	return v, nil
}

// snapshotPod reports a checkpoint-capture Job's pod.
func snapshotPod(p *corev1.Pod) bool {
	if p.Labels[LabelSnapshotJobUID] == "" {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Job" && o.APIVersion == "batch/v1" && o.Controller != nil && *o.Controller && o.Name == p.Labels[LabelSnapshotJob] {
			return true
		}
	}
	return false
}

// pcsgOK checks Grove's PodCliqueScalingGroup components: each pod's replica index within
// [0, desired).
func pcsgOK(dgd *unstructured.Unstructured, v podView, desired map[string]int64) bool {
	for _, p := range v.pods {
		comp := p.Labels[LabelComponent]
		if statusOf(dgd, comp).componentKind != "PodCliqueScalingGroup" {
			continue
		}
		idx, err := strconv.ParseInt(p.Labels[LabelPCSGReplicaIndex], 10, 64)
		if err != nil || idx < 0 || idx >= desired[comp] {
			return false
		}
	}
	return true
}

// graph is one consistent read of the deployment.
type graph struct {
	dgd     *unstructured.Unstructured
	roles   roleComponents
	desired map[string]int64
	pods    podView
}

// read reads the DGD, its components' desired counts and, when withPods, its pods.
func (c *Connector) read(ctx context.Context, withPods bool) (*graph, error) {
	dgd, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.readFrom(ctx, dgd, withPods)
}

// readFrom is read with the DGD already read.
func (c *Connector) readFrom(ctx context.Context, dgd *unstructured.Unstructured, withPods bool) (*graph, error) {
	roles, err := c.roles(dgd)
	if err != nil {
		return nil, err
	}
	g := &graph{dgd: dgd, roles: roles, desired: map[string]int64{}}
	for i := range roles.all {
		comp := &roles.all[i]
		n, _, err := c.desired(ctx, dgd, comp)
		if err != nil {
			return nil, err
		}
		g.desired[comp.name] = n
	}
	if withPods {
		if g.pods, err = c.listPods(ctx); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// stable reports whether a component serves what it is asked to: desired == updated ==
// serving, and no pod of it terminating.
func (g *graph) stable(name string) bool {
	s := statusOf(g.dgd, name)
	d := g.desired[name]
	return d == s.updatedCount() && d == s.serving() && g.pods.terminating[name] == 0
}

// settled reports whether the graph as a whole is quiet: the status reflects the spec, no
// rollout runs, no pod terminates, Grove's groups are within their counts, and every
// component but the planner is stable. The reason says what is not.
func (g *graph) settled() (bool, string) {
	if !generationObserved(g.dgd) {
		return false, "status.observedGeneration is behind metadata.generation (the operator has not caught up)"
	}
	if p := rolloutPhase(g.dgd); p != "" && p != "Completed" {
		return false, "a rolling update is in phase " + p
	}
	for name, n := range g.pods.terminating {
		if n > 0 {
			return false, fmt.Sprintf("%d pod(s) of %s terminating", n, name)
		}
	}
	if g.pods.known && !pcsgOK(g.dgd, g.pods, g.desired) {
		return false, "pods of a PodCliqueScalingGroup are outside its replica count"
	}
	for _, comp := range g.roles.all {
		if comp.typ != typePlanner && !g.stable(comp.name) {
			return false, "component " + comp.name + " is not stable (desired, updated and ready replicas differ)"
		}
	}
	return true, ""
}

// pendingStartup is, per component, the replicas that are starting (desired − serving) when
// the only thing in progress is a scale-up whose pods are Pending or Running; nil otherwise.
func (g *graph) pendingStartup() map[string]int64 {
	if !g.pods.known || !generationObserved(g.dgd) || len(g.pods.pods) == 0 {
		return nil
	}
	if p := rolloutPhase(g.dgd); p != "" && p != "Completed" {
		return nil
	}
	for _, p := range g.pods.pods {
		if p.DeletionTimestamp != nil || (p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning) {
			return nil
		}
	}
	if !pcsgOK(g.dgd, g.pods, g.desired) {
		return nil
	}
	pending := map[string]int64{}
	for _, comp := range g.roles.all {
		if comp.typ == typePlanner {
			continue
		}
		s := statusOf(g.dgd, comp.name)
		if s.replicas == nil || s.updated == nil {
			return nil
		}
		desired, serving := g.desired[comp.name], s.serving()
		if serving > *s.replicas || *s.replicas > desired || *s.updated != *s.replicas {
			return nil
		}
		if g.stable(comp.name) {
			continue
		}
		if comp.typ != typePrefill && comp.typ != typeDecode && comp.typ != typeWorker || desired <= serving {
			return nil
		}
		pending[comp.name] = desired - serving
	}
	if len(pending) == 0 {
		return nil
	}
	return pending
}

// Inventory reports each role's ready count (availableReplicas, else readyReplicas), its
// expected count when stable (else nil and scaling in progress), the GPUs per engine from a
// current status, and the newest decision applied (the DGD's annotation).
func (c *Connector) Inventory(ctx context.Context) (connectors.Inventory, error) {
	g, err := c.read(ctx, true)
	if err != nil {
		return connectors.Inventory{}, err
	}
	var inv connectors.Inventory
	if inv.AppliedDecisionID, err = appliedDecisionID(g.dgd); err != nil {
		return connectors.Inventory{}, fmt.Errorf("%s: %w", c.what(), err)
	}
	current := generationObserved(g.dgd)
	rolling := false
	switch rolloutPhase(g.dgd) {
	case "Pending", "InProgress", "Failed":
		rolling = true
	}
	mdc := c.mdcCapabilities(ctx, g)
	for _, role := range []scaling.Component{scaling.Prefill, scaling.Decode} {
		comp := g.roles.of(role)
		if comp == nil {
			continue
		}
		s := statusOf(g.dgd, comp.name)
		ready := int(s.serving())
		// Stable: desired == updated == ready and no pod terminating, on a current status,
		// outside a rollout (which makes every count transient).
		stable := g.stable(comp.name) && current && !rolling
		var expected *int
		if stable {
			e := ready
			expected = &e
		}
		var caps *scaling.EngineCapabilities
		if m, ok := mdc[role]; ok {
			caps = &m
		}
		if current && s.gpusPerEngine != nil && *s.gpusPerEngine > 0 {
			if caps == nil {
				caps = &scaling.EngineCapabilities{}
			}
			caps.NumGPU = int(*s.gpusPerEngine)
		}
		if role == scaling.Prefill {
			inv.ReadyPrefill, inv.ExpectedPrefill, inv.PrefillScalingInProgress, inv.Capabilities.Prefill = &ready, expected, !stable, caps
		} else {
			inv.ReadyDecode, inv.ExpectedDecode, inv.DecodeScalingInProgress, inv.Capabilities.Decode = &ready, expected, !stable, caps
		}
	}
	return inv, nil
}

// change is one component to move.
type change struct {
	role    scaling.Component
	comp    *component
	current int64
	target  int64
}

// Apply moves the DGD to the targets (a nil target leaves the role alone) and records the
// decision id; see the package documentation for the rules. The newest decision again is a
// no-op; an older one is ErrStaleDecision; a role the DGD does not have is ErrInvalidTargets;
// a deployment that cannot take the change now is ErrNotReady.
func (c *Connector) Apply(ctx context.Context, decisionID int64, targets connectors.Targets) error {
	if err := targets.Validate(); err != nil {
		return fmt.Errorf("%w: %v", connectors.ErrInvalidTargets, err)
	}
	if decisionID < 0 {
		return fmt.Errorf("%w: decision id %d is negative", connectors.ErrInvalidTargets, decisionID)
	}
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	var err error
	for attempt := 1; attempt <= conflictRetries; attempt++ {
		err = c.apply(ctx, decisionID, targets)
		if !apierrors.IsConflict(err) { // a failed precondition: re-read and retry (patchDGD turns a failed JSON Patch test into a conflict)
			return err
		}
		c.log.Info("the DGD changed under the planner's write; reading it again", "attempt", attempt, "error", err)
	}
	return fmt.Errorf("%s changed under every one of %d attempts: %w", c.what(), conflictRetries, err)
}

// patchDGD sends a JSON Patch testing the DGD's resourceVersion rv. The API server answers a
// failed test op with a 422 that names nothing; when the DGD moved past rv meanwhile, that
// is reported as a conflict (Apply reads again and retries), anything else as the error it is.
func (c *Connector) patchDGD(ctx context.Context, rv string, ops []map[string]any) error {
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(DGDResource).Namespace(c.o.Namespace).Patch(ctx, c.o.DGD, types.JSONPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err == nil {
		return nil
	}
	if apierrors.IsInvalid(err) {
		if now, gerr := c.get(ctx); gerr == nil && now.GetResourceVersion() != rv {
			return apierrors.NewConflict(DGDResource.GroupResource(), c.o.DGD,
				fmt.Errorf("the DGD changed (resourceVersion %s, then %s) between the planner's read and its patch", rv, now.GetResourceVersion()))
		}
	}
	return c.writeError("patch", DGDResource.Resource, err)
}

func (c *Connector) apply(ctx context.Context, decisionID int64, targets connectors.Targets) error {
	dgd, err := c.get(ctx)
	if err != nil {
		return err
	}
	applied, err := appliedDecisionID(dgd)
	if err != nil {
		return fmt.Errorf("%s: %w", c.what(), err)
	}
	if decisionID < applied {
		return fmt.Errorf("%w: decision %d is older than decision %d applied to %s", connectors.ErrStaleDecision, decisionID, applied, c.what())
	}
	// The same id again is the same decision retried (after a crash or a timeout, maybe
	// half-written): it converges to its targets, and was admitted already.
	claimed := decisionID == applied && applied > 0
	g, err := c.readFrom(ctx, dgd, false)
	if err != nil {
		return err
	}
	// Everything is resolved before the first write.
	var changes []change
	reduces := false
	for _, t := range []struct {
		role   scaling.Component
		target *int
	}{{scaling.Prefill, targets.Prefill}, {scaling.Decode, targets.Decode}} {
		if t.target == nil {
			continue
		}
		comp := g.roles.of(t.role)
		if comp == nil {
			return fmt.Errorf("%w: %s has no %s component", connectors.ErrInvalidTargets, c.what(), t.role)
		}
		ch := change{role: t.role, comp: comp, current: g.desired[comp.name], target: int64(*t.target)}
		if ch.target == ch.current {
			c.log.Debug("component already at its target", "component", comp.name, "replicas", ch.target)
			continue
		}
		if ch.comp.index < 0 && !ch.comp.hasAdapter {
			return fmt.Errorf("%s uses the v1alpha1 spec.services form, which the planner reads but does not patch: "+
				"convert it to v1beta1 spec.components or give the component a scalingAdapter", c.what())
		}
		reduces = reduces || ch.target < ch.current
		changes = append(changes, ch)
	}
	if claimed && len(changes) == 0 {
		return nil
	}
	if len(changes) > 0 && !claimed {
		if err := c.admit(ctx, g, changes, reduces); err != nil {
			return err
		}
	}
	return c.write(ctx, g, decisionID, claimed, changes)
}

// admit decides whether the deployment can take the changes now.
func (c *Connector) admit(ctx context.Context, g *graph, changes []change, reduces bool) error {
	ready, why := readyCondition(g.dgd)
	if g.dgd.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%w: %s is being deleted", ErrNotReady, c.what())
	}
	if ready && !reduces {
		return nil
	}
	pods, err := c.listPods(ctx)
	if err != nil {
		return err
	}
	g.pods = pods
	settledGraph, notSettled := g.settled()
	if ready && settledGraph {
		return nil
	}
	switch {
	case !ready && settledGraph:
		notSettled = why
	case !ready:
		notSettled = why + "; " + notSettled
	}
	if c.startupCancellation(g, changes) {
		c.log.Info("scaling down replicas that are still starting (startup cancellation)")
		return nil
	}
	if !ready && c.unreadyRecovery(g, changes) {
		c.log.Info("bringing an adapter-owned component back from 0 although the DGD is not Ready")
		return nil
	}
	return fmt.Errorf("%w: %s: %s; the scaling is held (the planner decides again on its next tick)", ErrNotReady, c.what(), notSettled)
}

// startupCancellation allows a scale-down of replicas that are still starting (Dynamo #14251):
// when replicas are pending startup, every change goes down, to no fewer than those serving.
func (c *Connector) startupCancellation(g *graph, changes []change) bool {
	if !g.pods.known || failed(g.dgd) {
		return false
	}
	pending := g.pendingStartup()
	if pending == nil {
		return false
	}
	for _, ch := range changes {
		serving := statusOf(g.dgd, ch.comp.name).serving()
		if ch.target > serving || ch.target >= ch.current {
			return false
		}
	}
	return true
}

// unreadyRecovery allows one adapter-owned component to come back from 0 when it serves and
// runs nothing and the DGD has not failed: a graph scaled to zero is never Ready, and must be
// able to start again.
func (c *Connector) unreadyRecovery(g *graph, changes []change) bool {
	if len(changes) != 1 || failed(g.dgd) || !g.pods.known {
		return false
	}
	ch := changes[0]
	if !ch.comp.hasAdapter || ch.current != 0 || ch.target <= 0 || !statusOf(g.dgd, ch.comp.name).allZero() {
		return false
	}
	for _, p := range g.pods.pods {
		if p.Labels[LabelComponent] == ch.comp.name && (p.DeletionTimestamp != nil ||
			(p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed)) {
			return false
		}
	}
	if !pcsgOK(g.dgd, g.pods, g.desired) {
		return false
	}
	for _, comp := range g.roles.all {
		if comp.name != ch.comp.name && comp.typ != typePlanner && !g.stable(comp.name) {
			return false
		}
	}
	return true
}

// write applies the changes. First one JSON Patch on the DGD, tested on the resourceVersion
// read: it claims the decision (the decision-id annotation, unless a retry already claimed
// it) and, for the components without an adapter, tests each whole component and adds its
// replicas, all at once. Then each adapter's scale, only while the claim holds: the DGD is
// read again (a newer decision's claim makes this one stale) and the adapter after it, whose
// resourceVersion the scale patch carries. So a late attempt of an older decision can never
// undo a newer one, and a decision interrupted between writes is finished by its retry.
func (c *Connector) write(ctx context.Context, g *graph, decisionID int64, claimed bool, changes []change) error {
	var ops []map[string]any
	if !claimed {
		ops = append(ops, annotationOps(g.dgd, decisionID)...)
	}
	for _, ch := range changes {
		if ch.comp.hasAdapter {
			continue
		}
		path := fmt.Sprintf("/spec/components/%d", ch.comp.index)
		ops = append(ops,
			map[string]any{"op": "test", "path": path, "value": ch.comp.raw},
			map[string]any{"op": "add", "path": path + "/replicas", "value": ch.target})
	}
	if len(ops) > 0 {
		ops = append([]map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": g.dgd.GetResourceVersion()}}, ops...)
		if err := c.patchDGD(ctx, g.dgd.GetResourceVersion(), ops); err != nil {
			return err
		}
	}
	for _, ch := range changes {
		if !ch.comp.hasAdapter {
			c.log.Info("scaled", "component", ch.comp.name, "role", ch.role, "from", ch.current, "to", ch.target, "adapter", false)
			continue
		}
		if err := c.scaleAdapter(ctx, decisionID, ch); err != nil {
			return err
		}
	}
	return nil
}

// annotationOps set the decision-id annotation.
func annotationOps(dgd *unstructured.Unstructured, id int64) []map[string]any {
	value := strconv.FormatInt(id, 10)
	key := "/metadata/annotations/" + strings.ReplaceAll(AnnotationDecisionID, "/", "~1")
	switch _, present := dgd.GetAnnotations()[AnnotationDecisionID]; {
	case present:
		return []map[string]any{{"op": "replace", "path": key, "value": value}}
	case dgd.GetAnnotations() == nil:
		return []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": map[string]string{AnnotationDecisionID: value}}}
	default:
		return []map[string]any{{"op": "add", "path": key, "value": value}}
	}
}

// scaleAdapter writes one adapter's scale while decisionID is still the DGD's claimed
// decision.
func (c *Connector) scaleAdapter(ctx context.Context, decisionID int64, ch change) error {
	dgd, err := c.get(ctx)
	if err != nil {
		return err
	}
	if cur, err := appliedDecisionID(dgd); err != nil {
		return fmt.Errorf("%s: %w", c.what(), err)
	} else if cur != decisionID {
		return fmt.Errorf("%w: decision %d was claimed by decision %d on %s before its scaling adapter %s was written",
			connectors.ErrStaleDecision, decisionID, cur, c.what(), AdapterName(dgd.GetName(), ch.comp.name))
	}
	current, a, err := c.desired(ctx, dgd, ch.comp)
	if err != nil {
		return err
	}
	if current == ch.target {
		return nil
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"replicas": ch.target},
		"metadata": map[string]any{"resourceVersion": a.GetResourceVersion()}})
	if err != nil {
		return err
	}
	if _, err := c.dyn.Resource(AdapterResource).Namespace(c.o.Namespace).Patch(ctx, a.GetName(), types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager}, "scale"); err != nil {
		return c.writeError("patch", AdapterResource.Resource+"/scale", err)
	}
	c.log.Info("scaled", "component", ch.comp.name, "role", ch.role, "from", current, "to", ch.target, "adapter", true)
	return nil
}

// writeError keeps conflicts recognisable (Apply retries them) and explains the rest.
func (c *Connector) writeError(verb, resource string, err error) error {
	if apierrors.IsConflict(err) {
		return err
	}
	return c.apiError(verb, resource, err)
}

// FPMEndpoints lists the FPM publishers of the ready pods of the prefill and decode
// components: tcp://<pod IP>:<the container port named FPMPortName, else FPMPort>.
func (c *Connector) FPMEndpoints(ctx context.Context) ([]connectors.Endpoint, error) {
	dgd, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	roles, err := c.roles(dgd)
	if err != nil {
		return nil, err
	}
	byName := map[string]scaling.Component{}
	for _, role := range []scaling.Component{scaling.Prefill, scaling.Decode} {
		if comp := roles.of(role); comp != nil {
			byName[comp.name] = role
		}
	}
	list, err := c.pods.Pods(c.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelDGD + "=" + c.o.DGD})
	if err != nil {
		return nil, c.apiError("list", "pods", err)
	}
	var eps []connectors.Endpoint
	noPort := 0
	for _, p := range list.Items {
		role, ok := byName[p.Labels[LabelComponent]]
		if !ok || snapshotPod(&p) || !podReady(&p) {
			continue
		}
		port := c.o.FPMPort
		for _, ct := range p.Spec.Containers {
			for _, cp := range ct.Ports {
				if cp.Name == c.o.FPMPortName {
					port = int(cp.ContainerPort)
				}
			}
		}
		if port <= 0 {
			noPort++
			continue
		}
		eps = append(eps, connectors.Endpoint{Address: "tcp://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), Component: role})
	}
	if noPort > 0 && !c.warnedPorts.Swap(true) {
		c.log.Warn("ready engine pods without an FPM port are not observed: name a container port "+c.o.FPMPortName+" or set fpm.port", "pods", noPort)
	}
	slices.SortFunc(eps, func(a, b connectors.Endpoint) int { return strings.Compare(a.Address, b.Address) })
	return eps, nil
}

// podReady reports a running, ready pod with an IP that is not being deleted.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
