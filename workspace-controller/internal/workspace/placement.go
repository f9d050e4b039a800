package workspace

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies,verbs=get;list;watch

// place picks the cluster of a workspace that names a Colony or a cluster selector, once: the choice
// is recorded in status.placement with the admission of the gate on that cluster, in one write made
// under the candidates' gate locks, and never changes afterwards. A workspace that names its
// ClusterDeployment gets a placement with reason Named. See docs/placement.md.
func (r *Reconciler) place(ctx context.Context, s *scope) (stepResult, error) {
	if !gate.PlacesItself(s.ws) {
		if s.ws.Status.Placement == nil || s.ws.Status.Placement.Reason != workspacesv1.PlacementNamed {
			key := owned.ClusterKey(s.ws)
			t := metav1.NewTime(s.now.UTC().Truncate(time.Second))
			s.ws.Status.Placement = &workspacesv1.Placement{Cluster: key.Name, Namespace: key.Namespace,
				Reason: workspacesv1.PlacementNamed, Message: "spec.clusterDeploymentRef", PlacedAt: &t}
			metrics.Placements.WithLabelValues(workspacesv1.PlacementNamed).Inc()
		}
		return next, nil
	}
	if p := r.gateFor().Placement(s.ws); p != nil {
		s.ws.Status.Placement = p
		s.setTrue(workspacesv1.PlacedCondition, workspacesv1.ReasonPlaced, "placed on ClusterDeployment "+owned.PlacedKey(s.ws).String())
		return next, nil
	}
	keys, why, err := r.candidates(ctx, s)
	if err != nil || why != nil {
		return stopAfter(r.Options.WaitingRetry), err
	}
	s.resources = MergeResources(s.class.Spec.DefaultResources, s.ws.Spec.Resources)
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	s.cdKey = types.NamespacedName{}
	req := r.gateRequest(s, s.applyPlacement)
	req.Candidates = keys
	d, err := r.gateFor().Place(ctx, req)
	if err != nil {
		return stop, err
	}
	s.applyPlacement(d)
	switch d.Outcome {
	case gate.NoFitNow:
		return stopAfter(r.Options.WaitingRetry), nil
	case gate.NoFitEver:
		return stop, nil
	case gate.OverQuota:
		return stop, r.releaseAdmission(ctx, s)
	}
	return next, nil
}

// applyPlacement records a decision of gate.Place in the status: the cluster, its admission and
// feasibility, or why no cluster was chosen.
func (s *scope) applyPlacement(d gate.Decision) {
	switch d.Outcome {
	case gate.NoFitNow:
		s.waitForGPUs(workspacesv1.PlacedCondition, d.Reason, d.Message)
	case gate.NoFitEver:
		s.failed(workspacesv1.PlacedCondition, d.Reason, d.Message)
	case gate.OverQuota:
		s.cdKey = d.Cluster
		s.applyQuota(d.Quota)
	case gate.Admitted:
		s.cdKey = d.Cluster
		s.applyQuota(d.Quota)
		s.ws.Status.Placement = d.Placement
		s.ws.Status.Admission = d.Admission
		s.ws.Status.Feasibility = d.Feasibility
		s.setTrue(workspacesv1.FeasibleCondition, d.Feasibility.Reason, d.Feasibility.Message)
		s.setTrue(workspacesv1.PlacedCondition, workspacesv1.ReasonPlaced, d.Message)
		s.obs.verdict = verdict{kind: verdictDeploying, reason: workspacesv1.ReasonPlaced, message: d.Message + " and admitted by the GPU gate"}
	}
}

// candidates lists the ClusterDeployments a workspace may be placed on, sorted by name: those of its
// Colony (status.clusterDeploymentRefs) or those of its namespace its cluster selector matches, that
// exist, are not being deleted and have their kubeconfig Secret. When there are none, the workspace
// is blocked with the reason and why is set.
func (r *Reconciler) candidates(ctx context.Context, s *scope) ([]types.NamespacedName, *string, error) {
	ns, fieldPath := s.ws.PlacementNamespace()
	if why, err := r.mayUseNamespace(ctx, s.ws.Namespace, ns); err != nil || why != "" {
		if err != nil {
			return nil, nil, err
		}
		msg := fieldPath + ": " + why + " (see docs/TENANCY.md)"
		s.waitFor(workspacesv1.PlacedCondition, workspacesv1.ReasonNamespaceNotAllowed, msg)
		return nil, &msg, nil
	}
	var names []string
	var source string
	switch {
	case s.ws.Spec.ColonyRef != nil:
		source = "Colony " + s.ws.Spec.ColonyRef.Name
		colony := &infrav1.Colony{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.ws.Spec.ColonyRef.Name}, colony)
		if apierrors.IsNotFound(err) {
			msg := fmt.Sprintf("spec.colonyRef: Colony %s/%s not found; waiting for it", ns, s.ws.Spec.ColonyRef.Name)
			s.waitFor(workspacesv1.PlacedCondition, workspacesv1.ReasonColonyNotFound, msg)
			return nil, &msg, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading Colony %s/%s: %w", ns, s.ws.Spec.ColonyRef.Name, err)
		}
		for _, ref := range colony.Status.ClusterDeploymentRefs {
			if ref.Namespace == "" || ref.Namespace == ns {
				names = append(names, ref.Name)
			}
		}
	default:
		source = "spec.clusterSelector"
		sel, err := metav1.LabelSelectorAsSelector(s.ws.Spec.ClusterSelector)
		if err != nil {
			msg := "spec.clusterSelector: " + err.Error()
			s.failed(workspacesv1.PlacedCondition, workspacesv1.ReasonNoCandidateClusters, msg)
			return nil, &msg, nil
		}
		if sel.Empty() {
			sel = labels.Everything()
		}
		var list k0rdentv1beta1.ClusterDeploymentList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, nil, fmt.Errorf("listing ClusterDeployments of %s: %w", ns, err)
		}
		for i := range list.Items {
			names = append(names, list.Items[i].Name)
		}
	}
	sort.Strings(names)
	var out []types.NamespacedName
	var skipped []string
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			continue
		}
		key := types.NamespacedName{Namespace: ns, Name: n}
		why, err := r.notReady(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			skipped = append(skipped, why)
			continue
		}
		out = append(out, key)
	}
	if len(out) == 0 {
		msg := source + " names no ClusterDeployment that is ready for workspaces yet"
		if len(skipped) > 0 {
			msg += ": " + strings.Join(skipped, "; ")
		}
		s.waitFor(workspacesv1.PlacedCondition, workspacesv1.ReasonNoCandidateClusters, msg)
		return nil, &msg, nil
	}
	return out, nil, nil
}

// notReady says why a ClusterDeployment cannot take workspaces now (missing, being deleted, no
// kubeconfig Secret), or "".
func (r *Reconciler) notReady(ctx context.Context, key types.NamespacedName) (string, error) {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	err := r.Client.Get(ctx, key, cd)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("%s does not exist", key.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading ClusterDeployment %s: %w", key, err)
	case !cd.DeletionTimestamp.IsZero():
		return fmt.Sprintf("%s is being deleted", key.Name), nil
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("%s has no kubeconfig Secret yet", key.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading kubeconfig Secret metadata of %s: %w", key, err)
	}
	return "", nil
}
