package k0rdentsim

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// seed gives every service without a state the Provisioning state KCM seeds new services with.
func (r *serviceSetReconciler) seed(ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus, msg string) {
	for _, svc := range ss.Spec.Services {
		if findState(status, svc) == nil {
			setState(status, svc, k0rdentv1beta1.ServiceStateProvisioning, "")
		}
	}
	setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, false, k0rdentv1beta1.ServiceSetProfileNotReadyReason, msg)
	finish(ss, status)
}

// pruneStates uninstalls releases of services removed from the spec and drops their states.
func (r *serviceSetReconciler) pruneStates(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus, h helmClient) {
	kept := status.Services[:0]
	for _, s := range status.Services {
		if inSpec(ss, s.Name, s.Namespace) {
			kept = append(kept, s)
			continue
		}
		if err := h.uninstall(s.Namespace, s.Name, 2*time.Minute); err != nil {
			log.FromContext(ctx).Error(err, "uninstalling a removed service", "release", s.Name, "namespace", s.Namespace)
			kept = append(kept, s)
		}
	}
	status.Services = kept
}

func inSpec(ss *k0rdentv1beta1.ServiceSet, name, namespace string) bool {
	for _, svc := range ss.Spec.Services {
		if svc.Name == name && svc.Namespace == namespace {
			return true
		}
	}
	return false
}

func findState(status *k0rdentv1beta1.ServiceSetStatus, svc k0rdentv1beta1.ServiceWithValues) *k0rdentv1beta1.ServiceState {
	for i := range status.Services {
		if status.Services[i].Name == svc.Name && status.Services[i].Namespace == svc.Namespace {
			return &status.Services[i]
		}
	}
	return nil
}

// setState records a service's state; the transition time moves only when the state changes.
func setState(status *k0rdentv1beta1.ServiceSetStatus, svc k0rdentv1beta1.ServiceWithValues, state k0rdentv1beta1.ServiceDeploymentState, msg string) {
	s := findState(status, svc)
	if s == nil {
		status.Services = append(status.Services, k0rdentv1beta1.ServiceState{Type: k0rdentv1beta1.ServiceTypeHelm, Name: svc.Name, Namespace: svc.Namespace})
		s = &status.Services[len(status.Services)-1]
	}
	s.Type, s.Template = k0rdentv1beta1.ServiceTypeHelm, svc.Template
	if s.State != state || s.LastStateTransitionTime == nil {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		s.LastStateTransitionTime = &now
	}
	s.State, s.FailureMessage = state, msg
}

// confirm records a service whose release Helm reports deployed with the current inputs, as the KCM
// release does. KCM v1.11 takes Helm's word: Deployed, with the spec's version. KCM v1.12 first
// checks the release's resources on the child (checkHealth): while one is unhealthy the service stays
// Provisioning with ServiceHealth<Kind> conditions naming them; once all are healthy it is Deployed,
// and when the fingerprint of what is deployed moved, lastDeployedHash and version are stamped. A
// check that cannot be made keeps Helm's word without a stamp, as KCM's best-effort verifier does.
// It reports whether the service waits for its resources (to be checked again).
func (r *serviceSetReconciler) confirm(ctx context.Context, child *world.ChildCluster, status *k0rdentv1beta1.ServiceSetStatus, p plan) (waiting bool) {
	if r.kcm != KCMv112 {
		setState(status, p.svc, k0rdentv1beta1.ServiceStateDeployed, "")
		findState(status, p.svc).Version = copyVersion(p.svc.Version)
		return false
	}
	bad, err := checkHealth(ctx, child.Client(), p.svc.Name, p.svc.Namespace)
	if err != nil {
		log.FromContext(ctx).Error(err, "checking the health of a service; keeping Helm's word", "release", p.svc.Name, "namespace", p.svc.Namespace)
		setState(status, p.svc, k0rdentv1beta1.ServiceStateDeployed, "")
		return false
	}
	if len(bad) > 0 {
		setState(status, p.svc, k0rdentv1beta1.ServiceStateProvisioning, "")
		setHealthConditions(findState(status, p.svc), healthConditions(bad))
		return true
	}
	setState(status, p.svc, k0rdentv1beta1.ServiceStateDeployed, "")
	s := findState(status, p.svc)
	setHealthConditions(s, nil)
	if p.hash != "" && p.hash != s.LastDeployedHash {
		s.LastDeployedHash = p.hash
		s.Version = copyVersion(p.svc.Version)
	}
	return false
}

func copyVersion(v *string) *string {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// healthPoll is how soon a service waiting for its resources is checked again: at the status interval,
// or every second when statuses are written at once. (KCM polls such a ServiceSet after 10 s, then
// with a backoff doubling up to 5 minutes.)
func healthPoll(interval time.Duration) time.Duration {
	if interval > 0 {
		return interval
	}
	return time.Second
}

// finish derives deployed and the collected/ready conditions from the service states.
func finish(ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus) {
	deployed := 0
	for _, s := range status.Services {
		if s.State == k0rdentv1beta1.ServiceStateDeployed {
			deployed++
		}
	}
	total := len(ss.Spec.Services)
	status.Deployed = deployed == total && len(status.Services) == total
	setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetStatusesCollectedCondition, true, k0rdentv1beta1.ServiceSetStatusesCollectedReason, "")
	reason := k0rdentv1beta1.SucceededReason
	if !status.Deployed {
		reason = k0rdentv1beta1.ProgressingReason
	}
	setSSCond(status, ss.Generation, k0rdentv1beta1.ServicesInReadyStateCondition, status.Deployed, reason, fmt.Sprintf("%d/%d", deployed, total))
}

func setSSCond(status *k0rdentv1beta1.ServiceSetStatus, gen int64, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

func (r *serviceSetReconciler) patchStatus(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus) error {
	if equality.Semantic.DeepEqual(*status, ss.Status) {
		return nil
	}
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Status = *status.DeepCopy()
	return client.IgnoreNotFound(r.client.Status().Patch(ctx, ss, patch))
}
