package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/tenancy"
	"github.com/exalsius/exalsius-operator/webhook/internal/validation"
)

// DeploymentValidator validates WorkspaceDeployments against their class and the tenancy rule.
type DeploymentValidator struct {
	// Reader reads WorkspaceClasses and Namespaces.
	Reader client.Reader
	// LiveReader reads the API server directly. A class that Reader (a cache) does not hold is read
	// again through it before the deployment is let through unchecked: `kubectl apply -f` of a folder
	// creates the class a moment before the deployment, sooner than the cache sees it. Nil skips that.
	LiveReader client.Reader
	// Options tune the rules.
	Options validation.DeploymentOptions
	// Reviewer creates the SubjectAccessReviews that check the requesting user may read each
	// spec.valuesFrom source (valuesfrom.go). Nil refuses every deployment that names a source.
	Reviewer AccessReviewer
	// ControllerUser is the workspace-controller's user name: only it may set or change the adoption
	// annotations (adoption.go). Empty leaves them unchecked.
	ControllerUser string
}

// ValidateCreate checks a new deployment: its fields, its values against the class (a missing class
// is a warning, so that GitOps tools may apply the deployment before the class), the tenancy rule, and
// that the requesting user may read every spec.valuesFrom source.
func (v *DeploymentValidator) ValidateCreate(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment) (admission.Warnings, error) {
	errs, warnings, err := v.check(ctx, wsd)
	if err != nil {
		return warnings, err
	}
	errs = append(errs, v.adoptionAnnotations(ctx, nil, wsd)...)
	if err := v.classDeleting(ctx, wsd); err != nil {
		errs = append(errs, err)
	}
	cerr, err := v.classAllowed(ctx, wsd)
	if err != nil {
		return warnings, err
	}
	if cerr != nil {
		errs = append(errs, cerr)
	}
	terrs, err := v.tenancy(ctx, wsd)
	if err != nil {
		return warnings, err
	}
	perrs, err := v.priority(ctx, wsd)
	if err != nil {
		return warnings, err
	}
	aerrs, err := v.valuesFromAccess(ctx, wsd, validation.ValuesFromToReview(nil, wsd.Spec.ValuesFrom))
	if err != nil {
		return warnings, err
	}
	errs = append(append(append(errs, terrs...), perrs...), aerrs...)
	return warnings, invalid(deploymentKind, wsd.Name, errs)
}

// ValidateUpdate keeps the class and cluster references fixed and checks a changed spec again; the
// right to read a spec.valuesFrom source is checked only for the sources the update adds. A
// deployment being deleted, an update that leaves the spec alone (finalizers, labels), or one that
// only stops or starts the workspace (spec.stopped) always passes, so that teardown never waits for
// the webhook's verdict on old data. Tenancy is checked on create only: the target never changes, and
// the workspace-controller re-checks it on every pass.
func (v *DeploymentValidator) ValidateUpdate(ctx context.Context, oldWSD, newWSD *workspacesv1.WorkspaceDeployment) (admission.Warnings, error) {
	if newWSD.DeletionTimestamp != nil {
		return nil, nil
	}
	// Before the early returns below: an update of the metadata alone may change these annotations.
	if errs := v.adoptionAnnotations(ctx, oldWSD, newWSD); len(errs) > 0 {
		return nil, invalid(deploymentKind, newWSD.Name, errs)
	}
	errs := validation.WorkspaceDeploymentUpdate(oldWSD, newWSD)
	if len(errs) > 0 || apiequality.Semantic.DeepEqual(oldWSD.Spec, newWSD.Spec) || validation.OnlyStoppedChanged(oldWSD, newWSD) {
		return nil, invalid(deploymentKind, newWSD.Name, errs)
	}
	cerrs, warnings, err := v.check(ctx, newWSD)
	if err != nil {
		return warnings, err
	}
	if newWSD.Spec.Priority > oldWSD.Spec.Priority {
		perrs, err := v.priority(ctx, newWSD)
		if err != nil {
			return warnings, err
		}
		cerrs = append(cerrs, perrs...)
	}
	// Only the sources the update adds are checked (validation.ValuesFromToReview says why).
	aerrs, err := v.valuesFromAccess(ctx, newWSD, validation.ValuesFromToReview(oldWSD.Spec.ValuesFrom, newWSD.Spec.ValuesFrom))
	if err != nil {
		return warnings, err
	}
	return warnings, invalid(deploymentKind, newWSD.Name, append(cerrs, aerrs...))
}

// ValidateDelete allows every deletion.
func (v *DeploymentValidator) ValidateDelete(context.Context, *workspacesv1.WorkspaceDeployment) (admission.Warnings, error) {
	return nil, nil
}

// check runs the field rules with the class, when it exists.
func (v *DeploymentValidator) check(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment) (field.ErrorList, admission.Warnings, error) {
	var warnings admission.Warnings
	var class *workspacesv1.WorkspaceClass
	if wsd.Spec.WorkspaceClassRef != "" {
		wc := &workspacesv1.WorkspaceClass{}
		err := v.get(ctx, client.ObjectKey{Name: wsd.Spec.WorkspaceClassRef}, wc)
		switch {
		case apierrors.IsNotFound(err):
			warnings = append(warnings, ClassMissingWarning(wsd.Spec.WorkspaceClassRef))
		case err != nil:
			return nil, nil, apierrors.NewInternalError(fmt.Errorf("reading WorkspaceClass %s: %w", wsd.Spec.WorkspaceClassRef, err))
		default:
			class = wc
		}
	}
	errs, w := validation.WorkspaceDeployment(wsd, class, v.Options)
	return errs, append(warnings, w...), nil
}

// get reads obj from the cache, and from the API server when the cache does not hold it: an object
// created a moment before (a class, a namespace, in the same `kubectl apply -f` of a folder) may not
// have reached the cache yet, and must not turn into a warning or a refusal.
func (v *DeploymentValidator) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := v.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && v.LiveReader != nil {
		err = v.LiveReader.Get(ctx, key, obj)
	}
	return err
}

// classDeleting refuses a new deployment of a class that is being deleted: the class would otherwise
// stay (its finalizer waits for every user) for a workspace created after its deletion was asked for.
func (v *DeploymentValidator) classDeleting(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment) *field.Error {
	if wsd.Spec.WorkspaceClassRef == "" {
		return nil
	}
	wc := &workspacesv1.WorkspaceClass{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: wsd.Spec.WorkspaceClassRef}, wc); err != nil || wc.DeletionTimestamp == nil {
		return nil
	}
	return field.Forbidden(field.NewPath("spec", "workspaceClassRef"),
		fmt.Sprintf("WorkspaceClass %s is being deleted; use another class", wc.Name))
}

// classAllowed refuses a new deployment of a class whose spec.allowedNamespaces does not select the
// deployment's namespace (common/tenancy.ClassAllowed). The class reference never changes, so only a
// create is checked; the workspace-controller checks again on every pass. A missing class is left to
// the warning of check.
func (v *DeploymentValidator) classAllowed(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment) (*field.Error, error) {
	if wsd.Spec.WorkspaceClassRef == "" {
		return nil, nil
	}
	wc := &workspacesv1.WorkspaceClass{}
	if err := v.get(ctx, client.ObjectKey{Name: wsd.Spec.WorkspaceClassRef}, wc); err != nil || !tenancy.ClassRestricted(wc) {
		return nil, client.IgnoreNotFound(err)
	}
	ns := &corev1.Namespace{}
	err := v.get(ctx, client.ObjectKey{Name: wsd.Namespace}, ns)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", wsd.Namespace, err))
	}
	if ok, why := tenancy.ClassAllowed(wc, wsd.Namespace, ns.Labels); !ok {
		return field.Forbidden(field.NewPath("spec", "workspaceClassRef"), why+" (see docs/TENANCY.md)"), nil
	}
	return nil, nil
}

// ClassMissingWarning is the warning returned when a deployment names a class that does not exist.
func ClassMissingWarning(class string) string {
	return fmt.Sprintf("WorkspaceClass %s does not exist yet: the workspace waits for it, and its values and "+
		"resources were not checked against it", class)
}

// priority refuses a spec.priority above what the namespace's WorkspaceQuotas allow (their lowest
// spec.maxPriority, 0 without one), so that tenants cannot outrank each other at will. Only a raise
// is checked on update: a workspace whose cap was lowered later may still be edited otherwise.
func (v *DeploymentValidator) priority(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment) (field.ErrorList, error) {
	if wsd.Spec.Priority <= 0 {
		return nil, nil
	}
	errs, err := v.priorityFrom(ctx, v.Reader, wsd)
	if err != nil || len(errs) == 0 || v.LiveReader == nil {
		return errs, err
	}
	// A refusal is confirmed against the API server: the quota that allows the priority may have been
	// created a moment before, sooner than the cache saw it.
	return v.priorityFrom(ctx, v.LiveReader, wsd)
}

func (v *DeploymentValidator) priorityFrom(ctx context.Context, r client.Reader, wsd *workspacesv1.WorkspaceDeployment) (field.ErrorList, error) {
	var quotas workspacesv1.WorkspaceQuotaList
	if err := r.List(ctx, &quotas, client.InNamespace(wsd.Namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing WorkspaceQuotas of %s: %w", wsd.Namespace, err))
	}
	return validation.Priority(wsd, workspacesv1.MaxPriority(quotas.Items)), nil
}

// tenancy applies the cross-namespace rule of common/tenancy to spec.clusterDeploymentRef.namespace,
// and to the namespace a placing workspace is placed from (spec.colonyRef.namespace,
// spec.clusterSelectorNamespace).
func (v *DeploymentValidator) tenancy(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment) (field.ErrorList, error) {
	errs, err := v.tenancyOf(ctx, wsd, wsd.Spec.ClusterDeploymentRef.Namespace, field.NewPath("spec", "clusterDeploymentRef", "namespace"))
	if err != nil {
		return nil, err
	}
	if from, path := wsd.PlacementNamespace(); path != "" {
		more, err := v.tenancyOf(ctx, wsd, from, fieldPath(path))
		if err != nil {
			return nil, err
		}
		errs = append(errs, more...)
	}
	return errs, nil
}

// fieldPath turns "spec.a.b" into a field.Path.
func fieldPath(p string) *field.Path {
	parts := strings.Split(p, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// tenancyOf checks that the workspace may use the clusters of namespace target, named at path.
func (v *DeploymentValidator) tenancyOf(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment, target string, path *field.Path) (field.ErrorList, error) {
	if tenancy.SameNamespace(wsd.Namespace, target) {
		return nil, nil
	}
	ns := &corev1.Namespace{}
	err := v.get(ctx, client.ObjectKey{Name: target}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", target, err))
	}
	if ok, why := tenancy.Allowed(wsd.Namespace, ns); !ok {
		return field.ErrorList{field.Forbidden(path, why)}, nil
	}
	return nil, nil
}

// DeploymentDefaulter fills spec.clusterDeploymentRef.namespace with the deployment's own namespace,
// so that the stored object says where the workspace runs; a deployment that names a Colony or a
// cluster selector instead is left alone. On update it only restores the value when
// a client drops it (server-side apply of a manifest without it), so that the immutability rule never
// trips on a field the client never set.
//
// It answers with a JSON patch of that one field and nothing else: decoding the object into Go types
// and encoding it again would respell every quantity (`1000m` becomes `1`), which GitOps tools see
// as drift.
type DeploymentDefaulter struct{}

// Handle implements admission.Handler.
func (d *DeploymentDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the WorkspaceDeployment: %w", err))
	}
	ns := req.Namespace
	if ns == "" || refNamespace(obj) != "" || placesItself(obj) {
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update {
		var old map[string]any
		if len(req.OldObject.Raw) == 0 || json.Unmarshal(req.OldObject.Raw, &old) != nil || refNamespace(old) != ns {
			return admission.Allowed("")
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	var op jsonpatch.JsonPatchOperation
	switch ref, isMap := spec["clusterDeploymentRef"].(map[string]any); {
	case spec == nil:
		op = jsonpatch.NewOperation("add", "/spec", map[string]any{"clusterDeploymentRef": map[string]any{"namespace": ns}})
	case !isMap || ref == nil:
		op = jsonpatch.NewOperation("add", "/spec/clusterDeploymentRef", map[string]any{"namespace": ns})
	default:
		op = jsonpatch.NewOperation("add", "/spec/clusterDeploymentRef/namespace", ns)
	}
	return admission.Patched("", op)
}

// placesItself reports whether a decoded object names a Colony or a cluster selector and no
// ClusterDeployment: it gets no clusterDeploymentRef.
func placesItself(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	if _, ok := spec["clusterDeploymentRef"]; ok {
		return false
	}
	_, colony := spec["colonyRef"]
	_, selector := spec["clusterSelector"]
	return colony || selector
}

// refNamespace is spec.clusterDeploymentRef.namespace of a decoded object, "" when absent.
func refNamespace(obj map[string]any) string {
	spec, _ := obj["spec"].(map[string]any)
	ref, _ := spec["clusterDeploymentRef"].(map[string]any)
	ns, _ := ref["namespace"].(string)
	return ns
}
