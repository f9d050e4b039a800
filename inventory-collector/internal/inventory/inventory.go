package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/status"
	"github.com/exalsius/exalsius-operator/common/text"
)

// maxMessage bounds the message of an unreachable child.
const maxMessage = 1024

// collect computes the inventory entry of each ClusterDeployment of this shard. It returns the
// entries it could compute, the earliest time a child that cannot be watched now should be retried,
// and the errors that are not about reachability (reading the kubeconfig Secret failed, ...).
//
// Children are collected independently: TryGet never waits for a connect, so a slow or black-holed
// child never delays the others. A child still connecting keeps its previous entry (or gets none
// yet); the cache notifies when its connect ends, which brings the Colony back here.
func (r *Reconciler) collect(ctx context.Context, colony *infrav1.Colony, cds []types.NamespacedName) (map[string]infrav1.ClusterGPUInventory, time.Duration, []string) {
	logger := log.FromContext(ctx)
	colonyKey := client.ObjectKeyFromObject(colony)
	now := metav1.NewTime(r.Now().Truncate(time.Second))
	out := make(map[string]infrav1.ClusterGPUInventory, len(cds))
	var requeue time.Duration
	var errs []string
	later := func(d time.Duration) {
		if d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}
	for _, cd := range cds {
		prev, hadPrev := colony.Status.GPUInventory[cd.Name]
		cl, err := r.Clusters.TryGet(ctx, cd.Namespace, cd.Name)
		switch {
		case err == nil:
			// Computed once per change of the child, shared by the ClusterDeployments that reach the
			// same API server with the same identity.
			offerings := cl.Memo("inventory/offerings", func() any { return gpu.Offerings(cl.Nodes(), cl.Pods()) }).([]infrav1.GPUOffering)
			e := infrav1.ClusterGPUInventory{Reachable: true, Offerings: offerings}
			e.LastUpdated = now
			contact := contactTime(cl.LastContact(), now)
			e.LastContact = &contact
			if hadPrev && sameContent(prev, e) {
				e.LastUpdated = prev.LastUpdated
				// Unchanged: keep the stored contact time until it is older than the refresh interval.
				if prev.LastContact != nil && contact.Sub(prev.LastContact.Time) < r.ContactRefresh {
					e.LastContact = prev.LastContact
				}
			}
			out[cd.Name] = e
			// A quiet child raises no event: come back to refresh its lastContact.
			later(r.ContactRefresh)
		case childcluster.UnreachableReason(err) == childcluster.ReasonConnecting:
			if hadPrev {
				out[cd.Name] = prev
			}
			continue
		case childcluster.IsUnreachable(err):
			reason := childcluster.UnreachableReason(err)
			scrapeErrors.WithLabelValues(colonyKey.Namespace, colonyKey.Name, cd.Name, reason).Inc()
			e := unreachableEntry(prev, hadPrev, reason, err, now)
			if !hadPrev || prev.Reachable {
				logger.Info("child cluster unreachable, keeping its last inventory", "clusterDeployment", cd.String(), "reason", reason)
			}
			out[cd.Name] = e
			switch reason {
			case childcluster.ReasonConnectFailed, childcluster.ReasonKubeconfigInvalid, childcluster.ReasonUnauthorized:
				later(max(childcluster.RetryAfter(err), time.Second))
			case childcluster.ReasonUnhealthy:
				later(recheckUnhealthy)
			default:
				later(recheckMissing)
			}
		default:
			scrapeErrors.WithLabelValues(colonyKey.Namespace, colonyKey.Name, cd.Name, "Error").Inc()
			errs = append(errs, fmt.Sprintf("%s: %v", cd, err))
			continue
		}
		recordCluster(colonyKey, cd.Name, out[cd.Name])
	}
	return out, requeue, errs
}

// contactTime is the child's last contact at the status' one-second precision, never after now.
func contactTime(t time.Time, now metav1.Time) metav1.Time {
	if t.IsZero() || t.After(now.Time) {
		return now
	}
	return metav1.NewTime(t.Truncate(time.Second))
}

// unreachableEntry keeps the last offerings and their lastUpdated (the age of what is shown) and says
// why the child cannot be reached. While the reason stays the same, the first message is kept, so that
// retries with slightly different errors do not rewrite the status.
func unreachableEntry(prev infrav1.ClusterGPUInventory, hadPrev bool, reason string, err error, now metav1.Time) infrav1.ClusterGPUInventory {
	msg := text.Truncate(fmt.Sprintf("%s: %v", reason, err), maxMessage)
	e := infrav1.ClusterGPUInventory{Reachable: false, Message: msg, LastUpdated: now}
	if hadPrev {
		e.Offerings = prev.Offerings
		e.LastUpdated = prev.LastUpdated
		e.LastContact = prev.LastContact
		if !prev.Reachable && len(prev.Message) >= len(reason) && prev.Message[:len(reason)] == reason {
			e.Message = prev.Message
		}
	}
	return e
}

// desiredInventory is status.gpuInventory as it should be: the freshly collected entries of this
// shard, the current entries of the Colony's other ClusterDeployments (other shards keep those), and
// nothing for ClusterDeployments the Colony no longer has.
func desiredInventory(colony *infrav1.Colony, all []types.NamespacedName, collected map[string]infrav1.ClusterGPUInventory) map[string]infrav1.ClusterGPUInventory {
	out := make(map[string]infrav1.ClusterGPUInventory, len(all))
	for _, cd := range all {
		if e, ok := collected[cd.Name]; ok {
			out[cd.Name] = e
		} else if prev, ok := colony.Status.GPUInventory[cd.Name]; ok {
			out[cd.Name] = prev
		}
	}
	return out
}

// gpuTotals sums the offerings of the reachable clusters: status.gpus. An unreachable cluster's
// offerings are the last ones seen and may be gone, so they are not counted as GPUs to be had.
func gpuTotals(inv map[string]infrav1.ClusterGPUInventory) *infrav1.ColonyGPUs {
	t := &infrav1.ColonyGPUs{}
	for _, e := range inv {
		if !e.Reachable {
			continue
		}
		for _, o := range e.Offerings {
			t.Total += o.Total
			t.Allocated += o.Allocated
			t.Free += max(o.Total-o.Allocated, 0)
		}
	}
	return t
}

// sameTotals compares status.gpus as stored with the desired totals.
func sameTotals(stored, desired *infrav1.ColonyGPUs) bool {
	return stored != nil && *stored == *desired
}

// sameContent reports whether two entries differ only in lastUpdated and lastContact.
func sameContent(a, b infrav1.ClusterGPUInventory) bool {
	a.LastUpdated, b.LastUpdated = metav1.Time{}, metav1.Time{}
	a.LastContact, b.LastContact = nil, nil
	return bytes.Equal(mustJSON(a), mustJSON(b))
}

// inventoriesEqual compares two inventories as the API server stores them (nil and empty maps and
// lists are the same; map order does not matter).
func inventoriesEqual(a, b map[string]infrav1.ClusterGPUInventory) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !av.LastUpdated.Equal(&bv.LastUpdated) || !av.LastContact.Equal(bv.LastContact) || !sameContent(av, bv) {
			return false
		}
	}
	return true
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain data types are marshalled here; this cannot happen.
		panic(fmt.Sprintf("inventory: marshalling %T: %v", v, err))
	}
	return b
}

// applyInventory writes status.gpuInventory and its totals, status.gpus, by server-side apply under FieldManager, conditioned on
// the Colony's resourceVersion: the whole map is owned by one field manager, so another shard's entry
// read a moment ago must not overwrite a newer one. A conflict is retried by the caller with a fresh
// read. No other status field is sent (every other field of ColonyStatus is omitempty and left
// zero), so the colony-controller's fields are never touched.
func (r *Reconciler) applyInventory(ctx context.Context, colony *infrav1.Colony, inv map[string]infrav1.ClusterGPUInventory) error {
	obj := &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Name: colony.Name, Namespace: colony.Namespace, ResourceVersion: colony.ResourceVersion},
		Status:     infrav1.ColonyStatus{GPUInventory: inv, GPUs: gpuTotals(inv)},
	}
	return status.Apply(ctx, r.Client, obj, FieldManager, status.IfUnchanged())
}
