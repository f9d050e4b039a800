package prerequisites

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/helmvalues"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// templateChart names the chart a ServiceTemplate installs, or "" when it cannot be told.
func (in *Installer) templateChart(ctx context.Context, namespace, template string) (string, error) {
	t := &k0rdentv1beta1.ServiceTemplate{}
	err := in.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: template}, t)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ServiceTemplate %s/%s: %w", namespace, template, err)
	}
	switch h := t.Spec.Helm; {
	case h == nil:
		return "", nil
	case h.ChartSpec != nil && h.ChartSpec.Chart != "":
		return h.ChartSpec.Chart, nil
	case h.ChartRef != nil && h.ChartRef.Name != "":
		return h.ChartRef.Name, nil
	}
	return "", nil
}

// versionConflict names, before a shared prerequisite ServiceSet is made, another version of the same
// chart that a shared ServiceSet or the Colony installs in the same namespace on the cluster: two
// versions of one chart cannot share a namespace (their releases fight over the same objects). ""
// when there is none.
func (in *Installer) versionConflict(ctx context.Context, req Request, p workspacesv1.Prerequisite) (string, error) {
	chart, err := in.templateChart(ctx, req.ClusterKey.Namespace, p.ServiceTemplate.Name)
	if err != nil || chart == "" {
		return "", err
	}
	type installed struct{ template, by string }
	var others []installed
	var list k0rdentv1beta1.ServiceSetList
	if err := in.Client.List(ctx, &list, client.InNamespace(req.ClusterKey.Namespace),
		client.MatchingLabels{workspacesv1.ClusterDeploymentLabel: req.ClusterKey.Name}, client.HasLabels{workspacesv1.PrerequisiteLabel}); err != nil {
		return "", fmt.Errorf("listing prerequisite ServiceSets of %s: %w", req.ClusterKey, err)
	}
	for i := range list.Items {
		for _, svc := range list.Items[i].Spec.Services {
			if svc.Namespace == p.ReleaseNamespace() && svc.Template != p.ServiceTemplate.Name {
				others = append(others, installed{svc.Template, "the shared ServiceSet " + list.Items[i].Namespace + "/" + list.Items[i].Name})
			}
		}
	}
	if req.Cluster != nil {
		for _, svc := range req.Cluster.Spec.ServiceSpec.Services {
			if !svc.Disable && orDefault(svc.Namespace, "default") == p.ReleaseNamespace() && svc.Template != p.ServiceTemplate.Name {
				others = append(others, installed{svc.Template, "ClusterDeployment " + req.ClusterKey.String()})
			}
		}
	}
	for _, o := range others {
		c, err := in.templateChart(ctx, req.ClusterKey.Namespace, o.template)
		if err != nil {
			return "", err
		}
		if c == chart {
			return fmt.Sprintf("prerequisite %s: %s already installs chart %s (ServiceTemplate %s) in namespace %s; two versions of one chart cannot share a namespace: use the same template, or another namespace",
				p.ServiceTemplate.Name, o.by, chart, o.template, p.ReleaseNamespace()), nil
		}
	}
	return "", nil
}

// valuesYAML is a prerequisite's values as the shared ServiceSet carries them: YAML with template
// delimiters escaped, so that they reach the chart verbatim.
func valuesYAML(p workspacesv1.Prerequisite) (string, error) {
	if p.Values == nil || len(p.Values.Raw) == 0 || string(p.Values.Raw) == "null" {
		return "", nil
	}
	y, err := yaml.JSONToYAML(p.Values.Raw)
	if err != nil {
		return "", fmt.Errorf("prerequisite %s values: %w", p.ServiceTemplate.Name, err)
	}
	return helmvalues.EscapeTemplate(string(y)), nil
}

// digest is values as the client's cache keeps them (Installer.ValuesDigest).
func (in *Installer) digest(values string) string {
	if in.ValuesDigest == nil {
		return values
	}
	return in.ValuesDigest(values)
}

// reconcileShared corrects drift on an existing shared prerequisite ServiceSet and reports
// conflicting values between classes. The ServiceSet carries the values of one class (the
// AnnotationPrerequisiteValuesFrom annotation): that class's workspaces put back what was changed; a
// workspace of another class that asks other values conflicts while the owning class is in use on
// the cluster, and takes the ServiceSet over once it is not. It returns the conflict, or "".
func (in *Installer) reconcileShared(ctx context.Context, req Request, p workspacesv1.Prerequisite, ss *k0rdentv1beta1.ServiceSet) (string, error) {
	if len(ss.Spec.Services) != 1 || !ss.DeletionTimestamp.IsZero() {
		return "", nil
	}
	want, err := valuesYAML(p)
	if err != nil {
		return "", err
	}
	owner := ss.Annotations[owned.AnnotationPrerequisiteValuesFrom]
	svc := ss.Spec.Services[0]
	drift := in.digest(svc.Values) != in.digest(want) || svc.HelmOptions != nil || len(svc.ValuesFrom) > 0 || svc.HelmAction != nil
	if owner != "" && owner != req.Class.Name {
		used, who, err := in.classUsedOn(ctx, req, owner)
		if err != nil {
			return "", err
		}
		if used {
			if in.digest(svc.Values) == in.digest(want) {
				return "", nil
			}
			return fmt.Sprintf("prerequisite %s: the shared ServiceSet %s/%s carries the values of WorkspaceClass %s (used by workspace %s), and WorkspaceClass %s asks other values; give both classes the same prerequisite values",
				p.ServiceTemplate.Name, ss.Namespace, ss.Name, owner, who, req.Class.Name), nil
		}
	}
	if !drift && owner == req.Class.Name {
		return "", nil
	}
	patchBase := ss.DeepCopy()
	if ss.Annotations == nil {
		ss.Annotations = map[string]string{}
	}
	ss.Annotations[owned.AnnotationPrerequisiteValuesFrom] = req.Class.Name
	ss.Spec.Services[0].Values = want
	ss.Spec.Services[0].HelmOptions = nil
	ss.Spec.Services[0].ValuesFrom = nil
	ss.Spec.Services[0].HelmAction = nil
	if err := in.Client.Patch(ctx, ss, client.MergeFrom(patchBase)); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("correcting prerequisite ServiceSet %s/%s: %w", ss.Namespace, ss.Name, err)
	}
	return "", nil
}

// classUsedOn reports whether a live workspace on the cluster (other than the request's) uses the
// class, and names it.
func (in *Installer) classUsedOn(ctx context.Context, req Request, class string) (bool, string, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := in.Client.List(ctx, &list, client.MatchingFields{owned.IndexCluster: req.ClusterKey.String()}, client.UnsafeDisableDeepCopy); err != nil { // read-only
		return false, "", fmt.Errorf("listing workspaces of %s: %w", req.ClusterKey, err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Spec.WorkspaceClassRef == class && o.DeletionTimestamp.IsZero() && (o.Namespace != req.Workspace.Namespace || o.Name != req.Workspace.Name) {
			return true, o.Namespace + "/" + o.Name, nil
		}
	}
	return false, "", nil
}
