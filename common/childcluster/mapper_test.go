package childcluster

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// pathRecorder records the paths of the requests it carries.
type pathRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	paths []string
}

func (p *pathRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, r.URL.Path)
	p.mu.Unlock()
	return p.next.RoundTrip(r)
}

// take returns the paths recorded since the last take.
func (p *pathRecorder) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.paths
	p.paths = nil
	return out
}

// widgetCRD is a CRD of the test group, namespaced, served at the given versions (the first stored).
func widgetCRD(kind, plural string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".mapper.exalsius.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "mapper.exalsius.test",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}})
	}
	return crd
}

// TestVersionMapperReadsOnlyWhatItIsAskedFor: a child client's mapper maps a kind from the discovery
// document of the group version asked for (one small request, kept), not from the whole server's;
// a group version the child does not serve is a no-match error and is asked again, so a CRD installed
// since is found; a kind added to a kept group version is found; the first served of the versions
// asked for wins; a kind asked for without a version is the fallback's.
func TestVersionMapperReadsOnlyWhatItIsAskedFor(t *testing.T) {
	child := startChild(t, "mapper")
	hc, err := rest.HTTPClientFor(child.Config)
	if err != nil {
		t.Fatal(err)
	}
	rec := &pathRecorder{next: hc.Transport}
	hc = &http.Client{Transport: rec}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(child.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	fallback, err := apiutil.NewDynamicRESTMapper(child.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	m := newVersionMapper(disc, fallback)

	expect := func(gk schema.GroupKind, versions []string, want schema.GroupVersionResource, scope meta.RESTScopeName) {
		t.Helper()
		got, err := m.RESTMapping(gk, versions...)
		if err != nil {
			t.Fatalf("RESTMapping(%v, %v): %v", gk, versions, err)
		}
		if got.Resource != want || got.GroupVersionKind != want.GroupVersion().WithKind(gk.Kind) || got.Scope.Name() != scope {
			t.Fatalf("RESTMapping(%v, %v) = %v %v %v, want %v %s", gk, versions, got.Resource, got.GroupVersionKind, got.Scope.Name(), want, scope)
		}
	}
	expectPaths := func(what string, want ...string) {
		t.Helper()
		if got := rec.take(); !slices.Equal(got, want) {
			t.Fatalf("%s: requests %v, want %v", what, got, want)
		}
	}

	expect(schema.GroupKind{Kind: "Namespace"}, []string{"v1"}, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, meta.RESTScopeNameRoot)
	expectPaths("the first core kind", "/api/v1")
	expect(schema.GroupKind{Kind: "ResourceQuota"}, []string{"v1"}, schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, meta.RESTScopeNameNamespace)
	expect(schema.GroupKind{Kind: "Endpoints"}, []string{"v1"}, schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, meta.RESTScopeNameNamespace)
	expectPaths("more core kinds")
	expect(schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"}, []string{"v1"},
		schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, meta.RESTScopeNameNamespace)
	expectPaths("a kind of another group", "/apis/networking.k8s.io/v1")

	widget := schema.GroupKind{Group: "mapper.exalsius.test", Kind: "Widget"}
	for range 2 {
		if _, err := m.RESTMapping(widget, "v1"); !meta.IsNoMatchError(err) {
			t.Fatalf("RESTMapping of a kind the child does not serve: %v, want a no-match error", err)
		}
		expectPaths("a group the child does not serve, asked again", "/apis/mapper.exalsius.test/v1")
	}
	if _, err := envtest.InstallCRDs(child.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD("Widget", "widgets", "v1")}}); err != nil {
		t.Fatal(err)
	}
	rec.take()
	expect(widget, []string{"v1"}, schema.GroupVersionResource{Group: widget.Group, Version: "v1", Resource: "widgets"}, meta.RESTScopeNameNamespace)
	expectPaths("a kind installed since", "/apis/mapper.exalsius.test/v1")

	gadget := schema.GroupKind{Group: widget.Group, Kind: "Gadget"}
	if _, err := envtest.InstallCRDs(child.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD("Gadget", "gadgets", "v1alpha2", "v1")}}); err != nil {
		t.Fatal(err)
	}
	rec.take()
	expect(gadget, []string{"v1"}, schema.GroupVersionResource{Group: widget.Group, Version: "v1", Resource: "gadgets"}, meta.RESTScopeNameNamespace)
	expectPaths("a kind added to a kept group version", "/apis/mapper.exalsius.test/v1")
	expect(gadget, []string{"v1alpha2", "v1"}, schema.GroupVersionResource{Group: widget.Group, Version: "v1alpha2", Resource: "gadgets"}, meta.RESTScopeNameNamespace)
	expect(widget, []string{"v1alpha2", "v1"}, schema.GroupVersionResource{Group: widget.Group, Version: "v1", Resource: "widgets"}, meta.RESTScopeNameNamespace)
	all, err := m.RESTMappings(gadget, "v1", "v1alpha2")
	if err != nil || len(all) != 2 || all[0].GroupVersionKind.Version != "v1" || all[1].GroupVersionKind.Version != "v1alpha2" {
		t.Fatalf("RESTMappings(%v, v1, v1alpha2) = %v, %v; want v1 and v1alpha2", gadget, all, err)
	}
	rec.take()

	got, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil || got.Resource.Resource != "deployments" {
		t.Fatalf("RESTMapping without a version = %v, %v; want the fallback's deployments", got, err)
	}
	if paths := rec.take(); !slices.Contains(paths, "/apis") {
		t.Fatalf("a kind without a version did not go to the fallback's discovery: requests %v", paths)
	}
}

// TestChildClientsUseTheVersionMapper: the client a Cluster hands out maps kinds with the version
// mapper.
func TestChildClientsUseTheVersionMapper(t *testing.T) {
	ctx := t.Context()
	child := startChild(t, "mapper-client")
	key := types.NamespacedName{Namespace: "mapper", Name: "client"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	cl, err := newCache(t, Options{}).Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cl.Client().RESTMapper().(*versionMapper); !ok {
		t.Fatalf("the child client's mapper is a %T", cl.Client().RESTMapper())
	}
	if err := cl.Client().Get(ctx, types.NamespacedName{Name: "default"}, &corev1.Namespace{}); err != nil {
		t.Fatalf("reading a Namespace through the child client: %v", err)
	}
}
