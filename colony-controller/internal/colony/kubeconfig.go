package colony

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	kcmv1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/names"
)

const (
	// KubeconfigKey is the data key of the merged kubeconfig in a Colony's kubeconfig Secret: one
	// context per ready cluster, named after the cluster's clusterName.
	KubeconfigKey = "kubeconfig"
	// PerClusterKeySuffix follows a clusterName in the data key of that cluster's own kubeconfig in
	// the Colony's kubeconfig Secret: `<clusterName>.kubeconfig`.
	PerClusterKeySuffix = ".kubeconfig"
	// secretNameMax is the longest Secret name.
	secretNameMax = 253
)

// KubeconfigSecretName returns the name of a Colony's kubeconfig Secret: `<colony>-kubeconfig`.
func KubeconfigSecretName(colony string) string {
	return names.Bounded(secretNameMax, colony, "kubeconfig")
}

// PerClusterKey returns the data key of one cluster's kubeconfig in the Colony's Secret.
func PerClusterKey(clusterName string) string {
	return clusterName + PerClusterKeySuffix
}

// childKubeconfig is the kubeconfig Secret content of one ready cluster.
type childKubeconfig struct {
	clusterName string
	data        []byte
}

// buildKubeconfigs returns the Secret data of a Colony: the merged kubeconfig under KubeconfigKey and
// one kubeconfig per cluster under PerClusterKey. Each child's current context (or its only context)
// becomes a cluster, a user and a context named after the clusterName; the merged kubeconfig's
// current context is the first cluster. A child whose kubeconfig is unusable is left out and
// reported in problems (by clusterName); the message never quotes the kubeconfig.
func buildKubeconfigs(children []childKubeconfig) (map[string][]byte, []string, map[string]string) {
	merged := clientcmdapi.NewConfig()
	data := map[string][]byte{}
	problems := map[string]string{}
	var included []string
	for _, child := range children {
		cluster, user, namespace, problem := extractContext(child.data)
		if problem != "" {
			problems[child.clusterName] = problem
			continue
		}
		single := clientcmdapi.NewConfig()
		for _, cfg := range []*clientcmdapi.Config{merged, single} {
			cfg.Clusters[child.clusterName] = cluster.DeepCopy()
			cfg.AuthInfos[child.clusterName] = user.DeepCopy()
			cfg.Contexts[child.clusterName] = &clientcmdapi.Context{
				Cluster: child.clusterName, AuthInfo: child.clusterName, Namespace: namespace,
			}
		}
		single.CurrentContext = child.clusterName
		if merged.CurrentContext == "" {
			merged.CurrentContext = child.clusterName
		}
		b, err := clientcmd.Write(*single)
		if err != nil {
			problems[child.clusterName] = "its kubeconfig cannot be serialised"
			delete(merged.Clusters, child.clusterName)
			delete(merged.AuthInfos, child.clusterName)
			delete(merged.Contexts, child.clusterName)
			continue
		}
		data[PerClusterKey(child.clusterName)] = b
		included = append(included, child.clusterName)
	}
	if len(included) > 0 && merged.CurrentContext != included[0] {
		merged.CurrentContext = included[0]
	}
	b, err := clientcmd.Write(*merged)
	if err != nil {
		// Every part serialised on its own above; this cannot fail in practice.
		b = nil
	}
	data[KubeconfigKey] = b
	return data, included, problems
}

// extractContext returns the cluster, user and namespace of a kubeconfig's current context (or of
// its only context), or a problem that names no content.
func extractContext(data []byte) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, string, string) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, "", "its kubeconfig is empty"
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// The parse error may quote the Secret's content: never pass it on.
		return nil, nil, "", "its kubeconfig does not parse"
	}
	name := cfg.CurrentContext
	if name == "" && len(cfg.Contexts) == 1 {
		for n := range cfg.Contexts {
			name = n
		}
	}
	kctx, ok := cfg.Contexts[name]
	if !ok || kctx == nil {
		return nil, nil, "", "its kubeconfig has no current context"
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cluster == nil || cluster.Server == "" {
		return nil, nil, "", "its kubeconfig's current context names no cluster with a server"
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	if user == nil {
		user = clientcmdapi.NewAuthInfo()
	}
	cluster, user = cluster.DeepCopy(), user.DeepCopy()
	cluster.LocationOfOrigin, user.LocationOfOrigin = "", ""
	cluster.Extensions, user.Extensions = nil, nil
	return cluster, user, kctx.Namespace, ""
}

// kubeconfigResult is what the Colony's kubeconfig Secret holds.
type kubeconfigResult struct {
	// secretName is set once the Secret exists.
	secretName string
	// included lists the clusterNames whose context is in the Secret.
	included map[string]bool
	// problems maps a clusterName, ready by its ClusterDeployment, to why it was left out.
	problems map[string]string
	// conflict is set when a Secret of that name exists and the Colony does not control it.
	conflict string
}

// kubeconfigMemo remembers, per Colony, the inputs of the last Secret write or check: the
// resourceVersions of its own Secret and of every ready child's Secret. While they stay the same,
// nothing is read: Secret data is read (with the API reader, never cached) only when one changed.
type kubeconfigMemo struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]memoEntry
}

type memoEntry struct {
	fingerprint string
	result      kubeconfigResult
}

func newKubeconfigMemo() *kubeconfigMemo {
	return &kubeconfigMemo{entries: map[types.NamespacedName]memoEntry{}}
}

func (m *kubeconfigMemo) get(key types.NamespacedName, fingerprint string) (kubeconfigResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || e.fingerprint != fingerprint {
		return kubeconfigResult{}, false
	}
	return e.result, true
}

func (m *kubeconfigMemo) put(key types.NamespacedName, fingerprint string, result kubeconfigResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[key] = memoEntry{fingerprint: fingerprint, result: result}
}

func (m *kubeconfigMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}

// fingerprint identifies the inputs of a Colony's kubeconfig Secret by resourceVersions.
func fingerprint(own *metav1.PartialObjectMetadata, ready []*entryState) string {
	var b strings.Builder
	if own != nil {
		fmt.Fprintf(&b, "%s/%s", own.UID, own.ResourceVersion)
	}
	for _, e := range ready {
		fmt.Fprintf(&b, ";%s=%s/%s", e.clusterName, e.secret.UID, e.secret.ResourceVersion)
	}
	return b.String()
}

// reconcileKubeconfigSecret keeps the Colony's kubeconfig Secret current: created once a cluster is
// ready, then rewritten whenever a ready cluster's kubeconfig Secret changes, a cluster becomes ready
// or stops being ready, or someone edits the Secret. ready lists the ready entries in spec order.
func (r *Reconciler) reconcileKubeconfigSecret(ctx context.Context, colony *infrav1.Colony, ready []*entryState) (kubeconfigResult, error) {
	name := KubeconfigSecretName(colony.Name)
	key := types.NamespacedName{Namespace: colony.Namespace, Name: colony.Name}
	own, err := r.secretMetadata(ctx, colony.Namespace, name)
	if err != nil {
		return kubeconfigResult{}, err
	}
	if own == nil && len(ready) == 0 {
		return kubeconfigResult{included: map[string]bool{}}, nil
	}
	fp := fingerprint(own, ready)
	if res, ok := r.kubeconfigs.get(key, fp); ok {
		return res, nil
	}

	children := make([]childKubeconfig, 0, len(ready))
	res := kubeconfigResult{included: map[string]bool{}, problems: map[string]string{}}
	for _, e := range ready {
		secretName := kcmv1.KubeconfigSecretName(e.cdName)
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: secretName}, secret)
		switch {
		case apierrors.IsNotFound(err):
			res.problems[e.clusterName] = fmt.Sprintf("kubeconfig Secret %s not found", secretName)
			continue
		case err != nil:
			return kubeconfigResult{}, fmt.Errorf("reading Secret %s: %w", secretName, err)
		}
		value, ok := secret.Data[kcmv1.KubeconfigSecretKey]
		if !ok {
			res.problems[e.clusterName] = fmt.Sprintf("kubeconfig Secret %s has no key %q", secretName, kcmv1.KubeconfigSecretKey)
			continue
		}
		children = append(children, childKubeconfig{clusterName: e.clusterName, data: value})
	}
	data, included, problems := buildKubeconfigs(children)
	for _, n := range included {
		res.included[n] = true
	}
	for n, p := range problems {
		res.problems[n] = fmt.Sprintf("kubeconfig Secret %s: %s", kcmv1.KubeconfigSecretName(ClusterDeploymentName(colony.Name, n)), p)
	}

	written, err := r.writeKubeconfigSecret(ctx, colony, name, data)
	if err != nil {
		if isEntryError(err) {
			res.conflict = err.Error()
			return res, nil
		}
		return kubeconfigResult{}, err
	}
	res.secretName = name
	r.kubeconfigs.put(key, fingerprint(written, ready), res)
	return res, nil
}

// writeKubeconfigSecret creates or corrects the Colony's kubeconfig Secret so that its data are
// exactly data, it carries the Colony label and the Colony is its controller. It reads the current
// Secret with the API reader and writes only when something differs. It returns the Secret's
// metadata after the write (or check).
func (r *Reconciler) writeKubeconfigSecret(ctx context.Context, colony *infrav1.Colony, name string,
	data map[string][]byte) (*metav1.PartialObjectMetadata, error) {
	current := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: name}, current)
	if apierrors.IsNotFound(err) {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       colony.Namespace,
				Labels:          map[string]string{infrav1.ColonyLabel: colony.Name},
				OwnerReferences: []metav1.OwnerReference{ownerReference(colony)},
			},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if err := r.Client.Create(ctx, secret, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("creating Secret %s: %w", name, err)
		}
		return metadataOf(secret), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", name, err)
	}
	if !isControlledBy(current, colony) {
		return nil, &entryError{msg: r.foreignSecretMessage(ctx, colony, name)}
	}
	if secretUpToDate(current, colony, data) {
		return metadataOf(current), nil
	}
	if current.Labels == nil {
		current.Labels = map[string]string{}
	}
	current.Labels[infrav1.ColonyLabel] = colony.Name
	current.Data = data
	current.StringData = nil
	if err := r.Client.Update(ctx, current, client.FieldOwner(FieldManager)); err != nil {
		return nil, fmt.Errorf("updating Secret %s: %w", name, err)
	}
	return metadataOf(current), nil
}

// secretUpToDate reports whether the Secret already holds exactly data and the Colony label.
func secretUpToDate(s *corev1.Secret, colony *infrav1.Colony, data map[string][]byte) bool {
	if s.Labels[infrav1.ColonyLabel] != colony.Name || len(s.Data) != len(data) {
		return false
	}
	for k, want := range data {
		if got, ok := s.Data[k]; !ok || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

func metadataOf(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: *s.ObjectMeta.DeepCopy()}
}

// foreignSecretMessage says why the Colony's kubeconfig Secret name is taken. When a
// ClusterDeployment is named like the Colony, the Secret is that cluster's kubeconfig: Colony `a-b`
// and Colony `a`'s cluster `b` clash.
func (r *Reconciler) foreignSecretMessage(ctx context.Context, colony *infrav1.Colony, name string) string {
	cd := &kcmv1.ClusterDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: colony.Name}, cd); err == nil {
		who := "ClusterDeployment " + cd.Name
		if owner := colonyControllerOf(cd); owner != "" {
			who = fmt.Sprintf("ClusterDeployment %s (cluster %s of Colony %s)", cd.Name, cd.GetLabels()[infrav1.ColonyClusterLabel], owner)
		}
		return fmt.Sprintf("Secret %s is the kubeconfig Secret of %s: the names clash; rename this Colony or that cluster", name, who)
	}
	return fmt.Sprintf("Secret %s exists and is not controlled by this Colony; delete or rename it to get the Colony's kubeconfig", name)
}
