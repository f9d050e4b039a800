package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// serviceSetName is the name the workspace's ServiceSet has: the one in its status when that
// ServiceSet still exists and is the workspace's (made under an earlier naming), else ServiceSetName.
func (r *Reconciler) serviceSetName(ctx context.Context, s *scope) (string, error) {
	name := owned.ServiceSetName(s.ws)
	prev := s.ws.Status.ServiceSetName
	if prev == "" || prev == name {
		return name, nil
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: owned.ClusterKey(s.ws).Namespace, Name: prev}, ss)
	switch {
	case apierrors.IsNotFound(err):
		return name, nil
	case err != nil:
		return "", fmt.Errorf("reading ServiceSet %s/%s: %w", owned.ClusterKey(s.ws).Namespace, prev, err)
	case owned.OwnedServiceSet(ss, s.ws):
		return prev, nil
	}
	return name, nil
}

// claimServiceSet checks, before the gate, that a ServiceSet of the workspace's name is not another's.
func (r *Reconciler) claimServiceSet(ctx context.Context, s *scope) (stepResult, error) {
	name, err := r.serviceSetName(ctx, s)
	if err != nil {
		return stop, err
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: s.cdKey.Namespace, Name: name}, ss)
	if apierrors.IsNotFound(err) {
		return next, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading ServiceSet %s/%s: %w", s.cdKey.Namespace, name, err)
	}
	if !owned.OwnedServiceSet(ss, s.ws) {
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonServiceSetConflict, serviceSetConflict(ss))
		return stop, nil
	}
	s.claimed = ss
	return next, nil
}

func serviceSetConflict(ss *k0rdentv1beta1.ServiceSet) string {
	owner := "no workspace"
	if n := ss.Labels[workspacesv1.WorkspaceLabel]; n != "" {
		owner = "workspace " + ss.Labels[workspacesv1.WorkspaceNamespaceLabel] + "/" + n
	}
	return fmt.Sprintf("ServiceSet %s/%s exists and its labels name %s; it is not adopted. Remove it or rename this workspace", ss.Namespace, ss.Name, owner)
}

func clusterOwnerRef(cd *k0rdentv1beta1.ClusterDeployment) metav1.OwnerReference {
	f := false
	return metav1.OwnerReference{
		APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ClusterDeployment", Name: cd.Name, UID: cd.UID, Controller: &f,
	}
}

// helmOptions are the class's helmOptions, or none: then k0rdent's defaults apply (atomic installs).
func (s *scope) helmOptions() *apiextensionsv1.JSON {
	ho := s.class.Spec.HelmOptions
	if ho == nil || len(ho.Raw) == 0 || string(ho.Raw) == "null" {
		return nil
	}
	return ho.DeepCopy()
}

func (s *scope) deployTimeout() time.Duration {
	return s.class.Spec.DeployTimeoutOrDefault()
}

// desiredServiceSet is the workspace's ServiceSet as the k0rdent contract wants it
// (docs/design/k0rdent-contract.md).
func (s *scope) desiredServiceSet(name string) *k0rdentv1beta1.ServiceSet {
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: s.cdKey.Namespace,
			Labels: map[string]string{
				k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue,
				workspacesv1.WorkspaceLabel:                        s.ws.Name,
				workspacesv1.WorkspaceNamespaceLabel:               s.ws.Namespace,
				workspacesv1.ClusterDeploymentLabel:                s.cdKey.Name,
			},
			OwnerReferences: []metav1.OwnerReference{clusterOwnerRef(s.cd)},
		},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  s.cdKey.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{
				Name:        owned.ReleaseName(s.ws),
				Namespace:   s.releaseNamespace(),
				Template:    s.class.Spec.ServiceTemplate.Name,
				Values:      s.values,
				ValuesFrom:  s.valuesFrom(),
				HelmOptions: s.helmOptions(),
			}},
		},
	}
	if s.stopping {
		ss.Labels[owned.LabelStopped] = "true"
	}
	return ss
}

// serviceSet creates the workspace's ServiceSet, or corrects it when it drifted from what the
// workspace asks (a spec edit is rolled out this way); docs/RECONCILIATION.md, step 6.
func (r *Reconciler) serviceSet(ctx context.Context, s *scope) (stepResult, error) {
	name, err := r.serviceSetName(ctx, s)
	if err != nil {
		return stop, err
	}
	want := s.desiredServiceSet(name)
	s.ws.Status.ServiceSetName = want.Name
	s.ws.Status.ReleaseName = want.Spec.Services[0].Name
	// Nanoseconds, so that two rollouts within one second (a stop right after a start) never share a
	// stamp, and the second is never taken for deployed because the first was.
	stamp := s.now.UTC().Format(time.RFC3339Nano)

	if h := valuesHash(s.secretValues); h != "" {
		want.Annotations = map[string]string{owned.AnnotationValuesHash: h}
	}

	got := &k0rdentv1beta1.ServiceSet{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, got)
	if apierrors.IsNotFound(err) {
		// The values Secret first, so that the ServiceSet never names a missing one; it gets the
		// ServiceSet as owner once that exists.
		if err := r.ensureValuesSecret(ctx, s, nil); err != nil {
			return stop, err
		}
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[owned.AnnotationRolloutStarted] = stamp
		owned.SetAdmissionAnnotation(want, s.ws.Status.Admission)
		if err := r.Client.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return stopAfter(time.Second), nil // created by a pass whose cache we have not seen yet
			}
			return stop, fmt.Errorf("creating ServiceSet %s/%s: %w", want.Namespace, want.Name, err)
		}
		s.svcSet = want
		if err := r.ensureValuesSecret(ctx, s, want); err != nil {
			return stop, err
		}
		return next, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading ServiceSet %s/%s: %w", want.Namespace, want.Name, err)
	}
	if !owned.OwnedServiceSet(got, s.ws) {
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonServiceSetConflict, serviceSetConflict(got))
		return stop, nil
	}
	if got.DeletionTimestamp.IsZero() && s.secretValues != "" {
		// Before the ServiceSet changes, so that it never names an outdated or missing Secret.
		if err := r.ensureValuesSecret(ctx, s, got); err != nil {
			return stop, err
		}
	}
	if !got.DeletionTimestamp.IsZero() {
		s.svcSet = got
		s.blocked(workspacesv1.PhaseDeploying, workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseDeploying,
			fmt.Sprintf("ServiceSet %s/%s is being deleted; it is made again once it is gone", got.Namespace, got.Name))
		return stop, nil
	}
	specDrift, metaDrift := drift(got, want)
	if !specDrift && !metaDrift {
		s.svcSet = got
		return next, r.dropValuesSecret(ctx, s)
	}
	patchBase := got.DeepCopy()
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
	if specDrift {
		got.Spec.Cluster = want.Spec.Cluster
		got.Spec.Provider.Name = want.Spec.Provider.Name
		got.Spec.Services = want.Spec.Services
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[owned.AnnotationRolloutStarted] = stamp
		if h := want.Annotations[owned.AnnotationValuesHash]; h != "" {
			got.Annotations[owned.AnnotationValuesHash] = h
		} else {
			delete(got.Annotations, owned.AnnotationValuesHash)
		}
		owned.SetAdmissionAnnotation(got, s.ws.Status.Admission)
	}
	if err := r.Client.Patch(ctx, got, client.MergeFrom(patchBase)); err != nil {
		return stop, fmt.Errorf("updating ServiceSet %s/%s: %w", got.Namespace, got.Name, err)
	}
	s.svcSet = got
	return next, r.dropValuesSecret(ctx, s)
}

// dropValuesSecret removes the values Secret once the ServiceSet no longer names it.
func (r *Reconciler) dropValuesSecret(ctx context.Context, s *scope) error {
	if s.secretValues != "" {
		return nil
	}
	return r.ensureValuesSecret(ctx, s, nil)
}

// drift compares the fields the operator owns. Fields KCM or users add are left alone.
func drift(got, want *k0rdentv1beta1.ServiceSet) (spec, meta bool) {
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
		if g.Name != w.Name || g.Namespace != w.Namespace || g.Template != w.Template || valuesDigest(g.Values) != valuesDigest(w.Values) ||
			!equality.Semantic.DeepEqual(g.ValuesFrom, w.ValuesFrom) || g.HelmAction != nil || g.Version != nil || !sameJSON(g.HelmOptions, w.HelmOptions) {
			return true, meta
		}
	}
	return false, meta
}

func hasOwner(o *k0rdentv1beta1.ServiceSet, ref metav1.OwnerReference) bool {
	for _, r := range o.OwnerReferences {
		if r.UID == ref.UID && r.Kind == ref.Kind && r.Name == ref.Name {
			return true
		}
	}
	return false
}

func sameJSON(a, b *apiextensionsv1.JSON) bool {
	var av, bv any
	if a != nil {
		_ = json.Unmarshal(a.Raw, &av)
	}
	if b != nil {
		_ = json.Unmarshal(b.Raw, &bv)
	}
	return equality.Semantic.DeepEqual(av, bv)
}

// readiness reads the release's state from the ServiceSet (docs/RECONCILIATION.md, step 7). The deployTimeout counts
// from the start of the current rollout (the ServiceSet made, or its services changed). Once k0rdent
// reported the current rollout Deployed, a later Provisioning or Pending is a re-sync (a Sveltos
// re-sync, a KCM restart, a health verifier): the workspace stays Running and says so, unless the
// service really fails.
func (r *Reconciler) readiness(ctx context.Context, s *scope) (stepResult, error) {
	ro := r.rolloutOf(s)
	state, current, deployedBefore, started, where := ro.state, ro.current, ro.deployedBefore, ro.started, ro.where
	ss := s.svcSet
	switch {
	case current && state.State == k0rdentv1beta1.ServiceStateDeployed:
		if err := r.markDeployed(ctx, ss); err != nil {
			return stop, err
		}
		s.running(workspacesv1.ReasonHelmReleaseDeployed, where+" is deployed")
		return next, nil
	case current && state.State == k0rdentv1beta1.ServiceStateFailed:
		msg := fmt.Sprintf("%s failed: %s", where, orDefault(state.FailureMessage, "no message from k0rdent"))
		reason := workspacesv1.ReasonHelmReleaseFailed
		if why := r.quotaRefusal(ctx, s); why != "" {
			msg, reason = msg+"; "+why, workspacesv1.ReasonGpuQuotaExceeded
		}
		s.failed(workspacesv1.HelmReleaseReadyCondition, reason, msg)
		s.snapshot = true
		return next, nil
	case deployedBefore:
		st := "no state reported"
		if state != nil {
			st = "state " + string(state.State)
		}
		s.running(workspacesv1.ReasonHelmReleaseResyncing,
			fmt.Sprintf("%s was deployed; k0rdent re-syncs it now (%s)", where, st))
		return next, nil
	}
	quota := ""
	if !s.releaseNSCreated { // a namespace made in this pass has no refused pods yet
		quota = r.quotaRefusal(ctx, s)
	}
	timeout := s.deployTimeout()
	if elapsed := s.now.Sub(started); elapsed >= timeout {
		st := "no state reported"
		if state != nil {
			st = "state " + string(state.State)
		}
		msg := fmt.Sprintf("%s not deployed within deployTimeout %s (%s)", where, timeout, st)
		reason := workspacesv1.ReasonDeployTimeout
		if quota != "" {
			msg, reason = msg+"; "+quota, workspacesv1.ReasonGpuQuotaExceeded
		}
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseFailed, msg)
		s.setCondition(workspacesv1.HelmReleaseReadyCondition, metav1.ConditionFalse, reason, msg)
		s.snapshot = true
		return next, nil
	}
	msg := where + " is being installed"
	if state != nil && current {
		msg += ": state " + string(state.State)
	}
	reason := workspacesv1.ReasonHelmReleaseDeploying
	if quota != "" {
		msg, reason = msg+"; "+quota, workspacesv1.ReasonGpuQuotaExceeded
	}
	s.blocked(workspacesv1.PhaseDeploying, workspacesv1.HelmReleaseReadyCondition, reason, msg)
	s.requeueAfter = timeout - s.now.Sub(started)
	if state != nil && !current {
		s.requeueAfter = min(s.requeueAfter, r.Options.RolloutSettle-s.now.Sub(started))
	}
	if quota == "" {
		// The child's refusals are not watched: look again while the release is installed.
		s.requeueAfter = min(s.requeueAfter, r.Options.UnreachableRetry*4)
	}
	return next, nil
}

// rollout is what k0rdent reports of the workspace's release in its ServiceSet, read against the
// current rollout (the ServiceSet made, or its services changed, at started).
type rollout struct {
	// state is the release's entry in the ServiceSet's status, nil while k0rdent reported none.
	state *k0rdentv1beta1.ServiceState
	// current: state describes this rollout. A state from before it describes the previous values
	// and is trusted only once k0rdent had time (RolloutSettle) to report a newer one.
	current bool
	// deployedBefore: k0rdent reported this rollout Deployed once (the ServiceSet's annotation).
	deployedBefore bool
	started        time.Time
	// where names the release for messages.
	where string
}

func (r *Reconciler) rolloutOf(s *scope) rollout {
	ss := s.svcSet
	release, ns := owned.ReleaseName(s.ws), s.releaseNamespace()
	ro := rollout{started: s.now,
		where: fmt.Sprintf("release %s in namespace %s (ServiceSet %s/%s)", release, ns, ss.Namespace, ss.Name)}
	stamp := ss.Annotations[owned.AnnotationRolloutStarted]
	if t, err := time.Parse(time.RFC3339, stamp); err == nil {
		ro.started = t
	}
	for i := range ss.Status.Services {
		if ss.Status.Services[i].Name == release && ss.Status.Services[i].Namespace == ns {
			ro.state = &ss.Status.Services[i]
		}
	}
	ro.current = ro.state != nil && (ro.state.LastStateTransitionTime == nil ||
		!ro.state.LastStateTransitionTime.Time.Before(ro.started.Truncate(time.Second)) ||
		s.now.Sub(ro.started) >= r.Options.RolloutSettle)
	ro.deployedBefore = stamp != "" && ss.Annotations[owned.AnnotationRolloutDeployed] == stamp
	return ro
}

// markDeployed records on the ServiceSet that its current rollout was deployed.
func (r *Reconciler) markDeployed(ctx context.Context, ss *k0rdentv1beta1.ServiceSet) error {
	stamp := ss.Annotations[owned.AnnotationRolloutStarted]
	if stamp == "" || ss.Annotations[owned.AnnotationRolloutDeployed] == stamp {
		return nil
	}
	patchBase := ss.DeepCopy()
	ss.Annotations[owned.AnnotationRolloutDeployed] = stamp
	if err := r.Client.Patch(ctx, ss, client.MergeFrom(patchBase)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking ServiceSet %s/%s deployed: %w", ss.Namespace, ss.Name, err)
	}
	return nil
}
