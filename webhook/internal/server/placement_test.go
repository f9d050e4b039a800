package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestPlacementTargetAndPriority: a deployment naming a Colony is accepted and gets no
// clusterDeploymentRef; one naming two targets is refused by the CRD's rule; a priority above the
// namespace's WorkspaceQuota maxPriority (0 without one) is denied naming spec.priority.
func TestPlacementTargetAndPriority(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	ns := "placement"
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, mgmt.Client.Create(ctx, simpleClass("placement-class")))

	d := deployment(ns, "by-colony", "placement-class", nil)
	d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
	d.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet"}
	must(t, wclient.Create(ctx, d))
	got := &workspacesv1.WorkspaceDeployment{}
	must(t, mgmt.Client.Get(ctx, client.ObjectKeyFromObject(d), got))
	if got.Spec.ClusterDeploymentRef != (workspacesv1.ClusterDeploymentRef{}) {
		t.Errorf("a deployment placed by Colony got a clusterDeploymentRef: %+v", got.Spec.ClusterDeploymentRef)
	}
	moved := got.DeepCopy()
	moved.Spec.ColonyRef.Name = "other"
	if err := mgmt.Client.Update(ctx, moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "colonyRef") {
		t.Errorf("want the Colony change refused naming colonyRef, got %v", err)
	}

	two := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "workspaces.exalsius.ai/v1", "kind": "WorkspaceDeployment",
		"metadata": map[string]any{"name": "two-targets", "namespace": ns},
		"spec": map[string]any{"workspaceClassRef": "placement-class", "clusterDeploymentRef": map[string]any{"name": "gpu-cluster"},
			"clusterSelector": map[string]any{"matchLabels": map[string]any{"pool": "gpu"}}},
	}}
	err := mgmt.Client.Create(ctx, two)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "exactly one of spec.clusterDeploymentRef, spec.colonyRef and spec.clusterSelector") {
		t.Errorf("want two targets refused, got %v", err)
	}

	high := deployment(ns, "high", "placement-class", nil)
	high.Spec.Priority = 5
	denied(t, wclient.Create(ctx, high), "spec.priority")

	q := &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(5))}}
	must(t, mgmt.Client.Create(ctx, q))
	// The webhook reads quotas from its cache: wait until it has this one.
	deadline := time.Now().Add(30 * time.Second)
	for err = wclient.Create(ctx, high.DeepCopy()); err != nil && time.Now().Before(deadline); err = wclient.Create(ctx, high.DeepCopy()) {
		time.Sleep(100 * time.Millisecond)
	}
	must(t, err)

	higher := deployment(ns, "higher", "placement-class", nil)
	higher.Spec.Priority = 6
	err = wclient.Create(ctx, higher)
	denied(t, err, "spec.priority")
	if !strings.Contains(err.Error(), "6 is above 5") {
		t.Errorf("the denial does not name the cap: %v", err)
	}
}

// TestSharedPlacementNamespaces: colonyRef.namespace and clusterSelectorNamespace may name a
// namespace that grants the workspace's (a platform team's shared fleet); any other is refused
// naming the field, clusterSelectorNamespace needs clusterSelector, and neither changes afterwards.
func TestSharedPlacementNamespaces(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-platform",
		Annotations: map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: "fleet-tenant"}}}))
	for _, n := range []string{"fleet-tenant", "fleet-stranger"} {
		must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	must(t, mgmt.Client.Create(ctx, simpleClass("shared-fleet-class")))
	byColony := func(ns, name string) *workspacesv1.WorkspaceDeployment {
		d := deployment(ns, name, "shared-fleet-class", nil)
		d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		d.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet", Namespace: "fleet-platform"}
		return d
	}
	bySelector := func(ns, name string) *workspacesv1.WorkspaceDeployment {
		d := deployment(ns, name, "shared-fleet-class", nil)
		d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		d.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}
		d.Spec.ClusterSelectorNamespace = "fleet-platform"
		return d
	}
	// The webhook reads namespaces from its cache: wait until it has the grant.
	granted := byColony("fleet-tenant", "by-colony")
	deadline := time.Now().Add(30 * time.Second)
	err := wclient.Create(ctx, granted.DeepCopy())
	for ; err != nil && time.Now().Before(deadline); err = wclient.Create(ctx, granted.DeepCopy()) {
		time.Sleep(100 * time.Millisecond)
	}
	must(t, err)
	must(t, wclient.Create(ctx, bySelector("fleet-tenant", "by-selector")))

	denied(t, wclient.Create(ctx, byColony("fleet-stranger", "by-colony")), "spec.colonyRef.namespace")
	denied(t, wclient.Create(ctx, bySelector("fleet-stranger", "by-selector")), "spec.clusterSelectorNamespace")

	alone := deployment("fleet-tenant", "alone", "shared-fleet-class", nil)
	alone.Spec.ClusterSelectorNamespace = "fleet-platform"
	if err := mgmt.Client.Create(ctx, alone); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "clusterSelectorNamespace is only used with spec.clusterSelector") {
		t.Errorf("want clusterSelectorNamespace without clusterSelector refused, got %v", err)
	}

	got := &workspacesv1.WorkspaceDeployment{}
	must(t, mgmt.Client.Get(ctx, client.ObjectKeyFromObject(granted), got))
	got.Spec.ColonyRef.Namespace = "fleet-tenant"
	if err := wclient.Update(ctx, got); err == nil || !strings.Contains(err.Error(), "colonyRef") {
		t.Errorf("want the Colony's namespace change refused naming colonyRef, got %v", err)
	}
	must(t, mgmt.Client.Get(ctx, types.NamespacedName{Namespace: "fleet-tenant", Name: "by-selector"}, got))
	got.Spec.ClusterSelectorNamespace = "fleet-tenant"
	if err := wclient.Update(ctx, got); err == nil || !strings.Contains(err.Error(), "clusterSelectorNamespace") {
		t.Errorf("want the selector's namespace change refused naming clusterSelectorNamespace, got %v", err)
	}
}
