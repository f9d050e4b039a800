package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func validColony() *infrav1.Colony {
	return &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "team-a"},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{
			{ClusterName: "gpu-eu", ClusterDeploymentSpec: *raw(map[string]any{"template": "hcp-0-1-0", "credential": "aws", "config": map[string]any{}, "custom": 1}),
				ClusterLabels: map[string]string{"tier": "gpu"}, ClusterAnnotations: map[string]string{"example.com/note": "anything goes"}},
			{ClusterName: "gpu-us", ClusterDeploymentSpec: *raw(map[string]any{"template": "hcp-0-1-0", "dryRun": false})},
		}},
	}
}

func TestColonyValid(t *testing.T) {
	expectPaths(t, Colony(validColony()))
}

func TestColonyRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*infrav1.Colony)
		paths  []string
	}{
		{"duplicate cluster", func(c *infrav1.Colony) { c.Spec.ColonyClusters[1].ClusterName = "gpu-eu" }, []string{"spec.colonyClusters[1].clusterName"}},
		{"cluster name not a label", func(c *infrav1.Colony) { c.Spec.ColonyClusters[0].ClusterName = "GPU" }, []string{"spec.colonyClusters[0].clusterName"}},
		{"ClusterDeployment name not a label", func(c *infrav1.Colony) { c.Name = "lab.example" }, []string{"spec.colonyClusters[0].clusterName", "spec.colonyClusters[1].clusterName"}},
		// An entry without a spec is accepted, as upstream accepts it (it makes no ClusterDeployment).
		{"no spec", func(c *infrav1.Colony) { c.Spec.ColonyClusters[0].ClusterDeploymentSpec = apiextensionsv1.JSON{} }, nil},
		{"null spec, bad name", func(c *infrav1.Colony) {
			c.Spec.ColonyClusters[0].ClusterDeploymentSpec = apiextensionsv1.JSON{Raw: []byte("null")}
			c.Spec.ColonyClusters[0].ClusterName = "GPU"
		}, []string{"spec.colonyClusters[0].clusterName"}},
		{"spec not an object", func(c *infrav1.Colony) { c.Spec.ColonyClusters[0].ClusterDeploymentSpec = *raw("x") }, []string{"spec.colonyClusters[0].clusterDeploymentSpec"}},
		{"no template", func(c *infrav1.Colony) { c.Spec.ColonyClusters[0].ClusterDeploymentSpec = *raw(map[string]any{}) }, []string{"spec.colonyClusters[0].clusterDeploymentSpec.template"}},
		{"template not a string", func(c *infrav1.Colony) {
			c.Spec.ColonyClusters[0].ClusterDeploymentSpec = *raw(map[string]any{"template": 3})
		}, []string{"spec.colonyClusters[0].clusterDeploymentSpec.template"}},
		{"config not an object", func(c *infrav1.Colony) {
			c.Spec.ColonyClusters[1].ClusterDeploymentSpec = *raw(map[string]any{"template": "t", "config": "x"})
		}, []string{"spec.colonyClusters[1].clusterDeploymentSpec.config"}},
		{"label key", func(c *infrav1.Colony) { c.Spec.ColonyClusters[0].ClusterLabels = map[string]string{"bad key": "x"} }, []string{"spec.colonyClusters[0].clusterLabels"}},
		{"reserved label", func(c *infrav1.Colony) {
			c.Spec.ColonyClusters[0].ClusterLabels = map[string]string{infrav1.ColonyLabel: "x"}
		}, []string{"spec.colonyClusters[0].clusterLabels[infra.exalsius.ai/colony]"}},
		{"annotation key", func(c *infrav1.Colony) { c.Spec.ColonyClusters[0].ClusterAnnotations = map[string]string{"a b": "x"} }, []string{"spec.colonyClusters[0].clusterAnnotations"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validColony()
			tc.mutate(c)
			expectPaths(t, Colony(c), tc.paths...)
		})
	}
}

func TestColonyCollisions(t *testing.T) {
	mk := func(name string, clusters ...string) infrav1.Colony {
		c := infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		for _, cl := range clusters {
			c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, infrav1.ColonyCluster{ClusterName: cl})
		}
		return c
	}
	others := []infrav1.Colony{mk("a", "b", "b-c"), mk("x-y")}
	// Colony a-b: its Secret a-b-kubeconfig is that of a's cluster b; its cluster c makes a-b-c, a's b-c too.
	c := mk("a-b", "c", "d")
	expectPaths(t, ColonyCollisions(&c, others), "metadata.name", "spec.colonyClusters[0].clusterName")
	// Colony x's cluster y makes x-y, whose kubeconfig Secret is Colony x-y's.
	c = mk("x", "y", "z")
	expectPaths(t, ColonyCollisions(&c, others), "spec.colonyClusters[0].clusterName")
	// No clash; and a Colony never clashes with itself (an update lists it too).
	c = mk("a", "b", "b-c")
	expectPaths(t, ColonyCollisions(&c, others))
	c = mk("q", "b")
	expectPaths(t, ColonyCollisions(&c, others))
	// A Colony being deleted no longer reserves its names.
	gone := mk("a", "b")
	now := metav1.Now()
	gone.DeletionTimestamp = &now
	c = mk("a-b")
	expectPaths(t, ColonyCollisions(&c, []infrav1.Colony{gone}))
}

func TestColonyRegional(t *testing.T) {
	const nsLabel = "spec.colonyClusters[0].clusterLabels[" + k0rdentv1beta1.KOFRegionalClusterNamespaceLabel + "]"
	regionalIn := func(ns string) map[string]string {
		l := map[string]string{k0rdentv1beta1.KOFRegionalClusterNameLabel: "regional"}
		if ns != "" {
			l[k0rdentv1beta1.KOFRegionalClusterNamespaceLabel] = ns
		}
		return l
	}
	namespace := func(name, allow string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if allow != "" {
			n.Annotations = map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: allow}
		}
		return n
	}
	colony := func(labels map[string]string) *infrav1.Colony {
		c := validColony()
		c.Spec.ColonyClusters[0].ClusterLabels = labels
		return c
	}
	cases := []struct {
		name       string
		labels     map[string]string
		old        map[string]string // labels of entry 0 before an update; nil: a create
		namespaces []*corev1.Namespace
		lookups    []string
		paths      []string
	}{
		{"own namespace, implicit", regionalIn(""), nil, nil, nil, nil},
		{"own namespace, explicit", regionalIn("team-a"), nil, nil, nil, nil},
		{"namespace label alone names nothing", map[string]string{k0rdentv1beta1.KOFRegionalClusterNamespaceLabel: "team-b"}, nil, nil, nil, nil},
		{"no annotation", regionalIn("team-b"), nil, []*corev1.Namespace{namespace("team-b", "")}, []string{"team-b"}, []string{nsLabel}},
		{"not listed", regionalIn("team-b"), nil, []*corev1.Namespace{namespace("team-b", "team-c, team-ab")}, []string{"team-b"}, []string{nsLabel}},
		{"missing namespace", regionalIn("team-b"), nil, nil, []string{"team-b"}, []string{nsLabel}},
		{"not a namespace name", regionalIn("Team_B"), nil, nil, nil, []string{nsLabel}},
		{"listed", regionalIn("team-b"), nil, []*corev1.Namespace{namespace("team-b", "team-c, team-a")}, []string{"team-b"}, nil},
		{"wildcard", regionalIn("team-b"), nil, []*corev1.Namespace{namespace("team-b", "*")}, []string{"team-b"}, nil},
		{"update keeps an admitted reference", regionalIn("team-b"), regionalIn("team-b"), nil, nil, nil},
		{"update changes the reference", regionalIn("team-b"), regionalIn("team-c"), nil, []string{"team-b"}, []string{nsLabel}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := colony(tc.labels)
			var old *infrav1.Colony
			if tc.old != nil {
				old = colony(tc.old)
			}
			if got := ColonyRegionalNamespaces(c, old); strings.Join(got, ",") != strings.Join(tc.lookups, ",") {
				t.Errorf("lookups %v, want %v", got, tc.lookups)
			}
			nss := map[string]*corev1.Namespace{}
			for _, n := range tc.namespaces {
				nss[n.Name] = n
			}
			errs := ColonyRegional(c, old, nss)
			expectPaths(t, errs, tc.paths...)
			for _, e := range errs {
				if !strings.Contains(e.Error(), workspacesv1.AllowWorkspacesFromAnnotation) && !strings.Contains(e.Error(), "does not exist") {
					t.Errorf("the error names neither the annotation nor a missing namespace: %v", e)
				}
			}
		})
	}
}
