package routing

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/mesh"
)

// Regionals reaches regional clusters by their ClusterDeployment.
type Regionals interface {
	// Client returns a client of the regional cluster of ClusterDeployment key. An error for which
	// childcluster.IsUnreachable holds means the cluster cannot be reached now.
	Client(ctx context.Context, key types.NamespacedName) (client.Client, error)
	// Namespace returns the metadata of a Namespace of the management cluster, nil without error when
	// it does not exist: the tenancy rule reads whether a regional ClusterDeployment's namespace allows
	// the child's before the regional cluster is used.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// CacheRegionals adapts a common/childcluster Cache to Regionals. Use a Cache of its own, built with
// Scheme(), so that workspace teardown (which forgets child connections) leaves it alone.
type CacheRegionals struct {
	Cache *childcluster.Cache
}

// Client implements Regionals.
func (c CacheRegionals) Client(ctx context.Context, key types.NamespacedName) (client.Client, error) {
	cl, err := c.Cache.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		return nil, err
	}
	return cl.Client(), nil
}

// Namespace implements Regionals, reading through the Cache's metadata reader.
func (c CacheRegionals) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Cache.MetadataReader().Get(ctx, types.NamespacedName{Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &corev1.Namespace{ObjectMeta: m.ObjectMeta}, nil
}

// Options configure the Gateway API provider.
type Options struct {
	// GatewayNamespace and GatewayName locate the tenant Gateway on each regional cluster.
	GatewayNamespace, GatewayName string
	// DefaultRegional is the regional cluster of children whose ClusterDeployment has no KOF label.
	DefaultRegional RegionalRef
	// Mesh is the mesh mode (--workspace-mesh-mode); the zero value is none.
	Mesh mesh.Config
}

// Gateway is the Gateway API Provider: one HTTPRoute per HTTP endpoint and one TCPRoute per SSH or
// TCP endpoint, attached to the tenant Gateway of the regional cluster, in a namespace of the
// workspace there, with selector-less mirror Services as backends.
type Gateway struct {
	Regionals Regionals
	// Children reaches the child clusters, for a mesh mode's Service labels and waypoint check; not
	// used in mesh mode none.
	Children Clusters
	Options  Options

	mu    sync.Mutex
	pools map[string]*sync.Mutex // per regional Gateway: port allocation is serialised
}

var _ Provider = (*Gateway)(nil)

// infraError is missing routing infrastructure: reported, never a failure.
type infraError struct{ msg string }

func (e *infraError) Error() string { return e.msg }

func infra(format string, args ...any) error { return &infraError{msg: fmt.Sprintf(format, args...)} }

// target is a workspace's view of its regional cluster.
type target struct {
	key    types.NamespacedName
	c      client.Client
	gw     *gwv1.Gateway
	tenant Tenant
	pool   []gwv1.Listener
	// local is true when the regional cluster is the workspace's own cluster: the routes go into the
	// release namespace and point at the release's own Services (no mirrors, no namespace of ours).
	local bool
}

// connect finds the regional cluster, its Gateway and what the Gateway serves.
func (g *Gateway) connect(ctx context.Context, ws Workspace) (*target, error) {
	if ws.Cluster == nil {
		return nil, infra("the ClusterDeployment of the workspace is gone")
	}
	key, source, ok := RegionalCluster(ws.Cluster, g.Options.DefaultRegional)
	if !ok {
		return nil, infra("no regional cluster: ClusterDeployment %s/%s has no label %s and the operator has no --default-regional-cluster",
			ws.Cluster.Namespace, ws.Cluster.Name, RegionalClusterNameLabel)
	}
	if why, err := allowRegional(ctx, g.Regionals, ws.Cluster, key); err != nil {
		return nil, err
	} else if why != "" {
		return nil, infra("%s", why)
	}
	c, err := g.Regionals.Client(ctx, key)
	if err != nil {
		if childcluster.IsUnreachable(err) {
			return nil, infra("regional cluster %s (named by %s) cannot be reached: %v", key, source, err)
		}
		return nil, fmt.Errorf("connecting to regional cluster %s: %w", key, err)
	}
	gw := &gwv1.Gateway{}
	gwKey := types.NamespacedName{Namespace: g.Options.GatewayNamespace, Name: g.Options.GatewayName}
	if err := c.Get(ctx, gwKey, gw); err != nil {
		switch {
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && isMissingKind(err):
			return nil, infra("the Gateway API CRDs are not installed on regional cluster %s", key)
		case apierrors.IsNotFound(err):
			return nil, infra("Gateway %s not found on regional cluster %s", gwKey, key)
		}
		return nil, fmt.Errorf("reading Gateway %s on regional cluster %s: %w", gwKey, key, err)
	}
	t := &target{key: key, c: c, gw: gw, pool: TCPPool(gw), local: key == ws.ClusterKey}
	if tenant, ok := TenantFromGateway(gw); ok {
		t.tenant = tenant
	} else {
		return nil, infra("Gateway %s on regional cluster %s has no wildcard HTTPS or HTTP listener (hostname *.<tenant-domain>)", gwKey, key)
	}
	return t, nil
}

// isMissingKind tells a 404 for a resource type the server does not serve from a missing object.
func isMissingKind(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Name == ""
}

// Ensure implements Provider.
func (g *Gateway) Ensure(ctx context.Context, ws Workspace) (Result, error) {
	res := Result{Access: make([]workspacesv1.AccessStatus, len(ws.Endpoints))}
	for i, ep := range ws.Endpoints {
		res.Access[i] = workspacesv1.AccessStatus{Name: ep.Name, Protocol: ep.Protocol}
	}
	t, err := g.connect(ctx, ws)
	if err != nil {
		return res, reportInfra(&res, err)
	}
	// The route namespace is also the claim of the short hostnames among same-named workspaces behind
	// this Gateway. A workspace routed on its own cluster claims one too (it stays empty: its routes go
	// into the release namespace, next to the release's Services), so the rule is the same for both.
	ns, qualified, err := g.claimNamespace(ctx, t, ws)
	if err != nil {
		return res, reportInfra(&res, err)
	}
	if ns, err = g.routeNamespace(ctx, t, ws, ns); err != nil {
		return res, reportInfra(&res, err)
	}
	if !t.local {
		if err := g.ensureServices(ctx, t, ws, ns); err != nil {
			return res, err
		}
	}
	if g.Options.Mesh.Enabled() {
		if err := g.labelChildServices(ctx, ws); err != nil {
			return res, reportInfra(&res, err)
		}
	}
	if err := g.ensureHTTP(ctx, t, ws, ns, qualified, &res); err != nil {
		return res, err
	}
	if err := g.ensureTCP(ctx, t, ws, ns, &res); err != nil {
		return res, err
	}
	if err := g.pruneRoutes(ctx, t.c, ws, ns, !t.local); err != nil {
		return res, err
	}
	// The routes are made either way (their URLs and ports are the workspace's); they only count
	// as serving once the waypoint they reach the release through is programmed.
	why, err := g.waypointNotReady(ctx, t, ws)
	if err != nil {
		return res, err
	}
	if why != "" {
		for i := range res.Access {
			res.Access[i].Ready = false
		}
		return res, reportInfra(&res, infra("%s", why))
	}
	return res, nil
}

// routeNamespace is where the routes and mirror Services go, given the route namespace claim that
// holds the workspace's hostnames: the release namespace on the workspace's own cluster; in a mesh
// mode the mirror namespace named like the release namespace (the claim then stays empty, as on
// the workspace's own cluster, and what an earlier run without mesh put in it goes); else the claim.
func (g *Gateway) routeNamespace(ctx context.Context, t *target, ws Workspace, claim string) (string, error) {
	switch {
	case t.local:
		return ws.ReleaseNamespace, nil
	case g.Options.Mesh.Enabled():
		ns, err := g.claimMirrorNamespace(ctx, t, ws)
		if err != nil {
			return "", err
		}
		return ns, g.pruneRoutes(ctx, t.c, Workspace{Namespace: ws.Namespace, Name: ws.Name}, claim, true)
	default:
		return claim, g.dropMirrorNamespace(ctx, t, ws)
	}
}

// reportInfra turns missing infrastructure into the result (every entry says why it is not ready)
// and returns other errors.
func reportInfra(res *Result, err error) error {
	var ie *infraError
	if !errors.As(err, &ie) {
		return err
	}
	res.InfraNotReady = ie.msg
	for i := range res.Access {
		res.Access[i].Message = ie.msg
	}
	return nil
}
