package colony

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strconv"
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
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/names"
)

const (
	// KubeconfigKey is the data key of the merged kubeconfig in each of a Colony's kubeconfig
	// Secrets: one context per ready cluster of that Secret, named after the cluster's clusterName.
	KubeconfigKey = "kubeconfig"
	// IndexKey is the data key, in the Colony's first kubeconfig Secret, of the index: one line per
	// ready cluster, "<clusterName> <Secret>", naming the Secret whose merged kubeconfig holds its
	// context. Each cluster's own kubeconfig is k0rdent's `<colony>-<clusterName>-kubeconfig`.
	IndexKey = "index"
	// ShardLabel marks the Colony's further kubeconfig Secrets, `<colony>-kubeconfig-<n>` (n >= 1),
	// with n. The first Secret, `<colony>-kubeconfig`, has no such label.
	ShardLabel = "infra.exalsius.ai/kubeconfig-shard"
	// DefaultShardBytes is the default budget of kubeconfig bytes per Secret, well under the API
	// server's 1 MiB limit of a Secret's data, leaving room for the index and the merge.
	DefaultShardBytes = 768 << 10
	// secretNameMax is the longest Secret name.
	secretNameMax = 253
)

// KubeconfigSecretName returns the name of a Colony's (first) kubeconfig Secret: `<colony>-kubeconfig`.
func KubeconfigSecretName(colony string) string {
	return names.Bounded(secretNameMax, colony, "kubeconfig")
}

// ShardSecretName returns the name of the n-th kubeconfig Secret of a Colony: n = 0 is
// KubeconfigSecretName, later ones are `<colony>-kubeconfig-<n>`.
func ShardSecretName(colony string, n int) string {
	if n == 0 {
		return KubeconfigSecretName(colony)
	}
	return names.Bounded(secretNameMax, colony, "kubeconfig", strconv.Itoa(n))
}

// childKubeconfig is the kubeconfig Secret content of one ready cluster.
type childKubeconfig struct {
	clusterName string
	data        []byte
}

// kubeconfigShard is one Secret's worth of merged kubeconfig.
type kubeconfigShard struct {
	clusters []string
	data     []byte
}

// buildKubeconfigs merges the children's kubeconfigs, each exactly once, into shards of at most
// budget bytes (estimated by the size of each cluster's kubeconfig on its own), in the given order. Each
// child's current context (or its only context) becomes a cluster, a user and a context named after
// the clusterName; a shard's current context is its first cluster. With no usable child there is
// one shard with an empty kubeconfig. A child whose kubeconfig is unusable, or larger than budget on
// its own, is left out and reported in problems (by clusterName); the message never quotes the
// kubeconfig. It returns the shards and the clusters included, in order.
func buildKubeconfigs(children []childKubeconfig, budget int) ([]kubeconfigShard, []string, map[string]string) {
	problems := map[string]string{}
	var included []string
	type open struct {
		cfg      *clientcmdapi.Config
		clusters []string
		size     int
	}
	var shards []*open
	for _, child := range children {
		cluster, user, namespace, problem := extractContext(child.data)
		if problem != "" {
			problems[child.clusterName] = problem
			continue
		}
		kctx := &clientcmdapi.Context{Cluster: child.clusterName, AuthInfo: child.clusterName, Namespace: namespace}
		single := clientcmdapi.NewConfig()
		single.Clusters[child.clusterName], single.AuthInfos[child.clusterName], single.Contexts[child.clusterName] = cluster, user, kctx
		b, err := clientcmd.Write(*single)
		if err != nil {
			problems[child.clusterName] = "its kubeconfig cannot be serialised"
			continue
		}
		if len(b) > budget {
			problems[child.clusterName] = fmt.Sprintf("its kubeconfig (%d bytes) does not fit in a Secret (at most %d bytes each)", len(b), budget)
			continue
		}
		if len(shards) == 0 || shards[len(shards)-1].size+len(b) > budget {
			shards = append(shards, &open{cfg: clientcmdapi.NewConfig()})
		}
		sh := shards[len(shards)-1]
		sh.cfg.Clusters[child.clusterName] = cluster.DeepCopy()
		sh.cfg.AuthInfos[child.clusterName] = user.DeepCopy()
		sh.cfg.Contexts[child.clusterName] = kctx
		if sh.cfg.CurrentContext == "" {
			sh.cfg.CurrentContext = child.clusterName
		}
		sh.clusters = append(sh.clusters, child.clusterName)
		sh.size += len(b)
		included = append(included, child.clusterName)
	}
	if len(shards) == 0 {
		shards = append(shards, &open{cfg: clientcmdapi.NewConfig()})
	}
	out := make([]kubeconfigShard, 0, len(shards))
	for _, sh := range shards {
		b, err := clientcmd.Write(*sh.cfg)
		if err != nil {
			// Every part serialised on its own above; this cannot fail in practice.
			b = nil
		}
		out = append(out, kubeconfigShard{clusters: sh.clusters, data: b})
	}
	return out, included, problems
}

// kubeconfigIndex renders the index: "<clusterName> <Secret>" per line, in shard order.
func kubeconfigIndex(colony string, shards []kubeconfigShard) []byte {
	var b bytes.Buffer
	for i, sh := range shards {
		for _, c := range sh.clusters {
			fmt.Fprintf(&b, "%s %s\n", c, ShardSecretName(colony, i))
		}
	}
	return b.Bytes()
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

// kubeconfigResult is what the Colony's kubeconfig Secrets hold.
type kubeconfigResult struct {
	// secretName is set once the first Secret exists.
	secretName string
	// shards names every kubeconfig Secret written, the first one first.
	shards []string
	// included lists the clusterNames whose context is in a Secret.
	included map[string]bool
	// problems maps a clusterName, ready by its ClusterDeployment, to why it was left out.
	problems map[string]string
	// conflict is set when a Secret of one of those names exists and the Colony does not control it.
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

// fingerprint identifies the inputs of a Colony's kubeconfig Secrets by resourceVersions.
func fingerprint(own []metav1.PartialObjectMetadata, ready []*entryState) string {
	var b strings.Builder
	for _, o := range own {
		fmt.Fprintf(&b, "%s=%s/%s;", o.Name, o.UID, o.ResourceVersion)
	}
	for _, e := range ready {
		if e.secret == nil {
			fmt.Fprintf(&b, ";%s=sha256:%x", e.clusterName, sha256.Sum256(e.indirect))
			continue
		}
		fmt.Fprintf(&b, ";%s=%s/%s", e.clusterName, e.secret.UID, e.secret.ResourceVersion)
	}
	return b.String()
}

// ownKubeconfigSecrets returns the metadata of the Colony's kubeconfig Secrets that exist: the first
// one by name, the further ones by ShardLabel, from the metadata-only cache.
func (r *Reconciler) ownKubeconfigSecrets(ctx context.Context, colony *infrav1.Colony) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	first, err := r.secretMetadata(ctx, colony.Namespace, KubeconfigSecretName(colony.Name))
	if err != nil {
		return nil, err
	}
	if first != nil {
		out = append(out, *first)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.Client.List(ctx, list, client.InNamespace(colony.Namespace),
		client.MatchingLabels{infrav1.ColonyLabel: colony.Name}, client.HasLabels{ShardLabel}); err != nil {
		return nil, fmt.Errorf("listing the Colony's kubeconfig Secrets: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for _, s := range list.Items {
		if isControlledBy(&s, colony) {
			out = append(out, s)
		}
	}
	return out, nil
}

// reconcileKubeconfigSecret keeps the Colony's kubeconfig Secrets current: created once a cluster is
// ready, then rewritten whenever a ready cluster's kubeconfig Secret changes, a cluster becomes ready
// or stops being ready, or someone edits one of them. ready lists the ready entries in spec order.
// The kubeconfigs are split over as many Secrets as needed (see docs/design/colony-kubeconfig.md);
// further Secrets no longer needed are emptied.
func (r *Reconciler) reconcileKubeconfigSecret(ctx context.Context, colony *infrav1.Colony, ready []*entryState) (kubeconfigResult, error) {
	name := KubeconfigSecretName(colony.Name)
	key := types.NamespacedName{Namespace: colony.Namespace, Name: colony.Name}
	own, err := r.ownKubeconfigSecrets(ctx, colony)
	if err != nil {
		return kubeconfigResult{}, err
	}
	if len(own) == 0 && len(ready) == 0 {
		return kubeconfigResult{included: map[string]bool{}}, nil
	}
	fp := fingerprint(own, ready)
	if res, ok := r.kubeconfigs.get(key, fp); ok {
		return res, nil
	}

	children := make([]childKubeconfig, 0, len(ready))
	res := kubeconfigResult{included: map[string]bool{}, problems: map[string]string{}}
	for _, e := range ready {
		if e.secret == nil && e.indirect != nil {
			// An adopted or regional cluster: its kubeconfig was found by the readiness check.
			children = append(children, childKubeconfig{clusterName: e.clusterName, data: e.indirect})
			continue
		}
		secretName := k0rdentv1beta1.KubeconfigSecretName(e.cdName)
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: secretName}, secret)
		switch {
		case apierrors.IsNotFound(err):
			res.problems[e.clusterName] = fmt.Sprintf("kubeconfig Secret %s not found", secretName)
			continue
		case err != nil:
			return kubeconfigResult{}, fmt.Errorf("reading Secret %s: %w", secretName, err)
		}
		value, ok := secret.Data[k0rdentv1beta1.KubeconfigSecretKey]
		if !ok {
			res.problems[e.clusterName] = fmt.Sprintf("kubeconfig Secret %s has no key %q", secretName, k0rdentv1beta1.KubeconfigSecretKey)
			continue
		}
		children = append(children, childKubeconfig{clusterName: e.clusterName, data: value})
	}
	budget := r.ShardBytes
	if budget <= 0 {
		budget = DefaultShardBytes
	}
	shards, included, problems := buildKubeconfigs(children, budget)
	for _, n := range included {
		res.included[n] = true
	}
	indirect := map[string]bool{}
	for _, e := range ready {
		if e.secret == nil {
			indirect[e.clusterName] = true
		}
	}
	for n, p := range problems {
		if indirect[n] {
			res.problems[n] = "the kubeconfig of the adopted or regional cluster: " + p
			continue
		}
		res.problems[n] = fmt.Sprintf("kubeconfig Secret %s: %s", k0rdentv1beta1.KubeconfigSecretName(ClusterDeploymentName(colony.Name, n)), p)
	}

	var written []metav1.PartialObjectMetadata
	for i, sh := range shards {
		data := map[string][]byte{KubeconfigKey: sh.data}
		if i == 0 {
			data[IndexKey] = kubeconfigIndex(colony.Name, shards)
		}
		m, err := r.writeKubeconfigSecret(ctx, colony, i, data)
		if err != nil {
			if isEntryError(err) {
				// Nothing in that Secret is usable: its clusters are not aggregated.
				for _, c := range sh.clusters {
					delete(res.included, c)
				}
				res.conflict = err.Error()
				if i == 0 {
					return res, nil
				}
				continue
			}
			return kubeconfigResult{}, err
		}
		written = append(written, *m)
		res.shards = append(res.shards, m.Name)
	}
	// Further Secrets no longer needed are emptied, not deleted (the controller may not delete
	// Secrets): they hold a kubeconfig without contexts until they are needed again or the Colony
	// goes, and garbage collection removes them with it.
	for _, o := range own {
		if n, ok := shardIndexOf(&o); ok && n >= len(shards) {
			m, err := r.writeKubeconfigSecret(ctx, colony, n, map[string][]byte{KubeconfigKey: emptyKubeconfig()})
			if err != nil && !isEntryError(err) {
				return kubeconfigResult{}, err
			}
			if m != nil {
				written = append(written, *m)
			}
		}
	}
	res.secretName = name
	if res.conflict == "" {
		r.kubeconfigs.put(key, fingerprint(written, ready), res)
	}
	return res, nil
}

// emptyKubeconfig is a valid kubeconfig without contexts.
func emptyKubeconfig() []byte {
	b, err := clientcmd.Write(*clientcmdapi.NewConfig())
	if err != nil {
		return nil
	}
	return b
}

// shardIndexOf returns n of a Colony's further kubeconfig Secret (ShardLabel), or false.
func shardIndexOf(m *metav1.PartialObjectMetadata) (int, bool) {
	v, ok := m.Labels[ShardLabel]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// writeKubeconfigSecret creates or corrects the Colony's n-th kubeconfig Secret so that its data are
// exactly data, it carries the Colony label (and ShardLabel for n >= 1) and the Colony is its
// controller. It reads the current Secret with the API reader and writes only when something
// differs. It returns the Secret's metadata after the write (or check).
func (r *Reconciler) writeKubeconfigSecret(ctx context.Context, colony *infrav1.Colony, n int,
	data map[string][]byte) (*metav1.PartialObjectMetadata, error) {
	name := ShardSecretName(colony.Name, n)
	labels := map[string]string{infrav1.ColonyLabel: colony.Name}
	if n > 0 {
		labels[ShardLabel] = strconv.Itoa(n)
	}
	current := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: name}, current)
	if apierrors.IsNotFound(err) {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       colony.Namespace,
				Labels:          labels,
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
	if secretUpToDate(current, labels, data) {
		return metadataOf(current), nil
	}
	if current.Labels == nil {
		current.Labels = map[string]string{}
	}
	for k, v := range labels {
		current.Labels[k] = v
	}
	current.Data = data
	current.StringData = nil
	if err := r.Client.Update(ctx, current, client.FieldOwner(FieldManager)); err != nil {
		return nil, fmt.Errorf("updating Secret %s: %w", name, err)
	}
	return metadataOf(current), nil
}

// secretUpToDate reports whether the Secret already holds exactly data and the labels.
func secretUpToDate(s *corev1.Secret, labels map[string]string, data map[string][]byte) bool {
	for k, v := range labels {
		if s.Labels[k] != v {
			return false
		}
	}
	if len(s.Data) != len(data) {
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
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: colony.Name}, cd); err == nil {
		who := "ClusterDeployment " + cd.Name
		if owner := infrav1.ControllingColony(cd); owner != "" {
			who = fmt.Sprintf("ClusterDeployment %s (cluster %s of Colony %s)", cd.Name, cd.GetLabels()[infrav1.ColonyClusterLabel], owner)
		}
		return fmt.Sprintf("Secret %s is the kubeconfig Secret of %s: the names clash; rename this Colony or that cluster", name, who)
	}
	return fmt.Sprintf("Secret %s exists and is not controlled by this Colony; delete or rename it to get the Colony's kubeconfig", name)
}
