package k0rdentsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// KCM v1.12's service-state verifier, as the simulator plays it. KCM v1.12 does not take Sveltos's
// word that a Helm service is Deployed (Helm can return before the pods run): it lists the release's
// resources on the child by the labels charts put on them, judges each by health rules (CEL, from
// ConfigMaps; KCM's chart ships the defaults reproduced in healthRules), and reports a service with an
// unhealthy resource as Provisioning, with a condition ServiceHealth<Kind> naming the resources. Only
// when both agree does the state become Deployed, and then, when the fingerprint of the deployed
// configuration (chart, release, values) moved, lastDeployedHash and version are stamped.

// healthDiscoveryLabels are the labels whose value, the service (release) name, makes a resource part
// of a service, as KCM finds them.
var healthDiscoveryLabels = []string{"release", "app", "app.kubernetes.io/instance", "app.kubernetes.io/name"}

// healthRule judges one kind of resource: healthy, or a message saying why not.
type healthRule struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	check      func(obj map[string]any) (bool, string)
}

// healthRules are KCM v1.12's default rules (its chart's default-health-rules ConfigMap), in Go.
var healthRules = []healthRule{
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, namespaced: true, check: replicasHealthy(false)},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, namespaced: true, check: replicasHealthy(true)},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, namespaced: true, check: daemonSetHealthy},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, namespaced: true, check: podHealthy},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, namespaced: true, check: phaseBound},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}, check: phaseBound},
}

// intField reads an integer field and whether it is present (CEL's has()).
func intField(obj map[string]any, path ...string) (int64, bool) {
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	}
	return 0, false
}

func or0(v int64, _ bool) int64 { return v }

// replicasHealthy is the Deployment rule (and, with revisions, the StatefulSet rule): the controller
// observed the newest spec, and every replica is ready and updated.
func replicasHealthy(revisions bool) func(map[string]any) (bool, string) {
	return func(obj map[string]any) (bool, string) {
		observed, hasObserved := intField(obj, "status", "observedGeneration")
		gen, _ := intField(obj, "metadata", "generation")
		want, ok := intField(obj, "spec", "replicas")
		if !ok {
			want = 1
		}
		ready, updated := or0(intField(obj, "status", "readyReplicas")), or0(intField(obj, "status", "updatedReplicas"))
		if !hasObserved || observed < gen {
			return false, "controller has not observed the latest spec"
		}
		if revisions {
			cur, hasCur, _ := unstructured.NestedString(obj, "status", "currentRevision")
			upd, hasUpd, _ := unstructured.NestedString(obj, "status", "updateRevision")
			if !hasCur || !hasUpd || cur != upd {
				if hasCur && hasUpd {
					return false, "rolling update in progress (currentRevision != updateRevision)"
				}
				return false, fmt.Sprintf("%d/%d replicas ready", ready, want)
			}
		}
		if ready != want || updated != want {
			return false, fmt.Sprintf("%d/%d replicas ready, %d updated", ready, want, updated)
		}
		return true, ""
	}
}

func daemonSetHealthy(obj map[string]any) (bool, string) {
	observed, hasObserved := intField(obj, "status", "observedGeneration")
	gen, _ := intField(obj, "metadata", "generation")
	desired, hasDesired := intField(obj, "status", "desiredNumberScheduled")
	ready, hasReady := intField(obj, "status", "numberReady")
	updated, hasUpdated := intField(obj, "status", "updatedNumberScheduled")
	if hasObserved && observed >= gen && hasDesired && hasReady && hasUpdated && desired == ready && desired == updated {
		return true, ""
	}
	return false, fmt.Sprintf("%d/%d nodes ready", ready, desired)
}

// podHealthy: Ready, or finished (Succeeded; Failed when a Job owns it, the Job retrying).
func podHealthy(obj map[string]any) (bool, string) {
	phase, _, _ := unstructured.NestedString(obj, "status", "phase")
	if phase == "Succeeded" {
		return true, ""
	}
	if phase == "Failed" {
		owners, _, _ := unstructured.NestedSlice(obj, "metadata", "ownerReferences")
		for _, o := range owners {
			if m, ok := o.(map[string]any); ok && m["kind"] == "Job" {
				return true, ""
			}
		}
	}
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true, ""
		}
	}
	statuses, ok, _ := unstructured.NestedSlice(obj, "status", "containerStatuses")
	if !ok {
		return false, "pod not ready"
	}
	var why []string
	for _, s := range statuses {
		m, _ := s.(map[string]any)
		if r, _ := m["ready"].(bool); r {
			continue
		}
		name, _ := m["name"].(string)
		reason := "not ready"
		if r, ok, _ := unstructured.NestedString(m, "state", "waiting", "reason"); ok {
			reason = r
		} else if r, ok, _ := unstructured.NestedString(m, "state", "terminated", "reason"); ok {
			reason = r
		}
		why = append(why, name+": "+reason)
	}
	return false, strings.Join(why, ", ")
}

func phaseBound(obj map[string]any) (bool, string) {
	phase, ok, _ := unstructured.NestedString(obj, "status", "phase")
	if ok && phase == "Bound" {
		return true, ""
	}
	if !ok {
		return false, "no phase reported"
	}
	return false, "phase=" + phase
}

// unhealthyResource is one resource of a service that fails its rule.
type unhealthyResource struct {
	kind, ref, reason string
}

// checkHealth lists the service's resources on the child (the namespaced ones in the release's
// namespace) and returns those that fail their rule. A resource being deleted counts as healthy, and
// a service with no labelled resource at all is healthy (KCM then keeps Sveltos's word).
func checkHealth(ctx context.Context, c client.Client, release, namespace string) ([]unhealthyResource, error) {
	var bad []unhealthyResource
	for _, rule := range healthRules {
		seen := map[string]bool{}
		for _, label := range healthDiscoveryLabels {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(rule.gvk.GroupVersion().WithKind(rule.gvk.Kind + "List"))
			opts := []client.ListOption{client.MatchingLabels{label: release}}
			if rule.namespaced {
				opts = append(opts, client.InNamespace(namespace))
			}
			if err := c.List(ctx, list, opts...); err != nil {
				if meta.IsNoMatchError(err) {
					break
				}
				return nil, fmt.Errorf("listing %s labelled %s=%s: %w", rule.gvk.Kind, label, release, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				ref := obj.GetName()
				if obj.GetNamespace() != "" {
					ref = obj.GetNamespace() + "/" + ref
				}
				if seen[ref] {
					continue
				}
				seen[ref] = true
				if obj.GetDeletionTimestamp() != nil {
					continue
				}
				if ok, why := rule.check(obj.Object); !ok {
					bad = append(bad, unhealthyResource{kind: rule.gvk.Kind, ref: ref, reason: why})
				}
			}
		}
	}
	return bad, nil
}

// ServiceHealthConditionPrefix starts the type of the conditions KCM v1.12 sets on a service state
// for each kind of its resources that is unhealthy (ServiceHealthPod, ServiceHealthDeployment, ...).
const ServiceHealthConditionPrefix = "ServiceHealth"

// healthConditions are the service conditions for the unhealthy resources: one per kind, False with
// reason <Kind>Unhealthy and a message naming them, as KCM writes them.
func healthConditions(bad []unhealthyResource) []metav1.Condition {
	byKind := map[string][]unhealthyResource{}
	for _, b := range bad {
		byKind[b.kind] = append(byKind[b.kind], b)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	conds := make([]metav1.Condition, 0, len(kinds))
	for _, k := range kinds {
		items := byKind[k]
		sort.Slice(items, func(i, j int) bool { return items[i].ref < items[j].ref })
		parts := make([]string, 0, len(items))
		for _, it := range items {
			parts = append(parts, fmt.Sprintf("%s (%s)", it.ref, it.reason))
		}
		conds = append(conds, metav1.Condition{Type: ServiceHealthConditionPrefix + k, Status: metav1.ConditionFalse, Reason: k + "Unhealthy",
			Message: fmt.Sprintf("%d %s unhealthy: %s", len(items), k, strings.Join(parts, "; "))})
	}
	return conds
}

// setHealthConditions replaces a service state's ServiceHealth* conditions by conds (a kind that
// recovered loses its condition); other conditions stay.
func setHealthConditions(s *k0rdentv1beta1.ServiceState, conds []metav1.Condition) {
	keep := map[string]bool{}
	for _, c := range conds {
		keep[c.Type] = true
	}
	for _, c := range append([]metav1.Condition{}, s.Conditions...) {
		if strings.HasPrefix(c.Type, ServiceHealthConditionPrefix) && !keep[c.Type] {
			meta.RemoveStatusCondition(&s.Conditions, c.Type)
		}
	}
	for _, c := range conds {
		meta.SetStatusCondition(&s.Conditions, c)
	}
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
}

// deployedHash is the simulator's fingerprint of a deployed Helm service: the chart's identity, the
// release's name and namespace, and its values. Like KCM's, it moves exactly when one of them
// changes; the digest itself differs from KCM's (which hashes what Sveltos records).
func deployedHash(chrt *chart.Chart, namespace, release string, vals map[string]any) string {
	values, _ := json.Marshal(normalize(vals)) // map keys are sorted: a stable encoding
	id := strings.Join([]string{"appVersion=" + chrt.Metadata.AppVersion, "chartVersion=" + chrt.Metadata.Version,
		"namespace=" + namespace, "releaseName=" + release, "chart=" + chrt.Metadata.Name}, "|")
	idSum, valSum := sha256.Sum256([]byte(id)), sha256.Sum256(values)
	h := sha256.New()
	h.Write(idSum[:])
	h.Write(valSum[:])
	return hex.EncodeToString(h.Sum(nil))
}
