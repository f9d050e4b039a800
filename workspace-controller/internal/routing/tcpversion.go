package routing

// The TCPRoute version a regional cluster serves: v1 from Gateway API 1.6 on, v1alpha2 only before
// (1.4 and 1.5). It is discovered, not configured: a platform team upgrading the Gateway API of one
// regional cluster changes nothing in the operator.

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
)

var tcpRouteKind = schema.GroupKind{Group: gwv1.GroupName, Kind: "TCPRoute"}

// tcpRouteVersion is the TCPRoute version c's cluster serves, v1 when it serves it, else v1alpha2
// (through c's RESTMapper, which asks the cluster's discovery API). An error for which
// meta.IsNoMatchError holds means it serves neither.
func tcpRouteVersion(c client.Client) (string, error) {
	m, err := c.RESTMapper().RESTMapping(tcpRouteKind, gwv1.GroupVersion.Version, gwv1alpha2.GroupVersion.Version)
	if err != nil {
		return "", err
	}
	return m.GroupVersionKind.Version, nil
}

// newTCPRouteList is an empty TCPRoute list of the version c's cluster serves.
func newTCPRouteList(c client.Client) (client.ObjectList, error) {
	v, err := tcpRouteVersion(c)
	if err != nil {
		return nil, err
	}
	if v == gwv1alpha2.GroupVersion.Version {
		return &gwv1alpha2.TCPRouteList{}, nil
	}
	return &gwv1.TCPRouteList{}, nil
}

// listTCPRoutes lists the TCPRoutes of c's cluster, in the version it serves, as v1 objects (the two
// versions have the same fields).
func listTCPRoutes(ctx context.Context, c client.Client, opts ...client.ListOption) ([]gwv1.TCPRoute, error) {
	list, err := newTCPRouteList(c)
	if err != nil {
		return nil, err
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	switch l := list.(type) {
	case *gwv1.TCPRouteList:
		return l.Items, nil
	case *gwv1alpha2.TCPRouteList:
		out := make([]gwv1.TCPRoute, 0, len(l.Items))
		for i := range l.Items {
			out = append(out, *tcpRouteFromV1alpha2(&l.Items[i]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected TCPRoute list %T", list) // not reached
}

func tcpRouteFromV1alpha2(a *gwv1alpha2.TCPRoute) *gwv1.TCPRoute {
	r := &gwv1.TCPRoute{ObjectMeta: a.ObjectMeta, Spec: gwv1.TCPRouteSpec{CommonRouteSpec: a.Spec.CommonRouteSpec}, Status: gwv1.TCPRouteStatus(a.Status)}
	for _, rule := range a.Spec.Rules {
		r.Spec.Rules = append(r.Spec.Rules, gwv1.TCPRouteRule(rule))
	}
	return r
}

func tcpRouteSpecToV1alpha2(s gwv1.TCPRouteSpec) gwv1alpha2.TCPRouteSpec {
	out := gwv1alpha2.TCPRouteSpec{CommonRouteSpec: s.CommonRouteSpec}
	for _, rule := range s.Rules {
		out.Rules = append(out.Rules, gwv1alpha2.TCPRouteRule(rule))
	}
	return out
}
