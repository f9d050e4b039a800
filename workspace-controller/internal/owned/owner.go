package owned

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// LabelledServiceSet reports whether a ServiceSet's labels name the workspace. Only the controller
// (and the platform) may write ServiceSets, so the labels say whose it is; the deletion deletes only
// such ServiceSets.
func LabelledServiceSet(ss *k0rdentv1beta1.ServiceSet, ws *workspacesv1.WorkspaceDeployment) bool {
	return ss.Labels[workspacesv1.WorkspaceLabel] == ws.Name && ss.Labels[workspacesv1.WorkspaceNamespaceLabel] == ws.Namespace
}

// OwnedServiceSet reports whether a ServiceSet is the workspace's: its labels name the workspace, or
// it is the upstream operator's ServiceSet this workspace adopted, which carries none of our labels
// until the adoption labels it; that one must have the upstream shape.
func OwnedServiceSet(ss *k0rdentv1beta1.ServiceSet, ws *workspacesv1.WorkspaceDeployment) bool {
	if LabelledServiceSet(ss, ws) {
		return true
	}
	return AdoptedServiceSetName(ws) == ss.Name && UpstreamShape(ss, ws) &&
		ss.Labels[workspacesv1.WorkspaceLabel] == "" && ss.Labels[workspacesv1.WorkspaceNamespaceLabel] == ""
}

// UpstreamShape reports whether ss looks like the ServiceSet the upstream operator made for ws: its
// legacy name, on the workspace's cluster, one service in ws-<name>.
func UpstreamShape(ss *k0rdentv1beta1.ServiceSet, ws *workspacesv1.WorkspaceDeployment) bool {
	return ss.Name == LegacyName(ws) && ss.Spec.Cluster == ws.Spec.ClusterDeploymentRef.Name &&
		len(ss.Spec.Services) == 1 && ss.Spec.Services[0].Namespace == LocalReleaseNamespace(ws.Name)
}

// OwnValuesSecret reports whether a Secret is the workspace's values Secret: its labels name the
// workspace by name and namespace.
func OwnValuesSecret(sec *corev1.Secret, ws *workspacesv1.WorkspaceDeployment) bool {
	return sec.Labels[LabelValuesSecret] == "true" && sec.Labels[workspacesv1.WorkspaceLabel] == ws.Name &&
		sec.Labels[workspacesv1.WorkspaceNamespaceLabel] == ws.Namespace
}

// ValuesSecretLabels are the labels of the values Secret of the workspace namespace/name, from its
// creation on: they say whose it is before the ServiceSet that owns it exists (or when it never came
// to exist), and the deletion and the orphan collector find the workspace's values Secrets by them.
func ValuesSecretLabels(ws types.NamespacedName) map[string]string {
	return map[string]string{
		LabelValuesSecret:                    "true",
		workspacesv1.WorkspaceLabel:          ws.Name,
		workspacesv1.WorkspaceNamespaceLabel: ws.Namespace,
	}
}

// SetAdmissionAnnotation records the workspace's GPU admission on its ServiceSet, or removes a
// recorded one when the workspace holds no GPUs or the ServiceSet is scaled to zero (a stopped
// workspace's ServiceSet holds nothing; starting it again gates it anew).
func SetAdmissionAnnotation(ss *k0rdentv1beta1.ServiceSet, ad *workspacesv1.Admission) {
	if ad == nil || ad.GPUs == 0 || ss.Labels[LabelStopped] == "true" {
		delete(ss.Annotations, AnnotationAdmission)
		return
	}
	raw, err := json.Marshal(ad)
	if err != nil {
		return // a struct of strings and numbers always marshals
	}
	if ss.Annotations == nil {
		ss.Annotations = map[string]string{}
	}
	ss.Annotations[AnnotationAdmission] = string(raw)
}

// AdmissionOf is a workspace's admission: current (its status, or what this process wrote), or, when
// there is none, the admission its ServiceSet carries, made by a pass that ended before it wrote the
// status. ss may be nil. The annotation is only parsed when the status has none.
func AdmissionOf(current *workspacesv1.Admission, ss *k0rdentv1beta1.ServiceSet) *workspacesv1.Admission {
	if current != nil {
		return current
	}
	return AnnotatedAdmission(ss)
}

// AnnotatedAdmission is the admission a ServiceSet carries (AnnotationAdmission), or nil when it
// carries none, is scaled to zero, or carries one that does not parse (then the workspace's status is
// what counts).
func AnnotatedAdmission(ss *k0rdentv1beta1.ServiceSet) *workspacesv1.Admission {
	if ss == nil || ss.Annotations[AnnotationAdmission] == "" || ss.Labels[LabelStopped] == "true" {
		return nil
	}
	ad := &workspacesv1.Admission{}
	if err := json.Unmarshal([]byte(ss.Annotations[AnnotationAdmission]), ad); err != nil || ad.GPUs <= 0 {
		return nil
	}
	return ad
}
