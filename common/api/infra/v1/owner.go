package v1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControllingColony returns the name of the Colony (of this API group, any version) that obj's
// controller owner reference points at, or "" when obj has no controller or another kind controls
// it. A Colony only controls objects in its own namespace, so the name is enough to find it.
func ControllingColony(obj metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "Colony" || !strings.HasPrefix(ref.APIVersion, GroupVersion.Group+"/") {
		return ""
	}
	return ref.Name
}
