package colony

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// realisticKubeconfig is a kubeconfig of the size k0rdent writes (about 5.4 KB): a CA, a client
// certificate and key, here random bytes of the usual sizes.
func realisticKubeconfig(t *testing.T, server string) []byte {
	t.Helper()
	random := func(n int) []byte {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: random(1100)}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: random(1150), ClientKeyData: random(1675)}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "ctx"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKubeconfigAt256Clusters: a Colony of 256 ready clusters with realistic kubeconfigs (about
// 1.4 MB together, more than one Secret may hold) is Ready 256/256; every cluster's context is in
// exactly one of the Colony's kubeconfig Secrets, each under the size limit, and the index names it;
// a rotation is followed; when the Colony shrinks, the Secrets no longer needed go.
func TestKubeconfigAt256Clusters(t *testing.T) {
	const n = 256
	ns := newNamespace(t)
	ctx := context.Background()
	startManager(t, ns)
	var entries []infrav1.ColonyCluster
	for i := range n {
		entries = append(entries, entry(t, fmt.Sprintf("c%03d", i), nil))
	}
	createColony(t, ns, "big", entries...)
	total := 0
	for i := range n {
		cd := fmt.Sprintf("big-c%03d", i)
		waitCD(t, ns, cd, cd, nil)
		setCDConditions(t, ns, cd, cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
		kc := realisticKubeconfig(t, fmt.Sprintf("https://%s.example:6443", cd))
		total += len(kc)
		if err := mgmt.WriteKubeconfigSecret(ctx, ns, cd, kc); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kubeconfigs, %d bytes together", n, total)
	waitColony(t, ns, "big", "Ready 256/256", all(phaseIs(infrav1.ColonyPhaseReady), func(c *infrav1.Colony) error {
		if c.Status.ReadyClusters != n {
			return fmt.Errorf("ready %d", c.Status.ReadyClusters)
		}
		return nil
	}))
	check := func(want int) map[string]string {
		t.Helper()
		where := map[string]string{}
		var index string
		eventually(t, fmt.Sprintf("%d contexts, each in one Secret", want), func() error {
			where = map[string]string{}
			list := &corev1.SecretList{}
			if err := mgmt.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{infrav1.ColonyLabel: "big"}); err != nil {
				return err
			}
			for _, s := range list.Items {
				size := 0
				for _, v := range s.Data {
					size += len(v)
				}
				if size > 1<<20 {
					return fmt.Errorf("Secret %s holds %d bytes", s.Name, size)
				}
				if s.Name == "big-kubeconfig" {
					index = string(s.Data[IndexKey])
				}
				cfg, err := clientcmd.Load(s.Data[KubeconfigKey])
				if err != nil {
					return err
				}
				for name := range cfg.Contexts {
					if other, dup := where[name]; dup {
						return fmt.Errorf("%s in %s and %s", name, other, s.Name)
					}
					where[name] = s.Name
				}
			}
			if len(where) != want {
				return fmt.Errorf("%d contexts in %d Secrets", len(where), len(list.Items))
			}
			for name, secret := range where {
				if !strings.Contains(index, name+" "+secret+"\n") {
					return fmt.Errorf("index lacks %s in %s", name, secret)
				}
			}
			return nil
		})
		return where
	}
	where := check(n)
	secrets := map[string]bool{}
	for _, s := range where {
		secrets[s] = true
	}
	if len(secrets) < 2 {
		t.Fatalf("256 realistic kubeconfigs in %d Secret(s)", len(secrets))
	}
	waitColony(t, ns, "big", "Ready names every Secret", conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionTrue,
		infrav1.ColonyReasonAllClustersReady, "Kubeconfigs in Secrets big-kubeconfig, big-kubeconfig-1"))

	// Rotation of the last cluster: its Secret follows.
	rotated := realisticKubeconfig(t, "https://rotated.example:6443")
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, fmt.Sprintf("big-c%03d", n-1), rotated); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("c%03d", n-1)
	eventually(t, "the rotation is followed", func() error {
		s := &corev1.Secret{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: where[last]}, s); err != nil {
			return err
		}
		cfg, err := clientcmd.Load(s.Data[KubeconfigKey])
		if err != nil {
			return err
		}
		if cfg.Clusters[last] == nil || cfg.Clusters[last].Server != "https://rotated.example:6443" {
			return fmt.Errorf("%s not rotated", last)
		}
		return nil
	})

	// Shrink to 10: one Secret is enough; the others are emptied (the controller may not delete
	// Secrets; garbage collection removes them with the Colony).
	updateColony(t, ns, "big", func(c *infrav1.Colony) { c.Spec.ColonyClusters = c.Spec.ColonyClusters[:10] })
	where = check(10)
	for _, s := range where {
		if s != "big-kubeconfig" {
			t.Fatalf("after shrinking, a context is in %s", s)
		}
	}
	eventually(t, "further Secrets emptied", func() error {
		list := &corev1.SecretList{}
		if err := mgmt.Client.List(ctx, list, client.InNamespace(ns), client.HasLabels{ShardLabel}); err != nil {
			return err
		}
		for _, s := range list.Items {
			cfg, err := clientcmd.Load(s.Data[KubeconfigKey])
			if err != nil {
				return err
			}
			if len(cfg.Contexts) != 0 {
				return fmt.Errorf("%s still has %d contexts", s.Name, len(cfg.Contexts))
			}
		}
		return nil
	})
}
