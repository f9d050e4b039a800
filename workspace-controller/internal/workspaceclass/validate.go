package workspaceclass

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// problem is a validation failure with its condition reason.
type problem struct {
	reason  string
	message string
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

// InjectionPaths returns every resourceInjection path of a class with the field that holds it, in a
// stable order.
func InjectionPaths(ri *workspacesv1.ResourceInjection) []FieldPath {
	if ri == nil {
		return nil
	}
	var out []FieldPath
	add := func(field string, paths []string) {
		for i, p := range paths {
			out = append(out, FieldPath{Field: fmt.Sprintf("spec.resourceInjection.%s[%d]", field, i), Kind: field, Path: p})
		}
	}
	add("replicas", ri.Replicas)
	add("cpu", ri.CPU)
	add("memory", ri.Memory)
	add("storage", ri.Storage)
	add("gpuCount", ri.GPUCount)
	add("gpuVendor", ri.GPUVendor)
	add("gpuType", ri.GPUType)
	return out
}

// FieldPath is one value path of a class and where it is declared.
type FieldPath struct {
	// Field is the API field holding the path, for messages.
	Field string
	// Kind is the resource injected (replicas, cpu, ...).
	Kind string
	// Path is the raw path.
	Path string
}

// ValidateInjection parses every resourceInjection path and rejects paths into the reserved _exalsius
// block, duplicates, and paths nested in one another (writing both would fail or lose a value).
func ValidateInjection(ri *workspacesv1.ResourceInjection) error {
	type parsed struct {
		fp   FieldPath
		keys []string
	}
	var all []parsed
	for _, fp := range InjectionPaths(ri) {
		keys, err := valuepath.Parse(fp.Path)
		if err != nil {
			return fmt.Errorf("%s: %v", fp.Field, err)
		}
		if keys[0] == workspacesv1.ExalsiusValuesKey {
			return fmt.Errorf("%s: %q points into the %s block, which the operator writes itself", fp.Field, fp.Path, workspacesv1.ExalsiusValuesKey)
		}
		all = append(all, parsed{fp, keys})
	}
	for i := range all {
		for j := range all {
			if i == j || len(all[i].keys) > len(all[j].keys) {
				continue
			}
			if valuepath.HasPrefix(all[j].keys, all[i].keys) {
				if len(all[i].keys) == len(all[j].keys) {
					if i < j {
						return fmt.Errorf("%s and %s both write %q", all[i].fp.Field, all[j].fp.Field, valuepath.String(all[i].keys))
					}
					continue
				}
				return fmt.Errorf("%s (%q) holds %s (%q): a value cannot be both a leaf and a map",
					all[i].fp.Field, all[i].fp.Path, all[j].fp.Field, all[j].fp.Path)
			}
		}
	}
	return nil
}

// ValidateUserFacingPaths parses every userFacingConfig helmValuePath.
func ValidateUserFacingPaths(ufc []workspacesv1.UserFacingConfig) error {
	for i, u := range ufc {
		if _, err := valuepath.Parse(u.HelmValuePath); err != nil {
			return fmt.Errorf("spec.userFacingConfig[%d].helmValuePath: %v", i, err)
		}
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
