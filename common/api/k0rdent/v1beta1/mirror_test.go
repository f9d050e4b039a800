package v1beta1

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"
)

// filler fills every field, with free-form JSON fields holding a small valid document.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0).NumElements(1, 2).Funcs(
		func(j *apiextensionsv1.JSON, c randfill.Continue) {
			j.Raw = []byte(fmt.Sprintf(`{"k":[%d,"v%d"]}`, c.Int31(), c.Int31()))
		},
		func(t *metav1.Time, c randfill.Continue) {
			// JSON keeps second precision, and decoding yields local time.
			*t = metav1.NewTime(time.Unix(int64(c.Int31()), 0).Local())
		},
		func(o *metav1.ObjectMeta, c randfill.Continue) {
			o.Name = c.String(10)
			o.Namespace = c.String(10)
		},
		func(tm *metav1.TypeMeta, c randfill.Continue) {},
		// Non-empty strings and true bools, so that omitempty drops nothing.
		func(s *string, c randfill.Continue) { *s = "s" + c.String(6) },
		func(b *bool, c randfill.Continue) { *b = true },
	)
}

// kinds are the mirrored root objects.
func kinds() []runtime.Object {
	return []runtime.Object{
		&ClusterDeployment{}, &ServiceSet{}, &ServiceTemplate{}, &ClusterTemplate{}, &Credential{},
		&ClusterDeploymentList{}, &ServiceSetList{}, &ServiceTemplateList{}, &ClusterTemplateList{}, &CredentialList{},
	}
}

// TestRoundTrip: a fully populated object survives JSON and DeepCopy unchanged.
func TestRoundTrip(t *testing.T) {
	for _, proto := range kinds() {
		for seed := int64(0); seed < 20; seed++ {
			obj := proto.DeepCopyObject()
			filler(seed).Fill(obj)
			raw, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("%T: marshal: %v", obj, err)
			}
			back := proto.DeepCopyObject()
			if err := json.Unmarshal(raw, back); err != nil {
				t.Fatalf("%T: unmarshal: %v", obj, err)
			}
			if !reflect.DeepEqual(obj, back) {
				again, _ := json.Marshal(back)
				t.Fatalf("%T changed on the JSON round trip:\n%s\n%s", obj, raw, again)
			}
			if cp := obj.DeepCopyObject(); !reflect.DeepEqual(obj, cp) {
				t.Fatalf("%T: DeepCopy differs", obj)
			}
		}
	}
}

// keysOf returns the JSON keys of v, with every field populated.
func keysOf(t *testing.T, v any) []string {
	t.Helper()
	filler(1).Fill(v)
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestJSONNames pins the JSON names of every mirrored struct to those of KCM
// (docs/design/k0rdent-contract.md). A renamed tag would silently drop data KCM writes or make KCM
// ignore ours.
func TestJSONNames(t *testing.T) {
	cases := []struct {
		v    any
		want []string
	}{
		{&ClusterDeploymentSpec{}, []string{"auditPolicy", "cleanupOnDeletion", "clusterAuth", "config", "credential", "dataSource", "dryRun", "ipamClaim", "propagateCredentials", "serviceSpec", "template"}},
		{&ClusterDeploymentStatus{}, []string{"availableUpgrades", "conditions", "k8sVersion", "observedGeneration", "region", "services", "servicesUpgradePaths"}},
		{&ServiceSpec{}, []string{"continueOnError", "driftExclusions", "driftIgnore", "policyRefs", "priority", "provider", "reload", "services", "stopOnConflict", "syncMode", "templateResourceRefs"}},
		{&Service{}, []string{"dependsOn", "disable", "helmAction", "helmOptions", "name", "namespace", "template", "templateChain", "values", "valuesFrom", "version"}},
		{&ServiceWithValues{}, []string{"helmAction", "helmOptions", "name", "namespace", "template", "values", "valuesFrom", "version"}},
		{&StateManagementProviderConfig{}, []string{"config", "name", "selfManagement"}},
		{&ValuesFrom{}, []string{"kind", "name"}},
		{&ServiceSetSpec{}, []string{"cluster", "multiClusterService", "provider", "services"}},
		{&ServiceSetStatus{}, []string{"cluster", "conditions", "deployed", "provider", "services"}},
		{&ServiceSetProviderStatus{}, []string{"ready", "suspended"}},
		{&ServiceState{}, []string{"conditions", "failureMessage", "lastDeployedHash", "lastStateTransitionTime", "name", "namespace", "state", "template", "type", "version"}},
		{&ServiceUpgradePaths{}, []string{"availableUpgrades", "name", "namespace", "template"}},
		{&ServiceTemplateSpec{}, []string{"helm", "helmOptions", "k8sConstraint", "kustomize", "resources", "version"}},
		{&HelmSpec{}, []string{"chartRef", "chartSource", "chartSpec"}},
		{&HelmChartSpec{}, []string{"chart", "ignoreMissingValuesFiles", "interval", "reconcileStrategy", "sourceRef", "suspend", "valuesFiles", "verify", "version"}},
		{&SourceSpec{}, []string{"deploymentType", "localSourceRef", "path", "remoteSourceSpec"}},
		{&ServiceTemplateStatus{}, []string{"chartRef", "chartVersion", "config", "description", "k8sConstraint", "observedGeneration", "schemaConfigMapName", "sourceStatus", "valid", "validationError"}},
		{&ClusterTemplateSpec{}, []string{"helm", "k8sVersion", "providerContracts", "providers"}},
		{&ClusterTemplateStatus{}, []string{"chartRef", "chartVersion", "config", "description", "k8sVersion", "observedGeneration", "providerContracts", "providers", "schemaConfigMapName", "valid", "validationError"}},
		{&CredentialSpec{}, []string{"description", "identityRef", "region"}},
		{&CredentialStatus{}, []string{"conditions", "ready"}},
	}
	for _, tc := range cases {
		if got := keysOf(t, tc.v); !slices.Equal(got, tc.want) {
			t.Errorf("%T JSON names = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestDecodeKCMServiceSet decodes a ServiceSet as KCM v1.12 writes it, including fields the mirror
// does not model, the way a controller-runtime client does (unknown fields ignored).
func TestDecodeKCMServiceSet(t *testing.T) {
	doc := `{"apiVersion":"k0rdent.mirantis.com/v1beta1","kind":"ServiceSet",
	"metadata":{"name":"cd-ws-a","namespace":"tenant","labels":{"ksm.k0rdent.mirantis.com/adapter":"kcm-controller-manager"},
		"finalizers":["k0rdent.mirantis.com/service-set"],"annotations":{"k0rdent.mirantis.com/service-set-paused":""}},
	"spec":{"cluster":"cd","provider":{"name":"ksm-projectsveltos","config":{"priority":100},"selfManagement":false},
		"services":[{"name":"ws-a","namespace":"ws-a","template":"jupyter-0-3-0","values":"a: 1\n","helmAction":"Install"}]},
	"status":{"deployed":true,"somethingNew":{"x":1},
		"services":[{"type":"Helm","name":"ws-a","namespace":"ws-a","template":"jupyter-0-3-0","state":"Deployed","version":"0.3.0",
			"lastStateTransitionTime":"2026-01-02T03:04:05Z","lastDeployedHash":"h","conditions":[]}],
		"conditions":[{"type":"ServicesInReadyState","status":"True","reason":"Succeeded","message":"1/1","lastTransitionTime":"2026-01-02T03:04:05Z"}],
		"cluster":{"apiVersion":"k0rdent.mirantis.com/v1beta1","kind":"ClusterDeployment","name":"cd","namespace":"tenant"},
		"provider":{"ready":true,"suspended":false}}}`
	s := &ServiceSet{}
	if err := json.Unmarshal([]byte(doc), s); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if s.Labels[StateManagementProviderAdapterLabel] != StateManagementProviderAdapterValue ||
		s.Spec.Provider.Name != DefaultStateManagementProvider || !slices.Contains(s.Finalizers, ServiceSetFinalizer) {
		t.Errorf("labels/provider/finalizer not as KCM writes them: %+v", s.ObjectMeta)
	}
	if _, paused := s.Annotations[ServiceSetPausedAnnotation]; !paused {
		t.Errorf("pause annotation not found")
	}
	if !s.Status.Deployed || len(s.Status.Services) != 1 || s.Status.Services[0].State != ServiceStateDeployed ||
		s.Status.Services[0].Type != ServiceTypeHelm || *s.Status.Services[0].Version != "0.3.0" {
		t.Errorf("status = %+v", s.Status)
	}
	if s.Status.Conditions[0].Type != ServicesInReadyStateCondition || s.Status.Cluster.Name != "cd" {
		t.Errorf("status conditions/cluster = %+v / %+v", s.Status.Conditions, s.Status.Cluster)
	}
}

func TestKubeconfigSecretName(t *testing.T) {
	if got := KubeconfigSecretName("gpu-a"); got != "gpu-a-kubeconfig" {
		t.Errorf("KubeconfigSecretName = %q", got)
	}
}
