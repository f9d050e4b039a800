package colony

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// --- pure functions ---

func TestDecodeClusterDeploymentSpec(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    map[string]any
		wantErr string
	}{
		{name: "config added when absent", raw: `{"template":"t"}`,
			want: map[string]any{"template": "t", "config": map[string]any{}}},
		{name: "config added when null", raw: `{"template":"t","config":null}`,
			want: map[string]any{"template": "t", "config": map[string]any{}}},
		{name: "config kept", raw: `{"template":"t","config":{"a":{"b":1}}}`,
			want: map[string]any{"template": "t", "config": map[string]any{"a": map[string]any{"b": int64(1)}}}},
		{name: "unknown keys kept", raw: `{"template":"t","futureField":{"x":true},"dryRun":false}`,
			want: map[string]any{"template": "t", "futureField": map[string]any{"x": true}, "dryRun": false, "config": map[string]any{}}},
		{name: "not an object", raw: `["template"]`, wantErr: "spec.colonyClusters[clusterName=a].clusterDeploymentSpec: must be a JSON object"},
		{name: "null", raw: `null`, wantErr: "clusterDeploymentSpec: must be a JSON object"},
		{name: "empty", raw: ``, wantErr: "clusterDeploymentSpec: must be a JSON object"},
		{name: "broken JSON", raw: `{"template":`, wantErr: "clusterDeploymentSpec: must be a JSON object"},
		{name: "wrong type", raw: `{"template":5}`, wantErr: "clusterDeploymentSpec.template: must be of type string, not number"},
		{name: "wrong nested type", raw: `{"template":"t","serviceSpec":{"services":[{"name":7}]}}`,
			wantErr: "clusterDeploymentSpec.serviceSpec.services.name: must be of type string"},
		{name: "config not an object", raw: `{"template":"t","config":"x: 1"}`,
			wantErr: "clusterDeploymentSpec.config: must be a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeClusterDeploymentSpec(infrav1.ColonyCluster{
				ClusterName: "a", ClusterDeploymentSpec: apiextensionsv1.JSON{Raw: []byte(tc.raw)},
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !isEntryError(err) {
					t.Fatalf("error %v, want an entry error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func FuzzDecodeClusterDeploymentSpec(f *testing.F) {
	for _, s := range []string{`{"template":"t"}`, `{"config":null}`, `[]`, `null`, `{"serviceSpec":{"services":[{}]}}`, `"x"`, `{"template":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec, err := decodeClusterDeploymentSpec(infrav1.ColonyCluster{ClusterName: "a", ClusterDeploymentSpec: apiextensionsv1.JSON{Raw: raw}})
		if err != nil {
			if !isEntryError(err) || !strings.Contains(err.Error(), "spec.colonyClusters[clusterName=a]") {
				t.Fatalf("error does not name the entry: %v", err)
			}
			return
		}
		if _, ok := spec["config"].(map[string]any); !ok {
			t.Fatalf("config is not an object: %#v", spec["config"])
		}
		// The result must be usable as unstructured content.
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		_ = u.DeepCopy()
	})
}

func TestDesiredClusterDeployment(t *testing.T) {
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1"}}
	e := infrav1.ColonyCluster{
		ClusterName:           "gpu",
		ClusterDeploymentSpec: apiextensionsv1.JSON{Raw: []byte(`{"template":"t"}`)},
		ClusterLabels:         map[string]string{"team": "a", infrav1.ColonyLabel: "spoofed"},
		ClusterAnnotations:    map[string]string{"note": "x"},
	}
	u, err := desiredClusterDeployment(colony, e)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "c-gpu" || u.GetNamespace() != "ns" || u.GroupVersionKind() != clusterDeploymentGVK {
		t.Errorf("identity: %s/%s %v", u.GetNamespace(), u.GetName(), u.GroupVersionKind())
	}
	wantLabels := map[string]string{"team": "a", infrav1.ColonyLabel: "c", infrav1.ColonyClusterLabel: "gpu"}
	if !reflect.DeepEqual(u.GetLabels(), wantLabels) {
		t.Errorf("labels %v, want %v", u.GetLabels(), wantLabels)
	}
	if !reflect.DeepEqual(u.GetAnnotations(), map[string]string{"note": "x"}) {
		t.Errorf("annotations %v", u.GetAnnotations())
	}
	refs := u.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != "uid-1" || refs[0].Kind != "Colony" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("owner references %+v", refs)
	}
	// Only the fields the Colony sets: no status, no creationTimestamp, nothing KCM owns.
	for _, k := range []string{"status"} {
		if _, ok := u.Object[k]; ok {
			t.Errorf("apply configuration carries %s", k)
		}
	}
	if _, ok := u.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
		t.Error("apply configuration carries creationTimestamp")
	}
	if !reflect.DeepEqual(u.Object["spec"], map[string]any{"template": "t", "config": map[string]any{}}) {
		t.Errorf("spec %#v", u.Object["spec"])
	}
	// No annotations: the key is absent, so a previous apply's annotations are removed.
	e.ClusterAnnotations = nil
	u, _ = desiredClusterDeployment(colony, e)
	if _, ok := u.Object["metadata"].(map[string]any)["annotations"]; ok {
		t.Error("empty annotations are sent")
	}
}

func TestRejectionMessageNamesColonyFields(t *testing.T) {
	err := apierrors.NewInvalid(schema.GroupKind{Group: "k0rdent.mirantis.com", Kind: "ClusterDeployment"}, "c-a", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template"), "", "should be at least 1 chars long"),
		field.Invalid(field.NewPath("metadata", "labels"), "bad key", "name part must consist of alphanumeric characters"),
	})
	msg := rejectionMessage("a", "c-a", err)
	for _, want := range []string{
		"ClusterDeployment c-a rejected",
		"spec.colonyClusters[clusterName=a].clusterDeploymentSpec.template: Invalid value",
		"spec.colonyClusters[clusterName=a].clusterLabels: Invalid value",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if got := rejectionMessage("a", "c-a", errors.New("boom")); !strings.Contains(got, "spec.colonyClusters[clusterName=a]") {
		t.Errorf("plain error: %q", got)
	}
}

func TestColonyFieldFor(t *testing.T) {
	cases := map[string]string{
		"spec":                          "spec.colonyClusters[clusterName=x].clusterDeploymentSpec",
		"spec.serviceSpec.services[0]":  "spec.colonyClusters[clusterName=x].clusterDeploymentSpec.serviceSpec.services[0]",
		"metadata.annotations[a]":       "spec.colonyClusters[clusterName=x].clusterAnnotations[a]",
		"":                              "spec.colonyClusters[clusterName=x]",
		"metadata.name":                 "spec.colonyClusters[clusterName=x] (ClusterDeployment metadata.name)",
		"metadata.labels[team/a]":       "spec.colonyClusters[clusterName=x].clusterLabels[team/a]",
		"spec.config":                   "spec.colonyClusters[clusterName=x].clusterDeploymentSpec.config",
		"spec.serviceSpec.priority":     "spec.colonyClusters[clusterName=x].clusterDeploymentSpec.serviceSpec.priority",
		"spec.propagateCredentials":     "spec.colonyClusters[clusterName=x].clusterDeploymentSpec.propagateCredentials",
		"metadata.ownerReferences":      "spec.colonyClusters[clusterName=x] (ClusterDeployment metadata.ownerReferences)",
		"spec.serviceSpec.services[1].": "spec.colonyClusters[clusterName=x].clusterDeploymentSpec.serviceSpec.services[1].",
	}
	for in, want := range cases {
		if got := colonyFieldFor("x", in); got != want {
			t.Errorf("colonyFieldFor(%q) = %q, want %q", in, got, want)
		}
	}
}

// --- against the API server ---

// TestCreateClusterDeployments: each entry becomes `<colony>-<clusterName>` with the full spec, the
// labels, annotations and the Colony as controller owner; config is always sent.
func TestCreateClusterDeployments(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	a := entry(t, "a", map[string]any{"template": "tmpl-a", "credential": "cred-a", "dryRun": true,
		"propagateCredentials": false, "config": map[string]any{"workers": 3, "nested": map[string]any{"k": "v"}},
		"serviceSpec": map[string]any{"services": []any{map[string]any{"name": "svc", "namespace": "apps", "template": "st-1"}}}})
	a.ClusterLabels = map[string]string{"team": "ml"}
	a.ClusterAnnotations = map[string]string{"owner": "alice"}
	b := entry(t, "b", map[string]any{"template": "tmpl-b"})
	colony := createColony(t, ns, "col", a, b)

	cdA := waitCD(t, ns, "col-a", "ClusterDeployment col-a", nil)
	if cdA.Spec.Template != "tmpl-a" || cdA.Spec.Credential != "cred-a" || !cdA.Spec.DryRun ||
		cdA.Spec.PropagateCredentials == nil || *cdA.Spec.PropagateCredentials {
		t.Errorf("spec of col-a: %+v", cdA.Spec)
	}
	if len(cdA.Spec.ServiceSpec.Services) != 1 || cdA.Spec.ServiceSpec.Services[0].Template != "st-1" {
		t.Errorf("services of col-a: %+v", cdA.Spec.ServiceSpec.Services)
	}
	if cdA.Labels["team"] != "ml" || cdA.Labels[infrav1.ColonyLabel] != "col" || cdA.Labels[infrav1.ColonyClusterLabel] != "a" {
		t.Errorf("labels of col-a: %v", cdA.Labels)
	}
	if cdA.Annotations["owner"] != "alice" {
		t.Errorf("annotations of col-a: %v", cdA.Annotations)
	}
	ref := metav1.GetControllerOf(cdA)
	if ref == nil || ref.UID != getColony(t, ns, colony.Name).UID || ref.Kind != "Colony" {
		t.Errorf("controller of col-a: %+v", ref)
	}
	rawA := getCDRaw(t, ns, "col-a")
	if v, _, _ := unstructured.NestedString(rawA.Object, "spec", "config", "nested", "k"); v != "v" {
		t.Errorf("config of col-a not passed on: %v", rawA.Object["spec"])
	}
	// b wrote no config: {} is sent all the same.
	rawB := waitCDRaw(t, ns, "col-b")
	cfg, found, _ := unstructured.NestedMap(rawB.Object, "spec", "config")
	if !found || len(cfg) != 0 {
		t.Errorf("config of col-b = %v (found %v), want {}", cfg, found)
	}
	for _, m := range rawB.GetManagedFields() {
		if m.Manager != FieldManager || m.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("unexpected field manager %s/%s on col-b", m.Manager, m.Operation)
		}
	}

	c := waitColony(t, ns, "col", "Colony provisioning", all(phaseIs(infrav1.ColonyPhaseProvisioning),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady, "0/2 clusters ready", "a (ClusterDeployment col-a)"),
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady)))
	if c.Status.TotalClusters != 2 || c.Status.ReadyClusters != 0 || c.Status.KubeconfigSecretName != "" {
		t.Errorf("status counts: %+v", c.Status)
	}
	wantRefs := []infrav1.ObjectRef{{Name: "col-a", Namespace: ns}, {Name: "col-b", Namespace: ns}}
	if !reflect.DeepEqual(c.Status.ClusterDeploymentRefs, wantRefs) {
		t.Errorf("refs %+v, want %+v", c.Status.ClusterDeploymentRefs, wantRefs)
	}
	if !containsString(c.Finalizers, infrav1.ColonyFinalizer) {
		t.Errorf("finalizers %v", c.Finalizers)
	}
}

// TestUpdateChangesOnlyColonyFields: changing one field of an entry changes that field on the
// ClusterDeployment; removed labels, annotations and spec keys go; what another manager (KCM) set
// stays.
func TestUpdateChangesOnlyColonyFields(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	a := entry(t, "a", map[string]any{"template": "tmpl-1", "credential": "cred", "dryRun": true,
		"config": map[string]any{"keep": 1, "drop": 2}})
	a.ClusterLabels = map[string]string{"keep": "1", "drop": "2"}
	a.ClusterAnnotations = map[string]string{"note": "x"}
	createColony(t, ns, "col", a)
	waitCD(t, ns, "col-a", "ClusterDeployment col-a", nil)

	// KCM adds its own label, annotation and finalizer with another field manager.
	kcm := &unstructured.Unstructured{}
	kcm.SetGroupVersionKind(clusterDeploymentGVK)
	kcm.SetNamespace(ns)
	kcm.SetName("col-a")
	kcm.SetLabels(map[string]string{"k0rdent.mirantis.com/component": "kcm"})
	kcm.SetAnnotations(map[string]string{"k0rdent.mirantis.com/note": "kcm"})
	kcm.SetFinalizers([]string{k0rdentv1beta1.ClusterDeploymentFinalizer})
	if err := mgmt.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(kcm), client.FieldOwner("kcm")); err != nil {
		t.Fatalf("KCM apply: %v", err)
	}
	t.Cleanup(func() { removeFinalizers(t, ns, "col-a") })

	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		e := &c.Spec.ColonyClusters[0]
		e.ClusterDeploymentSpec = rawJSON(t, map[string]any{"template": "tmpl-2", "credential": "cred", "config": map[string]any{"keep": 1}})
		e.ClusterLabels = map[string]string{"keep": "1"}
		e.ClusterAnnotations = nil
	})
	cd := waitCD(t, ns, "col-a", "col-a updated", func(cd *k0rdentv1beta1.ClusterDeployment) error {
		if cd.Spec.Template != "tmpl-2" {
			return fmt.Errorf("template %q", cd.Spec.Template)
		}
		if _, ok := cd.Labels["drop"]; ok {
			return fmt.Errorf("removed label still there: %v", cd.Labels)
		}
		if _, ok := cd.Annotations["note"]; ok {
			return fmt.Errorf("removed annotation still there: %v", cd.Annotations)
		}
		if cd.Spec.DryRun {
			return errors.New("removed dryRun still set")
		}
		return nil
	})
	raw := getCDRaw(t, ns, "col-a")
	if _, found, _ := unstructured.NestedFieldNoCopy(raw.Object, "spec", "config", "drop"); found {
		t.Errorf("removed config key still there: %v", raw.Object["spec"])
	}
	if cd.Labels["keep"] != "1" || cd.Labels["k0rdent.mirantis.com/component"] != "kcm" {
		t.Errorf("labels %v: the kept label and KCM's label must stay", cd.Labels)
	}
	if cd.Annotations["k0rdent.mirantis.com/note"] != "kcm" {
		t.Errorf("annotations %v: KCM's annotation must stay", cd.Annotations)
	}
	if !containsString(cd.Finalizers, k0rdentv1beta1.ClusterDeploymentFinalizer) {
		t.Errorf("finalizers %v: KCM's finalizer must stay", cd.Finalizers)
	}

	// Drift: someone edits a field the Colony owns; the controller puts it back.
	cd.Spec.Template = "edited-by-hand"
	if err := mgmt.Client.Update(context.Background(), cd); err != nil {
		t.Fatal(err)
	}
	waitCD(t, ns, "col-a", "drift corrected", func(cd *k0rdentv1beta1.ClusterDeployment) error {
		if cd.Spec.Template != "tmpl-2" {
			return fmt.Errorf("template %q", cd.Spec.Template)
		}
		return nil
	})
}

// TestAddAndRemoveEntries: a new entry makes a ClusterDeployment, a removed one deletes its own.
func TestAddAndRemoveEntries(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	waitCD(t, ns, "col-a", "col-a", nil)
	waitCD(t, ns, "col-b", "col-b", nil)

	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters = []infrav1.ColonyCluster{c.Spec.ColonyClusters[1], entry(t, "c", nil)}
	})
	waitCD(t, ns, "col-c", "col-c", nil)
	waitCDGone(t, ns, "col-a")
	c := waitColony(t, ns, "col", "status follows the entries", func(c *infrav1.Colony) error {
		if c.Status.ObservedGeneration != c.Generation || c.Status.TotalClusters != 2 || len(c.Status.ClusterDeploymentRefs) != 2 {
			return fmt.Errorf("status %+v", c.Status)
		}
		return nil
	})
	if c.Status.ClusterDeploymentRefs[0].Name != "col-b" || c.Status.ClusterDeploymentRefs[1].Name != "col-c" {
		t.Errorf("refs %+v", c.Status.ClusterDeploymentRefs)
	}
	list := &k0rdentv1beta1.ClusterDeploymentList{}
	if err := mgmt.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d ClusterDeployments, want 2", len(list.Items))
	}
}

// TestBadEntryIsIsolated: an entry the decoder or the API server refuses marks the Colony Degraded
// and names the field; the other entries still reconcile; fixing the entry heals the Colony.
func TestBadEntryIsIsolated(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col",
		entry(t, "good", nil),
		entry(t, "rejected", map[string]any{"template": ""}), // the CRD wants at least 1 character
		entry(t, "mistyped", map[string]any{"template": 42}), // the decoder refuses it
		entry(t, "badlabel", nil),
	)
	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters[3].ClusterLabels = map[string]string{"not a valid key!": "x"}
	})
	waitCD(t, ns, "col-good", "the good entry reconciles", nil)
	waitColony(t, ns, "col", "Degraded naming the bad entries", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry,
			"spec.colonyClusters[clusterName=rejected].clusterDeploymentSpec.template",
			"spec.colonyClusters[clusterName=mistyped].clusterDeploymentSpec.template: must be of type string",
			"spec.colonyClusters[clusterName=badlabel].clusterLabels"),
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry)))
	for _, name := range []string{"col-rejected", "col-mistyped", "col-badlabel"} {
		err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &k0rdentv1beta1.ClusterDeployment{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}

	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters[1].ClusterDeploymentSpec = rawJSON(t, map[string]any{"template": "fixed"})
		c.Spec.ColonyClusters = append(c.Spec.ColonyClusters[:2], c.Spec.ColonyClusters[3:]...)
		c.Spec.ColonyClusters[2].ClusterLabels = nil
	})
	waitCD(t, ns, "col-rejected", "the fixed entry reconciles", nil)
	waitCD(t, ns, "col-badlabel", "the fixed label reconciles", nil)
	waitColony(t, ns, "col", "no longer Degraded", all(phaseIs(infrav1.ColonyPhaseProvisioning),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady, "0/3 clusters ready")))
}

// TestForeignClusterDeploymentIsNotTakenOver: a ClusterDeployment of the same name that the Colony
// does not control is left alone and the entry is reported.
func TestForeignClusterDeploymentIsNotTakenOver(t *testing.T) {
	ns := newNamespace(t)
	foreign := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col-a", Labels: map[string]string{"owner": "someone"}},
		Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "theirs"},
	}
	if err := mgmt.Client.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	waitCD(t, ns, "col-b", "the other entry reconciles", nil)
	waitColony(t, ns, "col", "Degraded naming the conflict", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry,
			"ClusterDeployment col-a already exists and is not controlled by this Colony")))
	cd := getCD(t, ns, "col-a")
	if cd.Spec.Template != "theirs" || metav1.GetControllerOf(cd) != nil {
		t.Errorf("foreign ClusterDeployment changed: %+v", cd)
	}
}

// TestUnknownKeys: keys the mirror does not know are passed on as written. Inside free-form fields
// (config) they reach the ClusterDeployment. A key the installed ClusterDeployment CRD does not know
// at all is refused by the API server's server-side apply; it is never dropped silently: the entry
// is reported with the field, and the other entries reconcile.
func TestUnknownKeys(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	// The mirror keeps ipamClaim as written; KCM's real schema types it, so an unknown key inside it
	// is a mirror-only case (K0RDENT_CRDS).
	ipam := map[string]any{"ref": "claim-1", "futureRefKind": "X"}
	if testenv.RealK0rdentCRDs() {
		ipam = map[string]any{"ref": "claim-1"}
	}
	createColony(t, ns, "col",
		entry(t, "a", map[string]any{"template": "t",
			"config":    map[string]any{"controlPlane": map[string]any{"futureKnob": "on"}},
			"ipamClaim": ipam}),
		entry(t, "b", map[string]any{"template": "t", "futureField": map[string]any{"x": "y"}}),
	)
	waitCD(t, ns, "col-a", "col-a", nil)
	raw := getCDRaw(t, ns, "col-a")
	if v, _, _ := unstructured.NestedString(raw.Object, "spec", "config", "controlPlane", "futureKnob"); v != "on" {
		t.Errorf("unknown config key lost: %v", raw.Object["spec"])
	}
	if v, _, _ := unstructured.NestedString(raw.Object, "spec", "ipamClaim", "futureRefKind"); v != "X" && !testenv.RealK0rdentCRDs() {
		t.Errorf("unknown ipamClaim key lost: %v", raw.Object["spec"])
	}
	waitColony(t, ns, "col", "the unknown top-level key is reported", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonInvalidEntry,
			"spec.colonyClusters[clusterName=b].clusterDeploymentSpec.futureField: not known to the installed ClusterDeployment CRD")))
}

func TestSchemaRejection(t *testing.T) {
	single := errors.New(`failed to create typed patch object (ns/c-a; k0rdent.mirantis.com/v1beta1, Kind=ClusterDeployment): .spec.futureField: field not declared in schema`)
	msg, ok := schemaRejection("a", "c-a", single)
	if !ok || msg != "ClusterDeployment c-a rejected: spec.colonyClusters[clusterName=a].clusterDeploymentSpec.futureField: "+
		"not known to the installed ClusterDeployment CRD (unknown keys are passed on as written, never dropped)" {
		t.Errorf("single: %v %q", ok, msg)
	}
	multi := errors.New("failed to create typed patch object (ns/c-a; k0rdent.mirantis.com/v1beta1, Kind=ClusterDeployment): errors:\n" +
		"  .spec.x: field not declared in schema\n  .spec.dryRun: expected boolean, got string")
	msg, ok = schemaRejection("a", "c-a", multi)
	for _, want := range []string{"clusterDeploymentSpec.x: not known", "clusterDeploymentSpec.dryRun: expected boolean"} {
		if !ok || !strings.Contains(msg, want) {
			t.Errorf("multi: %v %q lacks %q", ok, msg, want)
		}
	}
	if _, ok := schemaRejection("a", "c-a", errors.New("connection refused")); ok {
		t.Error("a transport error taken for a schema rejection")
	}
}

func waitCDRaw(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	waitCD(t, ns, name, name, nil)
	return getCDRaw(t, ns, name)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// removeFinalizers clears a ClusterDeployment's finalizers, as KCM does once it is done.
func removeFinalizers(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "removing finalizers of "+name, func() error {
		cd := &k0rdentv1beta1.ClusterDeployment{}
		err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(cd.Finalizers) == 0 {
			return nil
		}
		cd.Finalizers = nil
		return mgmt.Client.Update(context.Background(), cd)
	})
}

// TestEntryWithoutSpec: an entry without clusterDeploymentSpec (the upstream operator allows it)
// makes no ClusterDeployment, keeps and leaves alone one the Colony already controls (also when an
// entry's spec is removed), and is not counted; the Colony's deletion deletes it with the others.
func TestEntryWithoutSpec(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	col := createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil), infrav1.ColonyCluster{ClusterName: "declared"})
	waitCD(t, ns, "col-a", "the entry with a spec is made", nil)
	waitCD(t, ns, "col-b", "the entry with a spec is made", nil)
	waitColony(t, ns, "col", "two clusters counted", func(c *infrav1.Colony) error {
		if c.Status.TotalClusters != 2 {
			return fmt.Errorf("totalClusters %d", c.Status.TotalClusters)
		}
		return nil
	})
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "col-declared"}, &k0rdentv1beta1.ClusterDeployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("col-declared: %v, want not found", err)
	}

	// b's spec is removed: its ClusterDeployment stays as it was, and is no longer counted.
	updateColony(t, ns, "col", func(c *infrav1.Colony) { c.Spec.ColonyClusters[1].ClusterDeploymentSpec = apiextensionsv1.JSON{} })
	waitColony(t, ns, "col", "one cluster counted", func(c *infrav1.Colony) error {
		if c.Status.TotalClusters != 1 || c.Status.ObservedGeneration != c.Generation {
			return fmt.Errorf("totalClusters %d, observed %d of %d", c.Status.TotalClusters, c.Status.ObservedGeneration, c.Generation)
		}
		return nil
	})
	cdB := getCD(t, ns, "col-b")
	if cdB.DeletionTimestamp != nil || cdB.Spec.Template != "tmpl-1-0-0" {
		t.Errorf("col-b after its spec was removed: deleting %v, template %q", cdB.DeletionTimestamp, cdB.Spec.Template)
	}

	if err := mgmt.Client.Delete(context.Background(), col); err != nil {
		t.Fatal(err)
	}
	waitCDGone(t, ns, "col-a")
	waitCDGone(t, ns, "col-b")
}
