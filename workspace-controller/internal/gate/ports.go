package gate

// The namespace's cap on SSH and TCP endpoints (WorkspaceQuota spec.tcpEndpoints): the ports of a
// Gateway's pool are shared by every team behind it, and one team must not take them all.

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// PortQuota is what the namespace's WorkspaceQuotas leave one workspace of SSH and TCP endpoints.
type PortQuota struct {
	// Limited is false when no WorkspaceQuota of the namespace sets spec.tcpEndpoints.
	Limited bool
	// Allowed is how many of the workspace's SSH and TCP endpoints, in the class's order, may hold a
	// port.
	Allowed int
	// Message says why the others get none.
	Message string
}

// IsPortEndpoint reports whether an endpoint takes a port of the Gateway's pool.
func IsPortEndpoint(ep workspacesv1.AccessEndpoint) bool {
	return ep.Protocol == workspacesv1.EndpointProtocolSSH || ep.Protocol == workspacesv1.EndpointProtocolTCP
}

// PortEndpoints counts the SSH and TCP endpoints among eps.
func PortEndpoints(eps []workspacesv1.AccessEndpoint) int {
	n := 0
	for _, ep := range eps {
		if IsPortEndpoint(ep) {
			n++
		}
	}
	return n
}

// PortsAllowed reads the namespace's WorkspaceQuotas and workspaces and says how many of ws's SSH and
// TCP endpoints may hold a port. The namespace's endpoints are given in the order of their workspaces'
// age (owned.Older), oldest first, so a newer workspace never takes a port an older one holds, and the
// answer does not depend on which workspace's pass comes first. A workspace being deleted still counts
// until it is gone (its routes, and so its ports, go last). endpointsOf returns a workspace's
// endpoints (its class's).
func PortsAllowed(ctx context.Context, c client.Reader, ws *workspacesv1.WorkspaceDeployment,
	endpointsOf func(context.Context, *workspacesv1.WorkspaceDeployment) ([]workspacesv1.AccessEndpoint, error)) (PortQuota, error) {
	quotas, err := listQuotas(ctx, c, ws.Namespace)
	if err != nil {
		return PortQuota{}, err
	}
	limit, ok := workspacesv1.TCPEndpointLimit(quotas)
	if !ok {
		return PortQuota{}, nil
	}
	var list workspacesv1.WorkspaceDeploymentList
	if err := c.List(ctx, &list, client.InNamespace(ws.Namespace)); err != nil {
		return PortQuota{}, fmt.Errorf("listing workspaces of %s: %w", ws.Namespace, err)
	}
	used := 0
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == ws.Name || !owned.Older(o, ws) {
			continue
		}
		eps, err := endpointsOf(ctx, o)
		if err != nil {
			return PortQuota{}, err
		}
		used += PortEndpoints(eps)
	}
	allowed := max(int(limit)-used, 0)
	return PortQuota{Limited: true, Allowed: allowed, Message: fmt.Sprintf(
		"no port: the namespace's WorkspaceQuota allows %d SSH and TCP endpoints (spec.tcpEndpoints), and older workspaces of the namespace hold %d",
		limit, min(used, int(limit)))}, nil
}
