// Package workspace runs the WorkspaceDeployment state machine: resolve the class and the
// ClusterDeployment, merge resources, pass the GPU gate, install the prerequisites, build the Helm
// values, create the workspace's k0rdent ServiceSet and follow its state, and tear it all down on
// deletion. Each step lives in its own file; docs/RECONCILIATION.md walks through them.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/status"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
)

// Component is the component word: logger name, metrics prefix, field manager, leader-election lease.
const Component = component.Name

// Reconciler reconciles WorkspaceDeployments.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Cache is the manager's cache, whose field indexes the GPU gate reads without copying; nil lists
	// through Client.
	Cache cache.Informers
	// APIReader reads the API server directly, for what is not cached (events on failure).
	APIReader client.Reader
	// Children reaches the child clusters.
	Children Children
	// Routes attaches the workspaces' routes (internal/routing); nil leaves routing unconfigured.
	Routes routing.Provider
	// Recorder emits events.k8s.io/v1 events.
	Recorder events.EventRecorder
	// Options are the component's settings; the reconciler reads its timings from them.
	Options Options
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// gate is the GPU gate (internal/gate); gateFor makes it.
	gate   *gate.Gate
	writes ownWrites
	// madeNamespaces remembers the release namespaces of passes that ended in an error (orphans.go).
	madeNamespaces madeNamespaces
}

// staleRetry is how soon a pass put off because the cache lags this process's own write is tried
// again.
const staleRetry = 200 * time.Millisecond

// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacedeployments/status,verbs=patch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspaceclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=clusterdeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicesets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;list

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile drives one WorkspaceDeployment one step further and writes its status once, when it
// changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, retErr error) {
	ws := &workspacesv1.WorkspaceDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, ws); err != nil {
		if apierrors.IsNotFound(err) {
			r.gateFor().Forget(req.NamespacedName.String())
			r.writes.forget(req.NamespacedName.String())
			return reconcile.Result{}, errors.Join(r.collectMadeNamespace(ctx, req.NamespacedName), r.collectOrphans(ctx, req.NamespacedName))
		}
		return reconcile.Result{}, err
	}
	r.madeNamespaces.forget(req.NamespacedName) // it exists: its own passes and deletion own what they made
	if r.writes.stale(req.NamespacedName.String(), ws.ResourceVersion) {
		// The cache has not caught up with this process's last write: a pass now would decide from
		// the state before it (and record its Events again).
		return reconcile.Result{RequeueAfter: staleRetry}, nil
	}
	s := newScope(ws, r.now())
	before := ws.DeepCopy()
	s.before = ws.DeepCopy()

	defer func() {
		if ws.DeletionTimestamp.IsZero() && s.obs.verdict.kind == verdictFailed {
			if err := r.releaseAdmission(ctx, s); err != nil {
				retErr = errors.Join(retErr, err)
			}
		}
		if err := r.patchStatus(ctx, before, s); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if retErr != nil && s.releaseNSCreated {
			r.madeNamespaces.remember(req.NamespacedName, s.cdKey)
		}
	}()

	if !ws.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if !controllerutil.ContainsFinalizer(ws, workspacesv1.WorkspaceFinalizer) {
		patchBase := ws.DeepCopy()
		controllerutil.AddFinalizer(ws, workspacesv1.WorkspaceFinalizer)
		if err := r.Client.Patch(ctx, ws, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
		r.writes.wrote(s.key(), ws.ResourceVersion)
	}
	if ws.Spec.Suspend {
		// The status describes this generation: suspended, left as it was.
		s.suspended()
		s.observed = true
		return reconcile.Result{}, nil
	}
	r.retry(s)
	if stopped, err := r.stopWhenIdle(ctx, s); stopped || err != nil {
		return reconcile.Result{}, err // the spec change brings the workspace back
	}
	res, err := r.reconcileNormal(ctx, s)
	return s.untilStopDeadline(res), err
}

// reconcileNormal runs the steps in order; a step that cannot finish stops the pass and says when to
// come back. The list is the step table of docs/RECONCILIATION.md, row for row, by name (make verify
// checks it).
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (reconcile.Result, error) {
	steps := []struct {
		name string
		run  func(context.Context, *scope) (stepResult, error)
	}{
		{"adopt legacy", r.adoptLegacy},
		{"resolve class", r.resolveClass},
		// A workspace naming a Colony or a cluster selector is placed (and admitted) here, once.
		{"placement", r.place},
		{"resolve cluster", r.resolveCluster},
		{"resolve templates", r.resolveTemplates},
		{"merge resources", r.mergeResources},
		// A stopped workspace is scaled to zero and skips the gate (stop.go).
		{"stop", r.stopWorkspace},
		// Everything that can fail the workspace for good is checked before the gate, so that an
		// admission is never written and then dropped again pass after pass.
		{"values check", r.valuesCheck},
		{"prerequisites", r.prerequisites},
		{"release namespace claim", r.claimReleaseNamespace},
		{"serviceset claim", r.claimServiceSet},
		{"gpu gate", r.admit},
		{"pin to admitted nodes", r.pinToAdmittedNodes},
		// The values again, now with the admitted node pinned in the selector.
		{"values", r.values},
		{"release namespace", r.ensureReleaseNamespace},
		{"serviceset", r.serviceSet},
		{"readiness", r.readiness},
		// A running workspace's routes; they never stop the pass (RoutesReady says how they are).
		{"routes", r.routes},
	}
	for _, st := range steps {
		out, err := st.run(ctx, s)
		if err != nil {
			log.FromContext(ctx).V(1).Info("step failed", "step", st.name, "error", err.Error())
			return reconcile.Result{}, fmt.Errorf("%s: %w", st.name, err)
		}
		if out.stop {
			s.observed = true
			return reconcile.Result{RequeueAfter: out.requeueAfter}, nil
		}
	}
	s.observed = true
	return reconcile.Result{RequeueAfter: s.requeueAfter}, nil
}

// patchStatus writes the status when it changed, and records events for the condition transitions.
func (r *Reconciler) patchStatus(ctx context.Context, before *workspacesv1.WorkspaceDeployment, s *scope) error {
	ws := s.ws
	if s.observed {
		ws.Status.ObservedGeneration = ws.Generation
	}
	s.finish()
	if s.snapshot {
		r.snapshotFailure(ctx, s)
	}
	if !equality.Semantic.DeepEqual(before.Status, ws.Status) {
		r.redactSecrets(ctx, s)
	}
	metrics.ObservePhase(before, ws, r.now())
	if equality.Semantic.DeepEqual(before.Status, ws.Status) {
		r.gateFor().Settle(s.key(), ws.Status.Admission, ws.ResourceVersion, ws.Status.Phase)
		return nil
	}
	if !recordPassEvent(r.Recorder, ws, before.Status.Conditions, ws.Status.Conditions) {
		r.recordRefusal(ws, s.refusal)
	}
	if equality.Semantic.DeepEqual(s.before.Status, ws.Status) {
		r.gateFor().Settle(s.key(), ws.Status.Admission, ws.ResourceVersion, ws.Status.Phase)
		return nil // written already, with the admission
	}
	if err := r.writeStatus(ctx, ws, &s.before.Status); err != nil {
		if apierrors.IsNotFound(err) {
			r.gateFor().Forget(s.key())
			return r.removeVanished(ctx, s)
		}
		return fmt.Errorf("writing status: %w", err)
	}
	r.writes.wrote(s.key(), ws.ResourceVersion)
	r.gateFor().Settle(s.key(), ws.Status.Admission, ws.ResourceVersion, ws.Status.Phase)
	return nil
}

// writeStatus writes ws.Status as a merge patch from written, the status as last written
// (common/status.Patch). It is the one status writer that does not use common/status.Apply, on
// purpose: a WorkspaceDeployment may carry status written by the upstream operator it replaces
// (docs/MIGRATION.md), owned by that operator's field manager, and a field this controller clears (a
// failure context, a feasibility, a message) must go whoever wrote it. Only the workspace-controller
// writes this status, so the diff is complete.
func (r *Reconciler) writeStatus(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, written *workspacesv1.WorkspaceDeploymentStatus) error {
	base := ws.DeepCopy()
	base.Status = *written
	return status.Patch(ctx, r.Client, ws, base, Component)
}

// stepResult says whether the pass stops at a step and when to come back.
type stepResult struct {
	stop         bool
	requeueAfter time.Duration
}

var (
	next = stepResult{}
	stop = stepResult{stop: true}
)

func stopAfter(d time.Duration) stepResult { return stepResult{stop: true, requeueAfter: d} }

// scope carries what the steps learn about one workspace during one pass. Each field says which step
// (by its name in reconcileNormal and the step table of docs/RECONCILIATION.md) sets it; a later step
// only reads it. The status (ws.Status) is written by every step through the helpers of status.go
// and derived once at the end (deriveStatus).
type scope struct {
	// ws is the workspace as read at the start of the pass; the steps change its status only.
	ws *workspacesv1.WorkspaceDeployment
	// now is the time of the pass.
	now time.Time
	// before is the workspace as last written: as read, or as "placement" or "gpu gate" wrote its
	// admission (recordStatus).
	before *workspacesv1.WorkspaceDeployment
	// prev is the status as the pass found it, from which deriveStatus starts.
	prev workspacesv1.WorkspaceDeploymentStatus
	// obs is what the pass observed that decides the phase (see deriveStatus): every step that stops
	// the pass sets its verdict through blocked, failed, running or stopped.
	obs observation
	// snapshot asks for a failure snapshot (ServiceSet status, recent events) once the status is
	// derived; set by "readiness".
	snapshot bool

	// class: "resolve class".
	class *workspacesv1.WorkspaceClass
	// cdKey: "placement" (the chosen cluster) and "resolve cluster" (the cluster the workspace
	// targets); cd: "resolve cluster".
	cd    *k0rdentv1beta1.ClusterDeployment
	cdKey types.NamespacedName
	// resources: "merge resources" (and "placement", which merges them first); "pin to admitted
	// nodes" adds the admitted node to their selector.
	resources *workspacesv1.ResolvedResources
	// values and secretValues: "values check" and "values" (and "stop", for zero replicas); the
	// secret values travel in the workspace's values Secret.
	values       string
	secretValues string
	// sourcesRead caches the spec.valuesFrom sources the first values step of the pass read.
	sourcesRead *valuesFromRead
	// built are the values the pass built last, with what they were built from; a values step with
	// the same input uses them.
	built *builtValues
	// claimed is the workspace's own ServiceSet as "serviceset claim" found it (nil: none); "gpu gate"
	// reads it.
	claimed *k0rdentv1beta1.ServiceSet
	// svcSet is the workspace's ServiceSet as "serviceset" made or corrected it; "readiness" reads it.
	svcSet *k0rdentv1beta1.ServiceSet
	// releaseNSClaim is what "release namespace claim" found of the release namespace (nil: not
	// read); "release namespace" reuses the read.
	releaseNSClaim *childns.Outcome
	// releaseNSCreated: "release namespace" made the release namespace in this pass (orphans.go).
	releaseNSCreated bool

	// observed is true when the pass got far enough to describe the current generation.
	observed bool
	// stopping is true when spec.stopped scales the release to zero ("stop").
	stopping bool
	// retrying is true when this pass takes a Failed workspace out of Failed on request (retry.go);
	// "serviceset" then starts a new rollout, so that the deployTimeout counts afresh.
	retrying bool
	// requeueAfter asks for a pass at a deadline (deployTimeout, routing) even without events; set by
	// "readiness" and "routes".
	requeueAfter time.Duration
	// reclaimAt is when a reclaim's notice stops the workspace (reclaim.go); zero when none is due.
	reclaimAt time.Time
	// refusal is a refusal of the release's pods that "readiness" found new or changed under an
	// unchanged HelmReleaseReady reason; patchStatus records it as an Event (a new reason is an
	// Event of its own: recordPassEvent).
	refusal *childns.Refusal
}

func newScope(ws *workspacesv1.WorkspaceDeployment, now time.Time) *scope {
	return &scope{ws: ws, now: now, prev: *ws.Status.DeepCopy()}
}

// key is the workspace's namespace/name.
func (s *scope) key() string { return s.ws.Namespace + "/" + s.ws.Name }

// releaseNamespace is the namespace of the workspace's Helm release on the child.
func (s *scope) releaseNamespace() string { return owned.ReleaseNamespace(s.ws) }

// gateFor returns the reconciler's GPU gate, made on first use.
func (r *Reconciler) gateFor() *gate.Gate {
	if r.gate == nil {
		r.gate = gate.New(r.Client, r.Cache, r.Children)
	}
	return r.gate
}
