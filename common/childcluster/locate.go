package childcluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/kubeconfig"
	"github.com/exalsius/exalsius-operator/common/scheme"
)

// k0rdent's other cluster kinds. Most ClusterDeployments have their kubeconfig Secret
// `<cd>-kubeconfig` next to them on the management cluster; two kinds do not, and are found the way
// k0rdent's own controllers find them:
//
//   - an adopted cluster has a SveltosCluster of the ClusterDeployment's name and namespace, whose
//     kubeconfig is in the Secret spec.kubeconfigName (default `<name>-sveltos-kubeconfig`), key
//     spec.kubeconfigKeyName (default: the Secret's first key);
//   - a regional cluster's ClusterDeployment names a Credential with spec.region: its Cluster and its
//     `<cd>-kubeconfig` Secret live on the regional cluster, reached through the Region's kubeconfig
//     (spec.kubeConfig, a Secret key in the system namespace, or spec.clusterDeployment, whose own
//     `<cd>-kubeconfig` Secret is on the management cluster).
//
// These are read through Options.Reader (the API reader) and only when `<cd>-kubeconfig` is missing,
// so the common case costs nothing more. Their data are read on every Get (no metadata watch covers
// them); a changed kubeconfig is still found by its hash.

var (
	sveltosClusterGVK = schema.GroupVersionKind{Group: "lib.projectsveltos.io", Version: "v1beta1", Kind: "SveltosCluster"}
	regionGVK         = k0rdentv1beta1.GroupVersion.WithKind("Region")
)

// DefaultSystemNamespace is k0rdent's system namespace, where a Region's kubeconfig Secret lives.
const DefaultSystemNamespace = "kcm-system"

// Locator finds the kubeconfig of an adopted or a regional ClusterDeployment, as described above. The
// Cache uses one; the colony-controller uses one of its own to tell whether such a cluster is ready
// and to aggregate its kubeconfig, so every component finds these clusters the same way.
type Locator struct {
	// Reader reads SveltosClusters, ClusterDeployments, Credentials, Regions and Secrets (required),
	// typically the manager's APIReader.
	Reader client.Reader
	// Scheme of the client to the regional cluster (default: the scheme Options defaults to).
	Scheme *runtime.Scheme
	// SystemNamespace is where a Region's kubeconfig Secret lives (default DefaultSystemNamespace).
	SystemNamespace string
	// UserAgent and Timeout of the client to the regional cluster.
	UserAgent string
	Timeout   time.Duration
	// Kubeconfig is what the Region's kubeconfig may ask for beyond inline credentials.
	Kubeconfig kubeconfig.Policy

	// reads, when set, counts reads of Secret data.
	reads *atomic.Int64
	// read, when set, collects the management-cluster Secrets read or looked for.
	read *[]types.NamespacedName
}

// countRead counts a read of the management-cluster Secret ref (nil: a Secret on another cluster).
func (l *Locator) countRead(ref *types.NamespacedName) {
	if l.reads != nil {
		l.reads.Add(1)
	}
	if l.read != nil && ref != nil {
		*l.read = append(*l.read, *ref)
	}
}

// readIndirect finds the kubeconfig of an adopted or a regional cluster. It returns found=false when
// the ClusterDeployment is neither.
func (c *Cache) readIndirect(ctx context.Context, key types.NamespacedName) (data []byte, found bool, err error) {
	var read []types.NamespacedName
	l := Locator{Reader: c.opts.Reader, Scheme: c.opts.Scheme, SystemNamespace: c.opts.SystemNamespace,
		UserAgent: c.opts.UserAgent, Timeout: c.opts.ProbeTimeout, Kubeconfig: c.opts.Kubeconfig, reads: &c.secretReads, read: &read}
	data, found, err = l.Locate(ctx, key)
	if found {
		c.setSources(key, read)
	} else {
		c.setSources(key, nil)
	}
	return data, found, err
}

// setSources records the management-cluster Secrets the lookup of key read (nil: none).
func (c *Cache) setSources(key types.NamespacedName, secrets []types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sourcesOf[key] {
		delete(c.sources[s], key)
		if len(c.sources[s]) == 0 {
			delete(c.sources, s)
		}
	}
	delete(c.sourcesOf, key)
	for _, s := range secrets {
		if c.sources[s] == nil {
			c.sources[s] = map[types.NamespacedName]struct{}{}
		}
		c.sources[s][key] = struct{}{}
		c.sourcesOf[key] = append(c.sourcesOf[key], s)
	}
}

// adoptedKubeconfigSuffix follows an adopted cluster's name in the default name of its SveltosCluster
// kubeconfig Secret.
const adoptedKubeconfigSuffix = "-sveltos" + k0rdentv1beta1.KubeconfigSecretSuffix

// ClustersForSecret is the one reverse mapping from a kubeconfig Secret to the ClusterDeployments it
// may be the kubeconfig of, by its name alone: `<cd>-kubeconfig`, and an adopted cluster's default
// `<cd>-sveltos-kubeconfig` (both namings are listed; a lookup that finds no such cluster costs
// nothing). Secrets named freely (a SveltosCluster's spec.kubeconfigName, a Region's) are found by
// Cache.ClustersForSecret, which adds what the cache's lookups read.
func ClustersForSecret(secret types.NamespacedName) []types.NamespacedName {
	cd, ok := strings.CutSuffix(secret.Name, k0rdentv1beta1.KubeconfigSecretSuffix)
	if !ok || cd == "" {
		return nil
	}
	out := []types.NamespacedName{{Namespace: secret.Namespace, Name: cd}}
	if adopted, ok := strings.CutSuffix(secret.Name, adoptedKubeconfigSuffix); ok && adopted != "" {
		out = append(out, types.NamespacedName{Namespace: secret.Namespace, Name: adopted})
	}
	return out
}

// ClustersForSecret is ClustersForSecret by name and the clusters whose last lookup read, or looked
// for, the Secret (Using), without repeats.
func (c *Cache) ClustersForSecret(secret types.NamespacedName) []types.NamespacedName {
	out := ClustersForSecret(secret)
	for _, k := range c.Using(secret) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Using returns the adopted and regional ClusterDeployments whose last lookup read (or looked for) the
// management-cluster Secret secret: an adopted cluster's SveltosCluster Secret, a Region's kubeconfig
// Secret. A controller that watches Secret metadata maps a changed Secret to them, so that a rotation
// (or the Secret appearing) is acted on at once. `<cd>-kubeconfig` Secrets are not listed: their name
// says their ClusterDeployment. Secrets on a regional cluster are not seen by such a watch; a rotation
// there that revokes the old credential makes the child Unauthorized, and the next Get reads the new
// one.
func (c *Cache) Using(secret types.NamespacedName) []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(c.sources[secret]))
	for k := range c.sources[secret] {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Locate returns the kubeconfig of the adopted or regional cluster of ClusterDeployment key. It
// returns found=false (and no error) when the ClusterDeployment is neither. A cluster of either kind
// whose kubeconfig cannot be found or read yet gives found=true and an *UnreachableError with the
// reason (ReasonKubeconfigMissing when the lookup itself failed, naming why).
func (l *Locator) Locate(ctx context.Context, key types.NamespacedName) (data []byte, found bool, err error) {
	if l.SystemNamespace == "" {
		l.SystemNamespace = DefaultSystemNamespace
	}
	if l.Scheme == nil {
		l.Scheme = scheme.New()
	}
	data, found, err = l.readAdopted(ctx, key)
	if !found && err == nil {
		data, found, err = l.readRegional(ctx, key)
	}
	if err != nil && !IsUnreachable(err) {
		// The lookup itself failed (say RBAC refuses SveltosClusters): the cluster's kubeconfig is
		// still missing as far as anyone can tell; say why without failing harder than that.
		err = &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing,
			Err: fmt.Errorf("Secret %s not found, and looking for an adopted or regional cluster failed: %w", k0rdentv1beta1.KubeconfigSecretName(key.Name), err)}
		found = true
	}
	return data, found, err
}

// readAdopted reads the kubeconfig of the SveltosCluster named like the ClusterDeployment.
func (l *Locator) readAdopted(ctx context.Context, key types.NamespacedName) ([]byte, bool, error) {
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(sveltosClusterGVK)
	if err := l.Reader.Get(ctx, key, sc); err != nil {
		if apierrors.IsNotFound(err) || isNoKind(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading SveltosCluster %s: %w", key, err)
	}
	name, _, _ := unstructured.NestedString(sc.Object, "spec", "kubeconfigName")
	if name == "" {
		name = key.Name + adoptedKubeconfigSuffix
	}
	dataKey, _, _ := unstructured.NestedString(sc.Object, "spec", "kubeconfigKeyName")
	secret := &corev1.Secret{}
	ref := types.NamespacedName{Namespace: key.Namespace, Name: name}
	l.countRead(&ref)
	if err := l.Reader.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing,
				Err: fmt.Errorf("Secret %s of SveltosCluster %s not found", ref, key)}
		}
		return nil, true, fmt.Errorf("reading Secret %s of SveltosCluster %s: %w", ref, key, err)
	}
	data := pickKey(secret, dataKey)
	if len(data) == 0 {
		return nil, true, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid,
			Err: fmt.Errorf("Secret %s of SveltosCluster %s has no kubeconfig under key %q", ref, key, dataKey)}
	}
	return data, true, nil
}

// pickKey returns the Secret's value under key, or, without a key, under its first key in order (as
// Sveltos does).
func pickKey(s *corev1.Secret, key string) []byte {
	if key != "" {
		return s.Data[key]
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return nil
	}
	return s.Data[keys[0]]
}

// readRegional reads the kubeconfig of a ClusterDeployment whose Credential has a region from the
// regional cluster.
func (l *Locator) readRegional(ctx context.Context, key types.NamespacedName) ([]byte, bool, error) {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := l.Reader.Get(ctx, key, cd); err != nil || cd.Spec.Credential == "" {
		return nil, false, client.IgnoreNotFound(err)
	}
	rc, region, err := l.RegionClient(ctx, key, cd.Spec.Credential)
	if err != nil || rc == nil {
		return nil, err != nil, err
	}
	secret := &corev1.Secret{}
	ref := types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}
	l.countRead(nil) // on the regional cluster
	if err := rc.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing,
				Err: fmt.Errorf("Secret %s not found on the cluster of Region %s", ref, region)}
		}
		reason := ReasonConnectFailed
		if isAuthError(err) {
			reason = ReasonUnauthorized
		}
		return nil, true, &UnreachableError{Cluster: key, Reason: reason,
			Err: fmt.Errorf("reading Secret %s on the cluster of Region %s: %w", ref, region, err)}
	}
	data := secret.Data[k0rdentv1beta1.KubeconfigSecretKey]
	if len(data) == 0 {
		return nil, true, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid,
			Err: fmt.Errorf("Secret %s on the cluster of Region %s has no data key %q", ref, region, k0rdentv1beta1.KubeconfigSecretKey)}
	}
	return data, true, nil
}

// RegionClient returns a client to the regional cluster that hosts the ClusterDeployment key, whose
// Credential is credential: the cluster of the Region the Credential names (spec.region), where KCM
// creates the ClusterDeployment's cluster objects (and k0smotron its hosted control plane) in the
// namespace of the same name. It returns a nil client and no error when the Credential names no
// Region (or does not exist): the cluster is not regional. The Region's kubeconfig passes the same
// policy as every other kubeconfig (Kubeconfig); errors name objects, never content.
func (l *Locator) RegionClient(ctx context.Context, key types.NamespacedName, credential string) (client.Client, string, error) {
	if l.Scheme == nil {
		l.Scheme = scheme.New()
	}
	if l.SystemNamespace == "" {
		l.SystemNamespace = DefaultSystemNamespace
	}
	cred := &k0rdentv1beta1.Credential{}
	if err := l.Reader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: credential}, cred); err != nil || cred.Spec.Region == "" {
		return nil, "", client.IgnoreNotFound(err)
	}
	region := cred.Spec.Region
	regional, err := l.regionKubeconfig(ctx, key, region)
	if err != nil {
		return nil, region, err
	}
	cfg, err := restConfigFrom(regional, l.Kubeconfig)
	if err != nil {
		return nil, region, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid,
			Err: fmt.Errorf("the kubeconfig of Region %s: %w", region, err)}
	}
	cfg.UserAgent = l.UserAgent
	cfg.Timeout = l.Timeout
	rc, err := client.New(cfg, client.Options{Scheme: l.Scheme})
	if err != nil {
		return nil, region, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("a client for Region %s: %w", region, err)}
	}
	return rc, region, nil
}

// regionKubeconfig reads the kubeconfig of a Region's cluster.
func (l *Locator) regionKubeconfig(ctx context.Context, key types.NamespacedName, region string) ([]byte, error) {
	r := &unstructured.Unstructured{}
	r.SetGroupVersionKind(regionGVK)
	if err := l.Reader.Get(ctx, types.NamespacedName{Name: region}, r); err != nil {
		if apierrors.IsNotFound(err) || isNoKind(err) {
			return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing, Err: fmt.Errorf("Region %s not found", region)}
		}
		return nil, fmt.Errorf("reading Region %s: %w", region, err)
	}
	var ref types.NamespacedName
	dataKey := k0rdentv1beta1.KubeconfigSecretKey
	if name, _, _ := unstructured.NestedString(r.Object, "spec", "kubeConfig", "name"); name != "" {
		ref = types.NamespacedName{Namespace: l.SystemNamespace, Name: name}
		if k, _, _ := unstructured.NestedString(r.Object, "spec", "kubeConfig", "key"); k != "" {
			dataKey = k
		}
	} else if name, _, _ := unstructured.NestedString(r.Object, "spec", "clusterDeployment", "name"); name != "" {
		ns, _, _ := unstructured.NestedString(r.Object, "spec", "clusterDeployment", "namespace")
		if ns == "" {
			ns = l.SystemNamespace
		}
		ref = types.NamespacedName{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(name)}
	} else {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid,
			Err: fmt.Errorf("Region %s names neither spec.kubeConfig nor spec.clusterDeployment", region)}
	}
	secret := &corev1.Secret{}
	l.countRead(&ref)
	if err := l.Reader.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing, Err: fmt.Errorf("Secret %s of Region %s not found", ref, region)}
		}
		return nil, fmt.Errorf("reading Secret %s of Region %s: %w", ref, region, err)
	}
	if len(secret.Data[dataKey]) == 0 {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid,
			Err: fmt.Errorf("Secret %s of Region %s has no data key %q", ref, region, dataKey)}
	}
	return secret.Data[dataKey], nil
}

// isNoKind reports an API group the management cluster does not serve (Sveltos or Regions not
// installed): that kind of cluster simply does not exist there.
func isNoKind(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// Find reports whether the kubeconfig of ClusterDeployment key can be found, the same way Get finds
// it: `<cd>-kubeconfig` next to the ClusterDeployment, else the adopted or regional cluster's
// (Locate). It returns nil when found, an *UnreachableError with ReasonKubeconfigMissing naming what
// is missing, and another error when a lookup failed. An adopted or regional kubeconfig that exists
// but is unusable (ReasonKubeconfigInvalid, an unreachable regional cluster) counts as found: Get
// reports it. Callers that only need to know whether a cluster has a kubeconfig yet (a workspace
// waiting for its cluster, a deletion deciding whether a child is left to clean up) use Find, so that
// every kind of cluster goes through one path.
func (c *Cache) Find(ctx context.Context, key types.NamespacedName) (indirect bool, err error) {
	reader := c.opts.MetadataReader
	if reader == nil {
		reader = c.opts.Reader
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	name := types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}
	err = reader.Get(ctx, name, m)
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading kubeconfig Secret %s metadata: %w", name, err)
	}
	_, found, err := c.readIndirect(ctx, key)
	switch {
	case !found:
		return false, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing, Err: fmt.Errorf("Secret %s not found", name)}
	case UnreachableReason(err) == ReasonKubeconfigMissing:
		return true, err
	}
	return true, nil
}
