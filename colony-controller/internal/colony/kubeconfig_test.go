package colony

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

func TestBuildKubeconfigs(t *testing.T) {
	a := fakeKubeconfig(t, "https://a.example:6443", "token-a")
	b := fakeKubeconfig(t, "https://b.example:6443", "token-b")
	shards, included, problems := buildKubeconfigs([]childKubeconfig{
		{clusterName: "alpha", data: a},
		{clusterName: "broken", data: []byte("not: [a kubeconfig")},
		{clusterName: "empty", data: nil},
		{clusterName: "beta", data: b},
	}, DefaultShardBytes)
	if strings.Join(included, ",") != "alpha,beta" {
		t.Errorf("included %v", included)
	}
	if problems["broken"] != "its kubeconfig does not parse" || problems["empty"] != "its kubeconfig is empty" || len(problems) != 2 {
		t.Errorf("problems %v", problems)
	}
	for _, p := range problems {
		if strings.Contains(p, "not: [a") {
			t.Errorf("problem quotes the Secret: %q", p)
		}
	}
	if len(shards) != 1 {
		t.Fatalf("%d shards, want 1", len(shards))
	}
	merged, err := clientcmd.Load(shards[0].data)
	if err != nil {
		t.Fatal(err)
	}
	if merged.CurrentContext != "alpha" || len(merged.Contexts) != 2 {
		t.Errorf("merged: current %q, %d contexts", merged.CurrentContext, len(merged.Contexts))
	}
	for name, want := range map[string]struct{ server, token string }{"alpha": {"https://a.example:6443", "token-a"}, "beta": {"https://b.example:6443", "token-b"}} {
		ctx := merged.Contexts[name]
		if ctx == nil || ctx.Cluster != name || ctx.AuthInfo != name {
			t.Fatalf("context %s: %+v", name, ctx)
		}
		if merged.Clusters[name].Server != want.server || merged.AuthInfos[name].Token != want.token {
			t.Errorf("context %s reaches %s with %q", name, merged.Clusters[name].Server, merged.AuthInfos[name].Token)
		}
	}
	// Each kubeconfig once: the merged kubeconfig is about the size of the two on their own.
	if len(shards[0].data) > len(a)+len(b)+200 {
		t.Errorf("merged kubeconfig %d bytes for two of %d and %d", len(shards[0].data), len(a), len(b))
	}
	if got := string(kubeconfigIndex("col", shards)); got != "alpha col-kubeconfig\nbeta col-kubeconfig\n" {
		t.Errorf("index %q", got)
	}
	// Deterministic: the same input gives the same bytes, so an unchanged Secret is not rewritten.
	again, _, _ := buildKubeconfigs([]childKubeconfig{{clusterName: "alpha", data: a}, {clusterName: "beta", data: b}}, DefaultShardBytes)
	if !bytes.Equal(again[0].data, shards[0].data) {
		t.Error("merged kubeconfig is not deterministic")
	}
	// Nothing ready: an empty but valid kubeconfig.
	empty, included, _ := buildKubeconfigs(nil, DefaultShardBytes)
	if cfg, err := clientcmd.Load(empty[0].data); len(empty) != 1 || err != nil || len(cfg.Contexts) != 0 || len(included) != 0 {
		t.Errorf("empty kubeconfig: %v %+v", err, cfg)
	}
}

// TestBuildKubeconfigShards: kubeconfigs that do not fit one Secret's budget are spread over
// several, each once, in order; one that alone exceeds the budget is left out and said why.
func TestBuildKubeconfigShards(t *testing.T) {
	var children []childKubeconfig
	for i := range 5 {
		children = append(children, childKubeconfig{clusterName: fmt.Sprintf("c%d", i),
			data: fakeKubeconfig(t, fmt.Sprintf("https://c%d.example:6443", i), strings.Repeat("t", 300))})
	}
	children = append(children, childKubeconfig{clusterName: "huge", data: fakeKubeconfig(t, "https://h.example:6443", strings.Repeat("t", 3000))})
	budget := 2*len(children[0].data) + 100 // two per Secret
	shards, included, problems := buildKubeconfigs(children, budget)
	if len(shards) != 3 || len(included) != 5 {
		t.Fatalf("%d shards, %d included; want 3 and 5", len(shards), len(included))
	}
	seen := map[string]int{}
	for i, sh := range shards {
		cfg, err := clientcmd.Load(sh.data)
		if err != nil {
			t.Fatal(err)
		}
		if len(sh.data) > budget+200 {
			t.Errorf("shard %d: %d bytes over a budget of %d", i, len(sh.data), budget)
		}
		for name := range cfg.Contexts {
			seen[name]++
		}
		if cfg.CurrentContext != sh.clusters[0] {
			t.Errorf("shard %d current context %q", i, cfg.CurrentContext)
		}
	}
	for _, c := range included {
		if seen[c] != 1 {
			t.Errorf("%s in %d shards", c, seen[c])
		}
	}
	if !strings.Contains(problems["huge"], "does not fit in a Secret") {
		t.Errorf("problems %v", problems)
	}
	index := string(kubeconfigIndex("col", shards))
	for _, want := range []string{"c0 col-kubeconfig\n", "c2 col-kubeconfig-1\n", "c4 col-kubeconfig-2\n"} {
		if !strings.Contains(index, want) {
			t.Errorf("index %q lacks %q", index, want)
		}
	}
}

func TestExtractContext(t *testing.T) {
	two := []byte(`apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://one"}
- name: c2
  cluster: {server: "https://two"}
users:
- name: u
  user: {token: t}
contexts:
- name: first
  context: {cluster: c1, user: u}
- name: second
  context: {cluster: c2, user: u, namespace: ns}
current-context: second
`)
	cluster, user, namespace, problem := extractContext(two)
	if problem != "" || cluster.Server != "https://two" || user.Token != "t" || namespace != "ns" {
		t.Errorf("current context not used: %v %+v %+v %q", problem, cluster, user, namespace)
	}
	noCurrent := bytes.Replace(two, []byte("current-context: second"), nil, 1)
	if _, _, _, problem := extractContext(noCurrent); problem != "its kubeconfig has no current context" {
		t.Errorf("two contexts without current: %q", problem)
	}
	noServer := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: x\n  context: {cluster: c}\n")
	if _, _, _, problem := extractContext(noServer); !strings.Contains(problem, "no cluster with a server") {
		t.Errorf("no server: %q", problem)
	}
	if _, _, _, problem := extractContext([]byte("apiVersion: v1\nkind: Config\ncontexts:\n- name: x\n  context: {cluster: missing}\n")); problem == "" {
		t.Error("a context naming a missing cluster accepted")
	}
}

func FuzzBuildKubeconfigs(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("clusters: [{name: c, cluster: {server: x}}]\ncontexts: [{name: x, context: {cluster: c, user: missing}}]"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		shards, included, problems := buildKubeconfigs([]childKubeconfig{{clusterName: "c", data: raw}}, DefaultShardBytes)
		if len(included)+len(problems) != 1 {
			t.Fatalf("the cluster is neither included nor reported: %v %v", included, problems)
		}
		if len(raw) > 8 && strings.Contains(problems["c"], string(raw)) {
			t.Fatal("problem quotes the kubeconfig")
		}
		if _, err := clientcmd.Load(shards[0].data); err != nil {
			t.Fatalf("merged kubeconfig does not load: %v", err)
		}
	})
}

// reachAll builds a client from every context of a kubeconfig and lists namespaces, returning the
// namespaces each context sees.
func reachAll(t *testing.T, kubeconfig []byte) map[string]map[string]bool {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for name := range cfg.Contexts {
		rest, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		cs, err := kubernetes.NewForConfig(rest)
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("context %s does not reach its cluster: %v", name, err)
		}
		out[name] = map[string]bool{}
		for _, ns := range list.Items {
			out[name][ns.Name] = true
		}
	}
	return out
}

func readSecret(t *testing.T, ns, name string) (*corev1.Secret, error) {
	t.Helper()
	s := &corev1.Secret{}
	err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	return s, err
}

// TestKubeconfigAggregation runs two separate child API servers: the Colony's merged kubeconfig has
// a context for each that really reaches it, per-cluster keys work on their own, a rotated child
// Secret is followed, and edits to or deletion of the merged Secret are corrected.
func TestKubeconfigAggregation(t *testing.T) {
	children := map[string]*testenv.Child{}
	for _, name := range []string{"east", "west"} {
		ch, err := testenv.StartChild(name)
		if err != nil {
			t.Fatalf("starting child %s: %v", name, err)
		}
		t.Cleanup(func() { _ = ch.Stop() })
		children[name] = ch
		// A namespace only this child has, to tell the children apart.
		marker := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-on-" + name}}
		if err := ch.Client.Create(context.Background(), marker); err != nil {
			t.Fatal(err)
		}
	}

	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "fleet", entry(t, "east", nil), entry(t, "west", nil), entry(t, "late", nil))
	for name, ch := range children {
		waitCD(t, ns, "fleet-"+name, name, nil)
		setCDConditions(t, ns, "fleet-"+name, cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
		if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "fleet-"+name, ch.Kubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	waitColony(t, ns, "fleet", "two of three ready", all(phaseIs(infrav1.ColonyPhaseProvisioning),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady,
			"2/3 clusters ready", "left out of Secret fleet-kubeconfig: late (ClusterDeployment fleet-late)"),
		func(c *infrav1.Colony) error {
			if c.Status.KubeconfigSecretName != "fleet-kubeconfig" || c.Status.ReadyClusters != 2 {
				return fmt.Errorf("status %+v", c.Status)
			}
			return nil
		}))

	var secret *corev1.Secret
	eventually(t, "merged kubeconfig with two contexts", func() error {
		var err error
		if secret, err = readSecret(t, ns, "fleet-kubeconfig"); err != nil {
			return err
		}
		cfg, err := clientcmd.Load(secret.Data[KubeconfigKey])
		if err != nil {
			return err
		}
		if len(cfg.Contexts) != 2 || cfg.Contexts["east"] == nil || cfg.Contexts["west"] == nil {
			return fmt.Errorf("contexts %v", cfg.Contexts)
		}
		return nil
	})
	if ref := metav1.GetControllerOf(secret); ref == nil || ref.Kind != "Colony" || ref.Name != "fleet" {
		t.Errorf("merged Secret's controller: %+v", ref)
	}
	if strings.Contains(string(secret.Data[IndexKey]), "late") {
		t.Error("a cluster that is not ready is in the Secret")
	}
	if string(secret.Data[IndexKey]) != "east fleet-kubeconfig\nwest fleet-kubeconfig\n" || len(secret.Data) != 2 {
		t.Errorf("keys %d, index %q", len(secret.Data), secret.Data[IndexKey])
	}
	seen := reachAll(t, secret.Data[KubeconfigKey])
	for name := range children {
		other := map[string]string{"east": "west", "west": "east"}[name]
		if !seen[name]["only-on-"+name] || seen[name]["only-on-"+other] {
			t.Errorf("context %s sees %v: it must reach child %s and only it", name, seen[name], name)
		}
	}

	// Rotation: the east child's Secret gets a new credential; the merged Secret follows.
	rotated, err := children["east"].Env.AddUser(envtest.User{Name: "rotated", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rotatedKubeconfig, err := rotated.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "fleet-east", rotatedKubeconfig); err != nil {
		t.Fatal(err)
	}
	wantCert := userCert(t, rotatedKubeconfig)
	eventually(t, "merged kubeconfig follows the rotation", func() error {
		s, err := readSecret(t, ns, "fleet-kubeconfig")
		if err != nil {
			return err
		}
		cfg, err := clientcmd.Load(s.Data[KubeconfigKey])
		if err != nil {
			return err
		}
		if !bytes.Equal(cfg.AuthInfos["east"].ClientCertificateData, wantCert) {
			return errors.New("east still has the old credential")
		}
		return nil
	})
	secret, _ = readSecret(t, ns, "fleet-kubeconfig")
	if seen := reachAll(t, secret.Data[KubeconfigKey]); !seen["east"]["only-on-east"] || !seen["west"]["only-on-west"] {
		t.Errorf("after rotation: %v", seen)
	}

	// Drift: an edit of the merged Secret is undone, a deleted one comes back.
	want := secret.Data[KubeconfigKey]
	secret.Data[KubeconfigKey] = []byte("tampered")
	secret.Data["extra"] = []byte("x")
	if err := mgmt.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "edited Secret corrected", func() error {
		s, err := readSecret(t, ns, "fleet-kubeconfig")
		if err != nil {
			return err
		}
		if !bytes.Equal(s.Data[KubeconfigKey], want) || s.Data["extra"] != nil {
			return errors.New("not corrected yet")
		}
		return nil
	})
	if err := mgmt.Client.Delete(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted Secret recreated", func() error {
		s, err := readSecret(t, ns, "fleet-kubeconfig")
		if err != nil {
			return err
		}
		if s.UID == secret.UID || !bytes.Equal(s.Data[KubeconfigKey], want) {
			return errors.New("not recreated yet")
		}
		return nil
	})

	// A cluster that stops being ready leaves the Secret.
	setCDConditions(t, ns, "fleet-west", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionFalse, k0rdentv1beta1.ProgressingReason))
	eventually(t, "west left out", func() error {
		s, err := readSecret(t, ns, "fleet-kubeconfig")
		if err != nil {
			return err
		}
		cfg, err := clientcmd.Load(s.Data[KubeconfigKey])
		if err != nil {
			return err
		}
		if cfg.Contexts["west"] != nil || strings.Contains(string(s.Data[IndexKey]), "west") || cfg.Contexts["east"] == nil {
			return fmt.Errorf("contexts %v", cfg.Contexts)
		}
		return nil
	})
}

func userCert(t *testing.T, kubeconfig []byte) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].ClientCertificateData
}

// TestKubeconfigSecretConflict: a Secret of the Colony's kubeconfig name that the Colony does not
// control is never overwritten; the Colony says so.
func TestKubeconfigSecretConflict(t *testing.T) {
	ns := newNamespace(t)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col-kubeconfig"}, Data: map[string][]byte{"mine": []byte("x")}}
	if err := mgmt.Client.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil))
	waitCD(t, ns, "col-a", "col-a", nil)
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "col-a", fakeKubeconfig(t, "https://a.example", "t")); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "conflict reported", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonKubeconfigSecretFailed,
			"Secret col-kubeconfig exists and is not controlled by this Colony")))
	s, err := readSecret(t, ns, "col-kubeconfig")
	if err != nil || string(s.Data["mine"]) != "x" || len(s.Data) != 1 || metav1.GetControllerOf(s) != nil {
		t.Errorf("foreign Secret changed: %v %+v", err, s)
	}

	// Once it is gone, the Colony writes its own.
	if err := mgmt.Client.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "Ready once the name is free", phaseIs(infrav1.ColonyPhaseReady))
	if _, err := readSecret(t, ns, "col-kubeconfig"); apierrors.IsNotFound(err) {
		t.Error("the Colony's Secret was not written")
	}
}
