// Package admission serves the webhook's admission handlers: validating WorkspaceClass,
// WorkspaceDeployment and Colony, and defaulting WorkspaceDeployment. The rules themselves are the
// pure functions of internal/validation; this package adds the lookups they need and turns their
// field errors into API errors.
//
// The kubebuilder markers (markers.go) generate config/webhook/manifests.yaml (`hack/generate.sh`).
// Both configurations are named exalsius-operator-webhook (the chart renames them after its release);
// failurePolicy is Fail with a 5 second timeout, sideEffects None, and the namespaceSelector leaves
// kube-system, kube-public and kube-node-lease alone (the chart adds its release namespace, by name:
// no label a tenant could set on a namespace turns admission off).
//
// +kubebuilder:webhookconfiguration:mutating=false,name=exalsius-operator-webhook
// +kubebuilder:webhookconfiguration:mutating=true,name=exalsius-operator-webhook
//
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspaceclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=list
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies,verbs=list
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacequotas,verbs=get;list;watch
package admission

import (
	"encoding/json"

	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/webhook/internal/validation"
)

// Paths the handlers are served at; they match the markers.
const (
	ValidateWorkspaceClassPath      = "/validate-workspaces-exalsius-ai-v1-workspaceclass"
	ValidateWorkspaceDeploymentPath = "/validate-workspaces-exalsius-ai-v1-workspacedeployment"
	DefaultWorkspaceDeploymentPath  = "/mutate-workspaces-exalsius-ai-v1-workspacedeployment"
	ValidateColonyPath              = "/validate-infra-exalsius-ai-v1-colony"
)

// Registrar is what handlers are registered on: the controller-runtime webhook server.
type Registrar interface {
	Register(path string, hook http.Handler)
}

// Options configure the handlers.
type Options struct {
	// Reader reads WorkspaceClasses and Namespaces; a cached client is fine.
	Reader client.Reader
	// LiveReader lists WorkspaceDeployments when a class is deleted, and reads a class the cache does
	// not hold yet; it should read the API server directly, so that a deployment created a moment ago
	// still protects its class and a class created a moment ago is checked against.
	LiveReader client.Reader
	// Deployment tunes the WorkspaceDeployment rules.
	Deployment validation.DeploymentOptions
	// Reviewer creates SubjectAccessReviews for the requesting user of a WorkspaceDeployment that
	// names spec.valuesFrom sources; nil refuses every such deployment.
	Reviewer AccessReviewer
	// ControllerUser is the workspace-controller's user name, the only one that may set the adoption
	// annotations of a WorkspaceDeployment; empty leaves them unchecked.
	ControllerUser string
}

// Register registers every handler on srv. Handlers recover from panics and deny the request.
func Register(srv Registrar, scheme *runtime.Scheme, opts Options) {
	if opts.LiveReader == nil {
		opts.LiveReader = opts.Reader
	}
	srv.Register(ValidateWorkspaceClassPath, admission.WithValidator[*workspacesv1.WorkspaceClass](scheme,
		&ClassValidator{Reader: opts.LiveReader}).WithRecoverPanic(true))
	srv.Register(ValidateWorkspaceDeploymentPath, admission.WithValidator[*workspacesv1.WorkspaceDeployment](scheme,
		&DeploymentValidator{Reader: opts.Reader, LiveReader: opts.LiveReader, Options: opts.Deployment, Reviewer: opts.Reviewer,
			ControllerUser: opts.ControllerUser}).WithRecoverPanic(true))
	defaulter := preflight{kind: deploymentKind, check: validation.WorkspaceDeploymentPreflight, next: &DeploymentDefaulter{},
		decodes: func(raw []byte) bool { return json.Unmarshal(raw, &workspacesv1.WorkspaceDeployment{}) == nil }}
	srv.Register(DefaultWorkspaceDeploymentPath, (&admission.Webhook{Handler: defaulter}).WithRecoverPanic(true))
	srv.Register(ValidateColonyPath, admission.WithValidator[*infrav1.Colony](scheme,
		&ColonyValidator{Reader: opts.LiveReader}).WithRecoverPanic(true))
}

// invalid turns a non-empty error list into the API's 422 Invalid error, which the API server
// returns to the client with every field path.
func invalid(kind schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(kind, name, validation.Sort(errs))
}

var (
	classKind      = workspacesv1.GroupVersion.WithKind("WorkspaceClass").GroupKind()
	deploymentKind = workspacesv1.GroupVersion.WithKind("WorkspaceDeployment").GroupKind()
	colonyKind     = infrav1.GroupVersion.WithKind("Colony").GroupKind()
)

// ColonyValidator validates Colonies.
type ColonyValidator struct {
	// Reader lists the Colonies of a namespace, to refuse names that clash with theirs, and reads the
	// Namespaces that the KOF regional labels of an entry name, for the tenancy rule. It should read
	// the API server directly: a grant given or revoked a moment before counts. Nil skips the names
	// check and finds no Namespace (a regional cluster in another namespace is refused).
	Reader client.Reader
}

// ValidateCreate checks a new Colony.
func (v *ColonyValidator) ValidateCreate(ctx context.Context, c *infrav1.Colony) (admission.Warnings, error) {
	return nil, v.validate(ctx, c, nil)
}

// ValidateUpdate checks a changed Colony; a Colony being deleted is never held up.
func (v *ColonyValidator) ValidateUpdate(ctx context.Context, oldC, newC *infrav1.Colony) (admission.Warnings, error) {
	if newC.DeletionTimestamp != nil || specEqual(oldC.Spec, newC.Spec) {
		return nil, nil
	}
	return nil, v.validate(ctx, newC, oldC)
}

// validate runs the field rules, the names check and the tenancy rule on the regional clusters the
// entries' labels name (old is nil on create).
func (v *ColonyValidator) validate(ctx context.Context, c, old *infrav1.Colony) error {
	errs := validation.Colony(c)
	more, err := v.collisions(ctx, c)
	if err != nil {
		return err
	}
	regional, err := v.regional(ctx, c, old)
	if err != nil {
		return err
	}
	return invalid(colonyKind, c.Name, append(append(errs, more...), regional...))
}

// regional reads the Namespaces that the KOF regional labels of c's entries newly name, and applies
// the tenancy rule to them.
func (v *ColonyValidator) regional(ctx context.Context, c, old *infrav1.Colony) (field.ErrorList, error) {
	names := validation.ColonyRegionalNamespaces(c, old)
	if len(names) == 0 {
		return nil, nil
	}
	namespaces := make(map[string]*corev1.Namespace, len(names))
	for _, name := range names {
		ns, err := v.namespace(ctx, name)
		if err != nil {
			return nil, err
		}
		if ns != nil {
			namespaces[name] = ns
		}
	}
	return validation.ColonyRegional(c, old, namespaces), nil
}

// namespace reads Namespace name; nil when it does not exist.
func (v *ColonyValidator) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if v.Reader == nil {
		return nil, nil
	}
	ns := &corev1.Namespace{}
	err := v.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", name, err))
	}
	return ns, nil
}

// collisions lists the namespace's Colonies and checks c's names against theirs.
func (v *ColonyValidator) collisions(ctx context.Context, c *infrav1.Colony) (field.ErrorList, error) {
	if v.Reader == nil {
		return nil, nil
	}
	list := &infrav1.ColonyList{}
	if err := v.Reader.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the Colonies of namespace %s: %w", c.Namespace, err))
	}
	return validation.ColonyCollisions(c, list.Items), nil
}

// ValidateDelete allows every deletion.
func (v *ColonyValidator) ValidateDelete(context.Context, *infrav1.Colony) (admission.Warnings, error) {
	return nil, nil
}
