package colony

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// mgmt is the management API server every test of the package shares; each test works in its own
// namespace with its own manager.
var mgmt *testenv.Management

func TestMain(m *testing.M) {
	// The controller's logs go to the test output only with TESTENV_VERBOSE=1.
	out := io.Discard
	if v := os.Getenv(testenv.EnvVerbose); v == "1" || v == "true" {
		out = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(out)))
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt = mg
		return nil
	})
}

// waitTimeout bounds every wait for the controller; the machines running the tests are small and
// shared, so it is generous. Waits poll; nothing asserts on how long a step takes.
const waitTimeout = 2 * time.Minute

var nsCounter atomic.Int64

// newNamespace creates a namespace unique to the test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("col-%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := mgmt.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return name
}

// runningManager is a manager running the colony reconciler in one namespace.
type runningManager struct {
	t      testing.TB
	mgr    ctrl.Manager
	cancel context.CancelFunc
	done   chan error
}

// startManager starts a manager with the colony reconciler, watching only namespace. It is stopped
// at the end of the test (or earlier by stop).
func startManager(t *testing.T, namespace string) *runningManager {
	t.Helper()
	return startManagerWith(t, namespace, nil)
}

// startManagerWith is startManager with the options adjusted by tune before Setup wires the
// controller, as main.go does.
func startManagerWith(t *testing.T, namespace string, tune func(*Options)) *runningManager {
	t.Helper()
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
		Scheme:                 mgmt.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	opts := DefaultOptions()
	if tune != nil {
		tune(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := Setup(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatalf("setting up the controller: %v", err)
	}
	rm := &runningManager{t: t, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- mgr.Start(ctx) }()
	t.Cleanup(rm.stop)
	return rm
}

// stop stops the manager and waits until it has stopped.
func (rm *runningManager) stop() {
	if rm.cancel == nil {
		return
	}
	rm.cancel()
	if err := <-rm.done; err != nil {
		rm.t.Errorf("the manager stopped with an error: %v", err)
	}
	rm.cancel = nil
}

// eventually polls check until it returns nil, failing the test with check's last error after
// waitTimeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var err error
	for {
		if err = check(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, waitTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rawJSON renders v as the JSON of a clusterDeploymentSpec.
func rawJSON(t *testing.T, v any) apiextensionsv1.JSON {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return apiextensionsv1.JSON{Raw: b}
}

// entry returns a Colony entry with a minimal valid spec.
func entry(t *testing.T, name string, spec map[string]any) infrav1.ColonyCluster {
	t.Helper()
	if spec == nil {
		spec = map[string]any{"template": "tmpl-1-0-0", "credential": "cred"}
	}
	return infrav1.ColonyCluster{ClusterName: name, ClusterDeploymentSpec: rawJSON(t, spec)}
}

// createColony creates a Colony.
func createColony(t *testing.T, namespace, name string, entries ...infrav1.ColonyCluster) *infrav1.Colony {
	t.Helper()
	c := &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       infrav1.ColonySpec{ColonyClusters: entries},
	}
	if err := mgmt.Client.Create(context.Background(), c); err != nil {
		t.Fatalf("creating Colony: %v", err)
	}
	return c
}

// updateColony re-reads the Colony, applies mutate and writes it back, retrying on conflicts.
func updateColony(t *testing.T, namespace, name string, mutate func(*infrav1.Colony)) {
	t.Helper()
	eventually(t, "updating Colony", func() error {
		c := getColony(t, namespace, name)
		mutate(c)
		return mgmt.Client.Update(context.Background(), c)
	})
}

func getColony(t *testing.T, namespace, name string) *infrav1.Colony {
	t.Helper()
	c := &infrav1.Colony{}
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, c); err != nil {
		t.Fatalf("reading Colony: %v", err)
	}
	return c
}

// waitColony waits until the Colony satisfies check.
func waitColony(t *testing.T, namespace, name, what string, check func(*infrav1.Colony) error) *infrav1.Colony {
	t.Helper()
	var c *infrav1.Colony
	eventually(t, what, func() error {
		c = &infrav1.Colony{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, c); err != nil {
			return err
		}
		return check(c)
	})
	return c
}

// phaseIs checks the Colony's phase and that its status describes the current generation.
func phaseIs(phase infrav1.ColonyPhase) func(*infrav1.Colony) error {
	return func(c *infrav1.Colony) error {
		if c.Status.ObservedGeneration != c.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", c.Status.ObservedGeneration, c.Generation)
		}
		if c.Status.Phase != phase {
			return fmt.Errorf("phase %q, want %q (conditions %+v)", c.Status.Phase, phase, c.Status.Conditions)
		}
		return nil
	}
}

// conditionIs checks a condition's status and reason and that its message contains every part.
func conditionIs(typ string, status metav1.ConditionStatus, reason string, parts ...string) func(*infrav1.Colony) error {
	return func(c *infrav1.Colony) error {
		cond := meta.FindStatusCondition(c.Status.Conditions, typ)
		if cond == nil {
			return fmt.Errorf("no %s condition", typ)
		}
		if cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("%s is %s/%s, want %s/%s: %s", typ, cond.Status, cond.Reason, status, reason, cond.Message)
		}
		if cond.ObservedGeneration != c.Generation {
			return fmt.Errorf("%s observedGeneration %d, generation %d", typ, cond.ObservedGeneration, c.Generation)
		}
		for _, p := range parts {
			if !strings.Contains(cond.Message, p) {
				return fmt.Errorf("%s message %q lacks %q", typ, cond.Message, p)
			}
		}
		return nil
	}
}

// all combines checks.
func all(checks ...func(*infrav1.Colony) error) func(*infrav1.Colony) error {
	return func(c *infrav1.Colony) error {
		for _, check := range checks {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// getCDRaw reads a ClusterDeployment as the API server stores it, unknown keys included.
func getCDRaw(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterDeploymentGVK)
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatalf("reading ClusterDeployment %s: %v", name, err)
	}
	return u
}

func getCD(t *testing.T, namespace, name string) *k0rdentv1beta1.ClusterDeployment {
	t.Helper()
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cd); err != nil {
		t.Fatalf("reading ClusterDeployment %s: %v", name, err)
	}
	return cd
}

// waitCD waits until the ClusterDeployment exists and satisfies check.
func waitCD(t *testing.T, namespace, name, what string, check func(*k0rdentv1beta1.ClusterDeployment) error) *k0rdentv1beta1.ClusterDeployment {
	t.Helper()
	var cd *k0rdentv1beta1.ClusterDeployment
	eventually(t, what, func() error {
		cd = &k0rdentv1beta1.ClusterDeployment{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cd); err != nil {
			return err
		}
		if check == nil {
			return nil
		}
		return check(cd)
	})
	return cd
}

// waitColonyGone waits until the Colony is gone (its deletion completed).
func waitColonyGone(t *testing.T, namespace, name string) {
	t.Helper()
	eventually(t, "Colony "+name+" gone", func() error {
		err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &infrav1.Colony{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

// waitCDGone waits until the ClusterDeployment no longer exists.
func waitCDGone(t *testing.T, namespace, name string) {
	t.Helper()
	eventually(t, "ClusterDeployment "+name+" deleted", func() error {
		err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &k0rdentv1beta1.ClusterDeployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still exists")
	})
}

// setCDConditions writes a ClusterDeployment's status conditions through the status subresource,
// as KCM would.
func setCDConditions(t *testing.T, namespace, name string, conds ...metav1.Condition) {
	t.Helper()
	eventually(t, "writing ClusterDeployment status", func() error {
		cd := &k0rdentv1beta1.ClusterDeployment{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cd); err != nil {
			return err
		}
		for _, c := range conds {
			if c.LastTransitionTime.IsZero() {
				c.LastTransitionTime = metav1.Now()
			}
			if c.Message == "" {
				c.Message = c.Reason
			}
			meta.SetStatusCondition(&cd.Status.Conditions, c)
		}
		return mgmt.Client.Status().Update(context.Background(), cd)
	})
}

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

// directReconciler is a Reconciler reading straight from the API server, for tests that call
// Reconcile themselves to look at one pass.
func directReconciler() *Reconciler {
	return newReconciler(mgmt.Client, mgmt.Client, nil)
}
