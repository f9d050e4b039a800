package chartnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	allcomponents "github.com/exalsius/exalsius-operator/common/components"
	"github.com/exalsius/exalsius-operator/e2e/internal/node"
)

var components = allcomponents.Names()

const (
	podTimeout = 5 * time.Minute
	// upgradeTag is a second tag of the inventory-collector image, for the upgrade.
	upgradeTag = "upgrade"
)

func eventually(ctx context.Context, t *testing.T, what string, timeout time.Duration, fn func(ctx context.Context) (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, msg := fn(ctx)
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
	}
}

func componentPods(ctx context.Context, c string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := w.Client.List(ctx, &pods, client.InNamespace(node.Namespace), client.MatchingLabels{
		"app.kubernetes.io/instance": node.Release, "app.kubernetes.io/component": c})
	return pods.Items, err
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyPods waits until the component has want Ready pods (and no others) and returns them.
func readyPods(ctx context.Context, t *testing.T, c string, want int) []corev1.Pod {
	t.Helper()
	var got []corev1.Pod
	eventually(ctx, t, fmt.Sprintf("%d Ready pod(s) of %s", want, c), podTimeout, func(ctx context.Context) (bool, string) {
		pods, err := componentPods(ctx, c)
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range pods {
			if podReady(&pods[i]) {
				ready++
			}
		}
		got = pods
		return ready == want && len(pods) == want, fmt.Sprintf("%d pods, %d Ready", len(pods), ready)
	})
	return got
}

// TestChartOnNode installs the chart with helm and checks it the way a cluster operator would.
func TestChartOnNode(t *testing.T) {
	replicas := map[string]int{"colony-controller": 2, "workspace-controller": 1, "inventory-collector": 1, "webhook": 2}
	f := features.New("the umbrella chart on a real node").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// Default values, but two colony-controller replicas for the failover below.
			if err := w.Install(ctx, "--set", "colony-controller.replicaCount=2"); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("every pod is Ready, and runs as its securityContext says", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, c := range components {
				for _, p := range readyPods(ctx, t, c, replicas[c]) {
					checkPodSecurity(ctx, t, &p)
				}
			}
			return ctx
		}).
		Assess("metrics are served over HTTPS through the Service, and refused without a token", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkMetrics(ctx, t)
			return ctx
		}).
		Assess("the API server calls the webhook through its Service", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkWebhook(ctx, t)
			return ctx
		}).
		Assess("the quick start reaches Running from the pods (management and child API servers reached from the pod network)", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkQuickstart(ctx, t)
			return ctx
		}).
		Assess("deleting the leader pod: the other replica leads and reconciles", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkFailover(ctx, t, false, "after-delete")
			return ctx
		}).
		Assess("killing the leader's process (a crash: no lease release): another replica leads once the lease expires", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkFailover(ctx, t, true, "after-crash")
			return ctx
		}).
		Assess("helm upgrade of one component's image restarts only that component", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkUpgrade(ctx, t, replicas)
			return ctx
		}).
		Assess("helm uninstall leaves nothing behind", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			checkUninstall(ctx, t)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// checkPodSecurity checks the pod's declared security context and what the runtime actually did: the
// container's process runs as 65532 with no effective capabilities, under a seccomp filter, on a
// read-only root filesystem.
func checkPodSecurity(ctx context.Context, t *testing.T, p *corev1.Pod) {
	t.Helper()
	sc := p.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod %s: pod securityContext %+v lacks runAsNonRoot/seccomp RuntimeDefault", p.Name, sc)
	}
	for _, c := range p.Spec.Containers {
		csc := c.SecurityContext
		if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
			csc.Capabilities == nil || len(csc.Capabilities.Add) > 0 || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("pod %s container %s: securityContext %+v is not read-only, no-escalation, drop ALL", p.Name, c.Name, csc)
		}
	}
	{
		pid := strconv.Itoa(containerPid(ctx, t, p))
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		fields := map[string]string{}
		for _, l := range strings.Split(string(status), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if uids := strings.Fields(fields["Uid"]); len(uids) == 0 || uids[0] != "65532" || uids[1] != "65532" {
			t.Errorf("pod %s: process runs as uid %q, want 65532", p.Name, fields["Uid"])
		}
		if fields["CapEff"] != "0000000000000000" || fields["CapPrm"] != "0000000000000000" {
			t.Errorf("pod %s: process capabilities eff %s prm %s, want none", p.Name, fields["CapEff"], fields["CapPrm"])
		}
		if fields["Seccomp"] != "2" {
			t.Errorf("pod %s: process seccomp mode %q, want 2 (filter)", p.Name, fields["Seccomp"])
		}
		if fields["NoNewPrivs"] != "1" {
			t.Errorf("pod %s: NoNewPrivs %q, want 1", p.Name, fields["NoNewPrivs"])
		}
		mounts, err := os.ReadFile("/proc/" + pid + "/mounts")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(l); len(f) >= 4 && f[1] == "/" {
				if !strings.HasPrefix(f[3], "ro,") && f[3] != "ro" {
					t.Errorf("pod %s: root filesystem mounted %q, want ro", p.Name, f[3])
				}
			}
		}
	}
}

// containerPid returns the host pid of the pod's (only) container's process, from the node's
// containerd.
func containerPid(ctx context.Context, t *testing.T, p *corev1.Pod) int {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s has %d container statuses, want 1", p.Name, len(p.Status.ContainerStatuses))
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := w.Node.Ctr(ctx, "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("ctr tasks ls: pid %q: %v", f[1], err)
			}
			return pid
		}
	}
	t.Fatalf("pod %s: container %s has no running task:\n%s", p.Name, id, out)
	return 0
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(w.World.Management.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkMetrics scrapes each component's metrics Service from the host through its ClusterIP (kube-proxy):
// without a token the request is refused, with the token of a ServiceAccount allowed to get
// /metrics it returns the component's metrics.
func checkMetrics(ctx context.Context, t *testing.T) {
	cs := clientset(t)
	const scraper = "e2e-scraper"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: scraper}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: scraper}, Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scraper},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: scraper},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: scraper}}}
	for _, o := range []client.Object{sa, role, binding} {
		if err := w.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, scraper, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The metrics certificate is self-signed by the component (the chart's ServiceMonitor says the
	// same): the check here is authentication, not the certificate chain.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	for _, c := range components {
		var svc corev1.Service
		if err := w.Client.Get(ctx, types.NamespacedName{Namespace: node.Namespace, Name: node.Release + "-" + c + "-metrics"}, &svc); err != nil {
			t.Fatalf("%s metrics Service: %v", c, err)
		}
		url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
		get := func(token string) (int, string, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer func() { _ = resp.Body.Close() }() // read only: nothing to lose
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			return resp.StatusCode, string(b), nil
		}
		eventually(ctx, t, c+" metrics refused without a token", time.Minute, func(context.Context) (bool, string) {
			code, _, err := get("")
			if err != nil {
				return false, err.Error()
			}
			return code == http.StatusUnauthorized || code == http.StatusForbidden, fmt.Sprint("status ", code)
		})
		prefix := "exalsius_" + strings.ReplaceAll(c, "-", "_") + "_"
		eventually(ctx, t, c+" metrics served with a token", time.Minute, func(context.Context) (bool, string) {
			code, body, err := get(tr.Status.Token)
			if err != nil {
				return false, err.Error()
			}
			return code == http.StatusOK && strings.Contains(body, "# HELP"), fmt.Sprintf("status %d, %d bytes, has %s: %t", code, len(body), prefix, strings.Contains(body, prefix))
		})
	}
}

// checkWebhook: the webhook configurations point at the chart's Service (no URL), and an invalid
// Colony is denied by the webhook, naming the field.
func checkWebhook(ctx context.Context, t *testing.T) {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := w.Client.Get(ctx, types.NamespacedName{Name: "exalsius-operator-webhook"}, &vwc); err != nil {
		t.Fatal(err)
	}
	for _, h := range vwc.Webhooks {
		if h.ClientConfig.URL != nil || h.ClientConfig.Service == nil || h.ClientConfig.Service.Namespace != node.Namespace || len(h.ClientConfig.CABundle) == 0 {
			t.Errorf("webhook %s: clientConfig %+v, want the chart's Service with an injected caBundle", h.Name, h.ClientConfig)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-hook"}}
	if err := w.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bad := &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "notemplate"},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{{
			ClusterName:           "a",
			ClusterDeploymentSpec: apiextensionsv1.JSON{Raw: []byte(`{"credential":"sim-credential","config":{}}`)},
		}}},
	}
	eventually(ctx, t, "an invalid Colony denied by the webhook", time.Minute, func(ctx context.Context) (bool, string) {
		err := w.Client.Create(ctx, bad)
		if err == nil {
			_ = w.Client.Delete(ctx, bad)
			return false, "accepted"
		}
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "spec.colonyClusters[0].clusterDeploymentSpec.template"), err.Error()
	})
}

// checkFailover deletes the colony-controller's leader pod (it releases the lease on SIGTERM), or, with
// crash, SIGKILLs the leader's process on the node (no release: the lease must expire), and measures
// how long until another process holds the lease and reconciles a new Colony named colonyName.
func checkFailover(ctx context.Context, t *testing.T, crash bool, colonyName string) {
	leaseKey := types.NamespacedName{Namespace: node.Namespace, Name: "colony-controller.exalsius.ai"}
	holder := func(ctx context.Context) string {
		var l coordinationv1.Lease
		if err := w.Client.Get(ctx, leaseKey, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	pods := readyPods(ctx, t, "colony-controller", 2)
	var leader string
	eventually(ctx, t, "a colony-controller leader", podTimeout, func(ctx context.Context) (bool, string) {
		leader = holder(ctx)
		return leader != "", "no holder"
	})
	var leaderPod *corev1.Pod
	for i := range pods {
		if strings.HasPrefix(leader, pods[i].Name) {
			leaderPod = &pods[i]
		}
	}
	if leaderPod == nil {
		t.Fatalf("lease holder %q is none of the pods", leader)
	}
	start := time.Now()
	how := "deleted"
	if crash {
		pid := containerPid(ctx, t, leaderPod)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing pid %d of %s: %v", pid, leaderPod.Name, err)
		}
		how = fmt.Sprintf("process %d SIGKILLed", pid)
	} else if err := w.Client.Delete(ctx, leaderPod); err != nil {
		t.Fatal(err)
	}
	var next string
	eventually(ctx, t, "another process leads", 3*time.Minute, func(ctx context.Context) (bool, string) {
		next = holder(ctx)
		return next != "" && next != leader, "holder " + next
	})
	led := time.Since(start)
	// Reconciling again: a new Colony gets a status from the new leader.
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-hook", Name: colonyName}}
	if err := w.Client.Create(ctx, colony); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the new leader reconciles a Colony", 2*time.Minute, func(ctx context.Context) (bool, string) {
		var c infrav1.Colony
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(colony), &c); err != nil {
			return false, err.Error()
		}
		return c.Status.ObservedGeneration == c.Generation && c.Status.Phase != "", fmt.Sprintf("phase %q observed %d", c.Status.Phase, c.Status.ObservedGeneration)
	})
	t.Logf("leader failover: leader pod %s: %s; %s leads after %s; a new Colony reconciled %s after the deletion",
		leaderPod.Name, how, next, led.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	_ = w.Client.Delete(ctx, colony)
}

func podUIDs(ctx context.Context, t *testing.T) map[string]map[types.UID]bool {
	out := map[string]map[types.UID]bool{}
	for _, c := range components {
		pods, err := componentPods(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		out[c] = map[types.UID]bool{}
		for _, p := range pods {
			out[c][p.UID] = true
		}
	}
	return out
}

// checkUpgrade: `helm upgrade --reset-then-reuse-values` with another inventory-collector image tag replaces the
// inventory-collector's pods and no other pod.
func checkUpgrade(ctx context.Context, t *testing.T, replicas map[string]int) {
	const c = "inventory-collector"
	for _, comp := range components {
		readyPods(ctx, t, comp, replicas[comp])
	}
	// The upgrade's image: the chart's default one under another tag (nothing can be pulled here).
	images, err := w.ChartImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := ""
	for _, img := range images {
		if strings.Contains(img, "/"+c+":") {
			src = img
		}
	}
	if src == "" {
		t.Fatalf("the chart runs no %s image: %v", c, images)
	}
	if _, err := w.Node.Ctr(ctx, "images", "tag", "--force", src, src[:strings.LastIndex(src, ":")+1]+upgradeTag); err != nil {
		t.Fatal(err)
	}
	before := podUIDs(ctx, t)
	if _, err := w.Helm(ctx, "upgrade", node.Release, w.ChartDir(), "--namespace", node.Namespace, "--reset-then-reuse-values",
		"--set", c+".image.tag="+upgradeTag, "--wait", "--timeout", "10m"); err != nil {
		t.Fatal(err)
	}
	pods := readyPods(ctx, t, c, replicas[c])
	for _, p := range pods {
		if before[c][p.UID] {
			t.Errorf("%s pod %s was not replaced", c, p.Name)
		}
		if img := p.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+upgradeTag) {
			t.Errorf("%s pod %s runs %s, want tag %s", c, p.Name, img, upgradeTag)
		}
	}
	after := podUIDs(ctx, t)
	for _, other := range components {
		if other == c {
			continue
		}
		for uid := range after[other] {
			if !before[other][uid] {
				t.Errorf("%s got a new pod %s in an upgrade of %s only", other, uid, c)
			}
		}
		if len(after[other]) != len(before[other]) {
			t.Errorf("%s: %d pods before the upgrade, %d after", other, len(before[other]), len(after[other]))
		}
	}
}

// checkUninstall: `helm uninstall --wait` removes every pod and every object of the release (the
// CRDs stay, as crds.keep says), the webhook no longer intercepts requests, and the release namespace
// can be deleted without anything stuck on a finalizer.
func checkUninstall(ctx context.Context, t *testing.T) {
	if _, err := w.Helm(ctx, "uninstall", node.Release, "--namespace", node.Namespace, "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	sel := client.MatchingLabels{"app.kubernetes.io/instance": node.Release}
	eventually(ctx, t, "no pods, Services, ServiceAccounts or webhook configurations of the release", 3*time.Minute, func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		var svcs corev1.ServiceList
		var sas corev1.ServiceAccountList
		var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
		var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
		var crs rbacv1.ClusterRoleList
		for _, l := range []client.ObjectList{&pods, &svcs, &sas, &vwcs, &mwcs, &crs} {
			if err := w.Client.List(ctx, l, sel); err != nil {
				return false, err.Error()
			}
		}
		n := len(pods.Items) + len(svcs.Items) + len(sas.Items) + len(vwcs.Items) + len(mwcs.Items) + len(crs.Items)
		return n == 0, fmt.Sprintf("%d pods, %d services, %d serviceaccounts, %d validating and %d mutating webhook configurations, %d clusterroles left",
			len(pods.Items), len(svcs.Items), len(sas.Items), len(vwcs.Items), len(mwcs.Items), len(crs.Items))
	})
	// With the webhook gone, Colonies are accepted and deleted without a controller (no finalizer was
	// set on this one, because no controller runs).
	free := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-hook", Name: "after-uninstall"}}
	if err := w.Client.Create(ctx, free); err != nil {
		t.Fatalf("creating a Colony after uninstall: %v", err)
	}
	if err := w.Client.Delete(ctx, free); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: node.Namespace}}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the release namespace deleted", 3*time.Minute, func(ctx context.Context) (bool, string) {
		var ns corev1.Namespace
		err := w.Client.Get(ctx, types.NamespacedName{Name: node.Namespace}, &ns)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, conditions %v", ns.Status.Phase, ns.Status.Conditions)
	})
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := w.Client.Get(ctx, types.NamespacedName{Name: "colonies.infra.exalsius.ai"}, crd); err != nil {
		t.Errorf("the Colony CRD should stay after uninstall (crds.keep): %v", err)
	}
}
