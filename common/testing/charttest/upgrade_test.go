package charttest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// previousChartRef is the commit of the previous chart version (main before the chart's 0.1.0
// release work); after a release, point it at the release tag. EXALSIUS_PREVIOUS_CHART_REF overrides it.
const previousChartRef = "d58a86b"

var crdNames = []string{"colonies.infra.exalsius.ai", "workspaceclasses.workspaces.exalsius.ai", "workspacedeployments.workspaces.exalsius.ai",
	"workspacequotas.workspaces.exalsius.ai"}

// previousChart extracts the chart at previousChartRef into a temporary folder, or skips when the
// clone lacks that commit (a shallow clone).
func previousChart(t *testing.T) string {
	t.Helper()
	ref := previousChartRef
	if r := os.Getenv("EXALSIUS_PREVIOUS_CHART_REF"); r != "" {
		ref = r
	}
	root := repoRoot(t)
	if err := exec.Command("git", "-C", root, "cat-file", "-e", ref+"^{commit}").Run(); err != nil {
		t.Skipf("the previous chart's commit %s is not in this clone (shallow?): skipping the upgrade from it", ref)
	}
	dir := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", ref, "charts/exalsius-operator")
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v", ref, err)
	}
	if err := untar.Wait(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "charts", "exalsius-operator")
}

// helmLive runs helm against the test API server.
func helmLive(t *testing.T, args ...string) (string, error) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, mgmt.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helmRaw(t, append(args, "--kubeconfig", kc)...)
	return string(out), err
}

// adoptCRDs does what docs/UPGRADE.md tells users to do with kubectl label/annotate: it hands the
// CRDs to the release.
func adoptCRDs(t *testing.T, release, namespace string) {
	t.Helper()
	for _, name := range crdNames {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		u.SetName(name)
		patch := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":"` +
			release + `","meta.helm.sh/release-namespace":"` + namespace + `"}}}`
		must(t, mgmt.Client.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", []byte(patch))))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// colonyExists creates a Colony (once) and reports whether it is still there.
func ensureColony(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	col := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infra.exalsius.ai/v1", "kind": "Colony",
		"metadata": map[string]any{"namespace": ns, "name": "survivor"},
		"spec": map[string]any{"colonyClusters": []any{map[string]any{
			"clusterName": "gpu-eu", "clusterDeploymentSpec": map[string]any{"template": "t", "credential": "c", "config": map[string]any{}},
		}}},
	}}
	if err := mgmt.Client.Create(ctx, col); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func colonySurvived(t *testing.T, ns string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("infra.exalsius.ai/v1")
	u.SetKind("Colony")
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "survivor"}, u); err != nil {
		t.Fatalf("the Colony did not survive: %v", err)
	}
}

// TestHelmUpgradeAndUninstall runs helm against a real API server whose CRDs were installed the way
// the upstream chart's crds/ folder installs them (plain, owned by no release):
//  1. the upstream layout: installing this chart fails until the CRDs are adopted as documented, then
//     succeeds, and the existing Colony survives;
//  2. the previous chart version: installed, then upgraded to this one;
//  3. uninstall: the CRDs (crds.keep) and the Colony stay.
func TestHelmUpgradeAndUninstall(t *testing.T) {
	const ns = "upgrade"
	ensureColony(t, "legacy")
	set := []string{"--set", "fullnameOverride=up"}

	t.Run("from the upstream layout", func(t *testing.T) {
		out, err := helmLive(t, append([]string{"install", "up", chartDir(t), "--namespace", ns, "--create-namespace"}, set...)...)
		if err == nil || !strings.Contains(err.Error(), "cannot be imported") {
			t.Fatalf("installing over unowned CRDs should be refused until they are adopted: %v %s", err, out)
		}
		adoptCRDs(t, "up", ns)
		out, err = helmLive(t, append([]string{"install", "up", chartDir(t), "--namespace", ns, "--create-namespace"}, set...)...)
		if err != nil {
			t.Fatalf("install after adopting the CRDs: %v %s", err, out)
		}
		// NOTES.txt tells the user what to do next.
		for _, want := range []string{"helm test up -n upgrade", "kubectl get clustertemplates,credentials,servicetemplates", "Before uninstalling", "docs/UPGRADE.md"} {
			if !strings.Contains(out, want) {
				t.Errorf("the install notes lack %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "WARNING") {
			t.Errorf("the notes warn about crds.keep=false by default:\n%s", out)
		}
		colonySurvived(t, "legacy")
		if out, err := helmLive(t, "uninstall", "up", "--namespace", ns); err != nil {
			t.Fatalf("uninstall: %v %s", err, out)
		}
		for _, name := range crdNames {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
				t.Fatalf("uninstall removed CRD %s: %v", name, err)
			}
		}
		colonySurvived(t, "legacy")
	})

	t.Run("notes warn when uninstalling deletes the Colonies", func(t *testing.T) {
		// The CRDs still carry the adoption by release "up" (kept on uninstall): dry-run that release.
		out, err := helmLive(t, append([]string{"install", "up", chartDir(t), "--namespace", ns, "--dry-run=server",
			"--set", "crds.keep=false", "--set", "crds.iUnderstandThatUninstallDeletesAllColonies=true"}, set...)...)
		if err != nil {
			t.Fatalf("dry-run install: %v %s", err, out)
		}
		if !strings.Contains(out, "WARNING: crds.keep=false") || !strings.Contains(out, "every child cluster is destroyed") {
			t.Errorf("the notes do not warn about crds.keep=false:\n%s", out)
		}
	})

	t.Run("from the previous chart version", func(t *testing.T) {
		prev := previousChart(t)
		adoptCRDs(t, "up", ns)
		if out, err := helmLive(t, append([]string{"install", "up", prev, "--namespace", ns, "--create-namespace"}, set...)...); err != nil {
			t.Fatalf("install of the previous chart: %v %s", err, out)
		}
		out, err := helmLive(t, append([]string{"upgrade", "up", chartDir(t), "--namespace", ns}, set...)...)
		if err != nil {
			t.Fatalf("upgrade to this chart: %v %s", err, out)
		}
		// The webhook configurations moved to the release's names; the old fixed ones are gone.
		for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("admissionregistration.k8s.io/v1")
			u.SetKind(kind)
			if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Name: "up-webhook"}, u); err != nil {
				t.Errorf("%s up-webhook after the upgrade: %v", kind, err)
			}
			if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Name: "exalsius-operator-webhook"}, u); !apierrors.IsNotFound(err) {
				t.Errorf("%s exalsius-operator-webhook of the previous chart left behind: %v", kind, err)
			}
		}
		colonySurvived(t, "legacy")
		if out, err := helmLive(t, "uninstall", "up", "--namespace", ns); err != nil {
			t.Fatalf("uninstall: %v %s", err, out)
		}
		colonySurvived(t, "legacy")
	})
}

// TestServerSideApplyUpgrade: a GitOps tool that server-side applies the rendered manifests (the
// bundle) can move from the previous chart's render to this one's without conflicts.
func TestServerSideApplyUpgrade(t *testing.T) {
	prev := previousChart(t)
	args := []string{"--set", "fullnameOverride=ssa", "--set", "crds.enabled=false"}
	old, err := helmRaw(t, append([]string{"template", "ssa", prev, "--namespace", releaseNamespace, "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	oldObjs, err := decode(old)
	if err != nil {
		t.Fatal(err)
	}
	var installed rendered
	for _, u := range oldObjs {
		if !strings.HasSuffix(u.GetKind(), "WebhookConfiguration") { // the previous chart's fixed names collide with other tests
			installed = append(installed, u)
		}
	}
	apply(t, installed, true)
	cur, err := helmRaw(t, append([]string{"template", "ssa", chartDir(t), "--namespace", releaseNamespace, "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	curObjs, err := decode(cur)
	if err != nil {
		t.Fatal(err)
	}
	var current rendered
	for _, u := range withoutTestHooks(curObjs) {
		if !strings.HasSuffix(u.GetKind(), "WebhookConfiguration") {
			current = append(current, u)
		}
	}
	apply(t, current, true)
	// The objects of the new render are all there.
	for _, u := range current {
		got := u.DeepCopy()
		if err := mgmt.Client.Get(context.Background(), client.ObjectKeyFromObject(u), got); err != nil {
			t.Errorf("%s after the upgrade: %v", key(u), err)
		}
	}
}

// nextChart is this chart as its next version might be: a copy that adds the values key
// upgradeProbe.newKey (default added-in-the-next-version) and a ConfigMap that requires it.
func nextChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "exalsius-operator")
	must(t, os.CopyFS(dir, os.DirFS(chartDir(t))))
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	must(t, err)
	values = append(values, []byte("\nupgradeProbe:\n  newKey: added-in-the-next-version\n")...)
	must(t, os.WriteFile(filepath.Join(dir, "values.yaml"), values, 0o644))
	schemaPath := filepath.Join(dir, "values.schema.json")
	raw, err := os.ReadFile(schemaPath)
	must(t, err)
	var schema map[string]any
	must(t, json.Unmarshal(raw, &schema))
	schema["properties"].(map[string]any)["upgradeProbe"] = map[string]any{"type": "object"}
	raw, err = json.Marshal(schema)
	must(t, err)
	must(t, os.WriteFile(schemaPath, raw, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "templates", "upgrade-probe.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-upgrade-probe
  namespace: {{ .Release.Namespace }}
data:
  newKey: {{ required "upgradeProbe.newKey is missing" (.Values.upgradeProbe | default dict).newKey | quote }}
`), 0o644))
	return dir
}

// TestUpgradeResetThenReuseValues: the upgrade the docs give (`--reset-then-reuse-values`) keeps a
// user's values and takes the defaults of keys the new version adds; the `--reuse-values` that docs
// used to give fails to render, because it reuses the old release's values without the new keys.
func TestUpgradeResetThenReuseValues(t *testing.T) {
	const ns, release = "reuse", "rv"
	if out, err := helmLive(t, "install", release, chartDir(t), "--namespace", ns, "--create-namespace",
		"--set", "fullnameOverride=rv", "--set", "crds.enabled=false", "--set", "global.commonLabels.team=ml"); err != nil {
		t.Fatalf("install: %v %s", err, out)
	}
	next := nextChart(t)
	if out, err := helmLive(t, "upgrade", release, next, "--namespace", ns, "--reuse-values"); err == nil || !strings.Contains(err.Error(), "upgradeProbe.newKey is missing") {
		t.Fatalf("--reuse-values should fail to render the new key (that is why the docs do not use it): %v %s", err, out)
	}
	if out, err := helmLive(t, "upgrade", release, next, "--namespace", ns, "--reset-then-reuse-values"); err != nil {
		t.Fatalf("upgrade with --reset-then-reuse-values: %v %s", err, out)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	must(t, mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-upgrade-probe"}, cm))
	if got := cm.Data["newKey"]; got != "added-in-the-next-version" {
		t.Errorf("the new key's default: %q", got)
	}
	// The user's values of the first install are kept.
	var sas corev1.ServiceAccountList
	must(t, mgmt.Client.List(ctx, &sas, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": release}))
	if len(sas.Items) == 0 {
		t.Fatal("no ServiceAccounts of the release")
	}
	for _, sa := range sas.Items {
		if sa.Labels["team"] != "ml" {
			t.Errorf("ServiceAccount %s lost the user's global.commonLabels: %v", sa.Name, sa.Labels)
		}
		if !strings.HasPrefix(sa.Name, "rv-") {
			t.Errorf("ServiceAccount %s lost the user's fullnameOverride", sa.Name)
		}
	}
	if docs, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "UPGRADE.md")); err != nil || !strings.Contains(string(docs), "--reset-then-reuse-values") {
		t.Errorf("docs/UPGRADE.md does not give the upgrade this test checks (%v)", err)
	}
	if out, err := helmLive(t, "uninstall", release, "--namespace", ns); err != nil {
		t.Fatalf("uninstall: %v %s", err, out)
	}
}
