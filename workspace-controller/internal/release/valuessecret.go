package release

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

const (
	// sveltosTemplateAnnotation asks Sveltos to render a valuesFrom source as a template, as it always
	// renders inline values; the values are escaped for that, so every Sveltos version reads them back
	// verbatim.
	sveltosTemplateAnnotation = "projectsveltos.io/template"
)

// ValuesHash is a short content hash of the secret values, empty when there are none.
func ValuesHash(secretValues string) string {
	if secretValues == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secretValues))
	return hex.EncodeToString(sum[:8])
}

// ValuesFrom is the ServiceSet service's valuesFrom: the values Secret when there are secret values.
func ValuesFrom(in Input) []k0rdentv1beta1.ValuesFrom {
	if in.SecretValues == "" {
		return nil
	}
	return []k0rdentv1beta1.ValuesFrom{{Kind: k0rdentv1beta1.ValuesFromSecret, Name: owned.ValuesSecretName(in.Workspace)}}
}

// DesiredValuesSecret is the workspace's values Secret. Its owner is the workspace's ServiceSet (the
// workspace itself may live in another namespace), so it goes when the ServiceSet goes; owner is nil,
// or has no UID, before the ServiceSet exists. Its labels (owned.ValuesSecretLabels) name the
// workspace from the start, so that the workspace's deletion finds it also when no ServiceSet ever
// owned it (a ServiceSet create that failed).
func DesiredValuesSecret(in Input, owner *k0rdentv1beta1.ServiceSet) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        owned.ValuesSecretName(in.Workspace),
			Namespace:   in.ClusterKey.Namespace,
			Labels:      owned.ValuesSecretLabels(types.NamespacedName{Namespace: in.Workspace.Namespace, Name: in.Workspace.Name}),
			Annotations: map[string]string{sveltosTemplateAnnotation: "ok"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{owned.ValuesSecretKey: []byte(in.SecretValues)},
	}
	if owner != nil && owner.UID != "" {
		t := true
		sec.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ServiceSet", Name: owner.Name, UID: owner.UID,
			Controller: &t, BlockOwnerDeletion: &t,
		}}
	}
	return sec
}

// CorrectValuesSecret brings the existing values Secret got to want (DesiredValuesSecret), for a merge
// patch: its data, the Sveltos annotation, and the ServiceSet as owner once want names one. changed
// says whether got differed, that is whether it needs writing.
func CorrectValuesSecret(got, want *corev1.Secret) (changed bool) {
	changed = string(got.Data[owned.ValuesSecretKey]) != string(want.Data[owned.ValuesSecretKey]) || len(got.Data) != 1 ||
		got.Annotations[sveltosTemplateAnnotation] != "ok"
	got.Data = want.Data
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations[sveltosTemplateAnnotation] = "ok"
	if len(want.OwnerReferences) > 0 && !hasOwnerRef(got.OwnerReferences, want.OwnerReferences[0]) {
		got.OwnerReferences = want.OwnerReferences
		changed = true
	}
	return changed
}

func hasOwnerRef(refs []metav1.OwnerReference, ref metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.UID == ref.UID {
			return true
		}
	}
	return false
}
