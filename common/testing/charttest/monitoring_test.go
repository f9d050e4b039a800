package charttest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// operatorMetric matches the name of a metric the operator's components export (all in the exalsius_
// namespace).
var operatorMetric = regexp.MustCompile(`\bexalsius_(?:colony_controller|workspace_controller|inventory_collector)_[a-z_]+`)

// operationsAnchors returns the anchors of docs/operations.md's headings, as GitHub makes them.
func operationsAnchors(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// documentedMetrics returns the operator metric names docs/operations.md lists.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range operatorMetric.FindAllString(string(data), -1) {
		out[m] = true
	}
	if len(out) == 0 {
		t.Fatal("docs/operations.md lists no operator metric")
	}
	return out
}

// checkDocumented fails for every operator metric in expr that docs/operations.md does not list.
// Histogram series (_bucket, _sum, _count) count as their histogram.
func checkDocumented(t *testing.T, where, expr string, documented map[string]bool) {
	t.Helper()
	for _, m := range operatorMetric.FindAllString(expr, -1) {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && documented[b] {
				base = b
			}
		}
		if !documented[base] {
			t.Errorf("%s uses %s, which docs/operations.md does not list", where, m)
		}
	}
}

func TestMonitoringIsOffByDefault(t *testing.T) {
	r := render(t)
	if n := len(r.ofKind("PrometheusRule")); n != 0 {
		t.Errorf("default render has %d PrometheusRules", n)
	}
	for _, cm := range r.ofKind("ConfigMap") {
		if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
			t.Errorf("default render has the dashboard ConfigMap %s", key(cm))
		}
	}
}

func TestPrometheusRule(t *testing.T) {
	r := render(t,
		"--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.prometheusRule.labels.release=kube-prometheus",
		"--set", "monitoring.prometheusRule.alertLabels.team=platform",
		"--set", "monitoring.prometheusRule.disabledAlerts[0]=ExalsiusWorkspacesWaitingForGPUs",
		"--set", "monitoring.prometheusRule.additionalRules[0].alert=Custom",
		"--set", "monitoring.prometheusRule.additionalRules[0].expr=vector(1)",
	)
	rules := r.ofKind("PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("want one PrometheusRule, got %d", len(rules))
	}
	pr := rules[0]
	if pr.GetNamespace() != releaseNamespace || pr.GetLabels()["release"] != "kube-prometheus" {
		t.Errorf("PrometheusRule %s: namespace or labels wrong: %v", key(pr), pr.GetLabels())
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if len(groups) != 1 {
		t.Fatalf("want one rule group, got %d", len(groups))
	}
	items, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	documented := documentedMetrics(t)
	anchors := operationsAnchors(t)
	alerts := map[string][]map[string]any{}
	for _, it := range items {
		rule := it.(map[string]any)
		name, _ := rule["alert"].(string)
		alerts[name] = append(alerts[name], rule)
		expr, _ := rule["expr"].(string)
		if name == "" || expr == "" {
			t.Errorf("rule without alert or expr: %v", rule)
			continue
		}
		if name == "Custom" {
			continue
		}
		checkDocumented(t, "alert "+name, expr, documented)
		labels, _, _ := unstructured.NestedStringMap(rule, "labels")
		if !slices.Contains([]string{"info", "warning", "critical"}, labels["severity"]) || labels["team"] != "platform" {
			t.Errorf("alert %s: labels %v, want a severity and team=platform", name, labels)
		}
		ann, _, _ := unstructured.NestedStringMap(rule, "annotations")
		if ann["summary"] == "" || ann["description"] == "" {
			t.Errorf("alert %s lacks a summary or description", name)
		}
		// Every alert links its runbook: a section of docs/operations.md named after the alert.
		wantURL := "https://github.com/exalsius/exalsius-operator/blob/v" + chartAppVersion(t) + "/docs/operations.md#" + strings.ToLower(name)
		if ann["runbook_url"] != wantURL {
			t.Errorf("alert %s: runbook_url %q, want %q", name, ann["runbook_url"], wantURL)
		}
		if anchor := strings.ToLower(name); !anchors[anchor] {
			t.Errorf("alert %s: runbook_url points at #%s, which is no heading of docs/operations.md", name, anchor)
		}
		if rule["for"] == nil {
			t.Errorf("alert %s has no for", name)
		}
	}
	if _, ok := alerts["ExalsiusWorkspacesWaitingForGPUs"]; ok {
		t.Error("a disabled alert is rendered")
	}
	if _, ok := alerts["Custom"]; !ok {
		t.Error("the additional rule is not rendered")
	}
	// The GPU wait and the quota wait are two alerts, told apart by the queue's reason label.
	if q := alerts["ExalsiusWorkspacesWaitingForQuota"]; len(q) != 1 || !strings.Contains(q[0]["expr"].(string), `reason="QuotaExceeded"`) {
		t.Errorf("ExalsiusWorkspacesWaitingForQuota: %v", q)
	}
	down := alerts["ExalsiusOperatorComponentDown"]
	if len(down) != len(components) {
		t.Fatalf("want one ExalsiusOperatorComponentDown per component, got %d", len(down))
	}
	for _, c := range components {
		job := `job="` + releaseName + "-" + c + `-metrics"`
		if !slices.ContainsFunc(down, func(rule map[string]any) bool { return strings.Contains(rule["expr"].(string), job) }) {
			t.Errorf("no ExalsiusOperatorComponentDown selects %s (the metrics Service of %s)", job, c)
		}
		if r.get("Service", releaseName+"-"+c+"-metrics") == nil {
			t.Errorf("the alerts select the job of Service %s-%s-metrics, which the chart does not render", releaseName, c)
		}
	}
	// Prometheus templates in the annotations reach Prometheus unexpanded by Helm.
	errs := alerts["ExalsiusReconcileErrors"]
	if len(errs) != 1 || !strings.Contains(errs[0]["annotations"].(map[string]any)["description"].(string), "{{ $labels.controller }}") {
		t.Errorf("ExalsiusReconcileErrors: the description lost its {{ $labels.controller }} placeholder: %v", errs)
	}

	ensureLooseCRD(t, "monitoring.coreos.com", "PrometheusRule", "prometheusrules")
	apply(t, rules, false)

	// A component left out, or one whose metrics are off, has no ComponentDown alert (it would fire
	// forever); the webhook's error alert goes with the webhook.
	r = render(t, "--set", "monitoring.prometheusRule.enabled=true", "--set", "webhook.enabled=false",
		"--set", "colony-controller.metrics.enabled=false")
	down = nil
	for _, it := range mustRules(t, r) {
		rule := it.(map[string]any)
		expr := rule["expr"].(string)
		if rule["alert"] == "ExalsiusOperatorComponentDown" {
			down = append(down, rule)
			if strings.Contains(expr, "-webhook-metrics") || strings.Contains(expr, "-colony-controller-metrics") {
				t.Errorf("ExalsiusOperatorComponentDown selects a component without metrics: %s", expr)
			}
		}
		if rule["alert"] == "ExalsiusWebhookErrors" {
			t.Error("ExalsiusWebhookErrors is rendered with the webhook disabled")
		}
	}
	if len(down) != 2 {
		t.Errorf("want ExalsiusOperatorComponentDown for the two components with metrics, got %d", len(down))
	}

	// runbookBaseURL moves every runbook link, keeping the alert's anchor.
	r = render(t, "--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.prometheusRule.runbookBaseURL=https://wiki.example.com/exalsius/operations")
	for _, it := range mustRules(t, r) {
		rule := it.(map[string]any)
		want := "https://wiki.example.com/exalsius/operations#" + strings.ToLower(rule["alert"].(string))
		if got := rule["annotations"].(map[string]any)["runbook_url"]; got != want {
			t.Errorf("alert %s: runbook_url %v, want %s", rule["alert"], got, want)
		}
	}
}

func mustRules(t *testing.T, r rendered) []any {
	t.Helper()
	pr := r.ofKind("PrometheusRule")
	if len(pr) != 1 {
		t.Fatalf("want one PrometheusRule, got %d", len(pr))
	}
	groups, _, _ := unstructured.NestedSlice(pr[0].Object, "spec", "groups")
	items, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	return items
}

func TestGrafanaDashboard(t *testing.T) {
	r := render(t,
		"--set", "monitoring.grafanaDashboard.enabled=true",
		"--set", "monitoring.grafanaDashboard.namespace=monitoring",
		"--set", "monitoring.grafanaDashboard.annotations.grafana_folder=Operators",
	)
	var cm *unstructured.Unstructured
	for _, u := range r.ofKind("ConfigMap") {
		if u.GetLabels()["grafana_dashboard"] == "1" {
			cm = u
		}
	}
	if cm == nil {
		t.Fatal("no ConfigMap labelled grafana_dashboard=1")
	}
	if cm.GetNamespace() != "monitoring" || cm.GetAnnotations()["grafana_folder"] != "Operators" {
		t.Errorf("dashboard ConfigMap %s: namespace %q, annotations %v", key(cm), cm.GetNamespace(), cm.GetAnnotations())
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	raw, ok := data["exalsius-operator.json"]
	if !ok || len(data) != 1 {
		t.Fatalf("dashboard ConfigMap data keys: %v", keys(data))
	}
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("the dashboard has no uid or title")
	}
	documented := documentedMetrics(t)
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkDocumented(t, "panel "+p.Title, tg.Expr, documented)
			for _, m := range operatorMetric.FindAllString(tg.Expr, -1) {
				seen[strings.TrimSuffix(m, "_bucket")] = true
			}
		}
	}
	// Every documented operator metric has a panel.
	for m := range documented {
		if !seen[m] {
			t.Errorf("docs/operations.md lists %s, but no dashboard panel shows it", m)
		}
	}

	ctx := context.Background()
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	apply(t, rendered{cm}, false)

	// The sidecar's label is configurable.
	r = render(t, "--set", "monitoring.grafanaDashboard.enabled=true",
		"--set", "monitoring.grafanaDashboard.sidecarLabel=dashboards", "--set", "monitoring.grafanaDashboard.sidecarLabelValue=exalsius")
	found := false
	for _, u := range r.ofKind("ConfigMap") {
		if u.GetLabels()["dashboards"] == "exalsius" && u.GetNamespace() == releaseNamespace {
			found = true
		}
	}
	if !found {
		t.Error("no ConfigMap carries the configured sidecar label dashboards=exalsius in the release namespace")
	}
}

func TestMonitoringSchemaRejectsBadValues(t *testing.T) {
	for _, set := range []string{
		"monitoring.prometheusRule.enable=true", // typo of enabled
		"monitoring.grafanaDashboard.sidecarLabel=",
		"monitoring.prometheusRule.disabledAlerts[0]=",
		"monitoring.prometheusRule.runbookBaseURL=wiki/operations", // not a URL
		"monitoring.grafanaDashboard.labels.a=b",
	} {
		if _, err := helmTemplate(t, "--set", set); err == nil {
			t.Errorf("--set %s was accepted", set)
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ensureLooseCRD installs a CRD accepting any spec for an integration's kind, once.
func ensureLooseCRD(t *testing.T, group, kind, plural string) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(looseCRD(group, kind, plural))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	if err := mgmt.Client.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
