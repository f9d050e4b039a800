package k0rdentsim

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// KOF's label and annotation on a regional ClusterDeployment (github.com/k0rdent/kof): the cluster
// role, and the domain its endpoints are published under.
const (
	KOFClusterRoleLabel     = "k0rdent.mirantis.com/kof-cluster-role"
	KOFRegionalDomainAnnot  = "k0rdent.mirantis.com/kof-regional-domain"
	regionalTCPPoolSize     = 4
	gatewaySimTick          = 500 * time.Millisecond
	conditionReasonAccepted = "Accepted"
)

// gatewaySimulator installs the tenant routing infrastructure on every regional cluster (a
// ClusterDeployment labelled k0rdent.mirantis.com/kof-cluster-role=regional, once its child is up):
// the Gateway API CRDs and a Gateway for *.<kof-regional-domain> with a TCP listener pool, as an admin
// would. Then it plays the Gateway controller there: the Gateway and its listeners are Programmed, and
// each route attached to it is Accepted (when its listener exists and, for HTTPRoutes, its hostnames
// fall under the listener's) with ResolvedRefs true only when every backend Service exists.
type gatewaySimulator struct {
	client client.Client
	world  *world.World

	ready   map[string]bool          // child names whose infrastructure is installed
	clients map[string]client.Client // per child name, with the Gateway API scheme
}

// Start runs the simulator until ctx ends (a manager.Runnable).
func (g *gatewaySimulator) Start(ctx context.Context) error {
	g.ready, g.clients = map[string]bool{}, map[string]client.Client{}
	t := time.NewTicker(gatewaySimTick)
	defer t.Stop()
	for {
		g.tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (g *gatewaySimulator) tick(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("gateway-sim")
	var cds k0rdentv1beta1.ClusterDeploymentList
	if err := g.client.List(ctx, &cds, client.MatchingLabels{KOFClusterRoleLabel: "regional"}); err != nil {
		return
	}
	for i := range cds.Items {
		cd := &cds.Items[i]
		name := ChildName(cd.Namespace, cd.Name)
		child := g.world.Child(name)
		if child == nil || !cd.DeletionTimestamp.IsZero() {
			delete(g.ready, name)
			delete(g.clients, name)
			continue
		}
		if !g.ready[name] {
			domain := cd.Annotations[KOFRegionalDomainAnnot]
			if domain == "" {
				domain = cd.Name + "." + cd.Namespace + ".exalsius.localhost"
			}
			if err := child.MakeRegional(ctx, domain, regionalTCPPoolSize); err != nil {
				logger.Info("installing the routing infrastructure", "cluster", name, "error", err.Error())
				continue
			}
			logger.Info("regional cluster ready", "cluster", name, "domain", domain)
			g.ready[name] = true
		}
		rc := g.clients[name]
		if rc == nil {
			c, err := child.RegionalClient()
			if err != nil {
				continue
			}
			rc, g.clients[name] = c, c
		}
		if err := syncGatewayStatus(ctx, rc); err != nil {
			logger.V(1).Info("gateway status", "cluster", name, "error", err.Error())
		}
	}
}

// syncGatewayStatus writes the Gateway's and the routes' status on one regional cluster.
func syncGatewayStatus(ctx context.Context, rc client.Client) error {
	var gws gwv1.GatewayList
	if err := rc.List(ctx, &gws); err != nil {
		return err
	}
	ours := map[types.NamespacedName]*gwv1.Gateway{}
	for i := range gws.Items {
		gw := &gws.Items[i]
		if gw.Spec.GatewayClassName != world.GatewayClassName {
			continue
		}
		ours[client.ObjectKeyFromObject(gw)] = gw
	}
	attached := map[types.NamespacedName]map[gwv1.SectionName]int32{}
	var hrs gwv1.HTTPRouteList
	if err := rc.List(ctx, &hrs); err != nil {
		return err
	}
	for i := range hrs.Items {
		r := &hrs.Items[i]
		var refs []gwv1.BackendObjectReference
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				refs = append(refs, b.BackendObjectReference)
			}
		}
		st := routeParents(ctx, rc, r.Namespace, r.Generation, r.Spec.ParentRefs, r.Spec.Hostnames, refs, ours, attached)
		if !sameParents(st, r.Status.Parents) {
			r.Status.Parents = st
			if err := rc.Status().Update(ctx, r); err != nil {
				return err
			}
		}
	}
	var trs gwv1.TCPRouteList
	if err := rc.List(ctx, &trs); err != nil {
		return err
	}
	for i := range trs.Items {
		r := &trs.Items[i]
		var refs []gwv1.BackendObjectReference
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				refs = append(refs, b.BackendObjectReference)
			}
		}
		st := routeParents(ctx, rc, r.Namespace, r.Generation, r.Spec.ParentRefs, nil, refs, ours, attached)
		if !sameParents(st, r.Status.Parents) {
			r.Status.Parents = st
			if err := rc.Status().Update(ctx, r); err != nil {
				return err
			}
		}
	}
	for key, gw := range ours {
		want := gatewayStatus(gw, attached[key])
		if !sameGatewayStatus(want, gw.Status) {
			gw.Status = want
			if err := rc.Status().Update(ctx, gw); err != nil {
				return err
			}
		}
	}
	return nil
}

func cond(t string, ok bool, reason, msg string, gen int64) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
}

// routeParents computes a route's parent statuses for the parents that are simulated Gateways.
func routeParents(ctx context.Context, rc client.Client, ns string, gen int64, parents []gwv1.ParentReference, hosts []gwv1.Hostname,
	refs []gwv1.BackendObjectReference, gws map[types.NamespacedName]*gwv1.Gateway, attached map[types.NamespacedName]map[gwv1.SectionName]int32) []gwv1.RouteParentStatus {
	resolved, reason, msg := true, string(gwv1.RouteReasonResolvedRefs), ""
	for _, b := range refs {
		if b.Kind != nil && *b.Kind != "Service" {
			continue
		}
		bns := ns
		if b.Namespace != nil {
			bns = string(*b.Namespace)
		}
		if err := rc.Get(ctx, types.NamespacedName{Namespace: bns, Name: string(b.Name)}, &corev1.Service{}); err != nil {
			resolved, reason, msg = false, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("backend Service %s/%s: %v", bns, b.Name, err)
		}
	}
	var out []gwv1.RouteParentStatus
	for _, p := range parents {
		pns := ns
		if p.Namespace != nil {
			pns = string(*p.Namespace)
		}
		key := types.NamespacedName{Namespace: pns, Name: string(p.Name)}
		gw := gws[key]
		if gw == nil {
			continue
		}
		accepted, areason, amsg := false, string(gwv1.RouteReasonNoMatchingParent), "no listener of the Gateway matches the parent reference"
		for _, l := range gw.Spec.Listeners {
			if (p.SectionName != nil && *p.SectionName != l.Name) || (p.Port != nil && *p.Port != l.Port) {
				continue
			}
			if len(hosts) > 0 && !hostsMatch(hosts, l.Hostname) {
				areason, amsg = string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route falls under the listener's"
				continue
			}
			accepted, areason, amsg = true, conditionReasonAccepted, ""
			if attached[key] == nil {
				attached[key] = map[gwv1.SectionName]int32{}
			}
			attached[key][l.Name]++
		}
		out = append(out, gwv1.RouteParentStatus{ParentRef: p, ControllerName: world.GatewayControllerName, Conditions: []metav1.Condition{
			cond(string(gwv1.RouteConditionAccepted), accepted, areason, amsg, gen),
			cond(string(gwv1.RouteConditionResolvedRefs), resolved, reason, msg, gen),
		}})
	}
	return out
}

// hostsMatch reports whether a route hostname falls under a listener hostname (*.domain or exact).
func hostsMatch(hosts []gwv1.Hostname, listener *gwv1.Hostname) bool {
	if listener == nil {
		return true
	}
	l := string(*listener)
	for _, h := range hosts {
		hs := string(h)
		if d, ok := strings.CutPrefix(l, "*."); ok {
			if label, rest, found := strings.Cut(hs, "."); found && label != "" && rest == d {
				return true
			}
		} else if hs == l {
			return true
		}
	}
	return false
}

func gatewayStatus(gw *gwv1.Gateway, attached map[gwv1.SectionName]int32) gwv1.GatewayStatus {
	st := gwv1.GatewayStatus{Conditions: []metav1.Condition{
		cond(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "", gw.Generation),
		cond(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "", gw.Generation),
	}}
	for _, l := range gw.Spec.Listeners {
		kind := gwv1.Kind("HTTPRoute")
		if l.Protocol == gwv1.TCPProtocolType {
			kind = "TCPRoute"
		}
		group := gwv1.Group(gwv1.GroupName)
		st.Listeners = append(st.Listeners, gwv1.ListenerStatus{
			Name: l.Name, AttachedRoutes: attached[l.Name],
			SupportedKinds: []gwv1.RouteGroupKind{{Group: &group, Kind: kind}},
			Conditions: []metav1.Condition{
				cond(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "", gw.Generation),
				cond(string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "", gw.Generation),
				cond(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "", gw.Generation),
			},
		})
	}
	return st
}

// sameConds compares conditions by type, status, reason and generation (not the transition time).
func sameConds(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		o := meta.FindStatusCondition(b, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

func sameParents(a, b []gwv1.RouteParentStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ParentRef.Name != b[i].ParentRef.Name || !sameConds(a[i].Conditions, b[i].Conditions) {
			return false
		}
	}
	return true
}

func sameGatewayStatus(a, b gwv1.GatewayStatus) bool {
	if !sameConds(a.Conditions, b.Conditions) || len(a.Listeners) != len(b.Listeners) {
		return false
	}
	for i := range a.Listeners {
		if a.Listeners[i].Name != b.Listeners[i].Name || a.Listeners[i].AttachedRoutes != b.Listeners[i].AttachedRoutes ||
			!sameConds(a.Listeners[i].Conditions, b.Listeners[i].Conditions) {
			return false
		}
	}
	return true
}
