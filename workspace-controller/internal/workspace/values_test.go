package workspace

import (
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func TestMergeResourcesFieldByField(t *testing.T) {
	one, four := int32(1), int32(4)
	def := workspacesv1.DefaultResources{Replicas: &four, PerReplica: &workspacesv1.PerReplicaResources{
		CPU: qty("1"), Memory: qty("4Gi"), GPUCount: &one, GPUVendor: workspacesv1.GPUVendorAMD,
	}}
	got := MergeResources(def, &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{
		Memory: qty("16Gi"), GPUNodeSelector: map[string]string{"pool": "x"},
	}})
	if got.Replicas != 4 || got.PerReplica.CPU.String() != "1" || got.PerReplica.Memory.String() != "16Gi" ||
		*got.PerReplica.GPUCount != 1 || got.GPUResourceName != "amd.com/gpu" || !reflect.DeepEqual(got.NodeSelector, map[string]string{"pool": "x"}) {
		t.Errorf("merged %+v", got)
	}
	// The defaults are not modified.
	if def.PerReplica.Memory.String() != "4Gi" {
		t.Error("defaults changed")
	}
	none := MergeResources(workspacesv1.DefaultResources{}, nil)
	if none.Replicas != 1 || none.GPUResourceName != "" || none.NodeSelector != nil {
		t.Errorf("empty merge %+v", none)
	}
}

func TestNamesNeverCollideWithKCM(t *testing.T) {
	long := strings.Repeat("x", 60)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: long},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: strings.Repeat("c", 63)}}}
	ss := owned.ServiceSetName(ws)
	if len(ss) > 63 || ss == ws.Spec.ClusterDeploymentRef.Name {
		t.Errorf("ServiceSet name %q", ss)
	}
	if r := owned.ReleaseName(ws); len(r) > 53 {
		t.Errorf("release name %q longer than 53", r)
	}
	other := ws.DeepCopy()
	other.Spec.ClusterDeploymentRef.Namespace = "clusters"
	if owned.ServiceSetName(other) == ss {
		t.Error("a workspace from another namespace gets the same ServiceSet name")
	}
}
