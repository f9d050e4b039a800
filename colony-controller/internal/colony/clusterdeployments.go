package colony

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/names"
)

// clusterDeploymentGVK is the kind the colony-controller writes.
var clusterDeploymentGVK = k0rdentv1beta1.GroupVersion.WithKind("ClusterDeployment")

// ClusterDeploymentName returns the name of the ClusterDeployment made for the entry clusterName of
// the Colony colony: `<colony>-<clusterName>`. The Colony CRD rejects entries whose name would not fit
// a DNS label, so the name is never cut in practice; names.DNSLabel keeps it bounded regardless.
func ClusterDeploymentName(colony, clusterName string) string {
	return names.DNSLabel(colony, clusterName)
}

// entryField returns the path of a field of the entry clusterName as the user wrote it, for messages:
// spec.colonyClusters[clusterName=a].clusterDeploymentSpec.template.
func entryField(clusterName string, rest ...string) string {
	p := fmt.Sprintf("spec.colonyClusters[clusterName=%s]", clusterName)
	for _, r := range rest {
		if r != "" {
			p += "." + r
		}
	}
	return p
}

// entryError is an entry the API server or the controller refuses; its message names the field.
type entryError struct {
	msg string
	// refused: the API server or an admission webhook or policy refused the object; something outside
	// the Colony (a ClusterTemplate, a Credential) may fix it.
	refused bool
}

func (e *entryError) Error() string { return e.msg }

// isEntryError reports whether err is a problem of the entry itself (fixed by editing the Colony),
// as opposed to a transient API error.
func isEntryError(err error) bool {
	var ee *entryError
	return errors.As(err, &ee)
}

// isRefusedEntry reports whether err is an entry the API server refused.
func isRefusedEntry(err error) bool {
	var ee *entryError
	return errors.As(err, &ee) && ee.refused
}

// decodeClusterDeploymentSpec decodes an entry's clusterDeploymentSpec. It returns the spec as a
// JSON object with every key the user wrote (unknown ones included) and `config: {}` added when
// config is missing or null. The typed decode into the k0rdent mirror only checks the known fields'
// types, so a mistake is reported with the field's name before anything is sent.
func decodeClusterDeploymentSpec(entry infrav1.ColonyCluster) (map[string]any, error) {
	field := func(rest string) string { return entryField(entry.ClusterName, "clusterDeploymentSpec", rest) }
	raw := bytes.TrimSpace(entry.ClusterDeploymentSpec.Raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, &entryError{msg: field("") + ": must be a JSON object"}
	}
	spec := map[string]any{}
	// utiljson turns whole numbers into int64, the number type unstructured objects hold.
	if err := utiljson.Unmarshal(raw, &spec); err != nil {
		return nil, &entryError{msg: field("") + ": must be a JSON object"}
	}
	var typed k0rdentv1beta1.ClusterDeploymentSpec
	if err := json.Unmarshal(raw, &typed); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, &entryError{msg: fmt.Sprintf("%s: must be of type %s, not %s", field(te.Field), te.Type, te.Value)}
		}
		return nil, &entryError{msg: field("") + ": does not decode as a ClusterDeployment spec"}
	}
	switch spec["config"].(type) {
	case nil:
		// KCM's mutating webhook turns a missing config into a dry run: always send one.
		spec["config"] = map[string]any{}
	case map[string]any:
	default:
		return nil, &entryError{msg: field("config") + ": must be a JSON object (the Helm values of the ClusterTemplate)"}
	}
	return spec, nil
}

// desiredClusterDeployment builds the apply configuration of an entry's ClusterDeployment: exactly
// the fields the Colony sets (spec as written plus config, labels, annotations and the controller
// owner reference) and nothing KCM owns.
func desiredClusterDeployment(colony *infrav1.Colony, entry infrav1.ColonyCluster) (*unstructured.Unstructured, error) {
	spec, err := decodeClusterDeploymentSpec(entry)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(clusterDeploymentGVK)
	u.SetNamespace(colony.Namespace)
	u.SetName(ClusterDeploymentName(colony.Name, entry.ClusterName))

	labels := make(map[string]string, len(entry.ClusterLabels)+2)
	for k, v := range entry.ClusterLabels {
		labels[k] = v
	}
	// The Colony's own labels win over user labels of the same key: the controller finds its
	// ClusterDeployments by them.
	labels[infrav1.ColonyLabel] = colony.Name
	labels[infrav1.ColonyClusterLabel] = entry.ClusterName
	u.SetLabels(labels)
	if len(entry.ClusterAnnotations) > 0 {
		annotations := make(map[string]string, len(entry.ClusterAnnotations))
		for k, v := range entry.ClusterAnnotations {
			annotations[k] = v
		}
		u.SetAnnotations(annotations)
	}
	u.SetOwnerReferences([]metav1.OwnerReference{ownerReference(colony)})
	return u, nil
}

// ownerReference is the controller owner reference of everything a Colony makes.
func ownerReference(colony *infrav1.Colony) metav1.OwnerReference {
	t, f := true, true
	return metav1.OwnerReference{
		APIVersion:         infrav1.GroupVersion.String(),
		Kind:               "Colony",
		Name:               colony.Name,
		UID:                colony.UID,
		Controller:         &t,
		BlockOwnerDeletion: &f,
	}
}

// isControlledBy reports whether obj's controller owner reference points at the Colony.
func isControlledBy(obj metav1.Object, colony *infrav1.Colony) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == colony.UID
}

// hashObject returns a short digest of an apply configuration, for the applied cache.
func hashObject(u *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(u.Object) // encoding/json sorts map keys: the digest is stable.
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// applyClusterDeployment server-side applies an entry's ClusterDeployment with the colony-controller
// field manager, taking ownership of the fields it sets. Labels, annotations and spec keys applied
// before and no longer sent are removed by the API server; fields other managers (KCM) own are never
// touched. An unchanged object seen at the same resourceVersion is not sent again.
func (r *Reconciler) applyClusterDeployment(ctx context.Context, colony *infrav1.Colony, entry infrav1.ColonyCluster,
	live *k0rdentv1beta1.ClusterDeployment) error {
	desired, err := desiredClusterDeployment(colony, entry)
	if err != nil {
		return err
	}
	if live != nil && !isControlledBy(live, colony) {
		return &entryError{msg: fmt.Sprintf("%s: ClusterDeployment %s already exists and is not controlled by this Colony",
			entryField(entry.ClusterName, "clusterName"), desired.GetName())}
	}
	digest, err := hashObject(desired)
	if err != nil {
		return fmt.Errorf("hashing ClusterDeployment %s: %w", desired.GetName(), err)
	}
	if live != nil && r.applied.has(desired.GetNamespace(), desired.GetName(), live.ResourceVersion, digest) {
		return nil
	}
	err = r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		if msg, ok := schemaRejection(entry.ClusterName, desired.GetName(), err); ok {
			return &entryError{msg: msg}
		}
		if isRefusal(err) {
			return &entryError{msg: rejectionMessage(entry.ClusterName, desired.GetName(), err), refused: true}
		}
		return fmt.Errorf("applying ClusterDeployment %s: %w", desired.GetName(), err)
	}
	r.applied.add(desired.GetNamespace(), desired.GetName(), desired.GetResourceVersion(), digest)
	return nil
}

// isRefusal reports whether the API server, or an admission webhook or policy behind it, refused the
// ClusterDeployment, as opposed to failing for a while. KCM's webhook answers 403 Forbidden when it
// refuses a ClusterDeployment (a template that is not allowed or not valid, a Credential that is not
// ready, an immutable field changed); a schema answers 422 or 400; an admission policy may pick any
// 4xx, a webhook any code. Every 4xx is a refusal but 408 (timeout), 409 (conflict) and 429 (too many
// requests), which pass by themselves; a 5xx is a refusal only when a webhook denied the request (a
// webhook that cannot be called also answers 500, and that passes).
func isRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	switch {
	case code == 408 || code == 409 || code == 429:
		return false
	case code >= 400 && code < 500:
		return true
	default:
		return strings.Contains(status.Status().Message, "denied the request")
	}
}

// rejectionMessage turns the API server's refusal of a ClusterDeployment into a message naming the
// entry's fields as the user wrote them in the Colony.
func rejectionMessage(clusterName, cdName string, err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return fmt.Sprintf("%s: ClusterDeployment %s rejected%s: %s", entryField(clusterName), cdName, statusCodeOf(err), err.Error())
	}
	parts := make([]string, 0, len(status.Status().Details.Causes))
	for _, c := range status.Status().Details.Causes {
		parts = append(parts, fmt.Sprintf("%s: %s", colonyFieldFor(clusterName, c.Field), c.Message))
	}
	sort.Strings(parts)
	return fmt.Sprintf("ClusterDeployment %s rejected%s: %s", cdName, statusCodeOf(err), strings.Join(parts, "; "))
}

// statusCodeOf renders the HTTP status of an API error for a message, " (403 Forbidden)", or "".
func statusCodeOf(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code == 0 {
		return ""
	}
	s := status.Status()
	if s.Reason != "" {
		return fmt.Sprintf(" (%d %s)", s.Code, s.Reason)
	}
	return fmt.Sprintf(" (%d)", s.Code)
}

// typedPatchError matches one field error of a server-side apply the API server cannot fit to the
// ClusterDeployment schema, such as ".spec.futureField: field not declared in schema".
var typedPatchError = regexp.MustCompile(`(?m)^\s*\.([A-Za-z0-9_.\[\]="-]+): (.+)$|\): \.([A-Za-z0-9_.\[\]="-]+): (.+)$`)

// schemaRejection recognises an apply the API server refuses because the object does not fit the
// installed ClusterDeployment schema, typically a key the installed KCM version does not know. Such
// keys are never dropped silently: the entry is reported with the field.
func schemaRejection(clusterName, cdName string, err error) (string, bool) {
	text := err.Error()
	if !strings.Contains(text, "failed to create typed patch object") {
		return "", false
	}
	var parts []string
	for _, m := range typedPatchError.FindAllStringSubmatch(text, -1) {
		path, why := m[1], m[2]
		if path == "" {
			path, why = m[3], m[4]
		}
		if why == "field not declared in schema" {
			why = "not known to the installed ClusterDeployment CRD (unknown keys are passed on as written, never dropped)"
		}
		parts = append(parts, fmt.Sprintf("%s: %s", colonyFieldFor(clusterName, path), why))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s: ClusterDeployment %s rejected: %s", entryField(clusterName), cdName, text), true
	}
	sort.Strings(parts)
	return fmt.Sprintf("ClusterDeployment %s rejected: %s", cdName, strings.Join(parts, "; ")), true
}

// colonyFieldFor maps a field path of the ClusterDeployment to the Colony field it came from.
func colonyFieldFor(clusterName, field string) string {
	switch {
	case field == "spec":
		return entryField(clusterName, "clusterDeploymentSpec")
	case strings.HasPrefix(field, "spec."):
		return entryField(clusterName, "clusterDeploymentSpec", strings.TrimPrefix(field, "spec."))
	case strings.HasPrefix(field, "metadata.labels"):
		return entryField(clusterName, "clusterLabels") + strings.TrimPrefix(field, "metadata.labels")
	case strings.HasPrefix(field, "metadata.annotations"):
		return entryField(clusterName, "clusterAnnotations") + strings.TrimPrefix(field, "metadata.annotations")
	case field == "":
		return entryField(clusterName)
	default:
		return fmt.Sprintf("%s (ClusterDeployment %s)", entryField(clusterName), field)
	}
}

// listClusterDeployments lists, from the cache, every ClusterDeployment in the Colony's namespace by
// name. Callers tell the Colony's own apart by owner reference (isControlledBy), not by label: a
// label someone removed must not hide a ClusterDeployment from its Colony.
func (r *Reconciler) listClusterDeployments(ctx context.Context, colony *infrav1.Colony) (map[string]*k0rdentv1beta1.ClusterDeployment, error) {
	list := &k0rdentv1beta1.ClusterDeploymentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(colony.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ClusterDeployments: %w", err)
	}
	out := make(map[string]*k0rdentv1beta1.ClusterDeployment, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// deleteRemovedClusterDeployments deletes the ClusterDeployments the Colony controls that no entry
// asks for any more. It returns the names still present (being deleted).
func (r *Reconciler) deleteRemovedClusterDeployments(ctx context.Context, colony *infrav1.Colony,
	all map[string]*k0rdentv1beta1.ClusterDeployment, wanted map[string]bool) ([]string, error) {
	var gone []string
	var errs []error
	for name, cd := range all {
		if wanted[name] || !isControlledBy(cd, colony) {
			continue
		}
		gone = append(gone, name)
		if err := r.deleteClusterDeployment(ctx, cd); err != nil {
			errs = append(errs, err)
		}
	}
	sort.Strings(gone)
	return gone, errors.Join(errs...)
}

// deleteClusterDeployment deletes a ClusterDeployment unless its deletion has started already. The
// precondition on its UID makes sure a new object of the same name is never deleted by mistake.
func (r *Reconciler) deleteClusterDeployment(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment) error {
	if cd.DeletionTimestamp != nil {
		return r.deleteEtcdPVC(ctx, cd.Namespace, cd.Name, cd.Spec.Credential) // etcdpvc.go; again on each pass while it goes
	}
	uid := cd.UID
	err := r.Client.Delete(ctx, cd, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting ClusterDeployment %s: %w", cd.Name, err)
	}
	if err == nil {
		r.applied.forget(cd.Namespace, cd.Name)
	}
	return r.deleteEtcdPVC(ctx, cd.Namespace, cd.Name, cd.Spec.Credential)
}
