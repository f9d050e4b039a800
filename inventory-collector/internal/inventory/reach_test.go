package inventory

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

func kubeconfigOf(t testing.TB, server string, auth *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	b, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server, CertificateAuthorityData: mgmt.Config.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": auth},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChildrenCollectedIndependently: three black-holed children (accepting TCP, never answering)
// in one Colony with a healthy one. The collector here waits an hour for a connect's listing and
// connects at most two children at a time, so a collector that waits for one child before the next
// would never publish the healthy child; one that collects them independently publishes it, and
// then a node change on it.
func TestChildrenCollectedIndependently(t *testing.T) {
	ns := "inventory-independent"
	_, stop, err := startCollectorWith([]string{ns}, sharding.Shard{Count: 1}, func(o *Options) {
		o.ChildSyncTimeout = time.Hour
		o.MaxConcurrentConnects = 2
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	child, err := testenv.StartChild("independent")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Stop() }()
	if err := childtest.CreateNode(ctx, child.Client, childtest.Node{Name: "g1", Labels: map[string]string{labelModel: "H100"},
		Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8)}); err != nil {
		t.Fatal(err)
	}
	colony := colonyFixture(t, ns, "mixed", map[string]*testenv.Child{"z-good": child})
	var refs []any
	refs = append(refs, map[string]any{"name": "mixed-z-good", "namespace": ns})
	for _, name := range []string{"mixed-a-hole", "mixed-b-hole", "mixed-c-hole"} {
		createClusterDeployment(t, colony, name)
		if err := mgmt.WriteKubeconfigSecret(ctx, ns, name, kubeconfigOf(t, testenv.BlackHoleURL(t), &clientcmdapi.AuthInfo{Token: "t"})); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, map[string]any{"name": name, "namespace": ns})
	}
	applyColonyControllerStatus(t, colony, refs)
	key := types.NamespacedName{Namespace: ns, Name: "mixed"}
	waitInventory(t, key, "the healthy child is published", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["mixed-z-good"]
		return e.Reachable && len(e.Offerings) == 1 && e.Offerings[0].Total == 8 && e.LastContact != nil
	})
	if err := childtest.CreateNode(ctx, child.Client, childtest.Node{Name: "g2", Labels: map[string]string{labelModel: "H100"},
		Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8)}); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, key, "a node change on the healthy child is published", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["mixed-z-good"]
		return e.Reachable && len(e.Offerings) == 1 && e.Offerings[0].Total == 16
	})
}

// TestBadCredentialsReportedAtOnce: a child that answers 401 is shown unreachable with reason
// Unauthorized without waiting for the sync timeout (an hour here); a valid Secret written next is
// used at once, despite a backoff of an hour.
func TestBadCredentialsReportedAtOnce(t *testing.T) {
	ns := "inventory-auth"
	_, stop, err := startCollectorWith([]string{ns}, sharding.Shard{Count: 1}, func(o *Options) {
		o.ChildSyncTimeout = time.Hour
		o.ChildCluster.BackoffBase = time.Hour
		o.ChildCluster.BackoffMax = time.Hour
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	child := children[0]
	cfg, err := clientcmd.Load(child.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo] = &clientcmdapi.AuthInfo{Token: "revoked"}
	bad, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	colonyFixture(t, ns, "auth", map[string]*testenv.Child{"a": child})
	key := types.NamespacedName{Namespace: ns, Name: "auth"}
	waitInventory(t, key, "reachable with the good kubeconfig", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["auth-a"].Reachable
	})
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "auth-a", bad); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, key, "unreachable, Unauthorized", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["auth-a"]
		return !e.Reachable && strings.HasPrefix(e.Message, childcluster.ReasonUnauthorized)
	})
	// A user the child knows, with rights: used at once.
	user, err := child.Env.AddUser(envtest.User{Name: "fresh", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "auth-a", good); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, key, "reachable again with the rotated Secret", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["auth-a"]
		return e.Reachable && e.Message == ""
	})
}

// TestLastContactTellsQuietFromStale: a quiet, reachable child keeps its lastUpdated while its
// lastContact moves on (every ContactRefresh, 2s here); once it stops answering, lastContact stays.
func TestLastContactTellsQuietFromStale(t *testing.T) {
	ns := "inventory-contact"
	_, stop, err := startCollectorWith([]string{ns}, sharding.Shard{Count: 1}, func(o *Options) { o.ContactRefresh = 2 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	child, err := testenv.StartChild("contact")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Stop() }()
	colonyFixture(t, ns, "quiet", map[string]*testenv.Child{"a": child})
	key := types.NamespacedName{Namespace: ns, Name: "quiet"}
	first := waitInventory(t, key, "reachable", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["quiet-a"].Reachable && inv["quiet-a"].LastContact != nil
	})["quiet-a"]
	later := waitInventory(t, key, "lastContact moves on, lastUpdated stays", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["quiet-a"]
		return e.LastContact != nil && e.LastContact.After(first.LastContact.Time) && e.LastUpdated.Equal(&first.LastUpdated)
	})["quiet-a"]
	if err := child.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Resume() }()
	gone := waitInventory(t, key, "unreachable", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return !inv["quiet-a"].Reachable
	})["quiet-a"]
	if gone.LastContact == nil || gone.LastContact.Before(later.LastContact) {
		t.Fatalf("an unreachable child keeps its last contact: before %v, now %v", later.LastContact, gone.LastContact)
	}
}
