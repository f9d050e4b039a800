package routing

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Claim is one TCP listener of the pool taken by a TCPRoute attached to the Gateway. The TCPRoutes
// are the allocation table: there is no other record of which port belongs to whom.
type Claim struct {
	// Route is the TCPRoute's namespace/name.
	Route types.NamespacedName
	// Listener is the listener (section) it attaches to.
	Listener gwv1.SectionName
	// Created orders claims of the same listener: the oldest route keeps it.
	Created metav1.Time
}

// ClaimsOf lists the pool listeners each TCPRoute takes on gw: a parent reference naming the Gateway
// takes the listener of its sectionName, or every pool listener on its port. A reference with
// neither attaches to all listeners and takes none in particular.
func ClaimsOf(routes []gwv1.TCPRoute, gw *gwv1.Gateway, pool []gwv1.Listener) []Claim {
	var out []Claim
	for i := range routes {
		rt := &routes[i]
		if !rt.DeletionTimestamp.IsZero() {
			continue // going: its port is about to be free, but not yet for anyone else
		}
		for _, ref := range rt.Spec.ParentRefs {
			if !refersTo(ref, rt.Namespace, gw) {
				continue
			}
			for _, l := range pool {
				if (ref.SectionName != nil && *ref.SectionName == l.Name) || (ref.SectionName == nil && ref.Port != nil && *ref.Port == l.Port) {
					out = append(out, Claim{Route: types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}, Listener: l.Name, Created: rt.CreationTimestamp})
				}
			}
		}
	}
	return out
}

// owners maps each claimed listener to the route that holds it: the oldest claim (by creation, then
// namespace/name), so that two routes racing for one port agree on who keeps it.
func owners(claims []Claim) map[gwv1.SectionName]types.NamespacedName {
	sorted := append([]Claim(nil), claims...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.Created.Equal(&b.Created) {
			return a.Created.Before(&b.Created)
		}
		return a.Route.String() < b.Route.String()
	})
	out := map[gwv1.SectionName]types.NamespacedName{}
	for _, c := range sorted {
		if _, taken := out[c.Listener]; !taken {
			out[c.Listener] = c.Route
		}
	}
	return out
}

// Allocate returns the pool listener for the route ours. A listener ours already holds is kept
// (ports are sticky); otherwise the free listener with the lowest port (then name) is given, where
// free means no other route claims it. It returns false when the pool is exhausted.
func Allocate(pool []gwv1.Listener, claims []Claim, ours types.NamespacedName) (gwv1.Listener, bool) {
	own := owners(claims)
	for _, l := range pool {
		if owner, ok := own[l.Name]; ok && owner == ours {
			return l, true
		}
	}
	taken := map[gwv1.SectionName]bool{}
	for _, c := range claims {
		if c.Route != ours {
			taken[c.Listener] = true
		}
	}
	free := make([]gwv1.Listener, 0, len(pool))
	for _, l := range pool {
		if !taken[l.Name] {
			free = append(free, l)
		}
	}
	if len(free) == 0 {
		return gwv1.Listener{}, false
	}
	sort.SliceStable(free, func(i, j int) bool {
		if free[i].Port != free[j].Port {
			return free[i].Port < free[j].Port
		}
		return free[i].Name < free[j].Name
	})
	return free[0], true
}
