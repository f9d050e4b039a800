package childtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// SveltosCRD is Sveltos' real SveltosCluster CRD, in the shared test data found in a parent folder
// of the repository (a user's clone has none: adopted clusters are then not tested).
const SveltosCRD = "shared/sveltos-crds/v1.1.1/lib.projectsveltos.io_sveltosclusters.yaml"

// FindShared looks for rel in the parent folders of the working directory; "" when there is none.
func FindShared(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// RegionCRD is a minimal CRD of k0rdent's Region (cluster-scoped, free-form spec: only
// spec.kubeConfig and spec.clusterDeployment are read by common/childcluster).
func RegionCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "regions.k0rdent.mirantis.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "k0rdent.mirantis.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "regions", Singular: "region", Kind: "Region", ListKind: "RegionList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

// InstallKindCRDs installs, on the API server of cfg, the SveltosCluster CRD (when the shared copy
// exists) and RegionCRD, and waits until they are served. It reports whether SveltosCluster is
// installed; why not is in the returned note.
func InstallKindCRDs(ctx context.Context, cfg *rest.Config, wait time.Duration) (haveSveltos bool, note string, err error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	if data, rerr := os.ReadFile(FindShared(SveltosCRD)); rerr == nil {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return false, "", fmt.Errorf("decoding %s: %w", SveltosCRD, err)
		}
		crds = append(crds, crd)
		haveSveltos = true
	} else {
		note = fmt.Sprintf("no SveltosCluster CRD at %s (shared test data): adopted clusters are not tested", SveltosCRD)
	}
	crds = append(crds, RegionCRD())
	sch := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(sch); err != nil {
		return false, "", err
	}
	ext, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return false, "", err
	}
	for _, crd := range crds {
		if err := ext.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, "", fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	if err := envtest.WaitForCRDs(cfg, crds, envtest.CRDInstallOptions{MaxTime: wait, PollInterval: 100 * time.Millisecond}); err != nil {
		return false, "", err
	}
	return haveSveltos, note, nil
}
