package routing_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
)

// v1alpha2OnlyTCPRouteCRD is the TCPRoute CRD as Gateway API 1.4 and 1.5 ship it: v1alpha2 alone.
func v1alpha2OnlyTCPRouteCRD(t *testing.T, dir string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "gateway.networking.k8s.io_tcproutes.yaml"))
	must(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	must(t, yaml.Unmarshal(raw, crd))
	var keep []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha2" {
			v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, true, false, nil
			keep = append(keep, v)
		}
	}
	if len(keep) != 1 {
		t.Fatalf("no v1alpha2 in the TCPRoute CRD of %s", dir)
	}
	crd.Spec.Versions = keep
	return crd
}

// TestTCPRouteV1alpha2OnOlderRegional: a regional cluster whose Gateway API serves TCPRoute only as
// v1alpha2 (1.4, 1.5) gets its SSH route in that version, found through discovery; deletion removes it.
func TestTCPRouteV1alpha2OnOlderRegional(t *testing.T) {
	old, err := testenv.StartChild("regional-old")
	must(t, err)
	t.Cleanup(func() { _ = old.Stop() })
	dir, err := gatewayCRDDir()
	must(t, err)
	_, err = envtest.InstallCRDs(old.Config, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(dir, "gateway.networking.k8s.io_gateways.yaml"), filepath.Join(dir, "gateway.networking.k8s.io_httproutes.yaml")},
		CRDs:               []*apiextensionsv1.CustomResourceDefinition{v1alpha2OnlyTCPRouteCRD(t, dir)},
		ErrorIfPathMissing: true,
	})
	must(t, err)
	oc, err := client.New(old.Config, client.Options{Scheme: routing.Scheme()})
	must(t, err)
	must(t, oc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwNamespace}}))
	must(t, oc.Create(ctxT(t), tenantGateway()))

	ns := newNamespace(t)
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, "regional-old", old.Kubeconfig))
	class := createClass(t, []workspacesv1.AccessEndpoint{sshEP("ssh")}, ns)
	cd := createCluster(t, ns, map[string]string{routing.RegionalClusterNameLabel: "regional-old"})
	wsName := name("old")
	key := runningWorkspace(t, ns, wsName, class, cd)
	waitWS(t, key, "a port on the older regional cluster", func(ws *workspacesv1.WorkspaceDeployment) error {
		if a := access(ws, "ssh"); !strings.HasPrefix(a.URL, "ssh://"+domain+":22") {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	rns := routing.RouteNamespace(wsName, ns, false)
	tr := &gwv1alpha2.TCPRoute{}
	must(t, oc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "ssh"}, tr))
	if len(tr.Spec.ParentRefs) != 1 || tr.Spec.ParentRefs[0].SectionName == nil || !strings.HasPrefix(string(*tr.Spec.ParentRefs[0].SectionName), "ssh-") ||
		len(tr.Spec.Rules) != 1 || string(tr.Spec.Rules[0].BackendRefs[0].Name) != wsName+"-ssh" {
		t.Errorf("TCPRoute v1alpha2 %s/ssh: %+v", rns, tr.Spec)
	}
	deleteWorkspace(t, key)
	eventually(t, "the v1alpha2 TCPRoute removed", func() error {
		err := oc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "ssh"}, &gwv1alpha2.TCPRoute{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}
