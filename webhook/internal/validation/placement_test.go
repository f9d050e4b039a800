package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func TestWorkspaceDeploymentTarget(t *testing.T) {
	byColony := func(d *workspacesv1.WorkspaceDeployment) {
		d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		d.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet"}
	}
	bySelector := func(d *workspacesv1.WorkspaceDeployment) {
		d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		d.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}
	}
	cases := []struct {
		name   string
		mutate func(*workspacesv1.WorkspaceDeployment)
		paths  []string
	}{
		{"colony", byColony, nil},
		{"selector", bySelector, nil},
		{"none", func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		},
			[]string{"spec.clusterDeploymentRef.name"}},
		{"cluster and colony", func(d *workspacesv1.WorkspaceDeployment) { d.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet"} },
			[]string{"spec"}},
		{"colony and selector", func(d *workspacesv1.WorkspaceDeployment) {
			byColony(d)
			d.Spec.ClusterSelector = &metav1.LabelSelector{}
		}, []string{"spec"}},
		{"bad colony name", func(d *workspacesv1.WorkspaceDeployment) {
			byColony(d)
			d.Spec.ColonyRef.Name = "Bad_Name"
		}, []string{"spec.colonyRef.name"}},
		{"empty colony name", func(d *workspacesv1.WorkspaceDeployment) {
			byColony(d)
			d.Spec.ColonyRef.Name = ""
		}, []string{"spec.colonyRef.name"}},
		{"bad selector", func(d *workspacesv1.WorkspaceDeployment) {
			bySelector(d)
			d.Spec.ClusterSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}
		}, []string{"spec.clusterSelector"}},
		{"namespace without name", func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{Namespace: "team-b"}
		}, []string{"spec.clusterDeploymentRef.name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment()
			tc.mutate(d)
			errs, _ := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
			expectPaths(t, errs, tc.paths...)
		})
	}
}

func TestWorkspaceDeploymentTargetImmutable(t *testing.T) {
	oldD := validDeployment()
	oldD.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
	oldD.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet"}
	newD := oldD.DeepCopy()
	newD.Spec.Suspend = true
	expectPaths(t, WorkspaceDeploymentUpdate(oldD, newD))
	newD.Spec.ColonyRef.Name = "other"
	expectPaths(t, WorkspaceDeploymentUpdate(oldD, newD), "spec.colonyRef")

	oldD.Spec.ColonyRef = nil
	oldD.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}
	newD = oldD.DeepCopy()
	newD.Spec.ClusterSelector.MatchLabels["pool"] = "b"
	expectPaths(t, WorkspaceDeploymentUpdate(oldD, newD), "spec.clusterSelector")
}

func TestPriority(t *testing.T) {
	d := validDeployment()
	d.Spec.Priority = 10
	expectPaths(t, Priority(d, 10))
	errs := Priority(d, 5)
	expectPaths(t, errs, "spec.priority")
	if !strings.Contains(errs[0].Error(), "10 is above 5") || !strings.Contains(errs[0].Error(), "namespace team-a") {
		t.Errorf("message %q does not name the value, the cap and the namespace", errs[0].Error())
	}
	d.Spec.Priority = -5
	expectPaths(t, Priority(d, 0))
}
