package crdtests

import (
	"context"
	"encoding/json"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// serviceSet returns a minimal valid ServiceSet spec, as the workspace-controller writes it, with the
// top-level fields of extra set or replaced.
func serviceSet(extra string) string {
	return withFields(`{"cluster":"cd","provider":{"name":"ksm-projectsveltos","selfManagement":false},`+
		`"services":[{"name":"ws","namespace":"ws-a","template":"jupyter-0-3-0","values":"a: b"}]}`, extra)
}

func TestServiceSetValidation(t *testing.T) {
	ns := createNamespace(t, "crd-serviceset")
	cases := []validationCase{
		{name: "minimal", spec: serviceSet("")},
		{name: "every service field", spec: serviceSet(`,"services":[{"name":"ws","namespace":"ws-a","template":"t","version":"1.0.0","values":"x: 1",` +
			`"valuesFrom":[{"kind":"ConfigMap","name":"cm"},{"kind":"Secret","name":"s"}],"helmAction":"Uninstall","helmOptions":{"timeout":"10m","wait":true}}]`)},
		{name: "helmAction Install", spec: serviceSet(`,"services":[{"name":"ws","namespace":"n","template":"t","helmAction":"Install"}]`)},
		{name: "cluster missing", spec: `{"provider":{"name":"ksm-projectsveltos"}}`, want: []string{"spec.cluster", "Required value"}},
		{name: "cluster empty accepted, as by KCM's schema", spec: serviceSet(`,"cluster":""`)},
		{name: "provider missing", spec: `{"cluster":"cd"}`, want: []string{"spec.provider", "Required value"}},
		{name: "service name missing", spec: serviceSet(`,"services":[{"namespace":"n","template":"t"}]`), want: []string{"spec.services[0].name", "Required value"}},
		{name: "service namespace missing", spec: serviceSet(`,"services":[{"name":"ws","template":"t"}]`), want: []string{"spec.services[0].namespace", "Required value"}},
		{name: "service template missing", spec: serviceSet(`,"services":[{"name":"ws","namespace":"n"}]`), want: []string{"spec.services[0].template", "Required value"}},
		{name: "unknown helmAction", spec: serviceSet(`,"services":[{"name":"ws","namespace":"n","template":"t","helmAction":"Upgrade"}]`), want: []string{"spec.services[0].helmAction", "Unsupported value"}},
		{name: "unknown valuesFrom kind", spec: serviceSet(`,"services":[{"name":"ws","namespace":"n","template":"t","valuesFrom":[{"kind":"Pod","name":"p"}]}]`), want: []string{"spec.services[0].valuesFrom[0].kind", "Unsupported value"}},
		{name: "valuesFrom name missing", spec: serviceSet(`,"services":[{"name":"ws","namespace":"n","template":"t","valuesFrom":[{"kind":"Secret"}]}]`), want: []string{"spec.services[0].valuesFrom[0].name", "Required value"}},
	}
	runCases(t, k0rdentAPI, "ServiceSet", ns, cases)
	requireTypedList(t, &k0rdentv1beta1.ServiceSetList{})
}

// TestServiceSetRoundTrip: provider.name is immutable once set, free-form fields survive, and status
// enforces KCM's ServiceState schema (required fields and the state/type enums).
func TestServiceSetRoundTrip(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, "crd-serviceset-rt")
	const name = "cd-ws-a"
	mustCreate(t, newObject(t, k0rdentAPI, "ServiceSet", ns, name, serviceSet(
		`,"provider":{"name":"ksm-projectsveltos","config":{"priority":50,"future":{"x":[1]}}},`+
			`"services":[{"name":"ws","namespace":"ws-a","template":"t","helmOptions":{"atomic":true,"installOptions":{"createNamespace":true}}}]`)))

	t.Run("free-form fields kept", func(t *testing.T) {
		s := &k0rdentv1beta1.ServiceSet{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatalf("reading the ServiceSet typed: %v", err)
		}
		var cfg, opts any
		if err := json.Unmarshal(s.Spec.Provider.Config.Raw, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(s.Spec.Services[0].HelmOptions.Raw, &opts); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, cfg, mustJSON(t, `{"priority":50,"future":{"x":[1]}}`)) {
			t.Errorf("provider.config changed: %s", s.Spec.Provider.Config.Raw)
		}
		t.Run("helmOptions kept as written", func(t *testing.T) {
			// KCM's schema types helmOptions and fills in defaults; the mirror keeps the raw JSON.
			testenv.MirrorOnly(t, "helmOptions kept verbatim")
			if !sameJSON(t, opts, mustJSON(t, `{"atomic":true,"installOptions":{"createNamespace":true}}`)) {
				t.Errorf("helmOptions changed: %s", s.Spec.Services[0].HelmOptions.Raw)
			}
		})
	})

	t.Run("provider.name immutable once set", func(t *testing.T) {
		err := updateField(t, k0rdentAPI, "ServiceSet", ns, name, "other", "spec", "provider", "name")
		requireInvalid(t, err, "spec.provider.name", "Provider name is immutable once set")
	})

	t.Run("provider.name may be set when it was empty", func(t *testing.T) {
		mustCreate(t, newObject(t, k0rdentAPI, "ServiceSet", ns, "unnamed-provider", `{"cluster":"cd","provider":{}}`))
		if err := updateField(t, k0rdentAPI, "ServiceSet", ns, "unnamed-provider", "ksm-projectsveltos", "spec", "provider", "name"); err != nil {
			t.Fatalf("setting provider.name rejected: %v", err)
		}
	})

	state := func(state, typ string) string {
		return `{"type":"` + typ + `","name":"ws","namespace":"ws-a","template":"t","state":"` + state + `","lastStateTransitionTime":"2026-01-01T00:00:00Z"}`
	}
	cases := []struct {
		name, status string
		want         []string
	}{
		{name: "unknown state", status: `{"deployed":false,"services":[` + state("Running", "Helm") + `]}`, want: []string{"status.services[0].state", "Unsupported value"}},
		{name: "unknown type", status: `{"deployed":false,"services":[` + state("Deployed", "Chart") + `]}`, want: []string{"status.services[0].type", "Unsupported value"}},
		{name: "lastStateTransitionTime missing", status: `{"deployed":false,"services":[{"type":"Helm","name":"ws","namespace":"n","template":"t","state":"Pending"}]}`, want: []string{"status.services[0].lastStateTransitionTime", "Required value"}},
		{name: "template missing", status: `{"deployed":false,"services":[{"type":"Helm","name":"ws","namespace":"n","state":"Pending","lastStateTransitionTime":"2026-01-01T00:00:00Z"}]}`, want: []string{"status.services[0].template", "Required value"}},
		{name: "every field", status: `{"deployed":true,"services":[{"type":"Helm","name":"ws","namespace":"ws-a","template":"t","state":"Deployed","failureMessage":"",` +
			`"version":"1.0.0","lastStateTransitionTime":"2026-01-01T00:00:00Z","lastDeployedHash":"abc","conditions":[` + condition + `]}],` +
			`"conditions":[{"type":"ServicesInReadyState","status":"True","reason":"Succeeded","message":"1/1","lastTransitionTime":"2026-01-01T00:00:00Z"}],` +
			`"cluster":{"apiVersion":"k0rdent.mirantis.com/v1beta1","kind":"ClusterDeployment","namespace":"` + ns + `","name":"cd"},"provider":{"ready":true,"suspended":false}}`},
	}
	for _, st := range []string{"Deployed", "Provisioning", "Failed", "Pending", "Deleting", "Deleted"} {
		for _, typ := range []string{"Helm", "Kustomize", "Resource"} {
			cases = append(cases, struct {
				name, status string
				want         []string
			}{name: "state " + st + " type " + typ, status: `{"deployed":false,"services":[` + state(st, typ) + `]}`})
		}
	}
	for _, tc := range cases {
		t.Run("status: "+tc.name, func(t *testing.T) {
			checkVerdict(t, updateStatus(t, k0rdentAPI, "ServiceSet", ns, name, tc.status), tc.want)
		})
	}

	t.Run("status: deployed defaults to false", func(t *testing.T) {
		if err := updateStatus(t, k0rdentAPI, "ServiceSet", ns, name, `{"services":[`+state("Pending", "Helm")+`]}`); err != nil {
			t.Fatalf("status without deployed rejected: %v", err)
		}
		u := get(t, k0rdentAPI, "ServiceSet", ns, name)
		if got := nested(t, u, "status", "deployed"); got != false {
			t.Errorf("status.deployed = %v, want the default false", got)
		}
		s := &k0rdentv1beta1.ServiceSet{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatalf("reading typed: %v", err)
		}
		if len(s.Status.Services) != 1 || s.Status.Services[0].State != k0rdentv1beta1.ServiceStatePending {
			t.Errorf("typed status.services = %+v", s.Status.Services)
		}
	})
}

func TestClusterDeploymentValidation(t *testing.T) {
	ns := createNamespace(t, "crd-cd")
	cases := []validationCase{
		{name: "minimal", spec: `{"template":"aws-1-0-0"}`},
		{name: "every field", spec: `{"template":"aws-1-0-0","credential":"aws","config":{"region":"x"},"dryRun":false,"propagateCredentials":false,` +
			`"clusterAuth":"auth","dataSource":"ds","auditPolicy":"ap","ipamClaim":{"ref":"claim"},"cleanupOnDeletion":true,` +
			`"serviceSpec":{"services":[{"name":"a","namespace":"n","template":"t","templateChain":"c","version":"1","values":"x: 1",` +
			`"valuesFrom":[{"kind":"Secret","name":"s"}],"dependsOn":[{"name":"b","namespace":"n"}],"disable":false,"helmAction":"Install","helmOptions":{"wait":true}}],` +
			`"provider":{"name":"ksm-projectsveltos","config":{"priority":10}},"syncMode":"ContinuousWithDriftDetection","priority":2147483646,` +
			`"templateResourceRefs":[{"resource":{"kind":"Secret","name":"s"},"identifier":"s"}],"policyRefs":[{"kind":"ConfigMap"}],"driftIgnore":[{"x":1}],"driftExclusions":[{"paths":["a"]}],` +
			`"stopOnConflict":true,"reload":true,"continueOnError":true}}`},
		{name: "no spec", spec: "", want: []string{"spec", "Required value"}},
		{name: "template missing", spec: `{"credential":"aws"}`, want: []string{"spec.template", "Required value"}},
		{name: "template empty", spec: `{"template":""}`, want: []string{"spec.template", "at least 1"}},
		{name: "template too long", spec: `{"template":"` + repeat("t", 254) + `"}`, want: []string{"spec.template", "Too long"}},
		{name: "duplicate service", spec: `{"template":"t","serviceSpec":{"services":[{"name":"a","template":"t"},{"name":"a","namespace":"default","template":"u"}]}}`, want: []string{"spec.serviceSpec.services[1]", "Duplicate value"}},
		{name: "service template missing", spec: `{"template":"t","serviceSpec":{"services":[{"name":"a"}]}}`, want: []string{"spec.serviceSpec.services[0].template", "Required value"}},
		{name: "unknown syncMode", spec: `{"template":"t","serviceSpec":{"syncMode":"Sometimes"}}`, want: []string{"spec.serviceSpec.syncMode", "Unsupported value"}},
		{name: "priority 0", spec: `{"template":"t","serviceSpec":{"priority":0}}`, want: []string{"spec.serviceSpec.priority", "greater than or equal to 1"}},
		{name: "dependsOn name missing", spec: `{"template":"t","serviceSpec":{"services":[{"name":"a","template":"t","dependsOn":[{"namespace":"n"}]}]}}`, want: []string{"spec.serviceSpec.services[0].dependsOn[0].name", "Required value"}},
	}
	runCases(t, k0rdentAPI, "ClusterDeployment", ns, cases)
	requireTypedList(t, &k0rdentv1beta1.ClusterDeploymentList{})

	t.Run("defaults and free-form config", func(t *testing.T) {
		config := `{"region":"eu","workers":[{"type":"p4d"}],"future":{"a":null,"b":{"c":"d"}}}`
		mustCreate(t, newObject(t, k0rdentAPI, "ClusterDeployment", ns, "defaults",
			`{"template":"t","config":`+config+`,"serviceSpec":{"services":[{"name":"a","template":"t"}]}}`))
		cd := &k0rdentv1beta1.ClusterDeployment{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "defaults"}, cd); err != nil {
			t.Fatalf("reading typed: %v", err)
		}
		if cd.Spec.PropagateCredentials == nil || !*cd.Spec.PropagateCredentials {
			t.Errorf("propagateCredentials = %v, want the default true", cd.Spec.PropagateCredentials)
		}
		if got := cd.Spec.ServiceSpec.Services[0].Namespace; got != "default" {
			t.Errorf("service namespace = %q, want the default \"default\"", got)
		}
		if cd.Spec.ServiceSpec.SyncMode != "Continuous" || cd.Spec.ServiceSpec.Priority != 100 {
			t.Errorf("syncMode/priority = %q/%d, want the defaults Continuous/100", cd.Spec.ServiceSpec.SyncMode, cd.Spec.ServiceSpec.Priority)
		}
		var got any
		if err := json.Unmarshal(cd.Spec.Config.Raw, &got); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, mustJSON(t, config)) {
			t.Errorf("config changed on the round trip: %s", cd.Spec.Config.Raw)
		}
	})
}

func TestServiceTemplateValidation(t *testing.T) {
	ns := createNamespace(t, "crd-svctmpl")
	chartSpec := `{"chart":"jupyter","version":"0.3.0","sourceRef":{"kind":"HelmRepository","name":"kcm-templates"},"interval":"10m"}`
	git := `{"url":"https://example.com/r.git","interval":"10m"}`
	cases := []validationCase{
		{name: "helm chartSpec", spec: `{"helm":{"chartSpec":` + chartSpec + `},"helmOptions":{"timeout":"5m"},"version":"0.3.0","k8sConstraint":">=1.30"}`},
		{name: "helm chartRef", spec: `{"helm":{"chartRef":{"kind":"HelmChart","name":"jupyter","namespace":"kcm-system"}}}`},
		{name: "helm chartSource", spec: `{"helm":{"chartSource":{"localSourceRef":{"kind":"GitRepository","name":"repo"},"path":"charts/x"}}}`},
		{name: "kustomize", spec: `{"kustomize":{"remoteSourceSpec":{"git":{"url":"https://example.com/r.git","interval":"10m"}},"deploymentType":"Local","path":"."}}`},
		{name: "resources", spec: `{"resources":{"localSourceRef":{"kind":"ConfigMap","name":"cm"}}}`},
		{name: "nothing set", spec: `{"version":"1"}`, want: []string{"spec", "One of Helm, Kustomize, or Resources must be specified"}},
		{name: "helm and kustomize", spec: `{"helm":{"chartSpec":` + chartSpec + `},"kustomize":{"localSourceRef":{"kind":"ConfigMap","name":"cm"}}}`, want: []string{"spec", "Helm, Kustomize and Resources are mutually exclusive"}},
		{name: "helm chartSpec and chartRef", spec: `{"helm":{"chartSpec":` + chartSpec + `,"chartRef":{"kind":"HelmChart","name":"x"}}}`, want: []string{"spec.helm", "chartSpec, chartSource and chartRef are mutually exclusive"}},
		{name: "chartSpec without interval", spec: `{"helm":{"chartSpec":{"chart":"x","sourceRef":{"kind":"HelmRepository","name":"r"}}}}`, want: []string{"spec.helm.chartSpec.interval", "Required value"}},
		{name: "chartSpec interval not a duration", spec: `{"helm":{"chartSpec":{"chart":"x","sourceRef":{"kind":"HelmRepository","name":"r"},"interval":"often"}}}`, want: []string{"spec.helm.chartSpec.interval", "should match"}},
		{name: "chartSpec sourceRef kind unknown", spec: `{"helm":{"chartSpec":{"chart":"x","sourceRef":{"kind":"OCIRepository","name":"r"},"interval":"1m"}}}`, want: []string{"spec.helm.chartSpec.sourceRef.kind", "Unsupported value"}},
		{name: "chartRef kind unknown", spec: `{"helm":{"chartRef":{"kind":"GitRepository","name":"x"}}}`, want: []string{"spec.helm.chartRef.kind", "Unsupported value"}},
		{name: "chartSource from a Secret", spec: `{"helm":{"chartSource":{"localSourceRef":{"kind":"Secret","name":"s"}}}}`, want: []string{"spec.helm.chartSource", "Secret and ConfigMap are not supported as Helm chart sources"}},
		{name: "source with both refs", spec: `{"resources":{"localSourceRef":{"kind":"ConfigMap","name":"cm"},"remoteSourceSpec":{"git":` + git + `}}}`, want: []string{"spec.resources", "LocalSource and RemoteSource are mutually exclusive"}},
		{name: "remote source with two kinds", spec: `{"resources":{"remoteSourceSpec":{"git":` + git + `,"oci":` + git + `}}}`, want: []string{"spec.resources.remoteSourceSpec", "Git, Bucket and OCI are mutually exclusive"}},
		{name: "unknown deploymentType", spec: `{"resources":{"localSourceRef":{"kind":"ConfigMap","name":"cm"},"deploymentType":"Elsewhere"}}`, want: []string{"spec.resources.deploymentType", "Unsupported value"}},
	}
	runCases(t, k0rdentAPI, "ServiceTemplate", ns, cases)
	requireTypedList(t, &k0rdentv1beta1.ServiceTemplateList{})

	t.Run("spec immutable, status valid required", func(t *testing.T) {
		mustCreate(t, newObject(t, k0rdentAPI, "ServiceTemplate", ns, "jupyter", `{"helm":{"chartSpec":`+chartSpec+`}}`))
		err := updateField(t, k0rdentAPI, "ServiceTemplate", ns, "jupyter", "0.4.0", "spec", "helm", "chartSpec", "version")
		requireInvalid(t, err, "spec", "Spec is immutable")

		err = updateStatus(t, k0rdentAPI, "ServiceTemplate", ns, "jupyter", `{"chartVersion":"0.3.0"}`)
		requireInvalid(t, err, "status.valid", "Required value")

		if err := updateStatus(t, k0rdentAPI, "ServiceTemplate", ns, "jupyter", `{"valid":true,"chartVersion":"0.3.0",`+
			`"chartRef":{"kind":"HelmChart","name":"jupyter","namespace":"`+ns+`"},"config":{"a":1},"description":"d","k8sConstraint":">=1.30",`+
			`"sourceStatus":{"kind":"HelmRepository","name":"r","namespace":"`+ns+`","artifact":{"revision":"x","digest":"sha256:0","lastUpdateTime":"2026-01-01T00:00:00Z","path":"p","url":"http://x/p"}}}`); err != nil {
			t.Fatalf("valid status rejected: %v", err)
		}
		st := &k0rdentv1beta1.ServiceTemplate{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "jupyter"}, st); err != nil {
			t.Fatalf("reading typed: %v", err)
		}
		if !st.Status.Valid || st.Status.ChartVersion != "0.3.0" || st.Status.ChartRef == nil || st.Status.ChartRef.Name != "jupyter" {
			t.Errorf("typed status = %+v", st.Status)
		}
		if st.Spec.Helm.ChartSpec.ReconcileStrategy != "ChartVersion" {
			t.Errorf("chartSpec.reconcileStrategy = %q, want Flux's default ChartVersion", st.Spec.Helm.ChartSpec.ReconcileStrategy)
		}
	})
}

func TestClusterTemplateAndCredentialValidation(t *testing.T) {
	ns := createNamespace(t, "crd-ct-cred")
	chartSpec := `{"chart":"aws","sourceRef":{"kind":"HelmRepository","name":"kcm-templates"},"interval":"10m"}`
	runCases(t, k0rdentAPI, "ClusterTemplate", ns, []validationCase{
		{name: "valid", spec: `{"helm":{"chartSpec":` + chartSpec + `},"providers":["infrastructure-aws"],"providerContracts":{"infrastructure-aws":"v1beta2"},"k8sVersion":"v1.33.0"}`},
		{name: "helm missing", spec: `{"providers":["x"]}`, want: []string{"spec.helm", "Required value"}},
		{name: "chartSource", spec: `{"helm":{"chartSource":{"localSourceRef":{"kind":"GitRepository","name":"r"}}}}`, want: []string{"spec", ".spec.helm.chartSource is not supported for ClusterTemplates"}},
	})
	runCases(t, k0rdentAPI, "Credential", ns, []validationCase{
		{name: "valid", spec: `{"identityRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSClusterStaticIdentity","name":"id"},"description":"AWS"}`},
		{name: "no spec", spec: "", want: []string{"spec", "Required value"}},
		{name: "identityRef missing", spec: `{"description":"x"}`, want: []string{"spec.identityRef", "Required value"}},
	})
	requireTypedList(t, &k0rdentv1beta1.ClusterTemplateList{})
	requireTypedList(t, &k0rdentv1beta1.CredentialList{})

	t.Run("credential region immutable, ready defaults to false", func(t *testing.T) {
		mustCreate(t, newObject(t, k0rdentAPI, "Credential", ns, "regional", `{"identityRef":{"kind":"Secret","name":"s"},"region":"eu"}`))
		err := updateField(t, k0rdentAPI, "Credential", ns, "regional", "us", "spec", "region")
		requireInvalid(t, err, "spec.region", "Region is immutable")

		if err := updateStatus(t, k0rdentAPI, "Credential", ns, "regional", `{"conditions":[`+condition+`]}`); err != nil {
			t.Fatalf("status without ready rejected: %v", err)
		}
		c := &k0rdentv1beta1.Credential{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "regional"}, c); err != nil {
			t.Fatalf("reading typed: %v", err)
		}
		if c.Status.Ready {
			t.Errorf("status.ready = true, want the default false")
		}
		if _, found := get(t, k0rdentAPI, "Credential", ns, "regional").Object["status"].(map[string]any)["ready"]; !found {
			t.Errorf("status.ready was not defaulted")
		}
	})
}
