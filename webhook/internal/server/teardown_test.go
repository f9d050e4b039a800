package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// deadLabel selects the objects the unreachable copy of the webhook configurations applies to.
const deadLabel = "webhook-test.exalsius.ai/dead"

// installDeadWebhook installs the generated configurations (config/webhook/manifests.yaml, the ones
// the chart ships) renamed, pointed at a port nobody listens on, with failurePolicy as generated and
// an objectSelector for deadLabel: the webhook is down for those objects only.
func installDeadWebhook(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	url := "https://127.0.0.1:1/dead"
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{deadLabel: "true"}}
	ctx := context.Background()
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			t.Fatal(err)
		}
		var obj client.Object
		switch probe.Kind {
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			must(t, yaml.Unmarshal([]byte(doc), v))
			for i := range v.Webhooks {
				v.Webhooks[i].ClientConfig = admissionv1.WebhookClientConfig{URL: &url}
				v.Webhooks[i].ObjectSelector = sel
			}
			obj = v
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			must(t, yaml.Unmarshal([]byte(doc), m))
			for i := range m.Webhooks {
				m.Webhooks[i].ClientConfig = admissionv1.WebhookClientConfig{URL: &url}
				m.Webhooks[i].ObjectSelector = sel
			}
			obj = m
		default:
			continue
		}
		obj.SetName("dead-" + obj.GetName())
		obj.SetResourceVersion("")
		must(t, mgmt.Client.Create(ctx, obj))
		t.Cleanup(func() { _ = mgmt.Client.Delete(context.Background(), obj) })
	}
}

// TestTeardownNeedsNoWebhook: with the webhook unreachable and failurePolicy Fail, a spec change is
// refused (the API server does call it), but metadata-only updates, finalizer removal from deleting
// objects, and deleting a WorkspaceClass go through: the matchConditions and the class deletion
// check's failurePolicy Ignore keep the webhook out of teardown.
func TestTeardownNeedsNoWebhook(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	labels := map[string]string{deadLabel: "true"}
	d := deployment("corpus", "teardown", corpusClass, validValues())
	d.Finalizers = []string{workspacesv1.WorkspaceFinalizer}
	must(t, mgmt.Client.Create(ctx, d))
	col := &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Namespace: "corpus", Name: "teardown", Finalizers: []string{"infra.exalsius.ai/test"}, Labels: labels},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{{
			ClusterName: "gpu-eu", ClusterDeploymentSpec: *jsonOf(map[string]any{"template": "hcp-0-1-0", "credential": "aws", "config": map[string]any{}}),
		}}},
	}
	must(t, mgmt.Client.Create(ctx, col))
	wc := simpleClass("teardown-1-0-0")
	wc.Labels = labels
	must(t, mgmt.Client.Create(ctx, wc))
	// Label the deployment after creating it, so that its creation went through the live webhook.
	patchLabels(t, d, labels)

	installDeadWebhook(t)
	// Wait until the API server calls the dead webhook: a spec change is refused.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &workspacesv1.WorkspaceDeployment{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return false, err
		}
		cur.Spec.Suspend = !cur.Spec.Suspend
		err := mgmt.Client.Update(ctx, cur)
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	})
	if err != nil {
		t.Fatalf("the unreachable webhook was never called for a spec change: %v", err)
	}

	// Metadata-only updates pass.
	patchAnnotation(t, d)
	patchAnnotation(t, col)
	// Deleting and removing the finalizers pass.
	must(t, mgmt.Client.Delete(ctx, d))
	must(t, mgmt.Client.Delete(ctx, col))
	removeFinalizers(t, d)
	removeFinalizers(t, col)
	// Deleting a class passes (its in-use check fails open; the workspace-controller's finalizer
	// is what protects a class in use).
	must(t, mgmt.Client.Delete(ctx, wc))
}

func patchLabels(t *testing.T, obj client.Object, labels map[string]string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkOf(t, obj))
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	patch := client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{"metadata": map[string]any{"labels": labels}}))
	must(t, mgmt.Client.Patch(context.Background(), u, patch))
}

func patchAnnotation(t *testing.T, obj client.Object) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkOf(t, obj))
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	patch := client.RawPatch("application/merge-patch+json", mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"example.com/touched": "yes"}}}))
	if err := mgmt.Client.Patch(context.Background(), u, patch); err != nil {
		t.Fatalf("a metadata-only update of %s needed the webhook: %v", obj.GetName(), err)
	}
}

func removeFinalizers(t *testing.T, obj client.Object) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkOf(t, obj))
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
	if err := mgmt.Client.Patch(context.Background(), u, patch); err != nil {
		t.Fatalf("removing the finalizers of deleting %s needed the webhook: %v", obj.GetName(), err)
	}
}

func gvkOf(t *testing.T, obj client.Object) schema.GroupVersionKind {
	t.Helper()
	g, err := mgmt.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustJSON(v any) []byte { return jsonOf(v).Raw }

// TestQuantitySpellingIsKept: the mutating webhook patches only the field it defaults, so a
// quantity keeps the user's spelling (GitOps tools compare it with the manifest).
func TestQuantitySpellingIsKept(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": workspacesv1.GroupVersion.String(), "kind": "WorkspaceDeployment",
		"metadata": map[string]any{"namespace": "corpus", "name": "spelling"},
		"spec": map[string]any{
			"workspaceClassRef":    corpusClass,
			"clusterDeploymentRef": map[string]any{"name": "gpu-cluster"},
			"values":               validValues(),
			"resources":            map[string]any{"perReplica": map[string]any{"cpu": "1000m", "memory": "1024Mi"}},
		},
	}}
	must(t, mgmt.Client.Create(ctx, u))
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	must(t, mgmt.Client.Get(ctx, client.ObjectKeyFromObject(u), got))
	cpu, _, _ := unstructured.NestedString(got.Object, "spec", "resources", "perReplica", "cpu")
	mem, _, _ := unstructured.NestedString(got.Object, "spec", "resources", "perReplica", "memory")
	ns, _, _ := unstructured.NestedString(got.Object, "spec", "clusterDeploymentRef", "namespace")
	if cpu != "1000m" || mem != "1024Mi" {
		t.Errorf("the webhook respelled the quantities: cpu %q memory %q", cpu, mem)
	}
	if ns != "corpus" {
		t.Errorf("clusterDeploymentRef.namespace not defaulted: %q", ns)
	}
	// An update that drops the defaulted field gets it back, and keeps the spelling too.
	must(t, unstructured.SetNestedField(got.Object, "", "spec", "clusterDeploymentRef", "namespace"))
	unstructured.RemoveNestedField(got.Object, "spec", "clusterDeploymentRef", "namespace")
	must(t, unstructured.SetNestedField(got.Object, true, "spec", "suspend"))
	must(t, mgmt.Client.Update(ctx, got))
	cpu, _, _ = unstructured.NestedString(got.Object, "spec", "resources", "perReplica", "cpu")
	ns, _, _ = unstructured.NestedString(got.Object, "spec", "clusterDeploymentRef", "namespace")
	if cpu != "1000m" || ns != "corpus" {
		t.Errorf("after an update: cpu %q, namespace %q", cpu, ns)
	}

}

// TestNoNewDeploymentOfADeletingClass: a class whose deletion waits on its finalizer takes no new
// WorkspaceDeployments (they would keep it alive after its deletion was asked for).
func TestNoNewDeploymentOfADeletingClass(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	wc := simpleClass("deleting-1-0-0")
	wc.Finalizers = []string{"example.com/hold"}
	must(t, mgmt.Client.Create(ctx, wc))
	must(t, mgmt.Client.Delete(ctx, wc))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// A dry run (the webhook is called, nothing is stored): the webhook's class cache may not
		// have seen the deletion yet, so wait for the denial.
		err := mgmt.Client.Create(ctx, deployment("corpus", "late-user", wc.Name, nil), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "is being deleted"), nil
	})
	if err != nil {
		t.Fatalf("want the deployment of a deleting class denied: %v", err)
	}
	removeFinalizers(t, wc)
}
