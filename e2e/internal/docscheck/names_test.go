package docscheck

import (
	"path/filepath"
	"strings"
	"testing"
)

// namesTree writes a small repository: three CRDs, one component with one metric and one flag, a phase
// enum, and the docs given (path -> content) over docs that state all of it truly.
func namesTree(t *testing.T, docs map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		crdDir + "/a.yaml": "spec:\n  names:\n    kind: Colony\n    plural: colonies\n",
		crdDir + "/b.yaml": "spec:\n  names:\n    kind: WorkspaceQuota\n    plural: workspacequotas\n",
		crdDir + "/c.yaml": "spec:\n  names:\n    kind: WorkspaceClass\n    plural: workspaceclasses\n",
		componentList:      "workspace-controller\n",
		"workspace-controller/m.go": "package m\n\nvar x = bootstrap.MetricName(component.Name, \"waits_total\")\n\n" +
			"func f() { fs.DurationVar(&o.Retry, \"routing-retry\", 0, \"\") }\n",
		"common/c.go":             "package c\n\nfunc g() { fs.String(\"log-level\", \"info\", \"\") }\n",
		"common/c_test.go":        "package c\n\nfunc h() { fs.String(\"test-only\", \"\", \"\") }\n",
		apiDir + "/v1/x_types.go": "package v1\n\n// +kubebuilder:validation:Enum=Ready;Deleting\ntype ColonyPhase string\n",
		operationsDoc: "# Operations\n\n## Metrics\n\n### workspace-controller (`exalsius_workspace_controller_`)\n\n| metric | type |\n|---|---|\n" +
			"| `exalsius_workspace_controller_waits_total` | counter |\n\n## Flags\n\n| component | flag | default | |\n|---|---|---|---|\n" +
			"| workspace-controller | `--routing-retry` | 15s | retry |\n\n## Next\n",
		runtimeDoc: "# Runtime\n\n`--log-level` sets the level.\n",
		webhookDoc: "# Webhook\n",
		"README.md": "Three kinds: `kubectl get colonies,workspaceclasses,workspacequotas`. The CRDs (Colony, WorkspaceClass, WorkspaceQuota).\n" +
			"Colony `phase` (Ready, Deleting). Routes: `kubectl get httproutes -n wsr-demo`.\n",
	}
	for path, body := range docs {
		files[path] = body
	}
	for path, body := range files {
		write(t, filepath.Join(root, path), body)
	}
	return root
}

func TestNamesHold(t *testing.T) {
	n, errs := Names(namesTree(t, nil))
	if len(errs) > 0 {
		t.Fatalf("true docs: %v", errs)
	}
	if n < 8 {
		t.Errorf("checked %d statements, want at least 8", n)
	}
}

func TestNamesFindDrift(t *testing.T) {
	for _, tc := range []struct {
		name    string
		docs    map[string]string
		want    string
		notWant string // a statement that must not be reported
	}{
		{"kind count", map[string]string{"docs/a.md": "The operator has two kinds.\n"}, `"two kinds", but the chart installs 3 CRDs`, ""},
		{"kind count, not 'kinds of'", map[string]string{"docs/a.md": "It has two kinds of endpoint and two CRDs.\n"}, `"two CRDs"`, "two kinds"},
		{"CRD list short of a kind", map[string]string{"charts/x/values.yaml": "# Install the CRDs (Colony, WorkspaceQuota) with the chart.\n"}, "names Colony, WorkspaceQuota but not WorkspaceClass", ""},
		{"kubectl get list", map[string]string{"charts/x/templates/NOTES.txt": "  kubectl get colonies -A\n  kubectl -n x get colonies,foo,workspacequotas\n"}, "`kubectl get colonies,foo,workspacequotas` lists Colony, WorkspaceQuota but not WorkspaceClass", "kubectl get colonies -A"},
		{"phase list", map[string]string{"docs/a.md": "| `phase` (Ready) and `phase` (Ready, Deleting, Failed) |\n"}, "phases (Ready, Deleting, Failed) are not the phases", ""},
		{"metric unknown", map[string]string{"docs/a.md": "Watch `exalsius_workspace_controller_gone_total`.\n"}, "metric exalsius_workspace_controller_gone_total is not registered", ""},
		{"metric in an alert", map[string]string{"charts/x/templates/prometheusrule.yaml": "expr: rate(exalsius_workspace_controller_waits_totl[5m])\n"}, "exalsius_workspace_controller_waits_totl", ""},
		{"metric missing from the table", map[string]string{"workspace-controller/n.go": "package m\n\nvar y = bootstrap.MetricName(component.Name, \"new_gauge\")\n"}, "does not list exalsius_workspace_controller_new_gauge", ""},
		{"flag not registered", map[string]string{operationsDoc: "## Metrics\n\n### workspace-controller (`exalsius_workspace_controller_`)\n\n| `exalsius_workspace_controller_waits_total` | counter |\n\n## Flags\n\n| workspace-controller | `--routing-retry`, `--tenant-domain` | x | y |\n"}, "--tenant-domain, but it registers no such flag", ""},
		{"flag not documented", map[string]string{"workspace-controller/n.go": "package m\n\nfunc k() { fs.Var(x, \"release-ingress-namespaces\", \"\") }\n"}, "registers --release-ingress-namespaces, which the flag table does not list", ""},
		{"shared flag not documented", map[string]string{runtimeDoc: "# Runtime\n"}, "shared flag --log-level", ""},
		{"old metric name", map[string]string{"docs/a.md": "| `workspace_controller_waits_total` | `exalsius_workspace_controller_waits_total` |\nWatch `workspace_controller_waits_total`.\n"}, "docs/a.md:2: workspace_controller_waits_total is the old name", "docs/a.md:1"},
		{"old metric name in an alert test", map[string]string{"hack/alerts/alerts_test.yaml": "- series: 'workspace_controller_waits_total'\n"}, "old name of exalsius_workspace_controller_waits_total", ""},
		{"routes in ws-", map[string]string{"docs/q.md": "kubectl --kubeconfig r -n ws-my-notebook get httproutes,services\n"}, "routes live in the route namespace wsr-<name>", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Names(namesTree(t, tc.docs))
			if len(errs) == 0 {
				t.Fatalf("no error for %v", tc.docs)
			}
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			joined := strings.Join(msgs, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Errorf("errors %q do not say %q", joined, tc.want)
			}
			if tc.notWant != "" && strings.Contains(joined, tc.notWant) {
				t.Errorf("errors %q report %q, which is true", joined, tc.notWant)
			}
		})
	}
}

func TestNamesSkipChangelogAndTests(t *testing.T) {
	_, errs := Names(namesTree(t, map[string]string{"CHANGELOG.md": "## 0.1.0\n\nThe three kinds; `exalsius_workspace_controller_old_total` renamed; `workspace_controller_waits_total` moved.\n"}))
	if len(errs) > 0 {
		t.Fatalf("the changelog is history, and flags registered in tests are not the component's: %v", errs)
	}
}
