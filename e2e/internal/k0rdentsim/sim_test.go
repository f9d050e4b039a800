package k0rdentsim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// The simulator playing KCM v1.12, end to end: a non-atomic release whose pod cannot be scheduled is
// Provisioning (ServiceHealth conditions, no lastDeployedHash) although Helm returned; once its pod
// can run it is Deployed with a hash, and a values change moves the hash only once the new pod runs.
func TestSimulatorKCM112(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local world")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	w, err := world.Start(ctx, world.Options{RunDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			w.DumpLogs(os.Stderr, 40)
			fmt.Fprintf(os.Stderr, "\n===== simulator =====\n%s\n", logs.String())
		}
		_ = w.Stop()
	}()
	// The release the simulator plays by itself: v1.11 on the mirror, v1.12 on KCM's CRDs that keep
	// lastDeployedHash.
	hashes, err := servesLastDeployedHash(ctx, w.Management.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := KCMv111
	if testenv.RealK0rdentCRDs() && hashes {
		want = KCMv112
	}
	if got, err := KCMOfCRDs(ctx, w.Management.Config); err != nil || got != want {
		t.Errorf("KCMOfCRDs: %s %v, want %s", got, err, want)
	}
	if !hashes {
		if _, err := Start(ctx, Options{Config: w.Management.Config, World: w, ChartsDir: "../../../examples/charts", KCM: KCMv112, NoAdmission: true}); err == nil {
			t.Fatal("the simulator played KCM v1.12 on a ServiceSet CRD that cannot keep lastDeployedHash")
		}
		// KCM's CRDs before v1.12 keep no lastDeployedHash: the refusal above is what there is to test.
		t.Log("the ServiceSet CRD under test keeps no lastDeployedHash (KCM's CRDs before v1.12): v1.12 refused")
		return
	}
	sim, err := Start(ctx, Options{Config: w.Management.Config, World: w, ChartsDir: "../../../examples/charts", Log: &logs, KCM: KCMv112, NoAdmission: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sim.Stop() }()
	c, err := client.New(w.Management.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "kcm112"
	if err := EnsureClusterFixtures(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: ClusterTemplateName, Credential: CredentialName,
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"nodes":[{"name":"w","labels":{"zone":"a"}}]}`)}}}
	if err := Ensure(ctx, c, ServiceTemplate(ns, "fixed", "fixed-replicas", "0.1.0"), cd); err != nil {
		t.Fatal(err)
	}
	values := func(zone string) string {
		return fmt.Sprintf("_exalsius:\n  scheduling:\n    nodeSelector:\n      zone: %s\n", zone)
	}
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-fixed",
			Labels: map[string]string{k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue}},
		Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: "fr", Namespace: "apps", Template: "fixed", Values: values("nowhere"),
				HelmOptions: &apiextensionsv1.JSON{Raw: []byte(`{"atomic":false}`)}}}},
	}
	if err := c.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	state := func() (*k0rdentv1beta1.ServiceState, error) {
		var got k0rdentv1beta1.ServiceSet
		if err := c.Get(ctx, client.ObjectKeyFromObject(ss), &got); err != nil {
			return nil, err
		}
		if len(got.Status.Services) != 1 {
			return nil, fmt.Errorf("%d service states", len(got.Status.Services))
		}
		return &got.Status.Services[0], nil
	}
	eventually := func(what string, f func(*k0rdentv1beta1.ServiceState) error) *k0rdentv1beta1.ServiceState {
		t.Helper()
		var last error
		var s *k0rdentv1beta1.ServiceState
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
			if s, last = state(); last == nil {
				last = f(s)
			}
			return last == nil, nil
		}); err != nil {
			t.Fatalf("%s: %v (%v)", what, last, err)
		}
		return s
	}
	// Helm returned (not atomic), but the pod cannot be scheduled: Provisioning, as KCM v1.12.
	eventually("Provisioning with a ServiceHealthPod condition", func(s *k0rdentv1beta1.ServiceState) error {
		if s.State == k0rdentv1beta1.ServiceStateDeployed {
			t.Fatalf("Deployed while its pod cannot be scheduled (hash %q)", s.LastDeployedHash)
		}
		if s.State != k0rdentv1beta1.ServiceStateProvisioning || meta.FindStatusCondition(s.Conditions, "ServiceHealthPod") == nil {
			return fmt.Errorf("state %s, conditions %v", s.State, s.Conditions)
		}
		if rel, err := Release(w.Child(ChildName(ns, cd.Name)).KubeconfigPath, "apps", "fr"); err != nil || rel == nil || rel.Info.Status != "deployed" {
			return fmt.Errorf("the Helm release is not deployed yet (%v)", err)
		}
		return nil
	})
	if s, _ := state(); s.LastDeployedHash != "" {
		t.Fatalf("lastDeployedHash %q before the pods run", s.LastDeployedHash)
	}
	setZone := func(zone string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var got k0rdentv1beta1.ServiceSet
			if err := c.Get(ctx, client.ObjectKeyFromObject(ss), &got); err != nil {
				return false, nil
			}
			got.Spec.Services[0].Values = values(zone)
			return c.Update(ctx, &got) == nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setZone("a")
	first := eventually("Deployed with a hash once the pod runs", func(s *k0rdentv1beta1.ServiceState) error {
		if s.State != k0rdentv1beta1.ServiceStateDeployed || s.LastDeployedHash == "" || len(s.Conditions) != 0 {
			return fmt.Errorf("state %s, hash %q, conditions %v", s.State, s.LastDeployedHash, s.Conditions)
		}
		return nil
	}).LastDeployedHash

	// A new configuration whose pod cannot run: the hash stays the last healthy one's.
	setZone("nowhere")
	eventually("Provisioning again, the hash unchanged", func(s *k0rdentv1beta1.ServiceState) error {
		if s.State != k0rdentv1beta1.ServiceStateProvisioning || s.LastDeployedHash != first {
			return fmt.Errorf("state %s, hash %q (first %q)", s.State, s.LastDeployedHash, first)
		}
		return nil
	})
}
