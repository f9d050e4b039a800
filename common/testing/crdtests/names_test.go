package crdtests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// crdNames is what one CRD must declare.
type crdNames struct {
	group, kind, plural string
	scope               apiextensionsv1.ResourceScope
	shortNames          []string
	categories          []string
	columns             []string
}

var wantCRDs = []crdNames{
	{group: "infra.exalsius.ai", kind: "Colony", plural: "colonies", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"col"}, categories: []string{"exalsius"}, columns: []string{"Phase", "Ready", "Total", "GPUs Free", "GPUs Total", "Age"}},
	{group: "workspaces.exalsius.ai", kind: "WorkspaceClass", plural: "workspaceclasses", scope: apiextensionsv1.ClusterScoped,
		shortNames: []string{"wsc"}, categories: []string{"exalsius"}, columns: []string{"Display Name", "Template", "Valid", "In Use", "Age"}},
	{group: "workspaces.exalsius.ai", kind: "WorkspaceDeployment", plural: "workspacedeployments", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"wsd"}, categories: []string{"exalsius"}, columns: []string{"Class", "Cluster", "Placement", "Priority", "Phase", "Ready", "Reason", "GPUs", "URL", "Age"}},
	{group: "workspaces.exalsius.ai", kind: "WorkspaceQuota", plural: "workspacequotas", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"wsq"}, categories: []string{"exalsius"}, columns: []string{"Used", "Waiting", "MaxPriority", "Age"}},
	// The k0rdent mirror: names and scopes of KCM's CRDs.
	{group: "k0rdent.mirantis.com", kind: "ClusterDeployment", plural: "clusterdeployments", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"clusterd", "cld"}},
	{group: "k0rdent.mirantis.com", kind: "ServiceSet", plural: "servicesets", scope: apiextensionsv1.NamespaceScoped},
	{group: "k0rdent.mirantis.com", kind: "ServiceTemplate", plural: "servicetemplates", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"svctmpl"}},
	{group: "k0rdent.mirantis.com", kind: "ClusterTemplate", plural: "clustertemplates", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"clustertmpl"}},
	{group: "k0rdent.mirantis.com", kind: "Credential", plural: "credentials", scope: apiextensionsv1.NamespaceScoped,
		shortNames: []string{"cred"}},
}

// TestCRDNames checks, on the installed CRD objects, the group, kind, plural, scope, short names,
// categories, printer columns, the single served and stored version and the status subresource.
func TestCRDNames(t *testing.T) {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(mgmt.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("building a client for CRDs: %v", err)
	}
	for _, want := range wantCRDs {
		t.Run(want.kind, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: want.plural + "." + want.group}, crd); err != nil {
				t.Fatalf("reading the CRD: %v", err)
			}
			n := crd.Spec.Names
			if n.Kind != want.kind || n.Plural != want.plural || crd.Spec.Scope != want.scope {
				t.Errorf("kind/plural/scope = %s/%s/%s, want %s/%s/%s", n.Kind, n.Plural, crd.Spec.Scope, want.kind, want.plural, want.scope)
			}
			if !slices.Equal(n.ShortNames, want.shortNames) {
				t.Errorf("shortNames = %v, want %v", n.ShortNames, want.shortNames)
			}
			if !slices.Equal(n.Categories, want.categories) {
				t.Errorf("categories = %v, want %v", n.Categories, want.categories)
			}
			if len(crd.Spec.Versions) != 1 || !crd.Spec.Versions[0].Served || !crd.Spec.Versions[0].Storage {
				t.Fatalf("want one served and stored version, got %+v", crd.Spec.Versions)
			}
			v := crd.Spec.Versions[0]
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("no status subresource")
			}
			if want.columns != nil {
				var got []string
				for _, col := range v.AdditionalPrinterColumns {
					got = append(got, col.Name)
				}
				if !slices.Equal(got, want.columns) {
					t.Errorf("printer columns = %v, want %v", got, want.columns)
				}
			}
		})
	}
}

// TestExalsiusCategory: discovery puts exactly the three exalsius kinds in the `exalsius` category,
// which is what `kubectl get exalsius` expands.
func TestExalsiusCategory(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var got []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			if slices.Contains(r.Categories, "exalsius") {
				got = append(got, r.Name)
			}
		}
	}
	slices.Sort(got)
	want := []string{"colonies", "workspaceclasses", "workspacedeployments", "workspacequotas"}
	if !slices.Equal(got, want) {
		t.Errorf("resources in category exalsius = %v, want %v", got, want)
	}
}

// TestKubectl runs kubectl against the server: `kubectl get exalsius` lists one object of each kind,
// and `kubectl get wsd` prints the WorkspaceDeployment columns.
func TestKubectl(t *testing.T) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is missing from KUBEBUILDER_ASSETS (%v): run `make tools`", err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, mgmt.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, "crd-kubectl")
	mustCreate(t, newObject(t, infraAPI, "Colony", ns, "kubectl-colony", colonySpec("a")))
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceClass", "", "kubectl-class", wsc("")))
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceDeployment", ns, "kubectl-ws", wsd("")))

	// A discovery cache of its own: the shared ~/.kube/cache may hold another test server's discovery
	// for the same host and port, without the kinds this one serves.
	cacheDir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cacheDir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	out := run("get", "exalsius", "-n", ns, "-o", "name")
	for _, want := range []string{
		"colony.infra.exalsius.ai/kubectl-colony",
		"workspaceclass.workspaces.exalsius.ai/kubectl-class",
		"workspacedeployment.workspaces.exalsius.ai/kubectl-ws",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get exalsius does not list %s:\n%s", want, out)
		}
	}

	header := strings.Fields(strings.SplitN(run("get", "wsd", "-n", ns), "\n", 2)[0])
	if want := []string{"NAME", "CLASS", "CLUSTER", "PHASE", "READY", "REASON", "GPUS", "URL", "AGE"}; !slices.Equal(header, want) {
		t.Errorf("kubectl get wsd columns = %v, want %v", header, want)
	}
	wide := strings.Fields(strings.SplitN(run("get", "wsd", "-n", ns, "-o", "wide"), "\n", 2)[0])
	if want := []string{"NAME", "CLASS", "CLUSTER", "PLACEMENT", "PRIORITY", "PHASE", "READY", "REASON", "GPUS", "URL", "AGE"}; !slices.Equal(wide, want) {
		t.Errorf("kubectl get wsd -o wide columns = %v, want %v", wide, want)
	}
}
