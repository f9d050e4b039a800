// Package routing gives workspaces URLs that work: it attaches routes for a workspace's access
// endpoints to the Gateway of its tenant's regional cluster and reports, per endpoint, the URL and
// whether the route serves. The workspace reconciler talks to it through Provider; Gateway (Gateway
// API) is the one implementation. docs/ROUTING.md explains the design and what the regional cluster
// must provide.
package routing

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
)

// Provider attaches and removes the routes of workspaces. Implementations keep no state of their own
// beyond caches: what they made on the regional cluster is the state, so a restarted controller
// finds the same URLs and ports.
type Provider interface {
	// Ensure makes the routes of a workspace match its endpoints and reports one access entry per
	// endpoint, in the order of the endpoints. Missing routing infrastructure is not an error: it is
	// reported in Result.InfraNotReady. An error means the pass should be retried.
	Ensure(ctx context.Context, ws Workspace) (Result, error)
	// Remove deletes the routes of a workspace and reports whether they are gone (a freed port is
	// free once Remove returned true). Without a reachable regional cluster it reports true and leaves
	// what remains to the sweeper.
	Remove(ctx context.Context, ws Workspace) (bool, error)
}

// Workspace is what a provider needs to know about one WorkspaceDeployment.
type Workspace struct {
	// Namespace and Name of the WorkspaceDeployment on the management cluster.
	Namespace, Name string
	// UID of the WorkspaceDeployment: a workspace recreated under the same name is another one.
	UID types.UID
	// ClusterKey names the workspace's ClusterDeployment.
	ClusterKey types.NamespacedName
	// Cluster is the workspace's ClusterDeployment; nil when it is gone (deletion only).
	Cluster *k0rdentv1beta1.ClusterDeployment
	// Release is the name of the workspace's Helm release on the child: the default Service name
	// prefix (<release>-<endpoint>).
	Release string
	// ReleaseNamespace is the namespace of the release on the child (owned.ReleaseNamespace).
	ReleaseNamespace string
	// Endpoints are the class's access endpoints.
	Endpoints []workspacesv1.AccessEndpoint
	// Ports, when not nil, is how many of the SSH and TCP endpoints, in the class's order, may hold a
	// port of the pool (the namespace's WorkspaceQuota spec.tcpEndpoints); the others get none, and a
	// port they held is given back. PortsMessage says why, in their status.access entries.
	Ports        *int
	PortsMessage string
}

// portDenied returns the names of the SSH and TCP endpoints past Ports.
func (w Workspace) portDenied() map[string]bool {
	if w.Ports == nil {
		return nil
	}
	out := map[string]bool{}
	n := 0
	for _, ep := range w.Endpoints {
		if ep.Protocol != workspacesv1.EndpointProtocolSSH && ep.Protocol != workspacesv1.EndpointProtocolTCP {
			continue
		}
		if n >= *w.Ports {
			out[ep.Name] = true
		}
		n++
	}
	return out
}

// Key is the workspace's namespace/name.
func (w Workspace) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
}

// Result is the routing state of one workspace.
type Result struct {
	// Access has one entry per endpoint, in the class's order.
	Access []workspacesv1.AccessStatus
	// InfraNotReady names the routing infrastructure that is missing (no regional cluster, no
	// Gateway, no wildcard listener, no TCP listener); empty when nothing is missing.
	InfraNotReady string
}

// Ready reports whether every entry serves and nothing is missing.
func (r Result) Ready() bool {
	if r.InfraNotReady != "" {
		return false
	}
	for _, a := range r.Access {
		if !a.Ready {
			return false
		}
	}
	return true
}

// Labels set on everything the provider makes on a regional cluster. The workspace's UID tells a
// recreated same-named workspace from the one the routes were made for (the sweeper relies on it).
const (
	// WorkspaceUIDLabel carries the WorkspaceDeployment's UID.
	WorkspaceUIDLabel = "workspaces.exalsius.ai/workspace-uid"
	// ManagedByLabel is app.kubernetes.io/managed-by.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the component that manages the routes.
	ManagedByValue = component.Name
	// EndpointLabel names the class endpoint a route or Service serves.
	EndpointLabel = "workspaces.exalsius.ai/endpoint"
	// RouteNamespaceLabel marks a namespace the provider made on a regional cluster for a
	// workspace's routes and mirror Services (value "true"). Only namespaces that carry it are ever
	// deleted by the provider or the sweeper: a release namespace ws-<name> carries the workspace's
	// owner labels too (the workspace-controller makes it on the child), but never this one.
	RouteNamespaceLabel = "workspaces.exalsius.ai/route-namespace"
)

// KOF's labels on a child ClusterDeployment naming its regional cluster (k0rdent observability,
// github.com/k0rdent/kof). The namespace label is optional; the child's namespace is the default. A
// regional cluster in another namespace is used only when that namespace allows the child's
// (allowRegional).
const (
	RegionalClusterNameLabel      = k0rdentv1beta1.KOFRegionalClusterNameLabel
	RegionalClusterNamespaceLabel = k0rdentv1beta1.KOFRegionalClusterNamespaceLabel
)

// workspaceLabels are the identity labels of a workspace's objects on the regional cluster.
func workspaceLabels(ws Workspace) map[string]string {
	return map[string]string{
		workspacesv1.WorkspaceLabel:          ws.Name,
		workspacesv1.WorkspaceNamespaceLabel: ws.Namespace,
		WorkspaceUIDLabel:                    string(ws.UID),
		ManagedByLabel:                       ManagedByValue,
	}
}
