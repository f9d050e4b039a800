package status

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Patch writes obj's status as a JSON merge patch from written, the same object as its status was
// last written, as fieldManager. It is Apply's counterpart for a status with one serial writer that
// must clear fields whoever wrote them: server-side apply removes only the fields its own manager
// owns, so a field another manager wrote (the upstream operator a component replaces) would stay; a
// merge patch of the diff clears it. The diff is complete only when one writer, one object at a time,
// writes the status and keeps what it wrote (the workspace-controller's WorkspaceDeployment status).
// On success obj holds the object the API server returned.
func Patch(ctx context.Context, c client.Client, obj, written client.Object, fieldManager string) error {
	return c.Status().Patch(ctx, obj, client.MergeFrom(written), client.FieldOwner(fieldManager))
}
