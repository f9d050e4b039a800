package prerequisites

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/names"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// What the installer reads and writes; the workspace reconciler's own rules cover them as well.
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicesets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=get;list;watch

// StateConflict is the state of a prerequisite in status.prerequisites that conflicts with what is on
// the cluster: a copy in another namespace, another version of its chart in its namespace, or other
// values of another class.
const StateConflict = "Conflict"

// Installer makes sure the prerequisites of a workspace's class are deployed on its cluster.
type Installer struct {
	Client client.Client
	// ValuesDigest is how the client's cache keeps a ServiceSet service's inline values (the cache
	// transform of ServiceSets replaces them by a digest): values are compared through it. The identity
	// when nil.
	ValuesDigest func(values string) string
}

// Request is what one prerequisites step needs, as plain values.
type Request struct {
	// Workspace is the workspace of the pass; it is read only.
	Workspace *workspacesv1.WorkspaceDeployment
	// Class is the workspace's WorkspaceClass; its spec.prerequisites are ensured.
	Class *workspacesv1.WorkspaceClass
	// Cluster is the ClusterDeployment the workspace targets, and ClusterKey its namespace/name.
	Cluster    *k0rdentv1beta1.ClusterDeployment
	ClusterKey types.NamespacedName
	// ClusterOwner is the owner reference a new shared ServiceSet carries (the ClusterDeployment's).
	ClusterOwner metav1.OwnerReference
}

// Result is what Ensure observed. It decides nothing: the caller turns it into a condition and phase.
type Result struct {
	// Statuses are the class's prerequisites as status.prerequisites reports them, in the class's order.
	Statuses []workspacesv1.PrerequisiteStatus
	// Conflicts are the messages of the prerequisites in StateConflict.
	Conflicts []string
	// ConflictReason is the condition reason of the conflicts: ReasonPrerequisiteValuesConflict when a
	// prerequisite's values conflict, else ReasonPrerequisiteNamespaceConflict. "" without conflicts.
	ConflictReason string
	// Failed are the prerequisites k0rdent reports Failed, as "<template>: <message>".
	Failed []string
	// Pending are the prerequisites neither deployed nor failed, as "<template> (<state>)".
	Pending []string
}

// Ready reports whether every prerequisite is deployed.
func (r Result) Ready() bool { return len(r.Conflicts)+len(r.Failed)+len(r.Pending) == 0 }

// Ensure makes sure every prerequisite of the class is deployed on the cluster, either by a service
// the Colony put on the ClusterDeployment or by the shared per-cluster ServiceSet, and reports each
// one's state. An error leaves the Result empty.
func (in *Installer) Ensure(ctx context.Context, req Request) (Result, error) {
	prereqs := req.Class.Spec.Prerequisites
	var res Result
	if len(prereqs) == 0 {
		return res, nil
	}
	statuses := make([]workspacesv1.PrerequisiteStatus, 0, len(prereqs))
	valuesConflict := false
	for _, p := range prereqs {
		st, values, err := in.prerequisite(ctx, req, p)
		if err != nil {
			return Result{}, err
		}
		valuesConflict = valuesConflict || values
		statuses = append(statuses, st)
		switch {
		case st.State == StateConflict:
			res.Conflicts = append(res.Conflicts, st.Message)
		case st.State == string(k0rdentv1beta1.ServiceStateFailed):
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %s", p.ServiceTemplate.Name, st.Message))
		case st.State != string(k0rdentv1beta1.ServiceStateDeployed):
			res.Pending = append(res.Pending, fmt.Sprintf("%s (%s)", p.ServiceTemplate.Name, orDefault(st.State, "Pending")))
		}
	}
	res.Statuses = statuses
	if len(res.Conflicts) > 0 {
		res.ConflictReason = workspacesv1.ReasonPrerequisiteNamespaceConflict
		if valuesConflict {
			res.ConflictReason = workspacesv1.ReasonPrerequisiteValuesConflict
		}
	}
	return res, nil
}

// prerequisite resolves one prerequisite: the shared ServiceSet when it exists, else a service the
// Colony provides, else a new shared ServiceSet. StateConflict marks a conflict: only a prerequisite
// that names its namespace conflicts with a copy installed in another one; one that names none
// accepts the copy wherever it is. valuesConflict says the conflict is one of values.
func (in *Installer) prerequisite(ctx context.Context, req Request, p workspacesv1.Prerequisite) (st workspacesv1.PrerequisiteStatus, valuesConflict bool, err error) {
	tmpl := p.ServiceTemplate.Name
	st = workspacesv1.PrerequisiteStatus{ServiceTemplate: tmpl, Namespace: p.ReleaseNamespace()}
	name := owned.PrerequisiteServiceSetName(req.ClusterKey.Name, tmpl)
	ss := &k0rdentv1beta1.ServiceSet{}
	err = in.Client.Get(ctx, types.NamespacedName{Namespace: req.ClusterKey.Namespace, Name: name}, ss)
	if err != nil && !apierrors.IsNotFound(err) {
		return st, false, fmt.Errorf("reading prerequisite ServiceSet %s/%s: %w", req.ClusterKey.Namespace, name, err)
	}
	if apierrors.IsNotFound(err) {
		if provided, ok := colonyService(req.Cluster, tmpl); ok {
			st.ProvidedByCluster = true
			st.State = provided.state
			st.Namespace = provided.namespace
			if p.Namespace != "" && provided.namespace != p.Namespace {
				st.State = StateConflict
				st.Message = fmt.Sprintf("prerequisite %s: the class wants it in namespace %s, but ClusterDeployment %s already has it in namespace %s",
					tmpl, p.Namespace, req.ClusterKey, provided.namespace)
			}
			return st, false, nil
		}
		if msg, err := in.versionConflict(ctx, req, p); err != nil || msg != "" {
			st.State, st.Message = StateConflict, msg
			return st, false, err
		}
		ss, err = in.create(ctx, req, p, name)
		if err != nil {
			return st, false, err
		}
	}
	st.ServiceSetName = ss.Name
	if len(ss.Spec.Services) > 0 {
		st.Namespace = ss.Spec.Services[0].Namespace
		if p.Namespace != "" && st.Namespace != p.Namespace {
			st.State = StateConflict
			st.Message = fmt.Sprintf("prerequisite %s: the class wants it in namespace %s, but the shared ServiceSet %s/%s installs it in namespace %s",
				tmpl, p.Namespace, ss.Namespace, ss.Name, st.Namespace)
			return st, false, nil
		}
	}
	if !ss.DeletionTimestamp.IsZero() {
		st.State = string(k0rdentv1beta1.ServiceStateDeleting)
		st.Message = "the shared ServiceSet is being removed; it is made again once it is gone"
		return st, false, nil
	}
	if msg, err := in.reconcileShared(ctx, req, p, ss); err != nil || msg != "" {
		st.State, st.Message = StateConflict, msg
		return st, true, err
	}
	st.State = string(k0rdentv1beta1.ServiceStatePending)
	release := names.HelmRelease(tmpl)
	for _, svc := range ss.Status.Services {
		if svc.Name == release && svc.Namespace == st.Namespace {
			st.State, st.Message = string(svc.State), svc.FailureMessage
		}
	}
	return st, false, nil
}

// create creates the shared ServiceSet; when another workspace created it first, that one is used.
func (in *Installer) create(ctx context.Context, req Request, p workspacesv1.Prerequisite, name string) (*k0rdentv1beta1.ServiceSet, error) {
	values, err := valuesYAML(p)
	if err != nil {
		return nil, err
	}
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: req.ClusterKey.Namespace,
			Labels: map[string]string{
				k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue,
				workspacesv1.PrerequisiteLabel:                     names.DNSLabel(p.ServiceTemplate.Name),
				workspacesv1.ClusterDeploymentLabel:                req.ClusterKey.Name,
			},
			Annotations:     map[string]string{owned.AnnotationPrerequisiteTemplate: p.ServiceTemplate.Name},
			OwnerReferences: []metav1.OwnerReference{req.ClusterOwner},
		},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  req.ClusterKey.Name,
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
	err = in.Client.Create(ctx, ss)
	if apierrors.IsAlreadyExists(err) {
		existing := &k0rdentv1beta1.ServiceSet{}
		if err := in.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}, existing); err != nil {
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
