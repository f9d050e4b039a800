package workspaceclass

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

var (
	k8s  client.Client
	uniq atomic.Int64
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		k8s = mg.Client
		ctx := context.Background()
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcm-system"}}); err != nil {
			return err
		}
		mgr, err := ctrl.NewManager(mg.Config, ctrl.Options{Scheme: mg.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			return err
		}
		r := &Reconciler{Client: mgr.GetClient(), Cache: mgr.GetCache(), Recorder: mgr.GetEventRecorder("workspace-controller")}
		if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
			return err
		}
		go func() { _ = mgr.Start(ctx) }()
		return nil
	})
}

func name(p string) string { return fmt.Sprintf("%s-%d", p, uniq.Add(1)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

func createTemplate(t *testing.T, n, version string, valid bool) *k0rdentv1beta1.ServiceTemplate {
	t.Helper()
	st := &k0rdentv1beta1.ServiceTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcm-system", Name: n},
		Spec: k0rdentv1beta1.ServiceTemplateSpec{Helm: &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
			Chart: "c", Version: version, Interval: metav1.Duration{Duration: time.Minute},
			SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
		}}},
	}
	must(t, k8s.Create(context.Background(), st))
	st.Status.Valid, st.Status.ChartVersion = valid, version
	if !valid {
		st.Status.ValidationError = "chart not found"
	}
	must(t, k8s.Status().Update(context.Background(), st))
	return st
}

func createClass(t *testing.T, spec workspacesv1.WorkspaceClassSpec) string {
	t.Helper()
	spec.DisplayName = "test"
	c := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: name("class")}, Spec: spec}
	must(t, k8s.Create(context.Background(), c))
	return c.Name
}

// waitStatus waits for the class's Ready condition to have the reason.
func waitStatus(t *testing.T, class, reason string) *workspacesv1.WorkspaceClass {
	t.Helper()
	got := &workspacesv1.WorkspaceClass{}
	eventually(t, class+" "+reason, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: class}, got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, workspacesv1.ClassReadyCondition)
		if c == nil || c.Reason != reason || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	wantValid := reason == workspacesv1.ReasonValid
	if got.Status.Valid != wantValid || (got.Status.ValidationError == "") != wantValid {
		t.Errorf("valid %v, validationError %q", got.Status.Valid, got.Status.ValidationError)
	}
	return got
}

// wantKstatus asserts what kstatus (Flux's health check) reads from the class: Current when valid,
// InProgress through Reconciling while it waits for a template, Failed through Stalled when it is
// wrong; the kstatus condition repeats Ready's reason and message and the other one is absent.
func wantKstatus(t *testing.T, class *workspacesv1.WorkspaceClass, want status.Status) {
	t.Helper()
	class = class.DeepCopy()
	class.APIVersion, class.Kind = workspacesv1.GroupVersion.String(), "WorkspaceClass"
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(class)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != want {
		t.Errorf("kstatus %s (%s), want %s; conditions %+v", res.Status, res.Message, want, class.Status.Conditions)
	}
	ready := meta.FindStatusCondition(class.Status.Conditions, workspacesv1.ClassReadyCondition)
	for typ, on := range map[string]bool{"Reconciling": want == status.InProgressStatus, "Stalled": want == status.FailedStatus} {
		c := meta.FindStatusCondition(class.Status.Conditions, typ)
		switch {
		case !on && c != nil:
			t.Errorf("%s is present: %+v", typ, c)
		case on && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != ready.Reason || c.Message != ready.Message ||
			c.ObservedGeneration != class.Generation):
			t.Errorf("%s is %+v, want True with Ready's reason and message", typ, c)
		}
	}
}

func TestValidClassAndInUseBy(t *testing.T) {
	tn := name("jupyter")
	createTemplate(t, tn, "0.3.1", true)
	pre := name("gpu-operator")
	createTemplate(t, pre, "24.9.0", true)
	class := createClass(t, workspacesv1.WorkspaceClassSpec{
		ServiceTemplate:   workspacesv1.ServiceTemplateRef{Name: tn, VersionConstraint: ">=0.3.0, <0.4.0"},
		Prerequisites:     []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: pre}, Namespace: "gpu-operator"}},
		ResourceInjection: &workspacesv1.ResourceInjection{GPUCount: []string{`resources.limits["nvidia.com/gpu"]`}},
	})
	waitStatus(t, class, workspacesv1.ReasonValid)

	ns := name("team")
	must(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	for i := 0; i < 2; i++ {
		must(t, k8s.Create(context.Background(), &workspacesv1.WorkspaceDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("ws")},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}},
		}))
	}
	eventually(t, "inUseBy 2", func() error {
		got := &workspacesv1.WorkspaceClass{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: class}, got); err != nil {
			return err
		}
		if got.Status.InUseBy != 2 {
			return fmt.Errorf("inUseBy %d", got.Status.InUseBy)
		}
		return nil
	})
}

func TestTemplateMissingThenAppears(t *testing.T) {
	tn := name("late")
	class := createClass(t, workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tn}})
	got := waitStatus(t, class, workspacesv1.ReasonServiceTemplateNotFound)
	if got.Status.ValidationError != fmt.Sprintf("spec.serviceTemplate: ServiceTemplate kcm-system/%s not found", tn) {
		t.Errorf("validationError %q", got.Status.ValidationError)
	}
	// A template applied after the class (a GitOps tool applying both) is waited for, not failed.
	wantKstatus(t, got, status.InProgressStatus)
	createTemplate(t, tn, "1.0.0", true)
	wantKstatus(t, waitStatus(t, class, workspacesv1.ReasonValid), status.CurrentStatus)
}

// TestTemplateNotValidatedYet: a ServiceTemplate k0rdent has not validated yet (not valid, no
// validation error) keeps the class Reconciling, not Stalled, until it is.
func TestTemplateNotValidatedYet(t *testing.T) {
	tn := name("fresh")
	st := &k0rdentv1beta1.ServiceTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcm-system", Name: tn},
		Spec: k0rdentv1beta1.ServiceTemplateSpec{Helm: &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
			Chart: "c", Version: "1.0.0", Interval: metav1.Duration{Duration: time.Minute},
			SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
		}}},
	}
	must(t, k8s.Create(context.Background(), st))
	class := createClass(t, workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tn}})
	wantKstatus(t, waitStatus(t, class, workspacesv1.ReasonServiceTemplateInvalid), status.InProgressStatus)
	st.Status.Valid, st.Status.ChartVersion = true, "1.0.0"
	must(t, k8s.Status().Update(context.Background(), st))
	wantKstatus(t, waitStatus(t, class, workspacesv1.ReasonValid), status.CurrentStatus)
}

func TestInvalidClasses(t *testing.T) {
	bad := name("bad")
	createTemplate(t, bad, "1.0.0", false)
	good := name("good")
	createTemplate(t, good, "1.0.0", true)
	cases := []struct {
		spec   workspacesv1.WorkspaceClassSpec
		reason string
		msg    string
		// waits: the class waits for a template (Reconciling); otherwise it is wrong (Stalled).
		waits bool
	}{
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: bad}},
			workspacesv1.ReasonServiceTemplateInvalid, "chart not found", false},
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: good, VersionConstraint: "^2.0.0"}},
			workspacesv1.ReasonVersionConstraintUnmet, "does not satisfy", false},
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: good},
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{`a["unterminated`}}},
			workspacesv1.ReasonInvalidInjectionPath, "spec.resourceInjection.cpu[0]", false},
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: good},
			UserFacingConfig: []workspacesv1.UserFacingConfig{{HelmValuePath: "a..b", DisplayName: "x", Type: "string"}}},
			workspacesv1.ReasonInvalidValuePath, "spec.userFacingConfig[0]", false},
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: good},
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"resources"}},
			UserFacingConfig:  []workspacesv1.UserFacingConfig{{HelmValuePath: "resources.limits.cpu", DisplayName: "x", Type: "string"}}},
			workspacesv1.ReasonInvalidValuePath, "overlaps spec.resourceInjection.cpu[0]", false},
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: good},
			Prerequisites: []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: name("missing")}, Namespace: "x"}}},
			workspacesv1.ReasonInvalidPrerequisite, "spec.prerequisites[0].serviceTemplate", true},
		{workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: good},
			Prerequisites: []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: bad}, Namespace: "x"}}},
			workspacesv1.ReasonInvalidPrerequisite, "is not valid", false},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := waitStatus(t, createClass(t, tc.spec), tc.reason)
			if c := meta.FindStatusCondition(got.Status.Conditions, workspacesv1.ClassReadyCondition); c.Status != metav1.ConditionFalse {
				t.Errorf("Ready %+v", c)
			}
			if got.Status.ValidationError == "" || !strings.Contains(got.Status.ValidationError, tc.msg) {
				t.Errorf("validationError %q does not contain %q", got.Status.ValidationError, tc.msg)
			}
			if tc.waits {
				wantKstatus(t, got, status.InProgressStatus)
			} else {
				wantKstatus(t, got, status.FailedStatus)
			}
		})
	}
}

// TestFinalizerProtectsAClassInUse runs without the webhook (nothing here serves admission): a class
// gets the finalizer, is kept while a WorkspaceDeployment uses it, and goes once the last user is
// gone; an unused class is deleted at once.
func TestFinalizerProtectsAClassInUse(t *testing.T) {
	ctx := context.Background()
	tn := name("protected")
	createTemplate(t, tn, "1.0.0", true)
	class := createClass(t, workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tn}})
	unused := createClass(t, workspacesv1.WorkspaceClassSpec{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tn}})
	for _, c := range []string{class, unused} {
		eventually(t, c+" finalizer", func() error {
			got := &workspacesv1.WorkspaceClass{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: c}, got); err != nil {
				return err
			}
			if !controllerutil.ContainsFinalizer(got, Finalizer) {
				return fmt.Errorf("finalizers %v", got.Finalizers)
			}
			return nil
		})
	}
	ns := name("team")
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	ws := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("ws")},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}},
	}
	must(t, k8s.Create(ctx, ws))

	must(t, k8s.Delete(ctx, &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: unused}}))
	eventually(t, "the unused class gone", func() error {
		err := k8s.Get(ctx, client.ObjectKey{Name: unused}, &workspacesv1.WorkspaceClass{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	must(t, k8s.Delete(ctx, &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: class}}))
	// The reconciler saw the deletion and kept the class: its DeletionBlocked event names the user.
	eventually(t, "the DeletionBlocked event", func() error {
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == class && e.Reason == ReasonDeletionBlocked && strings.Contains(e.Note, ns+"/"+ws.Name) {
				return nil
			}
		}
		return fmt.Errorf("no event yet")
	})
	got := &workspacesv1.WorkspaceClass{}
	must(t, k8s.Get(ctx, client.ObjectKey{Name: class}, got))
	if got.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(got, Finalizer) {
		t.Fatalf("the class in use lost its finalizer: %+v", got.ObjectMeta)
	}

	must(t, k8s.Delete(ctx, ws))
	eventually(t, "the class gone after its last user", func() error {
		err := k8s.Get(ctx, client.ObjectKey{Name: class}, &workspacesv1.WorkspaceClass{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}
