package release

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func testInput() Input {
	return Input{
		Workspace: &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team-a"}},
		Class: &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{
			ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "jupyter-1-0-0"},
		}},
		Cluster:    &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "kcm-system", UID: "cd-uid"}},
		ClusterKey: types.NamespacedName{Namespace: "kcm-system", Name: "gpu"},
		Values:     "image:\n  tag: v2\n",
	}
}

func TestDesiredServiceSetFollowsTheContract(t *testing.T) {
	in := testInput()
	ss := DesiredServiceSet(in, "the-name")
	if ss.Name != "the-name" || ss.Namespace != "kcm-system" {
		t.Fatalf("ServiceSet %s/%s, want kcm-system/the-name", ss.Namespace, ss.Name)
	}
	for k, v := range map[string]string{
		k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue,
		workspacesv1.WorkspaceLabel:                        "nb",
		workspacesv1.WorkspaceNamespaceLabel:               "team-a",
		workspacesv1.ClusterDeploymentLabel:                "gpu",
	} {
		if ss.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, ss.Labels[k], v)
		}
	}
	if _, ok := ss.Labels[owned.LabelStopped]; ok {
		t.Error("a running workspace's ServiceSet carries the stopped label")
	}
	if len(ss.OwnerReferences) != 1 || ss.OwnerReferences[0].UID != "cd-uid" || ss.OwnerReferences[0].Kind != "ClusterDeployment" ||
		ss.OwnerReferences[0].Controller == nil || *ss.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v, want the ClusterDeployment, not as controller", ss.OwnerReferences)
	}
	if ss.Spec.Cluster != "gpu" || ss.Spec.Provider.Name != k0rdentv1beta1.DefaultStateManagementProvider {
		t.Errorf("cluster %q provider %q", ss.Spec.Cluster, ss.Spec.Provider.Name)
	}
	if len(ss.Spec.Services) != 1 {
		t.Fatalf("%d services, want 1", len(ss.Spec.Services))
	}
	svc := ss.Spec.Services[0]
	if svc.Name != owned.ReleaseName(in.Workspace) || svc.Namespace != owned.LocalReleaseNamespace("nb") || svc.Template != "jupyter-1-0-0" ||
		svc.Values != in.Values || svc.ValuesFrom != nil || svc.HelmOptions != nil || svc.HelmAction != nil || svc.Version != nil {
		t.Errorf("service %+v", svc)
	}
	if len(ss.Annotations) != 0 {
		t.Errorf("annotations %v without secret values and before the rollout starts", ss.Annotations)
	}

	in.Stopping = true
	in.SecretValues = "password: x\n"
	in.Class.Spec.HelmOptions = &apiextensionsv1.JSON{Raw: []byte(`{"atomic":false}`)}
	ss = DesiredServiceSet(in, "the-name")
	if ss.Labels[owned.LabelStopped] != "true" {
		t.Error("a stopping workspace's ServiceSet lacks the stopped label")
	}
	if ss.Annotations[owned.AnnotationValuesHash] != ValuesHash(in.SecretValues) || ValuesHash(in.SecretValues) == "" {
		t.Errorf("values hash annotation %q", ss.Annotations[owned.AnnotationValuesHash])
	}
	svc = ss.Spec.Services[0]
	if len(svc.ValuesFrom) != 1 || svc.ValuesFrom[0].Kind != k0rdentv1beta1.ValuesFromSecret || svc.ValuesFrom[0].Name != owned.ValuesSecretName(in.Workspace) {
		t.Errorf("valuesFrom %+v, want the values Secret", svc.ValuesFrom)
	}
	if string(svc.HelmOptions.Raw) != `{"atomic":false,"wait":false,"waitForJobs":false}` {
		t.Errorf("helmOptions %s, want the class's without waiting (stopped)", svc.HelmOptions.Raw)
	}
	svc.HelmOptions.Raw[0] = 'x'
	if in.Class.Spec.HelmOptions.Raw[0] != '{' {
		t.Error("the ServiceSet shares the class's helmOptions")
	}
}

func TestHelmOptionsNullIsNone(t *testing.T) {
	for _, raw := range []string{"", "null"} {
		class := &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{HelmOptions: &apiextensionsv1.JSON{Raw: []byte(raw)}}}
		if ho := HelmOptions(class); ho != nil {
			t.Errorf("helmOptions %q gives %s, want none", raw, ho.Raw)
		}
	}
	if HelmOptions(&workspacesv1.WorkspaceClass{}) != nil {
		t.Error("no helmOptions gives some")
	}
}

func TestStampsOfOneSecondDiffer(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 100, time.FixedZone("x", 3600))
	a, b := Stamp(t0), Stamp(t0.Add(time.Millisecond))
	if a == b {
		t.Fatalf("two rollouts within a second share the stamp %s", a)
	}
	if !strings.HasSuffix(a, "Z") {
		t.Errorf("stamp %s is not UTC", a)
	}
	if got, err := time.Parse(time.RFC3339, a); err != nil || !got.Equal(t0) {
		t.Errorf("stamp %s reads back as %v, %v", a, got, err)
	}
}

func TestStartRollout(t *testing.T) {
	ss := DesiredServiceSet(testInput(), "n")
	StartRollout(ss, "s1", &workspacesv1.Admission{Cluster: "kcm-system/gpu", Replicas: 1, GPUs: 2})
	if ss.Annotations[owned.AnnotationRolloutStarted] != "s1" || ss.Annotations[owned.AnnotationAdmission] == "" {
		t.Errorf("annotations %v, want the stamp and the admission", ss.Annotations)
	}
	StartRollout(ss, "s2", nil)
	if ss.Annotations[owned.AnnotationRolloutStarted] != "s2" || ss.Annotations[owned.AnnotationAdmission] != "" {
		t.Errorf("annotations %v, want the new stamp and no admission", ss.Annotations)
	}
}

func TestConflictNamesTheOwner(t *testing.T) {
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kcm-system", Name: "x"}}
	if msg := Conflict(ss, "team-a"); !strings.Contains(msg, "kcm-system/x") || !strings.Contains(msg, "no workspace") {
		t.Errorf("conflict %q", msg)
	}
	ss.Labels = map[string]string{workspacesv1.WorkspaceLabel: "nb", workspacesv1.WorkspaceNamespaceLabel: "team-b"}
	if msg := Conflict(ss, "team-b"); !strings.Contains(msg, "workspace nb") {
		t.Errorf("conflict %q", msg)
	}
	// The tenant of another namespace is not told whose it is.
	if msg := Conflict(ss, "team-a"); strings.Contains(msg, "team-b") || strings.Contains(msg, "nb") || !strings.Contains(msg, "a workspace of another namespace") {
		t.Errorf("conflict seen from team-a: %q", msg)
	}
}

func TestDrift(t *testing.T) {
	in := testInput()
	in.Class.Spec.HelmOptions = &apiextensionsv1.JSON{Raw: []byte(`{"a":1,"b":{"c":true}}`)}
	want := DesiredServiceSet(in, "n")
	cached := func() *k0rdentv1beta1.ServiceSet {
		got := want.DeepCopy()
		got.Labels["kcm.example/added"] = "by KCM"
		got.Annotations = map[string]string{"user": "note", owned.AnnotationRolloutStarted: "s"}
		got.OwnerReferences = append(got.OwnerReferences, metav1.OwnerReference{Kind: "Other", Name: "o", UID: "o"})
		got.Spec.Services[0].HelmOptions = &apiextensionsv1.JSON{Raw: []byte(`{ "b": {"c": true}, "a": 1 }`)}
		out, _ := StripServiceSetValues(got)
		return out.(*k0rdentv1beta1.ServiceSet)
	}
	if spec, meta := Drift(cached(), want); spec || meta {
		t.Fatalf("no drift expected, got spec %v meta %v", spec, meta)
	}
	for name, c := range map[string]struct {
		edit       func(*k0rdentv1beta1.ServiceSet)
		spec, meta bool
	}{
		"label changed":         {func(ss *k0rdentv1beta1.ServiceSet) { ss.Labels[workspacesv1.WorkspaceLabel] = "x" }, false, true},
		"stopped label left":    {func(ss *k0rdentv1beta1.ServiceSet) { ss.Labels[owned.LabelStopped] = "true" }, false, true},
		"cluster owner missing": {func(ss *k0rdentv1beta1.ServiceSet) { ss.OwnerReferences = ss.OwnerReferences[1:] }, false, true},
		"values":                {func(ss *k0rdentv1beta1.ServiceSet) { ss.Spec.Services[0].Values = "image:\n  tag: v3\n" }, true, false},
		"values hash":           {func(ss *k0rdentv1beta1.ServiceSet) { ss.Annotations[owned.AnnotationValuesHash] = "old" }, true, false},
		"template":              {func(ss *k0rdentv1beta1.ServiceSet) { ss.Spec.Services[0].Template = "other" }, true, false},
		"helm action": {func(ss *k0rdentv1beta1.ServiceSet) {
			a := k0rdentv1beta1.HelmActionInstall
			ss.Spec.Services[0].HelmAction = &a
		}, true, false},
		"version":      {func(ss *k0rdentv1beta1.ServiceSet) { v := "1"; ss.Spec.Services[0].Version = &v }, true, false},
		"helm options": {func(ss *k0rdentv1beta1.ServiceSet) { ss.Spec.Services[0].HelmOptions = nil }, true, false},
		"valuesFrom": {func(ss *k0rdentv1beta1.ServiceSet) {
			ss.Spec.Services[0].ValuesFrom = []k0rdentv1beta1.ValuesFrom{{Kind: k0rdentv1beta1.ValuesFromSecret, Name: "s"}}
		}, true, false},
		"second service": {func(ss *k0rdentv1beta1.ServiceSet) { ss.Spec.Services = append(ss.Spec.Services, ss.Spec.Services[0]) }, true, false},
		"cluster":        {func(ss *k0rdentv1beta1.ServiceSet) { ss.Spec.Cluster = "other" }, true, false},
	} {
		got := cached()
		c.edit(got)
		if spec, meta := Drift(got, want); spec != c.spec || meta != c.meta {
			t.Errorf("%s: drift spec %v meta %v, want %v %v", name, spec, meta, c.spec, c.meta)
		}
	}
}

func TestCorrect(t *testing.T) {
	in := testInput()
	want := DesiredServiceSet(in, "n")
	got := want.DeepCopy()
	got.Labels[owned.LabelStopped] = "true"
	got.Labels["kcm"] = "keep"
	got.OwnerReferences = nil
	got.Annotations = map[string]string{owned.AnnotationRolloutStarted: "old", owned.AnnotationValuesHash: "old", "user": "keep"}
	got.Spec.Services[0].Values = "old: 1\n"
	deployedAt := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	got.Status.Services = []k0rdentv1beta1.ServiceState{{Name: want.Spec.Services[0].Name, Namespace: want.Spec.Services[0].Namespace,
		State: k0rdentv1beta1.ServiceStateDeployed, LastStateTransitionTime: &deployedAt}}

	meta := got.DeepCopy()
	Correct(meta, want, false, "new", nil)
	if meta.Labels[owned.LabelStopped] != "" || meta.Labels["kcm"] != "keep" || !hasOwner(meta, want.OwnerReferences[0]) {
		t.Errorf("labels %v owners %v after a metadata correction", meta.Labels, meta.OwnerReferences)
	}
	if meta.Annotations[owned.AnnotationRolloutStarted] != "old" || meta.Spec.Services[0].Values != "old: 1\n" {
		t.Error("a metadata correction started a rollout")
	}

	Correct(got, want, true, "new", &workspacesv1.Admission{Replicas: 1, GPUs: 1})
	if spec, m := Drift(got, want); spec || m {
		t.Errorf("drift after correction: spec %v meta %v", spec, m)
	}
	if got.Annotations[owned.AnnotationRolloutStarted] != "new" || got.Annotations["user"] != "keep" ||
		got.Annotations[owned.AnnotationAdmission] == "" {
		t.Errorf("annotations %v after a spec correction", got.Annotations)
	}
	if _, ok := got.Annotations[owned.AnnotationValuesHash]; ok {
		t.Error("the values hash stays although there are no secret values")
	}
	if b := got.Annotations[owned.AnnotationRolloutBaseTransition]; b != "2026-01-02T03:04:05Z" {
		t.Errorf("the rollout recorded the state it found at %q, want 2026-01-02T03:04:05Z", b)
	}
	Correct(got, got.DeepCopy(), false, "newer", nil)
	if len(got.OwnerReferences) != 1 {
		t.Errorf("owner references %v: the cluster owner is added twice", got.OwnerReferences)
	}
}

func TestSameJSON(t *testing.T) {
	j := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	if !SameJSON(j(`{"a":1,"b":[1,2]}`), j(`{"b":[1,2], "a":1.0}`)) || !SameJSON(nil, j(`null`)) {
		t.Error("equal documents differ")
	}
	if SameJSON(j(`{"a":1}`), nil) || SameJSON(j(`{"b":[2,1]}`), j(`{"b":[1,2]}`)) {
		t.Error("different documents are equal")
	}
}

// A stopped release is upgraded without waiting for its workloads (the stop refuses their pods on
// the child, and a chart that fixes its replicas still asks for them); the class's other options
// stay, and the start brings the class's options back.
func TestStoppedReleaseDoesNotWait(t *testing.T) {
	decode := func(t *testing.T, j *apiextensionsv1.JSON) map[string]any {
		t.Helper()
		m := map[string]any{}
		if j == nil {
			return m
		}
		if err := json.Unmarshal(j.Raw, &m); err != nil {
			t.Fatalf("helmOptions %s: %v", j.Raw, err)
		}
		return m
	}
	for name, class := range map[string]*apiextensionsv1.JSON{
		"k0rdent's defaults": nil,
		"null":               {Raw: []byte("null")},
		"the class's":        {Raw: []byte(`{"timeout":"10m","wait":true,"atomic":true,"labels":{"team":"a"}}`)},
	} {
		in := testInput()
		in.Class.Spec.HelmOptions = class
		running := DesiredServiceSet(in, "x").Spec.Services[0].HelmOptions
		in.Stopping = true
		stopped := decode(t, DesiredServiceSet(in, "x").Spec.Services[0].HelmOptions)
		for _, k := range []string{"wait", "waitForJobs", "atomic"} {
			if v, ok := stopped[k]; !ok || v != false {
				t.Errorf("%s: stopped helmOptions %s = %v, want false", name, k, v)
			}
		}
		for k, v := range decode(t, running) {
			if k == "wait" || k == "atomic" {
				continue
			}
			if got, _ := json.Marshal(stopped[k]); string(got) != mustJSON(t, v) {
				t.Errorf("%s: stopped helmOptions %s = %s, want the class's %s", name, k, got, mustJSON(t, v))
			}
		}
		if !SameJSON(running, HelmOptions(in.Class)) {
			t.Errorf("%s: running helmOptions %v, want the class's", name, running)
		}
	}
	if got := StopHelmOptions(&apiextensionsv1.JSON{Raw: []byte(`["not","an","object"]`)}); string(got.Raw) != `["not","an","object"]` {
		t.Errorf("options that are not an object: %s, want them unchanged", got.Raw)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
