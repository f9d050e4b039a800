package colony

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/kubeconfig"
)

// The API-endpoint ConfigMap. A cluster whose control plane k0smotron hosts on the management
// cluster runs Cilium in kube-proxy-free mode, which needs the API server's address before any
// Service works. Cilium reads it from the ConfigMap kube-system/cp-api-endpoint on the child, keys
// `host` and `port`, which the colony-controller writes (behind --api-endpoint-configmap) from the
// hosted control plane's Service: the Service in the Colony's namespace labelled app=k0smotron,
// component=cluster, cluster=<ClusterDeployment>, on the management cluster or, for a cluster whose
// Credential names a Region, on the Region's cluster. A LoadBalancer with an address gives that address;
// otherwise the Service's ClusterIP (its DNS name only for a headless Service). The port is the one
// named `api` or `kube-apiserver`, else 30443 or 6443.
const (
	// APIEndpointConfigMapName and APIEndpointConfigMapNamespace name the ConfigMap on each child.
	APIEndpointConfigMapName      = "cp-api-endpoint"
	APIEndpointConfigMapNamespace = "kube-system"
	// retryAPIEndpoint is how soon a ConfigMap that could not be written is tried again.
	retryAPIEndpoint = 30 * time.Second
)

// controlPlaneServiceLabels select the k0smotron control plane Service of a ClusterDeployment.
func controlPlaneServiceLabels(cdName string) client.MatchingLabels {
	return client.MatchingLabels{"app": "k0smotron", "component": "cluster", "cluster": cdName}
}

// apiEndpoint returns the host and port Cilium should use for a control plane Service, or false when
// the Service has no API port.
func apiEndpoint(svc *corev1.Service) (string, string, bool) {
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "api" || p.Name == "kube-apiserver" {
			port = p.Port
			break
		}
	}
	for _, p := range svc.Spec.Ports {
		if port == 0 && (p.Port == 30443 || p.Port == 6443) {
			port = p.Port
		}
	}
	if port == 0 {
		return "", "", false
	}
	// The Service's ClusterIP, as the upstream operator writes it: the child's Cilium agent has to
	// reach it before its own service routing (and DNS) works, so a DNS name would not do. A
	// headless Service has none; its DNS name is then the only address there is.
	host := svc.Spec.ClusterIP
	if host == "" || host == corev1.ClusterIPNone {
		host = fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, svc.Namespace)
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.Hostname != "" {
				host = in.Hostname
				break
			}
			if in.IP != "" {
				host = in.IP
				break
			}
		}
	}
	return host, strconv.Itoa(int(port)), true
}

// endpointMemo remembers what was last written to each child, keyed by ClusterDeployment, so an
// unchanged endpoint costs no connection to the child.
type endpointMemo struct {
	mu   sync.Mutex
	last map[string]string
}

func (m *endpointMemo) seen(key, value string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[key] == value
}

func (m *endpointMemo) put(key, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]string{}
	}
	m.last[key] = value
}

// reconcileAPIEndpoints writes the API-endpoint ConfigMap on every ready cluster whose control plane
// Service is known. It returns how soon to try again when a write failed (never an error: the
// Colony's status does not depend on it).
func (r *Reconciler) reconcileAPIEndpoints(ctx context.Context, colony *infrav1.Colony, ready []*entryState) time.Duration {
	if !r.APIEndpointConfigMap {
		return 0
	}
	var retry time.Duration
	for _, e := range ready {
		if err := r.reconcileAPIEndpoint(ctx, colony, e); err != nil {
			log.FromContext(ctx).Info("API-endpoint ConfigMap not written, retrying", "clusterDeployment", e.cdName, "error", err.Error())
			retry = retryAPIEndpoint
		}
	}
	return retry
}

func (r *Reconciler) reconcileAPIEndpoint(ctx context.Context, colony *infrav1.Colony, e *entryState) error {
	if e.secret == nil {
		return r.reconcileRegionalAPIEndpoint(ctx, colony, e)
	}
	list := &corev1.ServiceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(colony.Namespace), controlPlaneServiceLabels(e.cdName)); err != nil {
		return fmt.Errorf("listing control plane Services: %w", err)
	}
	if len(list.Items) == 0 {
		return nil // not a hosted control plane (or not yet): nothing to write
	}
	host, port, ok := apiEndpoint(&list.Items[0])
	if !ok {
		return fmt.Errorf("Service %s has no API port", list.Items[0].Name)
	}
	memoKey := colony.Namespace + "/" + e.cdName
	want := fmt.Sprintf("%s/%s|%s:%s", e.secret.UID, e.secret.ResourceVersion, host, port)
	if r.endpoints.seen(memoKey, want) {
		return nil
	}
	secret := &corev1.Secret{}
	secretName := k0rdentv1beta1.KubeconfigSecretName(e.cdName)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: secretName}, secret); err != nil {
		return fmt.Errorf("reading Secret %s: %w", secretName, err)
	}
	// The Secret is writable by whoever may write Secrets in the Colony's namespace: the sanitizer
	// refuses what would run, read or send anything of the operator's (its errors name the field,
	// never the content).
	if err := r.writeAPIEndpoint(ctx, colony, e, secret.Data[k0rdentv1beta1.KubeconfigSecretKey], host, port); err != nil {
		return fmt.Errorf("the kubeconfig in Secret %s: %w", secretName, err)
	}
	r.endpoints.put(memoKey, want)
	return nil
}

// reconcileRegionalAPIEndpoint writes the ConfigMap for a cluster whose ClusterDeployment's Credential
// names a Region: KCM creates its cluster objects on the Region's cluster, in the namespace of the
// same name, and k0smotron hosts its control plane there, so the control plane Service is read on
// the regional cluster; the child is reached through the kubeconfig found there (e.indirect). An
// adopted cluster (no Region) has no hosted control plane anyone here knows of: nothing is written.
func (r *Reconciler) reconcileRegionalAPIEndpoint(ctx context.Context, colony *infrav1.Colony, e *entryState) error {
	if len(e.indirect) == 0 {
		return nil
	}
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: e.cdName}, cd); err != nil || cd.Spec.Credential == "" {
		return client.IgnoreNotFound(err)
	}
	regional, region, err := r.locator().RegionClient(ctx, client.ObjectKeyFromObject(cd), cd.Spec.Credential)
	if err != nil {
		return err
	}
	if regional == nil {
		return nil // adopted, or a Credential without a Region
	}
	list := &corev1.ServiceList{}
	if err := regional.List(ctx, list, client.InNamespace(colony.Namespace), controlPlaneServiceLabels(e.cdName)); err != nil {
		return fmt.Errorf("listing control plane Services on the cluster of Region %s: %w", region, err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	host, port, ok := apiEndpoint(&list.Items[0])
	if !ok {
		return fmt.Errorf("Service %s on the cluster of Region %s has no API port", list.Items[0].Name, region)
	}
	// The memo holds a digest of the kubeconfig, never the kubeconfig: a rotated one is written to anew.
	sum := sha256.Sum256(e.indirect)
	memoKey := colony.Namespace + "/" + e.cdName
	want := fmt.Sprintf("region %s %x|%s:%s", region, sum[:8], host, port)
	if r.endpoints.seen(memoKey, want) {
		return nil
	}
	if err := r.writeAPIEndpoint(ctx, colony, e, e.indirect, host, port); err != nil {
		return fmt.Errorf("the kubeconfig of the cluster on Region %s: %w", region, err)
	}
	r.endpoints.put(memoKey, want)
	return nil
}

// writeAPIEndpoint applies the ConfigMap on the child reached through kubeconfig data, which passes
// the kubeconfig policy first.
func (r *Reconciler) writeAPIEndpoint(ctx context.Context, colony *infrav1.Colony, e *entryState, data []byte, host, port string) error {
	cfg, err := kubeconfig.RESTConfig(data, r.Kubeconfig)
	if err != nil {
		return fmt.Errorf("cannot be used: %w", err)
	}
	cfg.Timeout = 15 * time.Second
	cfg.UserAgent = bootstrap.UserAgent(Component)
	child, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("a client for the child: %w", err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      APIEndpointConfigMapName,
			"namespace": APIEndpointConfigMapNamespace,
			"labels": map[string]any{
				"app.kubernetes.io/managed-by": Component,
				infrav1.ColonyLabel:            colony.Name,
				infrav1.ColonyClusterLabel:     e.clusterName,
			},
		},
		"data": map[string]any{"host": host, "port": port},
	}}
	if err := child.Apply(ctx, client.ApplyConfigurationFromUnstructured(cm), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s not on the child yet", APIEndpointConfigMapNamespace)
		}
		return fmt.Errorf("applying ConfigMap %s/%s: %w", APIEndpointConfigMapNamespace, APIEndpointConfigMapName, err)
	}
	return nil
}

// serviceToColony maps a k0smotron control plane Service to the Colony of its ClusterDeployment.
func (r *Reconciler) serviceToColony(ctx context.Context, obj client.Object) []reconcile.Request {
	cdName := obj.GetLabels()["cluster"]
	if cdName == "" || obj.GetLabels()["app"] != "k0smotron" {
		return nil
	}
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: cdName}, cd); err != nil {
		return nil
	}
	if owner := infrav1.ControllingColony(cd); owner != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cd.Namespace, Name: owner}}}
	}
	return nil
}
