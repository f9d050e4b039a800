package charttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// webhooksOf returns every webhook of the rendered configurations as (name, failurePolicy, rules'
// operations, namespaceSelector, matchConditions).
type hookView struct {
	name          string
	failurePolicy string
	operations    []string
	selector      *admissionregistrationv1.ValidatingWebhook
	conditions    []admissionregistrationv1.MatchCondition
}

func webhooksOf(t *testing.T, r rendered, configName string) []hookView {
	t.Helper()
	vwc := r.get("ValidatingWebhookConfiguration", configName)
	mwc := r.get("MutatingWebhookConfiguration", configName)
	if vwc == nil || mwc == nil {
		t.Fatalf("webhook configurations %s missing", configName)
	}
	var out []hookView
	add := func(h admissionregistrationv1.ValidatingWebhook) {
		var ops []string
		for _, rule := range h.Rules {
			for _, op := range rule.Operations {
				ops = append(ops, string(op))
			}
		}
		fp := ""
		if h.FailurePolicy != nil {
			fp = string(*h.FailurePolicy)
		}
		hh := h
		out = append(out, hookView{name: h.Name, failurePolicy: fp, operations: ops, selector: &hh, conditions: h.MatchConditions})
	}
	for _, h := range into[admissionregistrationv1.ValidatingWebhookConfiguration](t, vwc).Webhooks {
		add(h)
	}
	for _, m := range into[admissionregistrationv1.MutatingWebhookConfiguration](t, mwc).Webhooks {
		add(admissionregistrationv1.ValidatingWebhook{Name: m.Name, FailurePolicy: m.FailurePolicy, Rules: m.Rules,
			NamespaceSelector: m.NamespaceSelector, ObjectSelector: m.ObjectSelector, MatchConditions: m.MatchConditions})
	}
	return out
}

// TestWebhookStaysOutOfTeardown: every create/update webhook carries the matchConditions that skip
// deleting objects and spec-unchanged updates; the deletion-only check fails open even when the
// values say Fail; the webhook pods get a preStop delay inside their grace period.
func TestWebhookStaysOutOfTeardown(t *testing.T) {
	r := render(t)
	hooks := webhooksOf(t, r, "exalsius-operator-webhook")
	deleteOnly := 0
	for _, h := range hooks {
		if slices.Equal(h.operations, []string{"DELETE"}) {
			deleteOnly++
			if h.failurePolicy != "Ignore" {
				t.Errorf("%s: the deletion check must fail open (the finalizer backs it), got %s", h.name, h.failurePolicy)
			}
			continue
		}
		if h.failurePolicy != "Fail" {
			t.Errorf("%s: failurePolicy %s, want the value Fail", h.name, h.failurePolicy)
		}
		var names []string
		for _, c := range h.conditions {
			names = append(names, c.Name)
		}
		if !slices.Contains(names, "not-deleting") || !slices.Contains(names, "spec-changed") {
			t.Errorf("%s: matchConditions %v lack not-deleting and spec-changed", h.name, names)
		}
	}
	if deleteOnly != 1 {
		t.Errorf("want one deletion-only webhook (WorkspaceClass), got %d", deleteOnly)
	}
	d := into[appsv1.Deployment](t, r.get("Deployment", "exalsius-operator-webhook"))
	c := d.Spec.Template.Spec.Containers[0]
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 5 {
		t.Fatalf("the webhook has no preStop sleep of 5s: %+v", c.Lifecycle)
	}
	// preStop (5) + graceful shutdown must fit the grace period (30).
	if !slices.Contains(c.Args, "--graceful-shutdown-timeout=20s") {
		t.Errorf("graceful shutdown does not leave room for the preStop delay: %v", c.Args)
	}
	for _, comp := range []string{"colony-controller", "workspace-controller", "inventory-collector"} {
		if cc := podSpecOf(t, r.get("Deployment", "exalsius-operator-"+comp)).Spec.Containers[0]; cc.Lifecycle != nil {
			t.Errorf("%s got a preStop hook it does not need", comp)
		}
	}
	off := into[appsv1.Deployment](t, render(t, "--set", "webhook.webhook.preStopDelaySeconds=0").get("Deployment", "exalsius-operator-webhook"))
	if off.Spec.Template.Spec.Containers[0].Lifecycle != nil {
		t.Errorf("preStopDelaySeconds=0 still renders a preStop hook")
	}
}

// TestWebhookExemptsOnlyTheReleaseNamespace: the namespaced webhooks skip the system namespaces and
// the release namespace by name, and nothing else: no label a tenant could set.
func TestWebhookExemptsOnlyTheReleaseNamespace(t *testing.T) {
	for _, ns := range []string{releaseNamespace, "ops"} {
		out, err := helmTemplateNS(t, ns)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "webhooks.exalsius.ai/ignore") {
			t.Errorf("namespace %s: the render still mentions the ignore label", ns)
		}
		r, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		namespaced := 0
		for _, h := range webhooksOf(t, r, "exalsius-operator-webhook") {
			sel := h.selector.NamespaceSelector
			if sel == nil {
				continue
			}
			namespaced++
			if len(sel.MatchLabels) != 0 || len(sel.MatchExpressions) != 1 {
				t.Errorf("%s: namespaceSelector beyond the namespace names: %+v", h.name, sel)
				continue
			}
			e := sel.MatchExpressions[0]
			want := []string{"kube-system", "kube-public", "kube-node-lease", ns}
			if e.Key != "kubernetes.io/metadata.name" || e.Operator != "NotIn" || !slices.Equal(e.Values, want) {
				t.Errorf("%s: %+v, want NotIn %v", h.name, e, want)
			}
		}
		if namespaced != 3 {
			t.Errorf("want 3 namespaced webhooks (Colony, WorkspaceDeployment validating and mutating), got %d", namespaced)
		}
	}
}

// TestWebhookNamesFollowValues: the configurations, the TLS Secret, the flags and the RBAC that names
// them all follow fullnameOverride.
func TestWebhookNamesFollowValues(t *testing.T) {
	r := render(t, "--set", "fullnameOverride=acme")
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		if r.get(kind, "acme-webhook") == nil || r.get(kind, "exalsius-operator-webhook") != nil {
			t.Errorf("%s is not named acme-webhook", kind)
		}
	}
	if r.get("Secret", "acme-webhook-tls") == nil {
		t.Errorf("no Secret acme-webhook-tls")
	}
	args := podSpecOf(t, r.get("Deployment", "acme-webhook")).Spec.Containers[0].Args
	for _, want := range []string{"--webhook-config-name=acme-webhook", "--cert-secret-name=acme-webhook-tls", "--service-name=acme-webhook"} {
		if !slices.Contains(args, want) {
			t.Errorf("webhook args lack %s: %v", want, args)
		}
	}
	var names []string
	for _, rule := range into[rbacv1.ClusterRole](t, r.get("ClusterRole", "acme-webhook")).Rules {
		names = append(names, rule.ResourceNames...)
	}
	// The TLS Secret's rule is a Role in the release namespace.
	if role := r.get("Role", "acme-webhook-release-namespace"); role != nil {
		for _, rule := range into[rbacv1.Role](t, role).Rules {
			names = append(names, rule.ResourceNames...)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"acme-webhook", "acme-webhook-tls"}) {
		t.Errorf("webhook RBAC names %v, want acme-webhook and acme-webhook-tls", names)
	}
	for _, h := range webhooksOf(t, r, "acme-webhook") {
		if s := h.selector.ClientConfig.Service; s != nil && s.Name != "acme-webhook" {
			t.Errorf("%s points at Service %s", h.name, s.Name)
		}
	}
}

// TestCRDsKeepFalseNeedsASecondValue: crds.keep=false alone is refused with the reason; with the
// confirmation the CRDs lose the keep policy.
func TestCRDsKeepFalseNeedsASecondValue(t *testing.T) {
	_, err := helmTemplate(t, "--set", "crds.keep=false")
	if err == nil || !strings.Contains(err.Error(), "crds.iUnderstandThatUninstallDeletesAllColonies") || !strings.Contains(err.Error(), "child clusters") {
		t.Fatalf("crds.keep=false alone was not refused with the reason: %v", err)
	}
	r := render(t, "--set", "crds.keep=false", "--set", "crds.iUnderstandThatUninstallDeletesAllColonies=true")
	crds := r.ofKind("CustomResourceDefinition")
	if len(crds) != 4 {
		t.Fatalf("want 4 CRDs (Colony, WorkspaceClass, WorkspaceDeployment, WorkspaceQuota), got %d", len(crds))
	}
	for _, u := range crds {
		if _, kept := u.GetAnnotations()["helm.sh/resource-policy"]; kept {
			t.Errorf("%s still kept", u.GetName())
		}
	}
}

// TestShardedCollectorKeepsShardsServed: each shard is its own Deployment that surges (maxSurge 1,
// maxUnavailable 0) with its own selector and --shard-index; no StatefulSet.
func TestShardedCollectorKeepsShardsServed(t *testing.T) {
	r := render(t, "--set", "inventory-collector.sharding.shards=3", "--set", "inventory-collector.replicaCount=2")
	if n := len(r.ofKind("StatefulSet")); n != 0 {
		t.Fatalf("%d StatefulSets rendered", n)
	}
	selectors := map[string]bool{}
	for i := range 3 {
		u := r.get("Deployment", fmt.Sprintf("exalsius-operator-inventory-collector-shard-%d", i))
		if u == nil {
			t.Fatalf("no Deployment for shard %d", i)
		}
		checkPodContract(t, u)
		d := into[appsv1.Deployment](t, u)
		ru := d.Spec.Strategy.RollingUpdate
		if ru == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge.IntValue() != 1 || *d.Spec.Replicas != 2 {
			t.Errorf("shard %d does not surge: %+v replicas %d", i, d.Spec.Strategy, *d.Spec.Replicas)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, fmt.Sprintf("--shard-index=%d", i)) || !slices.Contains(args, "--shard-count=3") || !slices.Contains(args, "--leader-elect=true") {
			t.Errorf("shard %d args: %v", i, args)
		}
		sel := fmt.Sprint(d.Spec.Selector.MatchLabels)
		if selectors[sel] {
			t.Errorf("shard %d shares its selector %s", i, sel)
		}
		selectors[sel] = true
		if d.Spec.Template.Labels["app.kubernetes.io/component"] != "inventory-collector" {
			t.Errorf("shard %d pods lose the component label (Service, PDB)", i)
		}
	}
	if r.get("Deployment", "exalsius-operator-inventory-collector") != nil {
		t.Errorf("an unsharded Deployment is rendered too")
	}
}

// TestServiceMonitorVerifiesAndAuthenticates: the scrape authenticates with a token from a Secret and
// verifies the certificate against a CA; the deprecated bearerTokenFile and insecureSkipVerify are
// gone and refused; the exported namespace label is honoured.
func TestServiceMonitorVerifiesAndAuthenticates(t *testing.T) {
	out, err := helmTemplate(t, "--values", chartDir(t)+"/ci/nondefault-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"bearerTokenFile", "insecureSkipVerify"} {
		if strings.Contains(string(out), banned) {
			t.Errorf("the render contains %s", banned)
		}
	}
	r, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	sm := r.get("ServiceMonitor", "eo-colony-controller")
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("endpoints: %v", eps)
	}
	ep := eps[0].(map[string]any)
	name, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	typ, _, _ := unstructured.NestedString(ep, "authorization", "type")
	ca, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
	server, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
	if typ != "Bearer" || name != "eo-metrics-scraper-token" || ca != "colony-metrics-tls" || server != "eo-colony-controller-metrics.exalsius-system.svc" {
		t.Errorf("endpoint %v", ep)
	}
	// The per-namespace series keep their namespace label (the workspace's), as the dashboard and the
	// alerts read it.
	if honor, _, _ := unstructured.NestedBool(ep, "honorLabels"); !honor {
		t.Errorf("endpoint without honorLabels: %v", ep)
	}
	tok := into[corev1.Secret](t, r.get("Secret", "eo-metrics-scraper-token"))
	if tok.Type != corev1.SecretTypeServiceAccountToken || tok.Annotations[corev1.ServiceAccountNameKey] != "eo-metrics-scraper" {
		t.Errorf("scraper token Secret: %+v", tok)
	}
	crb := into[rbacv1.ClusterRoleBinding](t, r.get("ClusterRoleBinding", "eo-metrics-scraper"))
	if crb.RoleRef.Name != "eo-metrics-reader" || crb.Subjects[0].Name != "eo-metrics-scraper" {
		t.Errorf("scraper binding: %+v", crb)
	}
	colony := podSpecOf(t, r.get("Deployment", "eo-colony-controller")).Spec
	if !slices.Contains(colony.Containers[0].Args, "--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs") ||
		!slices.ContainsFunc(colony.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "colony-metrics-tls" }) {
		t.Errorf("the metrics certificate Secret is not served")
	}
	for _, bad := range [][]string{
		{"--set", "colony-controller.metrics.serviceMonitor.enabled=true"},
		{"--set", "colony-controller.metrics.serviceMonitor.enabled=true", "--set", "colony-controller.metrics.certSecretName=x", "--set", "colony-controller.metrics.serviceMonitor.tlsConfig.insecureSkipVerify=true"},
	} {
		if _, err := helmTemplate(t, bad...); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
	// A token Secret of the user's replaces the chart's scraper.
	r = render(t, "--set", "colony-controller.metrics.serviceMonitor.enabled=true", "--set", "colony-controller.metrics.certSecretName=x",
		"--set", "colony-controller.metrics.serviceMonitor.bearerTokenSecret.name=prom-token")
	if r.get("ServiceAccount", "exalsius-operator-metrics-scraper") != nil {
		t.Errorf("the chart's scraper is rendered although a token Secret is given")
	}
}

// TestHelmTestHook: `helm test` runs the webhook image's self-test against every enabled component,
// with a ServiceAccount that may only read those Deployments and dry-run WorkspaceClasses.
func TestHelmTestHook(t *testing.T) {
	r := render(t, "--set", "inventory-collector.sharding.shards=2")
	pod := r.get("Pod", "exalsius-operator-self-test")
	if pod == nil {
		t.Fatal("no helm test pod")
	}
	if pod.GetAnnotations()["helm.sh/hook"] != "test" {
		t.Errorf("the pod is not a test hook: %v", pod.GetAnnotations())
	}
	p := into[corev1.Pod](t, pod)
	want := "--self-test-deployments=exalsius-operator-colony-controller,exalsius-operator-workspace-controller," +
		"exalsius-operator-inventory-collector-shard-0,exalsius-operator-inventory-collector-shard-1,exalsius-operator-webhook"
	if c := p.Spec.Containers[0]; !slices.Contains(c.Args, "--self-test") || !slices.Contains(c.Args, want) || !strings.HasSuffix(c.Image, "/webhook:"+chartAppVersion(t)) {
		t.Errorf("self-test container: %s %v", c.Image, c.Args)
	}
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		u := r.get(kind, "exalsius-operator-self-test")
		if u == nil || u.GetAnnotations()["helm.sh/hook"] != "test" {
			t.Errorf("%s of the test missing or not a hook", kind)
		}
	}
	cr := into[rbacv1.ClusterRole](t, r.get("ClusterRole", "exalsius-operator-self-test"))
	if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].Verbs, []string{"create"}) || !slices.Equal(cr.Rules[0].Resources, []string{"workspaceclasses"}) {
		t.Errorf("the test's ClusterRole grants more than creating WorkspaceClasses: %+v", cr.Rules)
	}
	if render(t, "--set", "tests.enabled=false").get("Pod", "exalsius-operator-self-test") != nil {
		t.Errorf("tests.enabled=false still renders the test")
	}
}

// TestOneVersion: the chart's version and appVersion agree, every default image is tagged with it,
// and it sorts after the upstream operator's 0.11.x, which is published at the same OCI path: a
// `helm upgrade` of an upstream installation without --version must not pick upstream's chart.
func TestOneVersion(t *testing.T) {
	version := chartAppVersion(t)
	if v := chartField(t, "version"); v != version {
		t.Fatalf("Chart.yaml version %s and appVersion %s differ", v, version)
	}
	var major, minor, patch int
	if _, err := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("version %s: %v", version, err)
	}
	if major == 0 && minor <= 11 {
		t.Errorf("version %s does not sort after the upstream operator's 0.11.x", version)
	}
	for _, w := range workloads(render(t)) {
		if img := podSpecOf(t, w).Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+version) {
			t.Errorf("%s: image %s is not tagged %s", key(w), img, version)
		}
	}
}

// TestWebhookCertificateSafetyIsWired: the chart passes the CA injection grace, and the webhook's
// readiness probe is the one that fails while CA injection fails (/readyz).
func TestWebhookCertificateSafetyIsWired(t *testing.T) {
	c := podSpecOf(t, render(t, "--set", "webhook.webhook.caInjectionGrace=2m").get("Deployment", "exalsius-operator-webhook")).Spec.Containers[0]
	if !slices.Contains(c.Args, "--ca-injection-grace=2m") {
		t.Errorf("caInjectionGrace not passed: %v", c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("the webhook's readiness probe is not /readyz: %+v", c.ReadinessProbe)
	}
	if _, err := helmTemplate(t, "--set", "webhook.webhook.caInjectionGrace=soon"); err == nil {
		t.Errorf("a malformed caInjectionGrace was accepted")
	}
}
