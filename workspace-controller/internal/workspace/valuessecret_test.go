package workspace

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// secretClassSpec is a class with a required secret password and a defaulted UI setting.
func secretClassSpec(tmpl string) workspacesv1.WorkspaceClassSpec {
	spec := classSpec(tmpl)
	spec.UserFacingConfig = []workspacesv1.UserFacingConfig{
		{HelmValuePath: "notebook.password", DisplayName: "Password", Type: workspacesv1.UserFacingConfigSecret, Required: true},
		{HelmValuePath: "notebook.ui", DisplayName: "UI", Type: workspacesv1.UserFacingConfigString, Default: rawJSON(`"lab"`)},
	}
	return spec
}

func valuesSecret(t *testing.T, ss *k0rdentv1beta1.ServiceSet) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name + "-values"}, sec))
	return sec
}

// TestSecretValuesNeverInline: a password set in spec.values and one read from a valuesFrom Secret
// reach the ServiceSet only through the workspace's values Secret, which the ServiceSet owns and
// names in valuesFrom; a rotation of the source changes the ServiceSet's values hash; defaults fill
// unset values.
func TestSecretValuesNeverInline(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, secretClassSpec(name("secret")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("db")},
		StringData: map[string]string{"values.yaml": "db:\n  password: db-pw-7731\n"}}
	must(t, k8s.Create(ctxT(t), src))

	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Values = jsonRaw(t, map[string]any{"notebook": map[string]any{"password": "inline-pw-4242"}, "greeting": "{{ hi }}"})
		ws.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceSecret, Name: src.Name}}
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	svc := ss.Spec.Services[0]
	for _, secret := range []string{"inline-pw-4242", "db-pw-7731"} {
		if strings.Contains(svc.Values, secret) {
			t.Errorf("ServiceSet values hold %q:\n%s", secret, svc.Values)
		}
	}
	if err := contains(svc.Values, `greeting: '{{"{{"}} hi }}'`); err != nil {
		t.Errorf("template delimiters not escaped: %v", err)
	}
	values := serviceSetValues(t, ss)
	if values["notebook"].(map[string]any)["ui"] != "lab" {
		t.Errorf("the userFacingConfig default was not applied: %v", values["notebook"])
	}
	if len(svc.ValuesFrom) != 1 || svc.ValuesFrom[0].Kind != k0rdentv1beta1.ValuesFromSecret || svc.ValuesFrom[0].Name != owned.ValuesSecretName(ws) {
		t.Fatalf("valuesFrom %+v, want the values Secret %s", svc.ValuesFrom, owned.ValuesSecretName(ws))
	}
	var sec *corev1.Secret
	eventually(t, "values Secret owned by the ServiceSet", func() error {
		sec = valuesSecret(t, ss)
		if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != ss.UID {
			return fmt.Errorf("owners %+v", sec.OwnerReferences)
		}
		return nil
	})
	got := map[string]any{}
	must(t, yaml.Unmarshal(sec.Data[owned.ValuesSecretKey], &got))
	if got["notebook"].(map[string]any)["password"] != "inline-pw-4242" || got["db"].(map[string]any)["password"] != "db-pw-7731" {
		t.Errorf("values Secret content %v", got)
	}
	hash := ss.Annotations[owned.AnnotationValuesHash]
	if hash == "" {
		t.Error("no values hash on the ServiceSet")
	}

	// A rotation of the source rolls out: the Secret follows, the ServiceSet's hash changes.
	src.Data = map[string][]byte{"values.yaml": []byte("db:\n  password: rotated-9\n")}
	must(t, k8s.Update(ctxT(t), src))
	eventually(t, "rotation reaches the values Secret and the ServiceSet", func() error {
		if !strings.Contains(string(valuesSecret(t, ss).Data[owned.ValuesSecretKey]), "rotated-9") {
			return fmt.Errorf("values Secret not updated")
		}
		cur := &k0rdentv1beta1.ServiceSet{}
		must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(ss), cur))
		if cur.Annotations[owned.AnnotationValuesHash] == hash {
			return fmt.Errorf("values hash unchanged")
		}
		return nil
	})

	// Drift of the values Secret is corrected.
	sec = valuesSecret(t, ss)
	sec.Data[owned.ValuesSecretKey] = []byte("tampered: true\n")
	must(t, k8s.Update(ctxT(t), sec))
	eventually(t, "values Secret drift corrected", func() error {
		if strings.Contains(string(valuesSecret(t, ss).Data[owned.ValuesSecretKey]), "tampered") {
			return fmt.Errorf("still tampered")
		}
		return nil
	})

}

// TestValuesSecretRemovedWhenUnneeded: a class without secret entries and a workspace without
// valuesFrom need no values Secret; one left from before is removed and valuesFrom dropped.
func TestValuesSecretRemovedWhenUnneeded(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("plain")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("src")},
		StringData: map[string]string{"v.yaml": "token: t-1\n"}}
	must(t, k8s.Create(ctxT(t), src))
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceSecret, Name: src.Name}}
	})
	ss := waitServiceSet(t, waitPhase(t, key, workspacesv1.PhaseDeploying, ""))
	eventually(t, "values Secret made", func() error {
		return k8s.Get(ctxT(t), types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name + "-values"}, &corev1.Secret{})
	})
	// The controller writes the workspace meanwhile: retry the edit on a conflict.
	eventually(t, "valuesFrom removed from the workspace", func() error {
		ws := getWS(t, key)
		ws.Spec.ValuesFrom = nil
		return k8s.Update(ctxT(t), ws)
	})
	eventually(t, "values Secret removed and valuesFrom dropped", func() error {
		err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name + "-values"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("values Secret still there (%v)", err)
		}
		cur := &k0rdentv1beta1.ServiceSet{}
		must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(ss), cur))
		if len(cur.Spec.Services[0].ValuesFrom) != 0 || cur.Annotations[owned.AnnotationValuesHash] != "" {
			return fmt.Errorf("valuesFrom %+v hash %q", cur.Spec.Services[0].ValuesFrom, cur.Annotations[owned.AnnotationValuesHash])
		}
		return nil
	})
}

// TestRequiredValueAndMissingSource: a workspace without a required value fails naming the path;
// one whose valuesFrom Secret is missing waits for it and goes on once it exists.
func TestRequiredValueAndMissingSource(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, secretClassSpec(name("required")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)

	missing := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, missing, workspacesv1.PhaseFailed, workspacesv1.ReasonMissingRequiredValue)
	if err := contains(condition(ws, workspacesv1.ResourcesInjectedCondition).Message, "notebook.password"); err != nil {
		t.Error(err)
	}

	srcName := name("later")
	later := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceSecret, Name: srcName}}
	})
	ws = waitPhase(t, later, workspacesv1.PhasePending, workspacesv1.ReasonValuesFromNotFound)
	if err := contains(ws.Status.Message, "Secret "+srcName); err != nil {
		t.Error(err)
	}
	must(t, k8s.Create(ctxT(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: srcName},
		StringData: map[string]string{"a.yaml": "notebook:\n  password: late-pw\n"}}))
	ws = waitPhase(t, later, workspacesv1.PhaseDeploying, "")
	if ss := waitServiceSet(t, ws); strings.Contains(ss.Spec.Services[0].Values, "late-pw") {
		t.Error("the password is inline")
	}
	// A Secret that does not hold values fails the workspace without echoing its content.
	bad := &corev1.Secret{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: srcName}, bad))
	bad.Data = map[string][]byte{"a.yaml": []byte("- secret-list-item-55")}
	must(t, k8s.Update(ctxT(t), bad))
	ws = waitPhase(t, later, workspacesv1.PhaseFailed, workspacesv1.ReasonInvalidValues)
	if strings.Contains(ws.Status.Message, "secret-list-item-55") || !strings.Contains(ws.Status.Message, srcName) {
		t.Errorf("message %q: must name the Secret and not echo it", ws.Status.Message)
	}
	// A Secret over a limit of values names the limit (which quotes nothing), not only "not values".
	deep := "leaf: deep-secret-66\n"
	for range valuepath.MaxValuesDepth + 1 {
		deep = "a:\n" + indent(deep)
	}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: srcName}, bad))
	bad.Data = map[string][]byte{"a.yaml": []byte(deep)}
	must(t, k8s.Update(ctxT(t), bad))
	eventually(t, "the failure names the depth limit", func() error {
		ws = getWS(t, later)
		if !strings.Contains(ws.Status.Message, "depth limit") {
			return fmt.Errorf("message %q", ws.Status.Message)
		}
		return nil
	})
	if strings.Contains(ws.Status.Message, "deep-secret-66") {
		t.Errorf("message %q echoes the Secret", ws.Status.Message)
	}
	if err := k8s.Delete(ctxT(t), bad); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// indent indents every line of a YAML document by two spaces.
func indent(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestSecretValuesRedactedFromFailures: k0rdent's failure message quotes a secret value (as a Helm
// template error can). The workspace's status (message, conditions, failure context with the
// ServiceSet's status) and its Events say [redacted] instead.
func TestSecretValuesRedactedFromFailures(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, secretClassSpec(name("redact")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	const secret = "leaky-pw-90210"
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Values = jsonRaw(t, map[string]any{"notebook": map[string]any{"password": secret}})
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateFailed,
		`template: notebook/templates/secret.yaml:3: executing "x": error calling b64dec: illegal base64 data in "`+secret+`"`)
	ws = waitPhase(t, key, workspacesv1.PhaseFailed, "")
	eventually(t, "failure context with the ServiceSet status", func() error {
		ws = getWS(t, key)
		if ws.Status.FailureContext == nil || ws.Status.FailureContext.ServiceSetStatus == nil {
			return fmt.Errorf("no failure context yet")
		}
		return nil
	})
	raw, err := yaml.Marshal(ws.Status)
	must(t, err)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the status quotes the secret value:\n%s", raw)
	}
	if !strings.Contains(string(raw), "[redacted]") {
		t.Fatalf("the failure message is not in the status at all:\n%s", raw)
	}
	var events eventsv1.EventList
	must(t, k8s.List(ctxT(t), &events, client.InNamespace(ns)))
	for _, e := range events.Items {
		if strings.Contains(e.Note, secret) {
			t.Errorf("Event %s quotes the secret value: %s", e.Reason, e.Note)
		}
	}
}

// refuseServiceSetCreates makes the API server refuse every ServiceSet create in namespace ns, as an
// admission webhook or policy of the platform may, until the test ends.
func refuseServiceSetCreates(t *testing.T, ns string) {
	t.Helper()
	fail, reason := admissionregistrationv1.Fail, metav1.StatusReasonForbidden
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-servicesets-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{k0rdentv1beta1.GroupVersion.Group},
						APIVersions: []string{k0rdentv1beta1.GroupVersion.Version}, Resources: []string{"servicesets"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "ServiceSets are refused here", Reason: &reason}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		must(t, k8s.Create(ctxT(t), o))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	eventually(t, "the admission policy refuses ServiceSets in "+ns, func() error {
		probe := &k0rdentv1beta1.ServiceSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: "probe",
				Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider}},
		}
		err := k8s.Create(ctxT(t), probe, client.DryRunAll)
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("not refused yet: %v", err)
	})
}

// workspaceValuesSecrets lists the values Secrets labelled with the workspace key, in every namespace.
func workspaceValuesSecrets(t *testing.T, key types.NamespacedName) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	must(t, k8s.List(ctxT(t), &list, client.MatchingLabels(owned.ValuesSecretLabels(key))))
	return list.Items
}

// TestValuesSecretGoesWithWorkspaceWhoseServiceSetWasRefused: the values Secret is made, labelled
// with its workspace, before the ServiceSet; when the API server refuses the ServiceSet, no
// ServiceSet ever owns the Secret, and deleting the workspace still deletes it and releases the
// finalizer.
func TestValuesSecretGoesWithWorkspaceWhoseServiceSetWasRefused(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, secretClassSpec(name("secret")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	refuseServiceSetCreates(t, ns)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Values = jsonRaw(t, map[string]any{"notebook": map[string]any{"password": "refused-pw-5150"}})
	})
	eventually(t, "the values Secret, labelled with the workspace, without a ServiceSet", func() error {
		if n := len(workspaceValuesSecrets(t, key)); n != 1 {
			return fmt.Errorf("%d values Secrets", n)
		}
		return nil
	})
	ws := getWS(t, key)
	if sets := workspaceServiceSets(t, ws); len(sets) != 0 {
		t.Fatalf("%d ServiceSets made although the API server refuses them", len(sets))
	}
	if sec := workspaceValuesSecrets(t, key)[0]; sec.Name != owned.ValuesSecretName(ws) || len(sec.OwnerReferences) != 0 {
		t.Fatalf("values Secret %s with owners %+v, want %s without owner", sec.Name, sec.OwnerReferences, owned.ValuesSecretName(ws))
	}

	must(t, k8s.Delete(ctxT(t), ws))
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
	if left := workspaceValuesSecrets(t, key); len(left) != 0 {
		t.Errorf("the values Secret %s/%s outlived its workspace", left[0].Namespace, left[0].Name)
	}
}
