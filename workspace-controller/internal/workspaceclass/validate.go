package workspaceclass

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/classpaths"
	"github.com/exalsius/exalsius-operator/common/conditions"
)

// problem is a validation failure with its condition reason.
type problem struct {
	reason  string
	message string
	// waiting: the class waits for something that is expected to come (a ServiceTemplate not created
	// or not validated by k0rdent yet) rather than being wrong; it is Reconciling, not Stalled.
	waiting bool
}

// progress is the kstatus condition the class's state calls for (conditions.SetKstatus): none when
// valid, Reconciling while it waits for a ServiceTemplate, Stalled when it is wrong and, its spec
// being immutable, stays wrong until a template changes or a new class replaces it.
func (p *problem) progress() conditions.Progress {
	switch {
	case p == nil:
		return conditions.Current
	case p.waiting:
		return conditions.InProgress
	}
	return conditions.Failed
}

// ChartVersion returns the chart version a ServiceTemplate deploys: its status.chartVersion (what KCM
// resolved), else its spec.helm.chartSpec.version, else its spec.version. Empty when none is set.
func ChartVersion(t *k0rdentv1beta1.ServiceTemplate) string {
	if v := strings.TrimSpace(t.Status.ChartVersion); v != "" {
		return v
	}
	if t.Spec.Helm != nil && t.Spec.Helm.ChartSpec != nil {
		if v := strings.TrimSpace(t.Spec.Helm.ChartSpec.Version); v != "" {
			return v
		}
	}
	return strings.TrimSpace(t.Spec.Version)
}

// CheckVersion checks a ServiceTemplate's chart version against a class's versionConstraint. An empty
// constraint accepts every template.
func CheckVersion(constraint string, t *k0rdentv1beta1.ServiceTemplate) error {
	return CheckVersionAt("spec.serviceTemplate.versionConstraint", constraint, t)
}

// CheckVersionAt is CheckVersion for the constraint at field (for messages).
func CheckVersionAt(field, constraint string, t *k0rdentv1beta1.ServiceTemplate) error {
	constraint = strings.TrimSpace(constraint)
	if constraint == "" {
		return nil
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return fmt.Errorf("%s %q does not parse: %v", field, constraint, err)
	}
	raw := ChartVersion(t)
	if raw == "" {
		return fmt.Errorf("ServiceTemplate %s/%s reports no chart version to check against %s %q",
			t.Namespace, t.Name, field, constraint)
	}
	v, err := semver.NewVersion(raw)
	if err != nil {
		return fmt.Errorf("ServiceTemplate %s/%s chart version %q is not a semantic version: %v", t.Namespace, t.Name, raw, err)
	}
	if ok, errs := c.Validate(v); !ok {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return fmt.Errorf("ServiceTemplate %s/%s chart version %s does not satisfy %s %q: %s",
			t.Namespace, t.Name, v, field, constraint, strings.Join(msgs, "; "))
	}
	return nil
}

// checkValuePaths applies common/classpaths' rule to the class's value paths, returning the first
// problem: InvalidInjectionPath when the resourceInjection paths alone break it, else
// InvalidValuePath when a userFacingConfig helmValuePath does (it does not parse, points into
// _exalsius, or names or lies inside another path of the class). Nil when the paths keep the rule.
func checkValuePaths(s *workspacesv1.WorkspaceClassSpec) *problem {
	spec := field.NewPath("spec")
	if errs := classpaths.Check(classpaths.Injection(s.ResourceInjection, spec)); len(errs) > 0 {
		return &problem{reason: workspacesv1.ReasonInvalidInjectionPath, message: errs[0].Error()}
	}
	if errs := classpaths.Check(classpaths.Of(s, spec)); len(errs) > 0 {
		return &problem{reason: workspacesv1.ReasonInvalidValuePath, message: errs[0].Error()}
	}
	return nil
}

// templateKeys returns "<namespace>/<name>" of the class's ServiceTemplate and its prerequisites'
// templates, sorted, unique.
func templateKeys(c *workspacesv1.WorkspaceClass) []string {
	set := map[string]bool{TemplateNamespace(c) + "/" + c.Spec.ServiceTemplate.Name: true}
	for i := range c.Spec.Prerequisites {
		p := &c.Spec.Prerequisites[i]
		set[p.TemplateNamespace()+"/"+p.ServiceTemplate.Name] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TemplateNamespace returns the namespace of a class's ServiceTemplate (kcm-system when unset).
func TemplateNamespace(c *workspacesv1.WorkspaceClass) string {
	if c.Spec.ServiceTemplate.Namespace != "" {
		return c.Spec.ServiceTemplate.Namespace
	}
	return workspacesv1.DefaultServiceTemplateNamespace
}
