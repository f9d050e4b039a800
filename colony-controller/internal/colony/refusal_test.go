package colony

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func TestIsRefusal(t *testing.T) {
	gr := schema.GroupResource{Group: "k0rdent.mirantis.com", Resource: "clusterdeployments"}
	cases := []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(gr, "a", errors.New("the ClusterTemplate is not valid")), true},
		{apierrors.NewBadRequest("bad"), true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ClusterDeployment"}, "a", nil), true},
		{apierrors.NewRequestEntityTooLargeError("big"), true},
		{apierrors.NewConflict(gr, "a", errors.New("changed")), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewTimeoutError("slow", 1), false},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "x": connection refused`)), false},
		{apierrors.NewGenericServerResponse(http.StatusInternalServerError, "create", gr, "a",
			`admission webhook "vclusterdeployment.kb.io" denied the request: nope`, 0, true), true},
		{apierrors.NewServiceUnavailable("later"), false},
		{errors.New("connection reset"), false},
	}
	for _, c := range cases {
		if got := isRefusal(c.err); got != c.want {
			t.Errorf("isRefusal(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// refusePolicy installs an admission policy that refuses, with 403 Forbidden as KCM's webhook does,
// ClusterDeployments of namespace ns whose spec.<field> names an object of kind (ClusterTemplate or
// Credential) in ns that lacks the label "allowed".
func refusePolicy(t *testing.T, ns, name, kind, field string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: kind},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{k0rdentv1beta1.GroupVersion.Group},
						APIVersions: []string{k0rdentv1beta1.GroupVersion.Version}, Resources: []string{"clusterdeployments"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec." + field + ") || params.metadata.name != object.spec." + field +
					" || (has(params.metadata.labels) && 'allowed' in params.metadata.labels)",
				Message: kind + " is not allowed",
				Reason:  ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			ParamRef: &admissionregistrationv1.ParamRef{Namespace: ns, Selector: &metav1.LabelSelector{},
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := mgmt.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
		t.Cleanup(func() { _ = mgmt.Client.Delete(context.Background(), o) })
	}
}

// waitRefusing waits until the policies are in force: a dry-run create naming the disallowed object
// is refused.
func waitRefusing(t *testing.T, ns string, spec k0rdentv1beta1.ClusterDeploymentSpec) {
	t.Helper()
	eventually(t, "the admission policy refuses", func() error {
		cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: spec}
		err := mgmt.Client.Create(context.Background(), cd, client.DryRunAll)
		if apierrors.IsForbidden(err) {
			return nil
		}
		return errors.New("not refused yet")
	})
}

// TestRefusedClusterDeployments: a ClusterDeployment the API server refuses with 403 (as KCM's webhook
// refuses a template or credential that is not allowed) makes the Colony Degraded naming the entry and
// the reason, for a new entry and for a template upgrade of a ready cluster alike; the old
// ClusterDeployment is never reported ready at the new generation. Once the ClusterTemplate or
// Credential is fixed, the entry is applied again at once: the slow safety requeue is disabled here,
// so only the watches can pick the fix up.
func TestRefusedClusterDeployments(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	refusePolicy(t, ns, ns+"-templates", "ClusterTemplate", "template")
	refusePolicy(t, ns, ns+"-credentials", "Credential", "credential")
	for _, o := range []client.Object{
		&k0rdentv1beta1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t2"},
			Spec: k0rdentv1beta1.ClusterTemplateSpec{Helm: k0rdentv1beta1.HelmSpec{ChartRef: &k0rdentv1beta1.CrossNamespaceSourceReference{Kind: "HelmChart", Name: "t2"}}}},
		&k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c2"},
			Spec: k0rdentv1beta1.CredentialSpec{IdentityRef: &corev1.ObjectReference{Kind: "Secret", Name: "id", Namespace: ns}}},
	} {
		if err := mgmt.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitRefusing(t, ns, k0rdentv1beta1.ClusterDeploymentSpec{Template: "t2"})
	waitRefusing(t, ns, k0rdentv1beta1.ClusterDeploymentSpec{Template: "t1", Credential: "c2"})

	startManagerWith(t, ns, func(o *Options) { o.RetryRefused = time.Hour })
	createColony(t, ns, "col", entry(t, "a", map[string]any{"template": "t1", "credential": "c1"}))
	waitCD(t, ns, "col-a", "col-a created", nil)
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, "Succeeded"))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "col-a", fakeKubeconfig(t, "https://a.example:6443", "ta")); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "Ready", phaseIs(infrav1.ColonyPhaseReady))

	// Upgrade a to the refused template, add b with the refused credential.
	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters[0].ClusterDeploymentSpec = rawJSON(t, map[string]any{"template": "t2", "credential": "c1"})
		c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, entry(t, "b", map[string]any{"template": "t1", "credential": "c2"}))
	})
	waitColony(t, ns, "col", "Degraded naming both refusals", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry,
			"ClusterDeployment col-a rejected (403 Forbidden): spec.colonyClusters[clusterName=a]", "ClusterTemplate is not allowed",
			"ClusterDeployment col-b rejected (403 Forbidden): spec.colonyClusters[clusterName=b]", "Credential is not allowed"),
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry)))
	if got := getCD(t, ns, "col-a").Spec.Template; got != "t1" {
		t.Fatalf("col-a template %q, want t1 (refused upgrade)", got)
	}

	// Fix the template: the upgrade goes through without a Colony edit.
	allow := func(o client.Object) {
		t.Helper()
		patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
		o.SetLabels(map[string]string{"allowed": "yes"})
		if err := mgmt.Client.Patch(ctx, o, patch); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := &k0rdentv1beta1.ClusterTemplate{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "t2"}, tmpl); err != nil {
		t.Fatal(err)
	}
	allow(tmpl)
	waitCD(t, ns, "col-a", "the upgrade is applied once the template is fixed", func(cd *k0rdentv1beta1.ClusterDeployment) error {
		if cd.Spec.Template != "t2" {
			return errors.New("template " + cd.Spec.Template)
		}
		return nil
	})
	cred := &k0rdentv1beta1.Credential{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c2"}, cred); err != nil {
		t.Fatal(err)
	}
	allow(cred)
	waitCD(t, ns, "col-b", "the new entry is created once the credential is fixed", nil)
	waitColony(t, ns, "col", "no longer Degraded", func(c *infrav1.Colony) error {
		if err := phaseIs(infrav1.ColonyPhaseProvisioning)(c); err != nil {
			return err
		}
		for _, cnd := range c.Status.Conditions {
			if strings.Contains(cnd.Message, "rejected") {
				return errors.New("still names a refusal: " + cnd.Message)
			}
		}
		return nil
	})
}

// TestNameCollisionReported: Colony `a-b` and Colony `a`'s cluster `b` both want the Secret
// `a-b-kubeconfig`. Without the webhook both can exist; the controller never takes the other's
// Secret for its own and names the clash on both Colonies.
func TestNameCollisionReported(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	startManager(t, ns)
	createColony(t, ns, "a-b", entry(t, "x", nil))
	waitCD(t, ns, "a-b-x", "a-b-x", nil)
	setCDConditions(t, ns, "a-b-x", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, "Succeeded"))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "a-b-x", fakeKubeconfig(t, "https://x.example:6443", "tx")); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "a-b", "a-b Ready with its Secret", phaseIs(infrav1.ColonyPhaseReady))

	createColony(t, ns, "a", entry(t, "b", nil))
	waitCD(t, ns, "a-b", "a-b", nil)
	setCDConditions(t, ns, "a-b", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, "Succeeded"))
	waitColony(t, ns, "a", "the clash is named on Colony a", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry,
			"spec.colonyClusters[clusterName=b].clusterName: the kubeconfig Secret a-b-kubeconfig of ClusterDeployment a-b is Colony a-b's own kubeconfig Secret"),
		func(c *infrav1.Colony) error {
			if c.Status.ReadyClusters != 0 {
				return errors.New("the other Colony's Secret counted as b's kubeconfig")
			}
			return nil
		}))

	// The other order: Colony p's cluster q has its kubeconfig Secret p-q-kubeconfig; Colony p-q
	// finds its own Secret name taken.
	createColony(t, ns, "p", entry(t, "q", nil))
	waitCD(t, ns, "p-q", "p-q", nil)
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "p-q", fakeKubeconfig(t, "https://q.example:6443", "tq")); err != nil {
		t.Fatal(err)
	}
	createColony(t, ns, "p-q", entry(t, "y", nil))
	waitCD(t, ns, "p-q-y", "p-q-y", nil)
	setCDConditions(t, ns, "p-q-y", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, "Succeeded"))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "p-q-y", fakeKubeconfig(t, "https://y.example:6443", "ty")); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "p-q", "the clash is named on Colony p-q", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonKubeconfigSecretFailed,
			"Secret p-q-kubeconfig is the kubeconfig Secret of ClusterDeployment p-q (cluster q of Colony p): the names clash")))
}
