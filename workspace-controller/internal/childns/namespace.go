package childns

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Namespaces acts on the release namespaces on the child cluster of one ClusterDeployment.
type Namespaces struct {
	// Child is a direct client of the child cluster; OlderSameName does not need it.
	Child client.Client
	// Workspaces reads the WorkspaceDeployments of the management cluster (the cache, with the
	// owned.IndexName index), for the older workspace of the same name.
	Workspaces client.Reader
	// Cluster is the ClusterDeployment of the child; messages and errors name it.
	Cluster types.NamespacedName
}

// Kind is what was found of ws-<name> on the child.
type Kind int

const (
	// Absent means there is no ws-<name> on the child.
	Absent Kind = iota
	// Usable means ws-<name> exists and is this workspace's to use (Check).
	Usable
	// Conflict means ws-<name> is another workspace's, or without owner labels and not adopted; Reason and
	// Message say so. The workspace fails until a human acts.
	Conflict
	// Terminating means ws-<name> is being deleted; it is made again once it is gone.
	Terminating
	// Ready means ws-<name> is owned by the workspace, enforces its Pod Security level and caps GPU requests
	// at the admission (Ensure); Message says so.
	Ready
)

// Outcome is what a look at ws-<name> found.
type Outcome struct {
	Kind Kind
	// Reason and Message are the condition's, for Conflict and Ready.
	Reason  string
	Message string
	// Namespace is ws-<name> as read; nil when Absent.
	Namespace *corev1.Namespace
	// Created: Ensure made the namespace (also when it then failed on its quota).
	Created bool
	// Corrected: Ensure patched drift in the namespace's labels or in the quota.
	Corrected bool
}

// Owner says who a release namespace on the child belongs to, from its labels.
type Owner int

const (
	// OwnerNone means the namespace carries no owner labels (made by an earlier version, or by Sveltos).
	OwnerNone Owner = iota
	// OwnerSelf means the labels name this workspace (its uid, or its namespace and name: an earlier
	// object of the same workspace, which is gone since names are unique).
	OwnerSelf
	// OwnerOther means the labels name another workspace.
	OwnerOther
)

// OwnerOf reads whose ns is from its labels; for OwnerOther, who names that workspace as ws's tenant
// may read it (text.WorkspaceSeenFrom: not at all when it is another namespace's).
func OwnerOf(ns *corev1.Namespace, ws *workspacesv1.WorkspaceDeployment) (owner Owner, who string) {
	l := ns.Labels
	name, namespace, uid := l[workspacesv1.WorkspaceLabel], l[workspacesv1.WorkspaceNamespaceLabel], l[workspacesv1.WorkspaceUIDLabel]
	switch {
	case name == "" && namespace == "" && uid == "":
		return OwnerNone, ""
	case uid != "" && uid == string(ws.UID):
		return OwnerSelf, ""
	case name == ws.Name && namespace == ws.Namespace:
		return OwnerSelf, ""
	}
	if namespace != ws.Namespace {
		// The status of ws is read by its tenant: another namespace's workspace is not named.
		return OwnerOther, text.WorkspaceSeenFrom(ws.Namespace, namespace, name)
	}
	return OwnerOther, fmt.Sprintf("workspace %s (uid %s)", name, uid)
}

// MayAdoptUnlabelled reports whether an existing ws-<name> without owner labels may be this
// workspace's: one it installed before (the child lost the labels, or Sveltos made the namespace
// again), or one the upstream operator made for it (a migrated workspace). Anything else without
// labels is someone else's (a platform team's namespace that happens to have the name) and is
// neither adopted nor deleted. The evidence is the workspace's status and the upstream finalizer or
// adopted ServiceSet, which only the controller writes or honours.
func MayAdoptUnlabelled(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.Status.ServiceSetName != "" || owned.AdoptedServiceSetName(ws) != "" ||
		controllerutil.ContainsFinalizer(ws, workspacesv1.LegacyFinalizer)
}

// PodSecurityLevel is the level ws-<name> enforces: the one the class asks for, baseline when it
// asks none (or there is no class).
func PodSecurityLevel(class *workspacesv1.WorkspaceClass) string {
	if class != nil && class.Spec.PodSecurityLevel != "" {
		return string(class.Spec.PodSecurityLevel)
	}
	return string(workspacesv1.PodSecurityBaseline)
}

// Want is the release namespace a workspace needs on the child.
type Want struct {
	Workspace *workspacesv1.WorkspaceDeployment
	// PodSecurityLevel is the level the namespace enforces (PodSecurityLevel of the class).
	PodSecurityLevel string
	// Admission is the gate's admission; the GPU quota caps requests at it (nil: no GPUs).
	Admission *workspacesv1.Admission
	// Devices are the device resources the child's nodes advertise (DeviceResources); the quota caps
	// each at 0 but the admitted one.
	Devices []corev1.ResourceName
	// ResourceClaims lets the pods use DRA ResourceClaims (the class's allowResourceClaims).
	ResourceClaims bool
	// Compute caps CPU, memory and pods (ComputeCap); nil for none.
	Compute corev1.ResourceList
	// Ingress is the NetworkPolicy spec of the namespace (IngressPolicy); nil for none.
	Ingress *networkingv1.NetworkPolicySpec
	// MeshLabels are the labels of the mesh mode (mesh.Config.ReleaseNamespaceLabels); nil for none.
	// Like the owner labels they are set where missing or different on every pass, so a namespace
	// relabelled by hand or made again by Sveltos joins the mesh again; a mesh label the mode does not
	// set is left alone (the platform team may have set it).
	MeshLabels map[string]string
}

// Namespace is ws-<name> as the controller makes it on the child: labelled with its owner, the Pod
// Security level and the mesh mode's labels.
func (w Want) Namespace() *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: owned.ReleaseNamespace(w.Workspace),
		Labels: map[string]string{
			workspacesv1.WorkspaceLabel:          w.Workspace.Name,
			workspacesv1.WorkspaceNamespaceLabel: w.Workspace.Namespace,
			workspacesv1.WorkspaceUIDLabel:       string(w.Workspace.UID),
			owned.LabelManagedBy:                 component.Name,
			owned.LabelPodSecurityEnforce:        w.PodSecurityLevel,
		},
	}}
	for k, v := range w.MeshLabels {
		ns.Labels[k] = v
	}
	return ns
}

// Quota is the namespace's GPU ResourceQuota (DesiredQuota).
func (w Want) Quota() *corev1.ResourceQuota {
	return DesiredQuota(owned.ReleaseNamespace(w.Workspace), w.Admission, w.Devices, w.ResourceClaims, w.Compute)
}

// Check applies the one rule of whose an existing ws-<name> is (see the package documentation):
// another workspace's or an unlabelled one this workspace may not adopt is a Conflict, one being
// deleted is Terminating, anything else is Usable. Ownership is checked first: a terminating
// namespace of another workspace is a conflict.
func (n Namespaces) Check(ns *corev1.Namespace, ws *workspacesv1.WorkspaceDeployment) Outcome {
	switch owner, who := OwnerOf(ns, ws); {
	case owner == OwnerOther:
		return Outcome{Kind: Conflict, Namespace: ns, Reason: workspacesv1.ReasonReleaseNamespaceConflict,
			Message: fmt.Sprintf("namespace %s on the child of ClusterDeployment %s belongs to %s; rename this workspace", ns.Name, n.Cluster, who)}
	case owner == OwnerNone && !MayAdoptUnlabelled(ws):
		return Outcome{Kind: Conflict, Namespace: ns, Reason: workspacesv1.ReasonReleaseNamespaceConflict,
			Message: fmt.Sprintf("namespace %s on the child of ClusterDeployment %s exists without the labels of a workspace and is not adopted; remove it or rename this workspace", ns.Name, n.Cluster)}
	}
	if !ns.DeletionTimestamp.IsZero() {
		return Outcome{Kind: Terminating, Namespace: ns}
	}
	return Outcome{Kind: Usable, Namespace: ns}
}

// Claim reads ws-<name> on the child, before the gate, and checks that it is this workspace's to use
// (Check): Absent, Usable, Conflict or Terminating. Ensure reuses the read.
func (n Namespaces) Claim(ctx context.Context, ws *workspacesv1.WorkspaceDeployment) (Outcome, error) {
	name := owned.ReleaseNamespace(ws)
	ns := &corev1.Namespace{}
	err := n.Child.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return Outcome{Kind: Absent}, nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("reading namespace %s on the child of %s: %w", name, n.Cluster, err)
	}
	return n.Check(ns, ws), nil
}

// Ensure makes ws-<name> on the child before the release: owned by the workspace, with its Pod
// Security level and a ResourceQuota capping GPUs at the admission. It corrects drift in the labels
// and quota the controller sets, and leaves everything else alone. claim is the Claim of this pass,
// whose read is reused (nil: read again). A namespace made by someone else since the claim is
// checked as any other (Check): the outcome is Ready, Conflict or Terminating. Created is reported
// even when the quota then fails.
func (n Namespaces) Ensure(ctx context.Context, want Want, claim *Outcome) (Outcome, error) {
	wantNS := want.Namespace()
	got := &corev1.Namespace{}
	var err error
	// The claim read the namespace a moment ago in this pass: that read is reused.
	switch {
	case claim != nil && claim.Namespace == nil:
		err = apierrors.NewNotFound(corev1.Resource("namespaces"), wantNS.Name)
	case claim != nil:
		got = claim.Namespace
	default:
		err = n.Child.Get(ctx, client.ObjectKeyFromObject(wantNS), got)
	}
	out := Outcome{}
	switch {
	case apierrors.IsNotFound(err):
		err = n.Child.Create(ctx, wantNS)
		if err == nil {
			out.Created, out.Namespace = true, wantNS
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return out, fmt.Errorf("creating namespace %s on the child of %s: %w", wantNS.Name, n.Cluster, err)
		}
		// Made by someone else since it was read: whose it is decides, not the name.
		if err := n.Child.Get(ctx, client.ObjectKeyFromObject(wantNS), got); err != nil {
			return out, fmt.Errorf("reading namespace %s on the child of %s: %w", wantNS.Name, n.Cluster, err)
		}
		if out, err = n.correct(ctx, want, wantNS, got); out.Kind != Usable || err != nil {
			return out, err
		}
	case err != nil:
		return out, fmt.Errorf("reading namespace %s on the child of %s: %w", wantNS.Name, n.Cluster, err)
	default:
		if out, err = n.correct(ctx, want, wantNS, got); out.Kind != Usable || err != nil {
			return out, err
		}
	}
	quota := want.Quota()
	patched, err := ensureQuota(ctx, n.Child, quota, out.Created)
	if err != nil {
		return out, fmt.Errorf("GPU quota in namespace %s on the child of %s: %w", wantNS.Name, n.Cluster, err)
	}
	npPatched, err := ensureNetworkPolicy(ctx, n.Child, wantNS.Name, want.Ingress, out.Created)
	if err != nil {
		return out, fmt.Errorf("NetworkPolicy in namespace %s on the child of %s: %w", wantNS.Name, n.Cluster, err)
	}
	out.Kind, out.Corrected = Ready, out.Corrected || patched || npPatched
	out.Reason = workspacesv1.ReasonReleaseNamespaceReady
	isolation := "admits ingress from anywhere"
	if want.Ingress != nil {
		isolation = "admits ingress only from itself and the data planes"
	}
	out.Message = fmt.Sprintf("namespace %s on the child is owned by the workspace, enforces Pod Security %q, %s and caps requests at %s",
		wantNS.Name, want.PodSecurityLevel, isolation, QuotaString(quota))
	return out, nil
}

// correct takes an existing ws-<name> in hand: Check decides whether it is this workspace's to use;
// a usable one gets the labels the controller sets where they drifted (everything else is left
// alone).
func (n Namespaces) correct(ctx context.Context, want Want, wantNS, got *corev1.Namespace) (Outcome, error) {
	out := n.Check(got, want.Workspace)
	if out.Kind != Usable {
		return out, nil
	}
	drift := false
	for k, v := range wantNS.Labels {
		if got.Labels[k] != v {
			drift = true
		}
	}
	if !drift {
		return out, nil
	}
	patchBase := got.DeepCopy()
	if got.Labels == nil {
		got.Labels = map[string]string{}
	}
	for k, v := range wantNS.Labels {
		got.Labels[k] = v
	}
	if err := n.Child.Patch(ctx, got, client.MergeFrom(patchBase)); err != nil {
		return Outcome{}, fmt.Errorf("labelling namespace %s on the child of %s: %w", wantNS.Name, n.Cluster, err)
	}
	out.Corrected = true
	return out, nil
}
