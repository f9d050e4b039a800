package validation

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// The fuzz tests decode arbitrary JSON into the API types, as the admission decoder does, and run the
// validators: they must never panic, and must return the same denial twice.

func FuzzWorkspaceClass(f *testing.F) {
	seed, _ := json.Marshal(validClass())
	f.Add(seed, seed)
	f.Add([]byte(`{"spec":{"userFacingConfig":[{"helmValuePath":"a[\"b","type":"int","default":"x","options":[1,"2",null]}],"resourceInjection":{"cpu":["a","a.b",""]}}}`), []byte(`{}`))
	f.Add([]byte(`{"spec":{"defaultValues":[1],"prerequisites":[{"values":"x"}],"accessEndpoints":[{"port":-1},{"port":-1}]}}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		wc, old := &workspacesv1.WorkspaceClass{}, &workspacesv1.WorkspaceClass{}
		if json.Unmarshal(a, wc) != nil {
			return
		}
		first := WorkspaceClass(wc).ToAggregate()
		second := WorkspaceClass(wc).ToAggregate()
		if (first == nil) != (second == nil) || (first != nil && first.Error() != second.Error()) {
			t.Fatalf("not deterministic: %v / %v", first, second)
		}
		if json.Unmarshal(b, old) == nil {
			_ = WorkspaceClassUpdate(old, wc)
		}
	})
}

func FuzzWorkspaceDeployment(f *testing.F) {
	d, _ := json.Marshal(validDeployment())
	c, _ := json.Marshal(validClass())
	f.Add(d, c)
	f.Add([]byte(`{"spec":{"values":{"a":{"b":1}},"resources":{"replicas":100000,"perReplica":{"gpuCount":-3,"gpuNodeSelector":{"":""}}}}}`),
		[]byte(`{"spec":{"userFacingConfig":[{"helmValuePath":"a.b","type":"publicKey","required":true,"options":[{}]}],"resourceInjection":{"replicas":["a"]}}}`))
	f.Add([]byte(`{"spec":{"values":{"k":"ssh-ed25519 AAAA"}}}`), []byte(`{"spec":{"userFacingConfig":[{"helmValuePath":"k","type":"publicKey"}]}}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		wsd, class := &workspacesv1.WorkspaceDeployment{}, &workspacesv1.WorkspaceClass{}
		if json.Unmarshal(a, wsd) != nil {
			return
		}
		if json.Unmarshal(b, class) != nil {
			class = nil
		}
		errs1, _ := WorkspaceDeployment(wsd, class, DeploymentOptions{MaxReplicas: 8})
		errs2, _ := WorkspaceDeployment(wsd, class, DeploymentOptions{MaxReplicas: 8})
		if errs1.ToAggregate() != nil && errs1.ToAggregate().Error() != errs2.ToAggregate().Error() {
			t.Fatalf("not deterministic")
		}
		_ = WorkspaceDeploymentUpdate(wsd, wsd)
	})
}

func FuzzColony(f *testing.F) {
	c, _ := json.Marshal(validColony())
	f.Add(c)
	f.Add([]byte(`{"metadata":{"name":"a.b"},"spec":{"colonyClusters":[{"clusterName":"x","clusterDeploymentSpec":[1]},{"clusterName":"x","clusterDeploymentSpec":{"template":{}}}]}}`))
	f.Add([]byte(`{"metadata":{"namespace":"a"},"spec":{"colonyClusters":[{"clusterName":"x","clusterLabels":{"k0rdent.mirantis.com/kof-regional-cluster-name":"r","k0rdent.mirantis.com/kof-regional-cluster-namespace":"b"}},{"clusterName":"x","clusterLabels":{"k0rdent.mirantis.com/kof-regional-cluster-name":"r","k0rdent.mirantis.com/kof-regional-cluster-namespace":"B!"}}]}}`))
	f.Fuzz(func(t *testing.T, a []byte) {
		col := &infrav1.Colony{}
		if json.Unmarshal(a, col) != nil {
			return
		}
		first := Colony(col).ToAggregate()
		second := Colony(col).ToAggregate()
		if (first == nil) != (second == nil) || (first != nil && first.Error() != second.Error()) {
			t.Fatalf("not deterministic")
		}
		// Without a grant, every reference the lookups name is refused, on create and on update.
		for _, old := range []*infrav1.Colony{nil, col} {
			names := ColonyRegionalNamespaces(col, old)
			errs := ColonyRegional(col, old, map[string]*corev1.Namespace{})
			if len(names) > len(errs) {
				t.Fatalf("%d namespaces to read, %d refusals", len(names), len(errs))
			}
		}
		if errs := ColonyRegional(col, col, nil); len(errs) > 0 {
			t.Fatalf("an unchanged Colony refused: %v", errs)
		}
	})
}

func FuzzPublicKey(f *testing.F) {
	f.Add(testKey)
	f.Add("ssh-ed25519 AAAAAA==")
	f.Add("ssh-rsa /////w==")
	f.Fuzz(func(t *testing.T, s string) {
		_ = checkPublicKey(s)
	})
}
