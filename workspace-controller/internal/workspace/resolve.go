package workspace

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/tenancy"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// resolveClass reads the WorkspaceClass. A missing or invalid class fails the workspace until the
// class is fixed (the class watch brings the workspace back).
func (r *Reconciler) resolveClass(ctx context.Context, s *scope) (stepResult, error) {
	class := &workspacesv1.WorkspaceClass{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: s.ws.Spec.WorkspaceClassRef}, class)
	if apierrors.IsNotFound(err) {
		s.failed(workspacesv1.ClassResolvedCondition, workspacesv1.ReasonClassNotFound,
			fmt.Sprintf("spec.workspaceClassRef: WorkspaceClass %q not found", s.ws.Spec.WorkspaceClassRef))
		return stop, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading WorkspaceClass %s: %w", s.ws.Spec.WorkspaceClassRef, err)
	}
	s.class = class
	ready := meta.FindStatusCondition(class.Status.Conditions, workspacesv1.ClassReadyCondition)
	if s.installed() && (ready == nil || class.Status.ObservedGeneration != class.Generation || !class.Status.Valid) {
		// The release is installed and untouched: a class that is invalid now (often only briefly, while
		// its ServiceTemplate is re-validated) is a condition, not a phase change.
		s.setCondition(workspacesv1.ClassResolvedCondition, metav1.ConditionFalse, workspacesv1.ReasonClassInvalid,
			fmt.Sprintf("WorkspaceClass %q is not valid now (%s); the installed release is left as it is", class.Name,
				orDefault(class.Status.ValidationError, "not validated yet")))
		return next, nil
	}
	switch {
	case ready == nil || class.Status.ObservedGeneration != class.Generation:
		s.blocked(workspacesv1.PhasePending, workspacesv1.ClassResolvedCondition, workspacesv1.ReasonClassInvalid,
			fmt.Sprintf("WorkspaceClass %q has not been validated yet", class.Name))
		return stop, nil
	case !class.Status.Valid:
		s.failed(workspacesv1.ClassResolvedCondition, workspacesv1.ReasonClassInvalid,
			fmt.Sprintf("WorkspaceClass %q is not valid: %s", class.Name, class.Status.ValidationError))
		return stop, nil
	}
	s.setTrue(workspacesv1.ClassResolvedCondition, workspacesv1.ReasonClassResolved, fmt.Sprintf("WorkspaceClass %q is valid", class.Name))
	return next, nil
}

// installed reports whether the workspace's release was installed by an earlier pass and is being
// followed: its ServiceSet was made and it is Deploying or Running.
func (s *scope) installed() bool {
	p := s.ws.Status.Phase
	return s.ws.Status.ServiceSetName != "" && (p == workspacesv1.PhaseRunning || p == workspacesv1.PhaseDeploying)
}

// resolveCluster checks tenancy and reads the ClusterDeployment and its kubeconfig Secret. Anything
// missing leaves the workspace Pending; it heals when the object appears.
func (r *Reconciler) resolveCluster(ctx context.Context, s *scope) (stepResult, error) {
	key := owned.ClusterKey(s.ws)
	s.cdKey = key
	if !tenancy.SameNamespace(s.ws.Namespace, key.Namespace) {
		ns := &metav1.PartialObjectMetadata{}
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		var target *corev1.Namespace
		err := r.Client.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns)
		switch {
		case err == nil:
			target = &corev1.Namespace{ObjectMeta: ns.ObjectMeta}
		case !apierrors.IsNotFound(err):
			return stop, fmt.Errorf("reading namespace %s: %w", key.Namespace, err)
		}
		if ok, why := tenancy.Allowed(s.ws.Namespace, target); !ok {
			s.blocked(workspacesv1.PhasePending, workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonNamespaceNotAllowed,
				"spec.clusterDeploymentRef.namespace: "+why+" (see docs/TENANCY.md)")
			return stop, nil
		}
	}
	cd := &k0rdentv1beta1.ClusterDeployment{}
	err := r.Client.Get(ctx, key, cd)
	if apierrors.IsNotFound(err) {
		s.blocked(workspacesv1.PhasePending, workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonClusterDeploymentNotFound,
			fmt.Sprintf("spec.clusterDeploymentRef: ClusterDeployment %s not found; waiting for it", key))
		return stop, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading ClusterDeployment %s: %w", key, err)
	}
	if !cd.DeletionTimestamp.IsZero() {
		s.blocked(workspacesv1.PhasePending, workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonClusterNotReady,
			fmt.Sprintf("ClusterDeployment %s is being deleted", key))
		return stop, nil
	}
	s.cd = cd
	// One path for every kind of cluster: `<cd>-kubeconfig`, an adopted cluster's SveltosCluster
	// Secret or a regional cluster's Secret on its Region (common/childcluster).
	if indirect, err := r.Children.Find(ctx, key); err != nil {
		if childcluster.UnreachableReason(err) != childcluster.ReasonKubeconfigMissing {
			return stop, fmt.Errorf("looking up the kubeconfig of %s: %w", key, err)
		}
		s.blocked(workspacesv1.PhasePending, workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonClusterNotReady,
			fmt.Sprintf("ClusterDeployment %s has no kubeconfig yet (%s)", key, kubeconfigMissing(err)))
		if indirect {
			// A Secret on a regional cluster, or one a SveltosCluster names freely, is not watched.
			return stopAfter(r.Options.UnreachableRetry), nil
		}
		return stop, nil
	}
	if out, err := r.checkReleaseNamespace(ctx, s); err != nil || out.stop {
		return out, err
	}
	s.setTrue(workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonClusterDeploymentResolved,
		fmt.Sprintf("ClusterDeployment %s", key))
	return next, nil
}

// kubeconfigMissing returns what a KubeconfigMissing error says is missing, without the prefix naming
// the cluster (the message names it already).
func kubeconfigMissing(err error) string {
	var u *childcluster.UnreachableError
	if errors.As(err, &u) && u.Err != nil {
		return u.Err.Error()
	}
	return err.Error()
}

// checkReleaseNamespace fails a workspace whose release namespace ws-<name> on the cluster is already
// used by an older workspace of the same name from another namespace (childns.OlderSameName).
func (r *Reconciler) checkReleaseNamespace(ctx context.Context, s *scope) (stepResult, error) {
	holder, err := childns.Namespaces{Workspaces: r.Client, Cluster: s.cdKey}.OlderSameName(ctx, s.ws)
	if err != nil {
		return stop, err
	}
	if holder == "" {
		return next, nil
	}
	s.failed(workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonReleaseNamespaceConflict,
		fmt.Sprintf("workspace %s already uses the release namespace %s on ClusterDeployment %s; rename this workspace",
			holder, s.releaseNamespace(), s.cdKey))
	return stop, nil
}

// resolveTemplates checks that the class's ServiceTemplate and its prerequisites' templates exist,
// valid, in the ClusterDeployment's namespace, where k0rdent looks a ServiceSet's templates up. The
// controller does not copy templates: k0rdent distributes them (AccessManagement, template chains),
// and a copy would bypass that. The workspace stays Pending until they are there.
func (r *Reconciler) resolveTemplates(ctx context.Context, s *scope) (stepResult, error) {
	names := []string{s.class.Spec.ServiceTemplate.Name}
	constraints := []string{s.class.Spec.ServiceTemplate.VersionConstraint}
	fields := []string{"spec.serviceTemplate.versionConstraint"}
	for i, p := range s.class.Spec.Prerequisites {
		names = append(names, p.ServiceTemplate.Name)
		constraints = append(constraints, p.ServiceTemplate.VersionConstraint)
		fields = append(fields, fmt.Sprintf("WorkspaceClass spec.prerequisites[%d].serviceTemplate.versionConstraint", i))
	}
	for i, n := range names {
		t := &k0rdentv1beta1.ServiceTemplate{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.cdKey.Namespace, Name: n}, t)
		msg := ""
		switch {
		case apierrors.IsNotFound(err):
			msg = fmt.Sprintf("ServiceTemplate %s is not available in namespace %s, where k0rdent looks templates up for ClusterDeployment %s; distribute it there (k0rdent AccessManagement or a template chain)",
				n, s.cdKey.Namespace, s.cdKey.Name)
		case err != nil:
			return stop, fmt.Errorf("reading ServiceTemplate %s/%s: %w", s.cdKey.Namespace, n, err)
		case !t.Status.Valid:
			msg = fmt.Sprintf("ServiceTemplate %s/%s is not valid: %s", s.cdKey.Namespace, n, t.Status.ValidationError)
		default:
			if verr := workspaceclass.CheckVersionAt(fields[i], constraints[i], t); verr != nil {
				msg = verr.Error()
			}
		}
		if msg != "" && s.installed() {
			// The release is installed and untouched: say so, do not change the phase.
			s.setCondition(workspacesv1.ClassResolvedCondition, metav1.ConditionFalse, workspacesv1.ReasonServiceTemplateUnavailable,
				msg+"; the installed release is left as it is")
			return next, nil
		}
		if msg != "" {
			s.blocked(workspacesv1.PhasePending, workspacesv1.ClassResolvedCondition, workspacesv1.ReasonServiceTemplateNotInClusterNamespace, msg)
			return stop, nil
		}
	}
	return next, nil
}

// mergeResources merges the class's defaultResources with the workspace's overrides, field by field,
// and records the result with the GPU resource and node selector.
func (r *Reconciler) mergeResources(_ context.Context, s *scope) (stepResult, error) {
	s.resources = MergeResources(s.class.Spec.DefaultResources, s.ws.Spec.Resources)
	return next, nil
}

// MergeResources applies overrides on defaults field by field: a field the overrides leave out keeps
// the default.
func MergeResources(def workspacesv1.DefaultResources, ov *workspacesv1.ResourceOverrides) *workspacesv1.ResolvedResources {
	out := &workspacesv1.ResolvedResources{Replicas: 1}
	if def.Replicas != nil {
		out.Replicas = *def.Replicas
	}
	if def.PerReplica != nil {
		out.PerReplica = *def.PerReplica.DeepCopy()
	}
	if ov != nil {
		if ov.Replicas != nil {
			out.Replicas = *ov.Replicas
		}
		if p := ov.PerReplica; p != nil {
			pr := &out.PerReplica
			if p.CPU != nil {
				q := p.CPU.DeepCopy()
				pr.CPU = &q
			}
			if p.Memory != nil {
				q := p.Memory.DeepCopy()
				pr.Memory = &q
			}
			if p.Storage != nil {
				q := p.Storage.DeepCopy()
				pr.Storage = &q
			}
			if p.GPUCount != nil {
				c := *p.GPUCount
				pr.GPUCount = &c
			}
			if p.GPUVendor != "" {
				pr.GPUVendor = p.GPUVendor
			}
			if p.GPUType != "" {
				pr.GPUType = p.GPUType
			}
			if p.GPUNodeSelector != nil {
				pr.GPUNodeSelector = make(map[string]string, len(p.GPUNodeSelector))
				for k, v := range p.GPUNodeSelector {
					pr.GPUNodeSelector[k] = v
				}
			}
		}
	}
	if out.Replicas < 1 {
		out.Replicas = 1
	}
	if gate.GPUs(out) > 0 {
		if out.PerReplica.GPUVendor == "" {
			out.PerReplica.GPUVendor = workspacesv1.GPUVendorNVIDIA
		}
		if res, ok := gpu.ResourceNameFor(out.PerReplica.GPUVendor); ok {
			out.GPUResourceName = string(res)
		}
		out.NodeSelector = gate.Selector(out)
	}
	return out
}
