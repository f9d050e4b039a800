package workspace

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/names"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// prerequisites makes sure every prerequisite of the class is deployed on the cluster, either by a
// service the Colony put on the ClusterDeployment or by the shared per-cluster ServiceSet
// (docs/RECONCILIATION.md, step 4).
func (r *Reconciler) prerequisites(ctx context.Context, s *scope) (stepResult, error) {
	prereqs := s.class.Spec.Prerequisites
	if len(prereqs) == 0 {
		s.ws.Status.Prerequisites = nil
		s.setTrue(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonNoPrerequisites, "the class has no prerequisites")
		return next, nil
	}
	statuses := make([]workspacesv1.PrerequisiteStatus, 0, len(prereqs))
	var conflict, failed, pending []string
	for _, p := range prereqs {
		st, err := r.prerequisite(ctx, s, p)
		if err != nil {
			return stop, err
		}
		statuses = append(statuses, st)
		switch {
		case st.State == "Conflict":
			conflict = append(conflict, st.Message)
		case st.State == string(k0rdentv1beta1.ServiceStateFailed):
			failed = append(failed, fmt.Sprintf("%s: %s", p.ServiceTemplate.Name, st.Message))
		case st.State != string(k0rdentv1beta1.ServiceStateDeployed):
			pending = append(pending, fmt.Sprintf("%s (%s)", p.ServiceTemplate.Name, orDefault(st.State, "Pending")))
		}
	}
	s.ws.Status.Prerequisites = statuses
	deployedBefore := s.ws.Status.ServiceSetName != ""
	switch {
	case len(conflict) > 0:
		s.failed(workspacesv1.PrerequisitesMetCondition, orDefault(s.prerequisiteConflict, workspacesv1.ReasonPrerequisiteNamespaceConflict), strings.Join(conflict, "; "))
		return stop, nil
	case len(failed) > 0 && !deployedBefore:
		s.failed(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisiteFailed, "prerequisite failed: "+strings.Join(failed, "; "))
		return stop, nil
	case len(failed)+len(pending) > 0 && deployedBefore:
		// The workspace is installed already: report, but do not take it down.
		s.setCondition(workspacesv1.PrerequisitesMetCondition, metav1.ConditionFalse, workspacesv1.ReasonPrerequisitesDeploying,
			"prerequisites not deployed: "+strings.Join(append(failed, pending...), "; "))
		return next, nil
	case len(pending) > 0:
		return r.waitForPrerequisites(s, pending), nil
	}
	s.setTrue(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisitesMet, "every prerequisite is deployed")
	return next, nil
}

// waitForPrerequisites keeps the workspace in InstallingPrerequisites until the class's
// prerequisiteDeployTimeout, counted from when it started waiting, then fails it.
func (r *Reconciler) waitForPrerequisites(s *scope, pending []string) stepResult {
	timeout := s.class.Spec.PrerequisiteDeployTimeoutOrDefault()
	started := s.now
	if c := meta.FindStatusCondition(s.ws.Status.Conditions, workspacesv1.PrerequisitesMetCondition); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == workspacesv1.ReasonPrerequisitesDeploying {
		started = c.LastTransitionTime.Time
	}
	msg := "waiting for prerequisites: " + strings.Join(pending, ", ")
	if s.now.Sub(started) >= timeout {
		s.failed(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisiteTimeout,
			fmt.Sprintf("prerequisites not deployed within prerequisiteDeployTimeout %s: %s", timeout, strings.Join(pending, ", ")))
		return stop
	}
	s.blocked(workspacesv1.PhaseInstallingPrerequisites, workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisitesDeploying, msg)
	return stopAfter(timeout - s.now.Sub(started))
}

// prerequisite resolves one prerequisite: the shared ServiceSet when it exists, else a service the
// Colony provides, else a new shared ServiceSet. State "Conflict" marks a namespace conflict: only a
// prerequisite that names its namespace conflicts with a copy installed in another one; one that names
// none accepts the copy wherever it is.
func (r *Reconciler) prerequisite(ctx context.Context, s *scope, p workspacesv1.Prerequisite) (workspacesv1.PrerequisiteStatus, error) {
	tmpl := p.ServiceTemplate.Name
	st := workspacesv1.PrerequisiteStatus{ServiceTemplate: tmpl, Namespace: p.ReleaseNamespace()}
	name := owned.PrerequisiteServiceSetName(s.cdKey.Name, tmpl)
	ss := &k0rdentv1beta1.ServiceSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.cdKey.Namespace, Name: name}, ss)
	if err != nil && !apierrors.IsNotFound(err) {
		return st, fmt.Errorf("reading prerequisite ServiceSet %s/%s: %w", s.cdKey.Namespace, name, err)
	}
	if apierrors.IsNotFound(err) {
		if provided, ok := colonyService(s.cd, tmpl); ok {
			st.ProvidedByCluster = true
			st.State = provided.state
			st.Namespace = provided.namespace
			if p.Namespace != "" && provided.namespace != p.Namespace {
				st.State = "Conflict"
				st.Message = fmt.Sprintf("prerequisite %s: the class wants it in namespace %s, but ClusterDeployment %s already has it in namespace %s",
					tmpl, p.Namespace, s.cdKey, provided.namespace)
			}
			return st, nil
		}
		if msg, err := r.prerequisiteVersionConflict(ctx, s, p); err != nil || msg != "" {
			st.State, st.Message = "Conflict", msg
			return st, err
		}
		ss, err = r.createPrerequisite(ctx, s, p, name)
		if err != nil {
			return st, err
		}
	}
	st.ServiceSetName = ss.Name
	if len(ss.Spec.Services) > 0 {
		st.Namespace = ss.Spec.Services[0].Namespace
		if p.Namespace != "" && st.Namespace != p.Namespace {
			st.State = "Conflict"
			st.Message = fmt.Sprintf("prerequisite %s: the class wants it in namespace %s, but the shared ServiceSet %s/%s installs it in namespace %s",
				tmpl, p.Namespace, ss.Namespace, ss.Name, st.Namespace)
			return st, nil
		}
	}
	if !ss.DeletionTimestamp.IsZero() {
		st.State = string(k0rdentv1beta1.ServiceStateDeleting)
		st.Message = "the shared ServiceSet is being removed; it is made again once it is gone"
		return st, nil
	}
	if msg, err := r.reconcileSharedPrerequisite(ctx, s, p, ss); err != nil || msg != "" {
		st.State, st.Message = "Conflict", msg
		s.prerequisiteConflict = workspacesv1.ReasonPrerequisiteValuesConflict
		return st, err
	}
	st.State = string(k0rdentv1beta1.ServiceStatePending)
	release := names.HelmRelease(tmpl)
	for _, svc := range ss.Status.Services {
		if svc.Name == release && svc.Namespace == st.Namespace {
			st.State, st.Message = string(svc.State), svc.FailureMessage
		}
	}
	return st, nil
}

// createPrerequisite creates the shared ServiceSet; when another workspace created it first, that one
// is used.
func (r *Reconciler) createPrerequisite(ctx context.Context, s *scope, p workspacesv1.Prerequisite, name string) (*k0rdentv1beta1.ServiceSet, error) {
	values, err := prerequisiteValuesYAML(p)
	if err != nil {
		return nil, err
	}
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: s.cdKey.Namespace,
			Labels: map[string]string{
				k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue,
				workspacesv1.PrerequisiteLabel:                     names.DNSLabel(p.ServiceTemplate.Name),
				workspacesv1.ClusterDeploymentLabel:                s.cdKey.Name,
			},
			Annotations:     map[string]string{owned.AnnotationPrerequisiteTemplate: p.ServiceTemplate.Name},
			OwnerReferences: []metav1.OwnerReference{clusterOwnerRef(s.cd)},
		},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  s.cdKey.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{
				Name:      names.HelmRelease(p.ServiceTemplate.Name),
				Namespace: p.ReleaseNamespace(),
				Template:  p.ServiceTemplate.Name,
				// No helmOptions: k0rdent's defaults (atomic installs) apply.
				Values: values,
			}},
		},
	}
	err = r.Client.Create(ctx, ss)
	if apierrors.IsAlreadyExists(err) {
		existing := &k0rdentv1beta1.ServiceSet{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}, existing); err != nil {
			return nil, fmt.Errorf("reading prerequisite ServiceSet %s/%s: %w", ss.Namespace, ss.Name, err)
		}
		return existing, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating prerequisite ServiceSet %s/%s: %w", ss.Namespace, ss.Name, err)
	}
	return ss, nil
}

// providedService is a service the Colony (or anyone but this operator) put on a ClusterDeployment.
type providedService struct {
	namespace string
	state     string
}

// colonyService finds a service with the template on the ClusterDeployment: in spec.serviceSpec
// (its state read from status.services), else a Deployed entry of status.services. Templates are
// versioned by name, so only the exact template counts.
func colonyService(cd *k0rdentv1beta1.ClusterDeployment, template string) (providedService, bool) {
	for _, svc := range cd.Spec.ServiceSpec.Services {
		if svc.Template != template || svc.Disable {
			continue
		}
		ns := orDefault(svc.Namespace, "default")
		out := providedService{namespace: ns, state: string(k0rdentv1beta1.ServiceStatePending)}
		for _, st := range cd.Status.Services {
			if st.Name == svc.Name && st.Namespace == ns {
				out.state = string(st.State)
			}
		}
		return out, true
	}
	for _, st := range cd.Status.Services {
		if st.Template == template && st.State == k0rdentv1beta1.ServiceStateDeployed {
			return providedService{namespace: st.Namespace, state: string(st.State)}, true
		}
	}
	return providedService{}, false
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
