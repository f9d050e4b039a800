package release

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func TestValuesHash(t *testing.T) {
	if ValuesHash("") != "" {
		t.Error("no secret values have a hash")
	}
	a, b := ValuesHash("password: a\n"), ValuesHash("password: b\n")
	if len(a) != 16 || a == b || a != ValuesHash("password: a\n") {
		t.Errorf("hashes %q %q", a, b)
	}
}

func TestDesiredValuesSecret(t *testing.T) {
	in := testInput()
	in.SecretValues = "password: x\n"
	sec := DesiredValuesSecret(in, nil)
	if sec.Name != owned.ValuesSecretName(in.Workspace) || sec.Namespace != "kcm-system" || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s/%s of type %s", sec.Namespace, sec.Name, sec.Type)
	}
	if sec.Labels[owned.LabelValuesSecret] != "true" || sec.Labels[workspacesv1.WorkspaceLabel] != "nb" ||
		sec.Labels[workspacesv1.WorkspaceNamespaceLabel] != "team-a" || sec.Annotations[sveltosTemplateAnnotation] != "ok" {
		t.Errorf("labels %v annotations %v", sec.Labels, sec.Annotations)
	}
	if len(sec.Data) != 1 || string(sec.Data[owned.ValuesSecretKey]) != in.SecretValues {
		t.Errorf("data %v", sec.Data)
	}
	if len(sec.OwnerReferences) != 0 || len(DesiredValuesSecret(in, &k0rdentv1beta1.ServiceSet{}).OwnerReferences) != 0 {
		t.Error("an owner before the ServiceSet exists")
	}
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Name: "ss", UID: "ss-uid"}}
	refs := DesiredValuesSecret(in, ss).OwnerReferences
	if len(refs) != 1 || refs[0].UID != "ss-uid" || refs[0].Kind != "ServiceSet" || !*refs[0].Controller || !*refs[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want the ServiceSet as controller", refs)
	}
}

func TestCorrectValuesSecret(t *testing.T) {
	in := testInput()
	in.SecretValues = "password: x\n"
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Name: "ss", UID: "ss-uid"}}
	want := DesiredValuesSecret(in, ss)

	same := want.DeepCopy()
	same.Labels["user"] = "keep"
	if CorrectValuesSecret(same, want) {
		t.Error("an up-to-date Secret is written")
	}
	noOwner := DesiredValuesSecret(in, nil)
	if CorrectValuesSecret(want.DeepCopy(), noOwner) {
		t.Error("a Secret is written for want without an owner")
	}
	for name, edit := range map[string]func(*corev1.Secret){
		"values":     func(s *corev1.Secret) { s.Data[owned.ValuesSecretKey] = []byte("password: old\n") },
		"extra key":  func(s *corev1.Secret) { s.Data["other"] = []byte("x") },
		"annotation": func(s *corev1.Secret) { s.Annotations = nil },
		"owner":      func(s *corev1.Secret) { s.OwnerReferences = nil },
	} {
		got := want.DeepCopy()
		edit(got)
		if !CorrectValuesSecret(got, want) {
			t.Errorf("%s: not written", name)
		}
		if CorrectValuesSecret(got, want) {
			t.Errorf("%s: still differs after the correction", name)
		}
	}
}
