package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// clusterWideSecrets lists the components whose ClusterRole needs Secrets when the controllers watch
// every namespace: the kubeconfig Secrets next to ClusterDeployments, and the Secrets they write,
// are wherever the Colonies and workspaces are. docs/SECURITY-MODEL.md says why for each. With
// global.watchNamespace set, none does.
var clusterWideSecrets = []string{"colony-controller", "workspace-controller", "inventory-collector"}

// TestSecretRulesInClusterRoles: with every namespace watched, only the ClusterRoles of the
// components in clusterWideSecrets have Secret rules, and docs/SECURITY-MODEL.md names each with its
// reason; the webhook's Secret rule is never in a ClusterRole.
func TestSecretRulesInClusterRoles(t *testing.T) {
	checkClusterWideSecrets(t, render(t), "exalsius-operator", clusterWideSecrets)
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "SECURITY-MODEL.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Secrets in ClusterRoles\n")
	if !ok {
		t.Fatal(`docs/SECURITY-MODEL.md has no section "## Secrets in ClusterRoles"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, c := range clusterWideSecrets {
		if !strings.Contains(section, "| "+c+" | ") {
			t.Errorf("docs/SECURITY-MODEL.md does not say why %s holds Secrets cluster-wide", c)
		}
	}
	// The check can fail: the webhook's TLS Secret rule in a ClusterRole is caught.
	leak := rendered{&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "exalsius-operator-webhook", "labels": map[string]any{"app.kubernetes.io/component": "webhook"}},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "resourceNames": []any{"exalsius-operator-webhook-tls"}, "verbs": []any{"get"}}},
	}}}
	if len(clusterWideSecretRules(t, leak, "exalsius-operator", clusterWideSecrets)) != 1 {
		t.Error("checkClusterWideSecrets missed the webhook's Secret rule in a ClusterRole")
	}
}
