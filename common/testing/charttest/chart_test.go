package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// podSpecOf returns the pod template of a Deployment or StatefulSet.
func podSpecOf(t *testing.T, u *unstructured.Unstructured) corev1.PodTemplateSpec {
	t.Helper()
	switch u.GetKind() {
	case "Deployment":
		return into[appsv1.Deployment](t, u).Spec.Template
	case "StatefulSet":
		return into[appsv1.StatefulSet](t, u).Spec.Template
	}
	t.Fatalf("%s is not a workload", key(u))
	return corev1.PodTemplateSpec{}
}

func workloads(r rendered) rendered {
	return append(r.ofKind("Deployment"), r.ofKind("StatefulSet")...)
}

// checkPodContract asserts the pod contract of docs/PRODUCTION_RUNTIME.md on one workload.
func checkPodContract(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	name := key(u)
	errorf := func(format string, args ...any) { t.Errorf(name+": "+format, args...) }
	if u.GetKind() == "Deployment" {
		d := into[appsv1.Deployment](t, u)
		s := d.Spec.Strategy
		if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
			s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
			errorf("rolling update must keep zero pods unavailable: %+v", s)
		}
	}
	tmpl := podSpecOf(t, u)
	spec := tmpl.Spec
	// A chart upgrade alone must not restart every pod.
	for _, l := range []string{"helm.sh/chart", "app.kubernetes.io/version"} {
		if _, has := tmpl.Labels[l]; has {
			errorf("pod template carries the %s label: every chart upgrade would restart the pods", l)
		}
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errorf("pod security context breaks the contract: %+v", psc)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < 10 {
		errorf("no graceful termination period")
	}
	if len(spec.TopologySpreadConstraints) == 0 && u.GetLabels()["app.kubernetes.io/component"] != "" {
		// The non-default values may remove spreading only by setting [] explicitly; none does.
		errorf("no topology spread constraints")
	}
	for _, tsc := range spec.TopologySpreadConstraints {
		if tsc.LabelSelector == nil || len(tsc.LabelSelector.MatchLabels) == 0 {
			errorf("topology spread constraint without a label selector: %+v", tsc)
		}
	}
	if len(spec.Containers) != 1 {
		errorf("want one container, got %d", len(spec.Containers))
		return
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		(sc.Privileged != nil && *sc.Privileged) {
		errorf("container security context breaks the contract: %+v", sc)
	}
	for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "healthz" {
			errorf("missing %s probe on the healthz port: %+v", what, p)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		errorf("readiness probe must use /readyz")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		errorf("resources need cpu and memory requests and a memory limit: %+v", c.Resources)
	}
	if !slices.Contains(c.Args, "--health-probe-bind-address=:8081") || !slices.Contains(c.Args, "--metrics-secure=true") {
		errorf("probe or secure-metrics flags missing: %v", c.Args)
	}
}

func TestDefaultRender(t *testing.T) {
	r := render(t)

	deployments := r.ofKind("Deployment")
	if len(deployments) != len(components) || len(r.ofKind("StatefulSet")) != 0 {
		t.Fatalf("want one Deployment per component, got %d Deployments", len(deployments))
	}
	for _, c := range components {
		d := r.get("Deployment", "exalsius-operator-"+c)
		if d == nil {
			t.Errorf("no Deployment for %s", c)
			continue
		}
		checkPodContract(t, d)
		args := podSpecOf(t, d).Spec.Containers[0].Args
		wantLE := fmt.Sprintf("--leader-elect=%v", c != "webhook")
		if !slices.Contains(args, wantLE) || !slices.Contains(args, "--metrics-bind-address=:8443") ||
			!slices.Contains(args, "--leader-election-namespace="+releaseNamespace) || !slices.Contains(args, "--log-format=json") {
			t.Errorf("%s args: %v", c, args)
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--watch-namespace") {
				t.Errorf("%s: watch namespace set by default: %s", c, a)
			}
		}
		for _, kind := range []string{"ServiceAccount", "PodDisruptionBudget", "ClusterRole", "ClusterRoleBinding"} {
			if r.get(kind, "exalsius-operator-"+c) == nil {
				t.Errorf("%s: no %s", c, kind)
			}
		}
		if r.get("Service", "exalsius-operator-"+c+"-metrics") == nil {
			t.Errorf("%s: no metrics Service", c)
		}
		if c != "webhook" && r.get("Role", "exalsius-operator-"+c+"-leader-election") == nil {
			t.Errorf("%s: no leader-election Role", c)
		}
	}
	if r.get("Role", "exalsius-operator-webhook-leader-election") != nil {
		t.Errorf("the webhook does not elect a leader but got a leader-election Role")
	}
	for _, kind := range []string{"ServiceMonitor", "NetworkPolicy", "Certificate", "Issuer"} {
		if n := len(r.ofKind(kind)); n != 0 {
			t.Errorf("%d %s objects rendered by default", n, kind)
		}
	}
	for _, u := range r {
		l := u.GetLabels()
		if l["app.kubernetes.io/part-of"] != "exalsius-operator" || l["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s lacks the common labels: %v", key(u), l)
		}
		if ns := u.GetNamespace(); ns != "" && ns != releaseNamespace {
			t.Errorf("%s is outside the release namespace", key(u))
		}
	}
	checkRBAC(t, r, "exalsius-operator")
	checkWebhook(t, r, "exalsius-operator-webhook", "Fail", 5)

	secret := r.get("Secret", "exalsius-operator-webhook-tls")
	if secret == nil || secret.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Fatalf("webhook TLS Secret missing or not kept: %v", secret)
	}
	if _, has := secret.Object["data"]; has {
		t.Errorf("the chart must not write certificate data")
	}

	crds := r.ofKind("CustomResourceDefinition")
	if len(crds) != 4 {
		t.Fatalf("want 4 CRDs (Colony, WorkspaceClass, WorkspaceDeployment, WorkspaceQuota), got %d", len(crds))
	}
	for _, u := range crds {
		if u.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s is not kept on uninstall", key(u))
		}
	}
}

// checkRBAC asserts least privilege: no wildcards anywhere, Secrets only for the components that
// read kubeconfigs, and the webhook limited to its own Secret by a Role in the release namespace.
func checkRBAC(t *testing.T, r rendered, fullname string) {
	t.Helper()
	var roles []*unstructured.Unstructured
	roles = append(roles, r.ofKind("ClusterRole")...)
	roles = append(roles, r.ofKind("Role")...)
	if len(roles) == 0 {
		t.Fatal("no roles rendered")
	}
	for _, u := range roles {
		rules := into[rbacv1.ClusterRole](t, u).Rules
		if len(rules) == 0 {
			t.Errorf("%s has no rules", key(u))
		}
		for _, rule := range rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
				for _, s := range list {
					if strings.Contains(s, "*") {
						t.Errorf("%s: wildcard %q in %+v", key(u), s, rule)
					}
				}
			}
			if !slices.Contains(rule.Resources, "secrets") {
				continue
			}
			comp := u.GetLabels()["app.kubernetes.io/component"]
			// The component's own ClusterRole, <fullname>-<component>, carries the generated rules.
			own := comp != "" && (u.GetKind() == "ClusterRole" || u.GetKind() == "Role") && u.GetName() == fullname+"-"+comp
			switch {
			case comp == "webhook":
				// Its own TLS Secret, by name, and only in the release namespace where the Secret is.
				if u.GetKind() != "Role" || u.GetNamespace() != releaseNamespace || u.GetName() != fullname+"-webhook-release-namespace" ||
					!reflect.DeepEqual(rule.ResourceNames, []string{fullname + "-webhook-tls"}) || slices.Contains(rule.Verbs, "list") || slices.Contains(rule.Verbs, "watch") {
					t.Errorf("%s: the webhook may touch only its own Secret, through a Role in the release namespace: %+v", key(u), rule)
				}
			case own:
				// colony-controller, workspace-controller and inventory-collector read kubeconfig Secrets.
			default:
				t.Errorf("%s grants Secrets access: %+v", key(u), rule)
			}
		}
	}
	// The ClusterRole and the release-namespace Role of a component carry exactly the generated rules.
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), c, "config", "rbac", "role.yaml"))
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var generated rbacv1.ClusterRole
		if err := yaml.Unmarshal(data, &generated); err != nil {
			t.Fatal(err)
		}
		var got []rbacv1.PolicyRule
		for _, u := range []*unstructured.Unstructured{r.get("ClusterRole", "exalsius-operator-"+c), r.get("Role", "exalsius-operator-"+c+"-release-namespace")} {
			if u != nil {
				got = append(got, into[rbacv1.ClusterRole](t, u).Rules...)
			}
		}
		if got == nil {
			continue
		}
		if !sameRules(got, generated.Rules) {
			t.Errorf("%s: chart RBAC drifted from %s/config/rbac/role.yaml; run make generate", c, c)
		}
	}
}

// sameRules reports whether a and b hold the same rules, in any order.
func sameRules(a, b []rbacv1.PolicyRule) bool {
	str := func(rules []rbacv1.PolicyRule) []string {
		out := make([]string, 0, len(rules))
		for _, r := range rules {
			out = append(out, fmt.Sprintf("%+v", r))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(str(a), str(b))
}

func checkWebhook(t *testing.T, r rendered, configName, failurePolicy string, timeout int32) {
	t.Helper()
	vwc := r.get("ValidatingWebhookConfiguration", configName)
	mwc := r.get("MutatingWebhookConfiguration", configName)
	if vwc == nil || mwc == nil {
		t.Fatalf("webhook configurations missing")
	}
	svc := r.get("Service", webhookService(r))
	if svc == nil {
		t.Fatalf("webhook Service %s missing", webhookService(r))
	}
	var hooks []admissionregistrationv1.ValidatingWebhook
	hooks = append(hooks, into[admissionregistrationv1.ValidatingWebhookConfiguration](t, vwc).Webhooks...)
	for _, m := range into[admissionregistrationv1.MutatingWebhookConfiguration](t, mwc).Webhooks {
		hooks = append(hooks, admissionregistrationv1.ValidatingWebhook{Name: m.Name, ClientConfig: m.ClientConfig, FailurePolicy: m.FailurePolicy, TimeoutSeconds: m.TimeoutSeconds, Rules: m.Rules})
	}
	if len(hooks) < 4 {
		t.Errorf("want at least 4 webhooks, got %d", len(hooks))
	}
	for _, h := range hooks {
		s := h.ClientConfig.Service
		if s == nil || s.Name != svc.GetName() || s.Namespace != releaseNamespace || s.Port == nil || *s.Port != 443 || s.Path == nil || *s.Path == "" {
			t.Errorf("%s: client config does not point at the webhook Service: %+v", h.Name, s)
		}
		want := failurePolicy
		if len(h.Rules) == 1 && len(h.Rules[0].Operations) == 1 && h.Rules[0].Operations[0] == admissionregistrationv1.Delete {
			want = "Ignore" // the WorkspaceClass deletion check fails open (a finalizer backs it)
		}
		if h.FailurePolicy == nil || string(*h.FailurePolicy) != want || h.TimeoutSeconds == nil || *h.TimeoutSeconds != timeout {
			t.Errorf("%s: failurePolicy/timeout not from values", h.Name)
		}
	}
}

func webhookService(r rendered) string {
	for _, d := range r.ofKind("Deployment") {
		for _, a := range d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any) {
			if s, ok := strings.CutPrefix(a.(string), "--service-name="); ok {
				return s
			}
		}
	}
	return ""
}

func TestNonDefaultRender(t *testing.T) {
	r := renderValuesFile(t, "nondefault-values.yaml")
	ws := workloads(r)
	if len(r.ofKind("Deployment")) != 6 || len(r.ofKind("StatefulSet")) != 0 {
		t.Fatalf("want 3 Deployments and one per inventory-collector shard (3), got %d and %d StatefulSets",
			len(r.ofKind("Deployment")), len(r.ofKind("StatefulSet")))
	}
	for _, w := range ws {
		checkPodContract(t, w)
		spec := podSpecOf(t, w).Spec
		if !slices.Contains(spec.Containers[0].Args, "--watch-namespace=team-a,team-b") {
			t.Errorf("%s: watch namespace not passed", key(w))
		}
		if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("%s: pull secrets %v", key(w), spec.ImagePullSecrets)
		}
		if !strings.HasPrefix(spec.Containers[0].Image, "registry.example.com/mirror/ghcr.io/exalsius/") {
			t.Errorf("%s: image registry not applied: %s", key(w), spec.Containers[0].Image)
		}
	}
	for _, u := range r {
		if u.GetLabels()["example.com/owner"] != "platform" {
			t.Errorf("%s lacks the common labels", key(u))
		}
	}

	colony := podSpecOf(t, r.get("Deployment", "eo-colony-controller")).Spec
	if img := colony.Containers[0].Image; !strings.HasSuffix(img, "/colony-controller@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
		t.Errorf("digest not used: %s", img)
	}
	if colony.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(colony.NodeSelector) != 1 || len(colony.Tolerations) != 1 ||
		colony.Affinity == nil || colony.Affinity.PodAntiAffinity == nil {
		t.Errorf("scheduling values not applied: %+v", colony)
	}
	args := colony.Containers[0].Args
	for _, want := range []string{"--max-concurrent-reconciles=8", "--log-level=debug", "--log-format=console"} {
		if !slices.Contains(args, want) {
			t.Errorf("colony-controller args miss %s: %v", want, args)
		}
	}
	if !slices.ContainsFunc(colony.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" }) {
		t.Errorf("extra env not applied")
	}
	if d := into[appsv1.Deployment](t, r.get("Deployment", "eo-colony-controller")); *d.Spec.Replicas != 3 {
		t.Errorf("replicaCount not applied")
	}
	if pdb := r.get("PodDisruptionBudget", "eo-colony-controller"); pdb == nil || fmt.Sprint(pdb.Object["spec"].(map[string]any)["minAvailable"]) != "1" {
		t.Errorf("minAvailable not applied: %v", pdb)
	}

	wc := podSpecOf(t, r.get("Deployment", "eo-workspace-controller"))
	if img := wc.Spec.Containers[0].Image; !strings.HasSuffix(img, "/workspace-controller:v9.9.9") {
		t.Errorf("tag not used: %s", img)
	}
	if wc.Spec.PriorityClassName != "system-cluster-critical" || wc.Labels["example.com/tier"] != "control" || wc.Annotations["example.com/scrape"] != "false" {
		t.Errorf("pod metadata values not applied")
	}
	if !slices.Contains(wc.Spec.Containers[0].Args, "--leader-elect=false") || r.get("Role", "eo-workspace-controller-leader-election") != nil {
		t.Errorf("leader election not turned off")
	}
	if sa := r.get("ServiceAccount", "eo-workspace-controller"); sa == nil || sa.GetAnnotations()["example.com/role"] != "workspace" {
		t.Errorf("service account annotations not applied")
	}

	for i := range 3 {
		inv := into[appsv1.Deployment](t, r.get("Deployment", fmt.Sprintf("eo-inventory-collector-shard-%d", i)))
		if *inv.Spec.Replicas != 1 || !slices.Contains(inv.Spec.Template.Spec.Containers[0].Args, "--shard-count=3") ||
			!slices.Contains(inv.Spec.Template.Spec.Containers[0].Args, fmt.Sprintf("--shard-index=%d", i)) ||
			!slices.Contains(inv.Spec.Template.Spec.Containers[0].Args, "--metrics-bind-address=0") {
			t.Errorf("sharded inventory-collector: %+v", inv.Spec.Template.Spec.Containers[0].Args)
		}
	}
	if r.get("Service", "eo-inventory-collector-metrics") != nil || r.get("ClusterRole", "eo-inventory-collector-metrics-auth") != nil {
		t.Errorf("metrics objects rendered for a component with metrics off")
	}

	if sms := r.ofKind("ServiceMonitor"); len(sms) != 1 || sms[0].GetName() != "eo-colony-controller" || sms[0].GetLabels()["release"] != "prometheus" {
		t.Errorf("want exactly the colony-controller ServiceMonitor: %v", sms)
	}
	if nps := r.ofKind("NetworkPolicy"); len(nps) != len(components) {
		t.Errorf("want a NetworkPolicy per component, got %d", len(nps))
	}

	webhook := podSpecOf(t, r.get("Deployment", "eo-webhook")).Spec
	if !slices.Contains(webhook.Containers[0].Args, "--cert-mode=cert-manager") || r.get("Secret", "eo-webhook-tls") != nil ||
		r.get("Certificate", "eo-webhook") == nil || r.get("Issuer", "eo-webhook-selfsigned") == nil {
		t.Errorf("cert-manager mode not rendered")
	}
	if tsc := webhook.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("topology spread values not applied: %+v", tsc)
	}
	checkWebhook(t, r, "eo-webhook", "Ignore", 10)
	if a := r.get("ValidatingWebhookConfiguration", "eo-webhook").GetAnnotations()["cert-manager.io/inject-ca-from"]; a != releaseNamespace+"/eo-webhook" {
		t.Errorf("cainjector annotation: %q", a)
	}
	checkRBAC(t, r, "eo")
	for _, u := range r.ofKind("CustomResourceDefinition") {
		if _, kept := u.GetAnnotations()["helm.sh/resource-policy"]; kept {
			t.Errorf("crds.keep=false ignored on %s", u.GetName())
		}
	}
}

// TestComponentsAreIsolated checks that disabling, scaling or upgrading one component changes only
// that component's objects.
func TestComponentsAreIsolated(t *testing.T) {
	base := withoutTestHooks(render(t)).byKey()
	for _, c := range components {
		t.Run(c, func(t *testing.T) {
			disabled := withoutTestHooks(render(t, "--set", c+".enabled=false")).byKey()
			for k, u := range base {
				owned := u.GetLabels()["app.kubernetes.io/component"] == c
				other, present := disabled[k]
				switch {
				case owned && present:
					t.Errorf("disabling %s kept its %s", c, k)
				case !owned && !present:
					t.Errorf("disabling %s removed %s", c, k)
				case !owned && !reflect.DeepEqual(u.Object, other.Object):
					t.Errorf("disabling %s changed %s", c, k)
				}
			}
			if len(disabled) >= len(base) {
				t.Errorf("disabling %s removed nothing", c)
			}
			for _, change := range [][]string{{"--set", c + ".replicaCount=5"}, {"--set", c + ".image.tag=v2.0.0"}} {
				changed := withoutTestHooks(render(t, change...)).byKey()
				for k, u := range base {
					other := changed[k]
					if other == nil {
						t.Fatalf("%v removed %s", change, k)
					}
					same := reflect.DeepEqual(u.Object, other.Object)
					if k == "Deployment/"+releaseNamespace+"/exalsius-operator-"+c {
						if same {
							t.Errorf("%v did not change the %s Deployment", change, c)
						}
					} else if !same {
						t.Errorf("%v changed %s", change, k)
					}
				}
			}
		})
	}
}

func TestCRDsMatchTheGeneratedOnesAndCanBeOff(t *testing.T) {
	r := render(t)
	dir := filepath.Join(repoRoot(t), "common", "config", "crd", "bases")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var want apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		got := r.get("CustomResourceDefinition", want.Name)
		if got == nil {
			t.Errorf("CRD %s missing from the chart", want.Name)
			continue
		}
		if !reflect.DeepEqual(into[apiextensionsv1.CustomResourceDefinition](t, got).Spec, want.Spec) {
			t.Errorf("CRD %s drifted from common/config/crd/bases; run make generate", want.Name)
		}
	}
	if n := len(render(t, "--set", "crds.enabled=false").ofKind("CustomResourceDefinition")); n != 0 {
		t.Errorf("crds.enabled=false still renders %d CRDs", n)
	}
}

func TestSchemaRejectsBadValues(t *testing.T) {
	for _, set := range []string{
		"colony-controller.logFormat=xml",
		"webhook.replicas=2", // typo of replicaCount
		"global.watchNamespace=Not_A_Namespace",
		"workspace-controller.image.digest=latest",
		"webhook.webhook.certMode=vault",
		"inventory-collector.sharding.shards=0",
		"colony-controller.extraArgs[0]=no-dashes",
	} {
		if _, err := helmTemplate(t, "--set", set); err == nil {
			t.Errorf("--set %s was accepted", set)
		}
	}
}

// withoutTestHooks drops the `helm test` objects: they check every component, so they follow every
// component's settings, and they are not installed.
func withoutTestHooks(r rendered) rendered {
	var out rendered
	for _, u := range r {
		if u.GetAnnotations()["helm.sh/hook"] != "test" {
			out = append(out, u)
		}
	}
	return out
}
