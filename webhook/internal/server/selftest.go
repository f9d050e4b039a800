package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// SelfTest is what `webhook --self-test` checks (the chart's `helm test` hook): every named
// Deployment is rolled out and available, and the webhook denies an invalid WorkspaceClass in a
// server-side dry run (so the API server reaches the webhook, trusts its certificate and gets its
// verdict; nothing is stored).
type SelfTest struct {
	Client      client.Client
	Namespace   string
	Deployments []string
	// Timeout bounds the wait for the Deployments.
	Timeout time.Duration
	// Poll is the interval between readiness checks; 2s when zero.
	Poll time.Duration
}

// Run runs every check and reports every failure.
func (s SelfTest) Run(ctx context.Context) error {
	var errs []error
	if err := s.deploymentsReady(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.admission(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s SelfTest) deploymentsReady(ctx context.Context) error {
	poll := s.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, poll, s.Timeout, true, func(ctx context.Context) (bool, error) {
		cur, err := s.Pending(ctx)
		if err != nil {
			return false, nil // the wait ran out mid-pass: keep the last complete answer
		}
		pending = cur
		return len(pending) == 0, nil
	})
	if err != nil && len(pending) > 0 {
		return fmt.Errorf("components not ready in %s: %s", s.Namespace, strings.Join(pending, "; "))
	}
	return err
}

// Pending makes one pass over the Deployments and says which are not ready, and why; an error only
// when ctx ended during the pass.
func (s SelfTest) Pending(ctx context.Context) ([]string, error) {
	var out []string
	for _, name := range s.Deployments {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, d); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if apierrors.IsNotFound(err) {
				out = append(out, name+": not found")
			} else {
				out = append(out, name+": "+err.Error())
			}
			continue
		}
		if why := notReady(d); why != "" {
			out = append(out, name+": "+why)
		}
	}
	return out, nil
}

// notReady says why a Deployment is not rolled out and available, "" when it is.
func notReady(d *appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return "the rollout has not been observed yet"
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("%d of %d pods updated", st.UpdatedReplicas, want)
	case st.AvailableReplicas < want:
		return fmt.Sprintf("%d of %d pods available", st.AvailableReplicas, want)
	}
	return ""
}

// admission dry-runs an invalid WorkspaceClass (an injection path with an empty segment, which only
// the webhook rejects) and wants the webhook's denial naming the field.
func (s SelfTest) admission(ctx context.Context) error {
	wc := &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "exalsius-self-test-"},
		Spec: workspacesv1.WorkspaceClassSpec{
			DisplayName:       "self test",
			ServiceTemplate:   workspacesv1.ServiceTemplateRef{Name: "self-test-0-0-0"},
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"a..b"}},
		},
	}
	err := s.Client.Create(ctx, wc, client.DryRunAll)
	switch {
	case err == nil:
		return errors.New("the webhook admitted an invalid WorkspaceClass: is it registered for workspaceclasses?")
	case strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "spec.resourceInjection.cpu[0]"):
		return nil
	default:
		return fmt.Errorf("the webhook did not answer the admission of an invalid WorkspaceClass: %w", err)
	}
}
