package workspace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

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
	want := release.DesiredValuesSecret(s.releaseInput(), owner)
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
	changed := release.CorrectValuesSecret(got, want)
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, got, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating values Secret %s: %w", key, err)
	}
	return nil
}

// valuesSecretsOf lists the metadata of the values Secrets whose labels name the workspace key, in
// namespace ("" for every namespace the reader sees). The content is never read.
func valuesSecretsOf(ctx context.Context, reader client.Reader, key types.NamespacedName, namespace string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	opts := []client.ListOption{client.MatchingLabels(owned.ValuesSecretLabels(key))}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing the values Secrets of workspace %s: %w", key, err)
	}
	return list.Items, nil
}

// deleteValuesSecrets deletes the values Secrets of a workspace that is being deleted or is gone,
// found by their labels, whether or not a ServiceSet of the workspace exists or ever existed: the
// Secret is made before the ServiceSet and owned by it only once that exists, so a failed ServiceSet
// create leaves it without an owner. Each is deleted with its UID as precondition.
func (r *Reconciler) deleteValuesSecrets(ctx context.Context, secrets []metav1.PartialObjectMetadata) error {
	for i := range secrets {
		sec := &secrets[i]
		sec.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		uid := sec.UID
		if err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting values Secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
	}
	return nil
}
