package routing

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// programmed is the Programmed condition type, which some Gateway implementations also report on
// a route's parent status.
const programmed = "Programmed"

// RouteReady reports whether a route attached to listener section of gw serves: its parent status
// for that Gateway says Accepted and ResolvedRefs (for the route's current generation), and
// Programmed wherever the Gateway reports it (on the route's parent status or on the listener). The
// message says what is missing.
func RouteReady(routeNamespace string, generation int64, parents []gwv1.RouteParentStatus, gw *gwv1.Gateway, section gwv1.SectionName) (bool, string) {
	var ps *gwv1.RouteParentStatus
	for i := range parents {
		if refersTo(parents[i].ParentRef, routeNamespace, gw) {
			ps = &parents[i]
			break
		}
	}
	if ps == nil {
		return false, fmt.Sprintf("waiting for Gateway %s/%s to report on the route", gw.Namespace, gw.Name)
	}
	for _, t := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
		if ok, msg := conditionTrue(ps.Conditions, t, generation, true); !ok {
			return false, msg
		}
	}
	if ok, msg := conditionTrue(ps.Conditions, programmed, generation, false); !ok {
		return false, msg
	}
	for _, l := range gw.Status.Listeners {
		if l.Name != section {
			continue
		}
		if c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionProgrammed)); c != nil && c.Status != metav1.ConditionTrue {
			return false, fmt.Sprintf("listener %s of Gateway %s/%s is not Programmed: %s: %s", section, gw.Namespace, gw.Name, c.Reason, c.Message)
		}
	}
	return true, ""
}

// conditionTrue checks one condition of a route's parent status. A condition from an older
// generation of the route does not count yet. required says whether a missing condition fails.
func conditionTrue(conds []metav1.Condition, t string, generation int64, required bool) (bool, string) {
	c := meta.FindStatusCondition(conds, t)
	switch {
	case c == nil && !required:
		return true, ""
	case c == nil:
		return false, fmt.Sprintf("waiting for the Gateway to report %s on the route", t)
	case c.ObservedGeneration > 0 && c.ObservedGeneration < generation:
		return false, fmt.Sprintf("waiting for the Gateway to observe the route's latest change (%s)", t)
	case c.Status != metav1.ConditionTrue:
		return false, fmt.Sprintf("the route is not %s: %s: %s", t, c.Reason, c.Message)
	}
	return true, ""
}

// refersTo reports whether a parent reference of a route in routeNamespace names gw.
func refersTo(ref gwv1.ParentReference, routeNamespace string, gw *gwv1.Gateway) bool {
	if ref.Group != nil && *ref.Group != gwv1.GroupName {
		return false
	}
	if ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	ns := routeNamespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == gw.Namespace && string(ref.Name) == gw.Name
}
