package gate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func resources(gpus int32, replicas int32, gpuType string) *workspacesv1.ResolvedResources {
	return &workspacesv1.ResolvedResources{Replicas: replicas, GPUResourceName: "nvidia.com/gpu",
		PerReplica: workspacesv1.PerReplicaResources{GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUCount: &gpus, GPUType: gpuType}}
}

// An admission covers exactly what it granted: cluster, replicas, GPUs per replica, vendor and
// selector; a CPU-only admission covers any CPU-only resources on its cluster.
func TestCovers(t *testing.T) {
	res := resources(2, 2, "H100")
	ad := newAdmission("team/cd", res, gpu.Decision{Selector: Selector(res)}, nil, time.Now())
	if !Covers(ad, "team/cd", res) {
		t.Fatal("an admission does not cover the resources it was made for")
	}
	for name, other := range map[string]*workspacesv1.ResolvedResources{
		"more replicas":   resources(2, 3, "H100"),
		"more GPUs":       resources(4, 2, "H100"),
		"another model":   resources(2, 2, "A100"),
		"no model at all": resources(2, 2, ""),
	} {
		if Covers(ad, "team/cd", other) {
			t.Errorf("%s: covered by the old admission", name)
		}
	}
	if Covers(ad, "team/other", res) || Covers(nil, "team/cd", res) {
		t.Error("another cluster, or no admission, covers the resources")
	}
	cpu := resources(0, 1, "")
	if !Covers(newAdmission("team/cd", cpu, gpu.Decision{}, nil, time.Now()), "team/cd", cpu) {
		t.Error("a CPU-only admission does not cover its resources")
	}
}

// A new admission records the nodes the replicas were counted on, with their hostnames, and the model
// they share; it pins the workspace only when one node with a hostname holds every replica.
func TestNewAdmissionAndPin(t *testing.T) {
	node := func(name, host, model string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: host, gpu.LabelGPUModel: model}}}
	}
	nodes := []corev1.Node{node("n1", "h1", "H100"), node("n2", "", "H100")}
	res := resources(1, 2, "")
	one := newAdmission("team/cd", res, gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n1", Replicas: 2}}}, nodes, time.Now())
	if one.GPUs != 2 || one.GPUModel != "H100" || len(one.Nodes) != 1 || one.Nodes[0].Hostname != "h1" {
		t.Fatalf("admission %+v", one)
	}
	if pin := PinSelector(one); pin[corev1.LabelHostname] != "h1" {
		t.Fatalf("pin %v, want the hostname h1", pin)
	}
	spread := newAdmission("team/cd", res, gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n1", Replicas: 1}, {Node: "n2", Replicas: 1}}}, nodes, time.Now())
	if PinSelector(spread) != nil {
		t.Fatal("replicas on two nodes are pinned to one")
	}
	noHost := newAdmission("team/cd", res, gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n2", Replicas: 2}}}, nodes, time.Now())
	if PinSelector(noHost) != nil {
		t.Fatal("a node without a hostname label is pinned")
	}
}

// A workspace that cannot be pinned waits while another's counted replicas are unbound on a node it
// could take; a pinned one waits only for an unpinned workspace that could still take its node.
func TestUnpinnedOverlap(t *testing.T) {
	node := func(name, host string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: host}}}
	}
	nodes := []corev1.Node{node("n1", "h1"), node("n2", "h2")}
	pinned := gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n1", Replicas: 1}}}
	spread := gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n1", Replicas: 1}, {Node: "n2", Replicas: 1}}}
	other := gpu.Reservation{Key: "team/other", Node: "n2", GPUsPerReplica: 1, Replicas: 1}
	if why := unpinnedOverlap("team", spread, nodes, heldGPUs{admitted: []gpu.Reservation{other}}); !strings.Contains(why, "workspace other on node n2") {
		t.Fatalf("a spread workspace is admitted while another's replicas are unbound: %q", why)
	}
	// Seen from another namespace, the workspace is not named.
	if why := unpinnedOverlap("rival", spread, nodes, heldGPUs{admitted: []gpu.Reservation{other}}); !strings.Contains(why, "a workspace of another namespace") || strings.Contains(why, "team") {
		t.Fatalf("a wait names another namespace's workspace: %q", why)
	}
	if why := unpinnedOverlap("team", pinned, nodes, heldGPUs{admitted: []gpu.Reservation{other}}); why != "" {
		t.Fatalf("a pinned workspace waits for a pinned one elsewhere: %q", why)
	}
	loose := gpu.Reservation{Key: "team/loose", GPUsPerReplica: 1, Replicas: 1}
	if why := unpinnedOverlap("team", pinned, nodes, heldGPUs{admitted: []gpu.Reservation{loose}, unpinned: map[string]bool{"team/loose": true}}); !strings.Contains(why, "workspace loose is spread") {
		t.Fatalf("a pinned workspace takes a node an unpinned workspace could still take: %q", why)
	}
	if why := unpinnedOverlap("rival", pinned, nodes, heldGPUs{admitted: []gpu.Reservation{loose}, unpinned: map[string]bool{"team/loose": true}}); !strings.HasPrefix(why, "a workspace of another namespace is spread") {
		t.Fatalf("a wait names another namespace's workspace: %q", why)
	}
}

// What holds GPUs: an admission of a workspace not Failed nor deleted, or any admission whose
// ServiceSet exists.
func TestHoldsGPUs(t *testing.T) {
	ad := &workspacesv1.Admission{GPUs: 1}
	live := &workspacesv1.WorkspaceDeployment{}
	gone := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
	for _, c := range []struct {
		name   string
		o      *workspacesv1.WorkspaceDeployment
		ad     *workspacesv1.Admission
		phase  workspacesv1.WorkspacePhase
		hasSet bool
		want   bool
	}{
		{"admitted", live, ad, workspacesv1.PhaseDeploying, false, true},
		{"no admission", live, nil, workspacesv1.PhaseRunning, true, false},
		{"failed", live, ad, workspacesv1.PhaseFailed, false, false},
		{"failed with its release", live, ad, workspacesv1.PhaseFailed, true, true},
		{"deleted", gone, ad, workspacesv1.PhaseDeleting, false, false},
		{"deleted, release still there", gone, ad, workspacesv1.PhaseDeleting, true, true},
	} {
		if got := holdsGPUs(c.o, c.ad, c.phase, c.hasSet); got != c.want {
			t.Errorf("%s: holds %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBindsNoMore: an admitted workspace's unbound replicas stop reserving GPUs once it is being
// deleted, or once the current rollout of its release passed its deploy deadline without being
// deployed; not while k0rdent may still bind them (a Failed release within the deadline: k0rdent
// retries it), and not for a rollout deployed once (a replica not bound then is a pod being
// replaced).
func TestBindsNoMore(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	stamp := start.Format(time.RFC3339)
	set := func(ann map[string]string) *k0rdentv1beta1.ServiceSet {
		return &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
	}
	undeployed := set(map[string]string{owned.AnnotationRolloutStarted: stamp})
	deployed := set(map[string]string{owned.AnnotationRolloutStarted: stamp, owned.AnnotationRolloutDeployed: stamp})
	earlierDeployed := set(map[string]string{owned.AnnotationRolloutStarted: stamp,
		owned.AnnotationRolloutDeployed: start.Add(-time.Hour).Format(time.RFC3339)})
	live := &workspacesv1.WorkspaceDeployment{}
	gone := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: start}}}
	timeout := 15 * time.Minute
	for _, c := range []struct {
		name    string
		o       *workspacesv1.WorkspaceDeployment
		set     *k0rdentv1beta1.ServiceSet
		timeout time.Duration
		at      time.Duration // after the rollout started
		want    bool
	}{
		{"within the deadline", live, undeployed, timeout, timeout - time.Second, false},
		{"at the deadline", live, undeployed, timeout, timeout, true},
		{"past the deadline", live, undeployed, timeout, 2 * timeout, true},
		{"deployed once, past the deadline", live, deployed, timeout, 2 * timeout, false},
		{"an earlier rollout deployed, this one past the deadline", live, earlierDeployed, timeout, 2 * timeout, true},
		{"timeout not known", live, undeployed, 0, 2 * timeout, false},
		{"no ServiceSet", live, nil, timeout, 2 * timeout, false},
		{"no rollout stamp", live, set(nil), timeout, 2 * timeout, false},
		{"a stamp that is no time", live, set(map[string]string{owned.AnnotationRolloutStarted: "yesterday"}), timeout, 2 * timeout, false},
		{"being deleted", gone, undeployed, timeout, 0, true},
		{"being deleted, deployed", gone, deployed, 0, 0, true},
	} {
		if got := bindsNoMore(c.o, c.set, c.timeout, start.Add(c.at)); got != c.want {
			t.Errorf("%s: binds no more %v, want %v", c.name, got, c.want)
		}
	}
}
