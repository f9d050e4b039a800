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

// FuzzValuesFromToReview decodes two arbitrary valuesFrom lists (old, new): the indexes to review are
// in range, increasing, of a readable kind, and cover every new source the old list did not name;
// an unchanged list needs no review.
func FuzzValuesFromToReview(f *testing.F) {
	f.Add([]byte(`[{"kind":"Secret","name":"a"}]`), []byte(`[{"kind":"Secret","name":"a"},{"kind":"ConfigMap","name":"a"},{"kind":"Pod","name":"b"}]`))
	f.Add([]byte(`null`), []byte(`[{"kind":"Secret","name":""},{"kind":"Secret","name":""}]`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var oldRefs, newRefs []workspacesv1.ValuesFromSource
		if json.Unmarshal(a, &oldRefs) != nil || json.Unmarshal(b, &newRefs) != nil {
			return
		}
		got := ValuesFromToReview(oldRefs, newRefs)
		reviewed := map[int]bool{}
		for n, i := range got {
			if i < 0 || i >= len(newRefs) || (n > 0 && i <= got[n-1]) {
				t.Fatalf("indexes %v out of range or order for %d sources", got, len(newRefs))
			}
			if k := newRefs[i].Kind; k != workspacesv1.ValuesSourceSecret && k != workspacesv1.ValuesSourceConfigMap {
				t.Fatalf("index %d of kind %q reviewed", i, k)
			}
			reviewed[i] = true
		}
		for i, ref := range newRefs {
			if ref.Kind != workspacesv1.ValuesSourceSecret && ref.Kind != workspacesv1.ValuesSourceConfigMap || reviewed[i] {
				continue
			}
			named := false
			for _, o := range oldRefs {
				named = named || (o.Kind == ref.Kind && o.Name == ref.Name)
			}
			if !named {
				t.Fatalf("new source %d (%s %s) not reviewed: %v", i, ref.Kind, ref.Name, got)
			}
		}
		if again := ValuesFromToReview(newRefs, newRefs); len(again) != 0 {
			t.Fatalf("an unchanged list reviews %v", again)
		}
	})
}
