package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

const (
	// sveltosTemplateAnnotation asks Sveltos to render a valuesFrom source as a template, as it always
	// renders inline values; the values are escaped for that, so every Sveltos version reads them back
	// verbatim.
	sveltosTemplateAnnotation = "projectsveltos.io/template"
)

// valuesHash is a short content hash of the secret values, empty when there are none.
func valuesHash(secretValues string) string {
	if secretValues == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secretValues))
	return hex.EncodeToString(sum[:8])
}

// valuesFrom is the ServiceSet service's valuesFrom: the values Secret when there are secret values.
func (s *scope) valuesFrom() []k0rdentv1beta1.ValuesFrom {
	if s.secretValues == "" {
		return nil
	}
	return []k0rdentv1beta1.ValuesFrom{{Kind: k0rdentv1beta1.ValuesFromSecret, Name: owned.ValuesSecretName(s.ws)}}
}

// desiredValuesSecret is the workspace's values Secret. Its owner is the workspace's ServiceSet (the
// workspace itself may live in another namespace), so it goes when the ServiceSet goes.
func (s *scope) desiredValuesSecret(owner *k0rdentv1beta1.ServiceSet) *corev1.Secret {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      owned.ValuesSecretName(s.ws),
			Namespace: s.cdKey.Namespace,
			Labels: map[string]string{
				owned.LabelValuesSecret:              "true",
				workspacesv1.WorkspaceLabel:          s.ws.Name,
				workspacesv1.WorkspaceNamespaceLabel: s.ws.Namespace,
			},
			Annotations: map[string]string{sveltosTemplateAnnotation: "ok"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{owned.ValuesSecretKey: []byte(s.secretValues)},
	}
	if owner != nil && owner.UID != "" {
		t := true
		sec.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ServiceSet", Name: owner.Name, UID: owner.UID,
			Controller: &t, BlockOwnerDeletion: &t,
		}}
	}
	return sec
}

// ensureValuesSecret creates or corrects the workspace's values Secret, or removes it when the
// workspace has no secret values. owner is the ServiceSet when it exists. The Secret is read from the
// API server: Secrets are not cached.
func (r *Reconciler) ensureValuesSecret(ctx context.Context, s *scope, owner *k0rdentv1beta1.ServiceSet) error {
	key := types.NamespacedName{Namespace: s.cdKey.Namespace, Name: owned.ValuesSecretName(s.ws)}
	if s.secretValues == "" {
		// Nothing to write: only a leftover Secret is removed. The Secrets' metadata is cached (the
		// controller watches it), so a workspace without secret values costs no request here; a
		// Secret the cache has not seen yet brings the workspace back through that watch.
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := r.Client.Get(ctx, key, meta); apierrors.IsNotFound(err) {
			return nil
		}
	}
	got := &corev1.Secret{}
	err := r.APIReader.Get(ctx, key, got)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading values Secret %s: %w", key, err)
	}
	exists := err == nil
	if s.secretValues == "" {
		// Only a Secret whose labels name this very workspace (name and namespace) is removed: a
		// Secret of that name belonging to someone else is left alone.
		if exists && owned.OwnValuesSecret(got, s.ws) {
			if err := r.Client.Delete(ctx, got, client.Preconditions{UID: &got.UID}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing values Secret %s: %w", key, err)
			}
		}
		return nil
	}
	want := s.desiredValuesSecret(owner)
	if !exists {
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating values Secret %s: %w", key, err)
		}
		return nil
	}
	if !owned.OwnValuesSecret(got, s.ws) {
		return fmt.Errorf("secret %s exists and does not belong to workspace %s; remove or rename it", key, s.key())
	}
	patchBase := got.DeepCopy()
	changed := string(got.Data[owned.ValuesSecretKey]) != s.secretValues || len(got.Data) != 1 ||
		got.Annotations[sveltosTemplateAnnotation] != "ok"
	got.Data = want.Data
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations[sveltosTemplateAnnotation] = "ok"
	if len(want.OwnerReferences) > 0 && !hasOwnerRef(got.OwnerReferences, want.OwnerReferences[0]) {
		got.OwnerReferences = want.OwnerReferences
		changed = true
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, got, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating values Secret %s: %w", key, err)
	}
	return nil
}

func hasOwnerRef(refs []metav1.OwnerReference, ref metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.UID == ref.UID {
			return true
		}
	}
	return false
}
