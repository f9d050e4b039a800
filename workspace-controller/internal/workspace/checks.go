package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/tenancy"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// The checks of what a workspace refers to (its WorkspaceClass, its ClusterDeployment and the
// ServiceTemplates), as one ordered chain in the manner of cert-manager's policy chains: each check
// has a name and either passes (it may record what it read in the scope) or returns a finding. Three
// steps of the pass run their part of the chain ("resolve class", "resolve cluster" and "resolve
// templates": placement runs between the first two, since it needs the class and gives the cluster);
// the first finding stops the step.
//
// A finding fails the workspace when a human must act, and otherwise leaves it Pending until the
// input appears (the watches bring it back, or retry does). A workspace whose release is installed
// and followed (scope.installed) is never taken out of Deploying or Running by a finding that
// whenInstalled covers: the condition says what is wrong, the release is left as it is, and the pass
// goes on (or stops there, keeping the phase, when it cannot go on without the input: a class
// briefly missing).

// check is one named check of the chain, run by the step that names it.
type check struct {
	step string
	name string
	run  func(context.Context, *scope) (*finding, error)
}

// finding is what a check found wrong: the condition set False with its reason and message.
type finding struct {
	condition, reason, message string
	// fail: a human must act; the workspace is Failed. Otherwise it is Pending.
	fail bool
	// retry: no watch sees the input; the pass comes back after this long.
	retry time.Duration
	// whenInstalled, when set, is what an installed workspace gets instead: the condition is
	// recorded and the pass goes on, or, with hold, stops there keeping the phase and Ready.
	whenInstalled *finding
	// hold (of a whenInstalled finding): the pass cannot go on without the input; it stops, the
	// installed release left as it is and the phase kept.
	hold bool
}

// Steps that run the chain.
const (
	stepResolveClass     = "resolve class"
	stepResolveCluster   = "resolve cluster"
	stepResolveTemplates = "resolve templates"
)

// checks is the chain, in the order the pass runs it.
func (r *Reconciler) checks() []check {
	return []check{
		{stepResolveClass, "class exists", r.classExists},
		{stepResolveClass, "class validated", classValidated},
		{stepResolveClass, "class valid", classValid},
		{stepResolveClass, "class allowed in the namespace", r.classAllowed},
		{stepResolveCluster, "namespace allowed", r.namespaceAllowed},
		{stepResolveCluster, "cluster exists", r.clusterExists},
		{stepResolveCluster, "cluster not being deleted", clusterNotDeleting},
		{stepResolveCluster, "kubeconfig present", r.kubeconfigPresent},
		{stepResolveCluster, "release namespace free", r.releaseNamespaceFree},
		{stepResolveTemplates, "templates available", r.templatesAvailable},
	}
}

// checksOf is the step's part of the chain, in order.
func (r *Reconciler) checksOf(step string) []check {
	var out []check
	for _, c := range r.checks() {
		if c.step == step {
			out = append(out, c)
		}
	}
	return out
}

// runChecks runs checks in order until one finds a problem; resolved records what the step resolved
// once every check passed.
func runChecks(ctx context.Context, s *scope, checks []check, resolved func()) (stepResult, error) {
	for _, c := range checks {
		f, err := c.run(ctx, s)
		if err != nil {
			return stop, fmt.Errorf("%s: %w", c.name, err)
		}
		if f == nil {
			continue
		}
		if w := f.whenInstalled; w != nil && s.installed() {
			if w.hold {
				s.holding(w.condition, w.reason, w.message)
				return stopAfter(w.retry), nil
			}
			s.setCondition(w.condition, metav1.ConditionFalse, w.reason, w.message)
			return next, nil
		}
		if f.fail {
			s.failed(f.condition, f.reason, f.message)
		} else {
			s.waitFor(f.condition, f.reason, f.message)
		}
		return stopAfter(f.retry), nil
	}
	if resolved != nil {
		resolved()
	}
	return next, nil
}

// installed reports whether the workspace's release was installed by an earlier pass and is being
// followed: its ServiceSet was made and it is Deploying or Running.
func (s *scope) installed() bool {
	p := s.ws.Status.Phase
	return s.ws.Status.ServiceSetName != "" && (p == workspacesv1.PhaseRunning || p == workspacesv1.PhaseDeploying)
}

// resolveClass reads the WorkspaceClass, which must be validated and valid. A missing or invalid class
// fails the workspace until the class is fixed (the class watch brings the workspace back).
func (r *Reconciler) resolveClass(ctx context.Context, s *scope) (stepResult, error) {
	return runChecks(ctx, s, r.checksOf(stepResolveClass), func() {
		s.setTrue(workspacesv1.ClassResolvedCondition, workspacesv1.ReasonClassResolved, fmt.Sprintf("WorkspaceClass %q is valid", s.class.Name))
	})
}

// resolveCluster checks tenancy and reads the ClusterDeployment and its kubeconfig Secret, and that
// the release namespace is not an older workspace's. Anything missing leaves the workspace Pending; it
// heals when the object appears.
func (r *Reconciler) resolveCluster(ctx context.Context, s *scope) (stepResult, error) {
	s.cdKey = owned.ClusterKey(s.ws)
	return runChecks(ctx, s, r.checksOf(stepResolveCluster), func() {
		s.setTrue(workspacesv1.ClusterDeploymentResolvedCondition, workspacesv1.ReasonClusterDeploymentResolved,
			fmt.Sprintf("ClusterDeployment %s", s.cdKey))
	})
}

// resolveTemplates checks that the class's ServiceTemplate and its prerequisites' templates exist,
// valid, in the ClusterDeployment's namespace, where k0rdent looks a ServiceSet's templates up. The
// controller does not copy templates: k0rdent distributes them (AccessManagement, template chains),
// and a copy would bypass that. The workspace stays Pending until they are there.
func (r *Reconciler) resolveTemplates(ctx context.Context, s *scope) (stepResult, error) {
	return runChecks(ctx, s, r.checksOf(stepResolveTemplates), nil)
}

// classExists reads the WorkspaceClass into the scope.
func (r *Reconciler) classExists(ctx context.Context, s *scope) (*finding, error) {
	class := &workspacesv1.WorkspaceClass{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: s.ws.Spec.WorkspaceClassRef}, class)
	if apierrors.IsNotFound(err) {
		return &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassNotFound, fail: true,
			message: fmt.Sprintf("spec.workspaceClassRef: WorkspaceClass %q not found", s.ws.Spec.WorkspaceClassRef),
			whenInstalled: &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassNotFound, hold: true,
				message: fmt.Sprintf("spec.workspaceClassRef: WorkspaceClass %q not found now; the installed release is left as it is until it is back", s.ws.Spec.WorkspaceClassRef)}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading WorkspaceClass %s: %w", s.ws.Spec.WorkspaceClassRef, err)
	}
	s.class = class
	return nil, nil
}

// classNotValidNow is what an installed workspace records about a class that is not valid now (often
// only briefly, while its ServiceTemplate is re-validated): a condition, not a phase change.
func classNotValidNow(class *workspacesv1.WorkspaceClass) *finding {
	return &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassInvalid,
		message: fmt.Sprintf("WorkspaceClass %q is not valid now (%s); the installed release is left as it is", class.Name,
			orDefault(class.Status.ValidationError, "not validated yet"))}
}

// classValidated: the workspaceclass controller has validated the class's current generation.
func classValidated(_ context.Context, s *scope) (*finding, error) {
	class := s.class
	if meta.FindStatusCondition(class.Status.Conditions, workspacesv1.ClassReadyCondition) != nil &&
		class.Status.ObservedGeneration == class.Generation {
		return nil, nil
	}
	return &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassInvalid,
		message:       fmt.Sprintf("WorkspaceClass %q has not been validated yet", class.Name),
		whenInstalled: classNotValidNow(class)}, nil
}

// classValid: the class is valid.
func classValid(_ context.Context, s *scope) (*finding, error) {
	class := s.class
	if class.Status.Valid {
		return nil, nil
	}
	return &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassInvalid, fail: true,
		message:       fmt.Sprintf("WorkspaceClass %q is not valid: %s", class.Name, class.Status.ValidationError),
		whenInstalled: classNotValidNow(class)}, nil
}

// classAllowed: the class's spec.allowedNamespaces selects the workspace's namespace
// (tenancy.ClassAllowed; docs/TENANCY.md). The workspace waits Pending until it does (the namespace's
// labels are watched); an installed one keeps its release as it is and takes no change meanwhile.
func (r *Reconciler) classAllowed(ctx context.Context, s *scope) (*finding, error) {
	if !tenancy.ClassRestricted(s.class) {
		return nil, nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, types.NamespacedName{Name: s.ws.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading namespace %s: %w", s.ws.Namespace, err)
	}
	ok, why := tenancy.ClassAllowed(s.class, s.ws.Namespace, ns.Labels)
	if ok {
		return nil, nil
	}
	msg := "spec.workspaceClassRef: " + why + " (see docs/TENANCY.md)"
	return &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassNotAllowed, message: msg,
		whenInstalled: &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonClassNotAllowed, hold: true,
			message: msg + "; the installed release is left as it is"}}, nil
}

// namespaceAllowed: a ClusterDeployment in another namespace may be used only where that namespace
// allows the workspace's (docs/TENANCY.md).
func (r *Reconciler) namespaceAllowed(ctx context.Context, s *scope) (*finding, error) {
	why, err := r.mayUseNamespace(ctx, s.ws.Namespace, s.cdKey.Namespace)
	if err != nil || why == "" {
		return nil, err
	}
	fieldPath := "spec.clusterDeploymentRef.namespace"
	if gate.PlacesItself(s.ws) {
		_, fieldPath = s.ws.PlacementNamespace()
		if fieldPath == "" {
			fieldPath = "status.placement.namespace" // placed on a cluster of another namespace
		}
	}
	return &finding{condition: workspacesv1.ClusterDeploymentResolvedCondition, reason: workspacesv1.ReasonNamespaceNotAllowed,
		message: fieldPath + ": " + why + " (see docs/TENANCY.md)"}, nil
}

// mayUseNamespace says why a workspace of namespace own may not use the clusters of namespace target,
// or "": its own namespace always, another only where that namespace allows it (common/tenancy).
func (r *Reconciler) mayUseNamespace(ctx context.Context, own, target string) (string, error) {
	if tenancy.SameNamespace(own, target) {
		return "", nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	var obj *corev1.Namespace
	err := r.Client.Get(ctx, types.NamespacedName{Name: target}, ns)
	switch {
	case err == nil:
		obj = &corev1.Namespace{ObjectMeta: ns.ObjectMeta}
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("reading namespace %s: %w", target, err)
	}
	if ok, why := tenancy.Allowed(own, obj); !ok {
		return why, nil
	}
	return "", nil
}

// clusterExists reads the ClusterDeployment into the scope.
func (r *Reconciler) clusterExists(ctx context.Context, s *scope) (*finding, error) {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	err := r.Client.Get(ctx, s.cdKey, cd)
	if apierrors.IsNotFound(err) {
		return r.clusterGone(ctx, s) // clustergone.go
	}
	if err != nil {
		return nil, fmt.Errorf("reading ClusterDeployment %s: %w", s.cdKey, err)
	}
	s.cd = cd
	return nil, nil
}

// clusterNotDeleting: a ClusterDeployment being deleted takes no workspace.
func clusterNotDeleting(_ context.Context, s *scope) (*finding, error) {
	if s.cd.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	s.cd = nil
	return &finding{condition: workspacesv1.ClusterDeploymentResolvedCondition, reason: workspacesv1.ReasonClusterNotReady,
		message: fmt.Sprintf("ClusterDeployment %s is being deleted", s.cdKey)}, nil
}

// kubeconfigPresent: the cluster's kubeconfig exists. One path for every kind of cluster:
// `<cd>-kubeconfig`, an adopted cluster's SveltosCluster Secret or a regional cluster's Secret on its
// Region (common/childcluster).
func (r *Reconciler) kubeconfigPresent(ctx context.Context, s *scope) (*finding, error) {
	indirect, err := r.Children.Find(ctx, s.cdKey)
	if err == nil {
		return nil, nil
	}
	if childcluster.UnreachableReason(err) != childcluster.ReasonKubeconfigMissing {
		return nil, fmt.Errorf("looking up the kubeconfig of %s: %w", s.cdKey, err)
	}
	f := &finding{condition: workspacesv1.ClusterDeploymentResolvedCondition, reason: workspacesv1.ReasonClusterNotReady,
		message: fmt.Sprintf("ClusterDeployment %s has no kubeconfig yet (%s)", s.cdKey, kubeconfigMissing(err))}
	if indirect {
		// A Secret on a regional cluster, or one a SveltosCluster names freely, is not watched.
		f.retry = r.Options.UnreachableRetry
	}
	return f, nil
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

// releaseNamespaceFree: the release namespace on the cluster is not already used by an older
// workspace of the same name from another namespace (childns.OlderSameName).
func (r *Reconciler) releaseNamespaceFree(ctx context.Context, s *scope) (*finding, error) {
	older, err := childns.Namespaces{Workspaces: r.Client, Cluster: s.cdKey}.OlderSameName(ctx, s.ws)
	if err != nil || !older {
		return nil, err
	}
	return &finding{condition: workspacesv1.ClusterDeploymentResolvedCondition, reason: workspacesv1.ReasonReleaseNamespaceConflict, fail: true,
		message: fmt.Sprintf("a workspace of the same name in another namespace already uses the release namespace %s on ClusterDeployment %s; rename this workspace",
			s.releaseNamespace(), s.cdKey)}, nil
}

// templatesAvailable: the class's and its prerequisites' ServiceTemplates exist, valid, in the
// ClusterDeployment's namespace, and their version constraints hold for those copies.
func (r *Reconciler) templatesAvailable(ctx context.Context, s *scope) (*finding, error) {
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
			return nil, fmt.Errorf("reading ServiceTemplate %s/%s: %w", s.cdKey.Namespace, n, err)
		case !t.Status.Valid:
			msg = fmt.Sprintf("ServiceTemplate %s/%s is not valid: %s", s.cdKey.Namespace, n, t.Status.ValidationError)
		default:
			if verr := workspaceclass.CheckVersionAt(fields[i], constraints[i], t); verr != nil {
				msg = verr.Error()
			}
		}
		if msg != "" {
			return &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonServiceTemplateNotInClusterNamespace, message: msg,
				whenInstalled: &finding{condition: workspacesv1.ClassResolvedCondition, reason: workspacesv1.ReasonServiceTemplateUnavailable,
					message: msg + "; the installed release is left as it is"}}, nil
		}
	}
	return nil, nil
}
