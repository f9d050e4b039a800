package release

import (
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Input is what the workspace's ServiceSet and values Secret are built from.
type Input struct {
	Workspace *workspacesv1.WorkspaceDeployment
	Class     *workspacesv1.WorkspaceClass
	// Cluster is the ClusterDeployment the release goes to, the ServiceSet's owner.
	Cluster *k0rdentv1beta1.ClusterDeployment
	// ClusterKey is the ClusterDeployment's key: the ServiceSet and the values Secret live in its
	// namespace.
	ClusterKey types.NamespacedName
	// Values are the inline values of the ServiceSet's service.
	Values string
	// SecretValues are the values that travel in the values Secret, empty when there are none.
	SecretValues string
	// Stopping: spec.stopped scales the release to zero, and the ServiceSet says so in a label.
	Stopping bool
}

// ClusterOwnerRef is the owner reference a workspace's ServiceSets carry to their ClusterDeployment
// (not a controller reference: KCM's own references stay in charge).
func ClusterOwnerRef(cd *k0rdentv1beta1.ClusterDeployment) metav1.OwnerReference {
	f := false
	return metav1.OwnerReference{
		APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ClusterDeployment", Name: cd.Name, UID: cd.UID, Controller: &f,
	}
}

// HelmOptions are the class's helmOptions, or none: then k0rdent's defaults apply (atomic installs).
func HelmOptions(class *workspacesv1.WorkspaceClass) *apiextensionsv1.JSON {
	ho := class.Spec.HelmOptions
	if ho == nil || len(ho.Raw) == 0 || string(ho.Raw) == "null" {
		return nil
	}
	return ho.DeepCopy()
}

// StopHelmOptions are the helmOptions of a stopped workspace's release: the class's, with wait,
// waitForJobs and atomic off. A stop is made on the child (a quota that refuses the release's pods),
// and the published charts fix their replica count, so a Helm upgrade that waits for the release's
// workloads to be ready would wait for pods the stop refuses: it would hold the release for the whole
// Helm timeout, hold any deletion of it behind that, and then (atomic, k0rdent's default) roll the
// zero-replica values back and fail. The start restores the class's options. Options that are not
// a JSON object are left as they are (k0rdent refuses them and says so).
func StopHelmOptions(ho *apiextensionsv1.JSON) *apiextensionsv1.JSON {
	m := map[string]any{}
	if ho != nil && len(ho.Raw) > 0 && string(ho.Raw) != "null" {
		if err := json.Unmarshal(ho.Raw, &m); err != nil || m == nil {
			return ho
		}
	}
	m["wait"], m["waitForJobs"], m["atomic"] = false, false, false
	raw, err := json.Marshal(m)
	if err != nil {
		return ho
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// DesiredServiceSet is the workspace's ServiceSet of the given name as the k0rdent contract wants it
// (docs/design/k0rdent-contract.md), with the hash of the secret values when there are any. A new
// one still needs its rollout started (StartRollout).
func DesiredServiceSet(in Input, name string) *k0rdentv1beta1.ServiceSet {
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: in.ClusterKey.Namespace,
			Labels: map[string]string{
				k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue,
				workspacesv1.WorkspaceLabel:                        in.Workspace.Name,
				workspacesv1.WorkspaceNamespaceLabel:               in.Workspace.Namespace,
				workspacesv1.ClusterDeploymentLabel:                in.ClusterKey.Name,
			},
			OwnerReferences: []metav1.OwnerReference{ClusterOwnerRef(in.Cluster)},
		},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  in.ClusterKey.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{
				Name:        owned.ReleaseName(in.Workspace),
				Namespace:   owned.ReleaseNamespace(in.Workspace),
				Template:    in.Class.Spec.ServiceTemplate.Name,
				Values:      in.Values,
				ValuesFrom:  ValuesFrom(in),
				HelmOptions: HelmOptions(in.Class),
			}},
		},
	}
	if in.Stopping {
		ss.Labels[owned.LabelStopped] = "true"
		ss.Spec.Services[0].HelmOptions = StopHelmOptions(ss.Spec.Services[0].HelmOptions)
	}
	if h := ValuesHash(in.SecretValues); h != "" {
		ss.Annotations = map[string]string{owned.AnnotationValuesHash: h}
	}
	return ss
}

// Stamp is the rollout stamp of a rollout started at now. Nanoseconds, so that two rollouts within one
// second (a stop right after a start) never share a stamp, and the second is never taken for deployed
// because the first was.
func Stamp(now time.Time) string {
	return now.UTC().Format(time.RFC3339Nano)
}

// StartRollout marks ss as carrying a new rollout started at stamp, with the workspace's admission
// (owned.SetAdmissionAnnotation).
func StartRollout(ss *k0rdentv1beta1.ServiceSet, stamp string, admission *workspacesv1.Admission) {
	if ss.Annotations == nil {
		ss.Annotations = map[string]string{}
	}
	ss.Annotations[owned.AnnotationRolloutStarted] = stamp
	ss.Annotations[owned.AnnotationRolloutBaseHash] = "" // a new ServiceSet: no configuration was confirmed before
	owned.SetAdmissionAnnotation(ss, admission)
}

// Fingerprinted reports whether bringing got to want changes what KCM fingerprints in a service's
// lastDeployedHash (the chart, the release's name and namespace, the rendered values): a template, a
// release, inline values, valuesFrom or the values Secret's content. Only then must a new rollout
// move the hash; a change of anything else (helm options, a field someone else set) may not.
func Fingerprinted(got, want *k0rdentv1beta1.ServiceSet) bool {
	if len(got.Spec.Services) != len(want.Spec.Services) ||
		got.Annotations[owned.AnnotationValuesHash] != want.Annotations[owned.AnnotationValuesHash] {
		return true
	}
	for i := range want.Spec.Services {
		g, w := got.Spec.Services[i], want.Spec.Services[i]
		if g.Name != w.Name || g.Namespace != w.Namespace || g.Template != w.Template || ValuesDigest(g.Values) != ValuesDigest(w.Values) ||
			!equality.Semantic.DeepEqual(g.ValuesFrom, w.ValuesFrom) {
			return true
		}
	}
	return false
}

// lastDeployedHash is the lastDeployedHash got's status reports for want's release ("" when none).
func lastDeployedHash(got, want *k0rdentv1beta1.ServiceSet) string {
	if st := serviceState(got, want); st != nil {
		return st.LastDeployedHash
	}
	return ""
}

// serviceState is the state got's status reports for want's release, or nil.
func serviceState(got, want *k0rdentv1beta1.ServiceSet) *k0rdentv1beta1.ServiceState {
	if len(want.Spec.Services) == 0 {
		return nil
	}
	w := want.Spec.Services[0]
	for i := range got.Status.Services {
		if st := &got.Status.Services[i]; st.Name == w.Name && st.Namespace == w.Namespace {
			return st
		}
	}
	return nil
}

// Conflict says why a ServiceSet of the workspace's name that is not the workspace's is left alone,
// as the tenant of viewer (the workspace's namespace) may read it: another namespace's workspace is
// not named.
func Conflict(ss *k0rdentv1beta1.ServiceSet, viewer string) string {
	owner := "no workspace"
	if n := ss.Labels[workspacesv1.WorkspaceLabel]; n != "" {
		owner = text.WorkspaceSeenFrom(viewer, ss.Labels[workspacesv1.WorkspaceNamespaceLabel], n)
	}
	return fmt.Sprintf("ServiceSet %s/%s exists and its labels name %s; it is not adopted. Remove it or rename this workspace", ss.Namespace, ss.Name, owner)
}

// Drift compares the fields the operator owns of the existing ServiceSet got with want
// (DesiredServiceSet): spec is a drift that needs a new rollout (the services, the cluster, the
// provider, the values hash), meta one of labels or the cluster owner. Fields KCM or users add are
// left alone. Inline values compare by digest, so a cached ServiceSet (StripServiceSetValues) compares
// as the one in the API server.
func Drift(got, want *k0rdentv1beta1.ServiceSet) (spec, meta bool) {
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			meta = true
		}
	}
	if got.Labels[owned.LabelStopped] != want.Labels[owned.LabelStopped] {
		meta = true
	}
	if !hasOwner(got, want.OwnerReferences[0]) {
		meta = true
	}
	if got.Spec.Cluster != want.Spec.Cluster || got.Spec.Provider.Name != want.Spec.Provider.Name ||
		len(got.Spec.Services) != len(want.Spec.Services) ||
		got.Annotations[owned.AnnotationValuesHash] != want.Annotations[owned.AnnotationValuesHash] {
		return true, meta
	}
	for i := range want.Spec.Services {
		g, w := got.Spec.Services[i], want.Spec.Services[i]
		if g.Name != w.Name || g.Namespace != w.Namespace || g.Template != w.Template || ValuesDigest(g.Values) != ValuesDigest(w.Values) ||
			!equality.Semantic.DeepEqual(g.ValuesFrom, w.ValuesFrom) || g.HelmAction != nil || g.Version != nil || !SameJSON(g.HelmOptions, w.HelmOptions) {
			return true, meta
		}
	}
	return false, meta
}

// Correct brings got to want (DesiredServiceSet) in the fields the operator owns, for a merge patch:
// the labels (the stopped label goes when want has none) and the cluster owner, and, when spec (Drift),
// the cluster, provider and services with a new rollout started at stamp, the values hash and the
// admission.
func Correct(got, want *k0rdentv1beta1.ServiceSet, spec bool, stamp string, admission *workspacesv1.Admission) {
	for k, v := range want.Labels {
		if got.Labels == nil {
			got.Labels = map[string]string{}
		}
		got.Labels[k] = v
	}
	if want.Labels[owned.LabelStopped] == "" {
		delete(got.Labels, owned.LabelStopped)
	}
	if !hasOwner(got, want.OwnerReferences[0]) {
		got.OwnerReferences = append(got.OwnerReferences, want.OwnerReferences[0])
	}
	if !spec {
		return
	}
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	if Fingerprinted(got, want) {
		got.Annotations[owned.AnnotationRolloutBaseHash] = lastDeployedHash(got, want)
	} else {
		delete(got.Annotations, owned.AnnotationRolloutBaseHash)
	}
	got.Annotations[owned.AnnotationRolloutBaseTransition] = transitionStamp(serviceState(got, want))
	got.Spec.Cluster = want.Spec.Cluster
	got.Spec.Provider.Name = want.Spec.Provider.Name
	got.Spec.Services = want.Spec.Services
	got.Annotations[owned.AnnotationRolloutStarted] = stamp
	if h := want.Annotations[owned.AnnotationValuesHash]; h != "" {
		got.Annotations[owned.AnnotationValuesHash] = h
	} else {
		delete(got.Annotations, owned.AnnotationValuesHash)
	}
	owned.SetAdmissionAnnotation(got, admission)
}

func hasOwner(o *k0rdentv1beta1.ServiceSet, ref metav1.OwnerReference) bool {
	for _, r := range o.OwnerReferences {
		if r.UID == ref.UID && r.Kind == ref.Kind && r.Name == ref.Name {
			return true
		}
	}
	return false
}

// SameJSON reports whether two JSON documents are equal as values (key order and spacing aside); nil
// and null are equal.
func SameJSON(a, b *apiextensionsv1.JSON) bool {
	var av, bv any
	if a != nil {
		_ = json.Unmarshal(a.Raw, &av)
	}
	if b != nil {
		_ = json.Unmarshal(b.Raw, &bv)
	}
	return equality.Semantic.DeepEqual(av, bv)
}
