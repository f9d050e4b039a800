package colony

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// The upstream exalsius-operator's aggregated Secret `<colony>-kubeconfigs`, deprecated in 0.12.0
// and to be removed in 0.14.0 (docs/MIGRATION.md). Upstream 0.11 wrote it next to each Colony: one
// key per ClusterDeployment, each value a JSON ObjectReference to that cluster's `<cd>-kubeconfig`
// Secret. This project's aggregated kubeconfig is the Secret `<colony>-kubeconfig` (kubeconfig.go).
// For the consumers of an installation switched from upstream, a pointer Secret that exists is kept
// in step: the Colony takes it over (controller owner reference, so it goes with the Colony, which
// upstream's never did) and writes one pointer per ready cluster whose `<cd>-kubeconfig` Secret is on
// the management cluster. None is created for a Colony that has none.

// PointerSecretName is the name of a Colony's upstream pointer Secret: `<colony>-kubeconfigs`.
func PointerSecretName(colony string) string { return colony + "-kubeconfigs" }

// pointersHashAnnotation records the digest of the pointers written, so that a pass whose pointers
// did not change reads nothing but cached metadata.
const pointersHashAnnotation = "infra.exalsius.ai/pointers-hash"

// pointerData returns the pointer Secret's data for the ready entries, and its digest.
func pointerData(namespace string, ready []*entryState) (map[string][]byte, string, error) {
	data := map[string][]byte{}
	for _, e := range ready {
		if e.secret == nil {
			continue // an adopted or regional cluster: its kubeconfig is not `<cd>-kubeconfig` here
		}
		ref, err := json.Marshal(corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: namespace,
			Name: k0rdentv1beta1.KubeconfigSecretName(e.cdName)})
		if err != nil {
			return nil, "", err
		}
		data[e.cdName] = ref
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		_, _ = fmt.Fprintf(h, "%s=%s\n", k, data[k]) // a hash.Hash never fails a write
	}
	return data, hex.EncodeToString(h.Sum(nil))[:16], nil
}

// reconcilePointerSecret keeps an existing `<colony>-kubeconfigs` Secret in step with the ready
// clusters. A Secret another object controls is left alone.
func (r *Reconciler) reconcilePointerSecret(ctx context.Context, colony *infrav1.Colony, ready []*entryState) error {
	name := PointerSecretName(colony.Name)
	meta, err := r.secretMetadata(ctx, colony.Namespace, name)
	if err != nil || meta == nil {
		return err
	}
	if ref := metav1.GetControllerOfNoCopy(meta); ref != nil && ref.UID != colony.UID {
		return nil
	}
	data, digest, err := pointerData(colony.Namespace, ready)
	if err != nil {
		return err
	}
	if isControlledBy(meta, colony) && meta.Annotations[pointersHashAnnotation] == digest {
		return nil
	}
	current := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: colony.Namespace, Name: name}, current); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Secret %s: %w", name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(current); ref != nil && ref.UID != colony.UID {
		return nil
	}
	if !isControlledBy(current, colony) {
		current.OwnerReferences = append(current.OwnerReferences, ownerReference(colony))
	}
	if current.Labels == nil {
		current.Labels = map[string]string{}
	}
	current.Labels[infrav1.ColonyLabel] = colony.Name
	if current.Annotations == nil {
		current.Annotations = map[string]string{}
	}
	current.Annotations[pointersHashAnnotation] = digest
	current.Data, current.StringData = data, nil
	if err := r.Client.Update(ctx, current, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("updating Secret %s: %w", name, err)
	}
	return nil
}
