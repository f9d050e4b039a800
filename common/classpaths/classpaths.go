// Package classpaths holds the one rule for the Helm value paths a WorkspaceClass writes to: its
// resourceInjection paths and its userFacingConfig helmValuePaths. The webhook applies it at
// admission and the workspace-controller's class reconciler applies it again, so that a class that
// reached the API server without the webhook is judged the same way.
package classpaths

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// Path is one Helm value path of a class and the field that declares it.
type Path struct {
	// Field is the API field that holds the path, e.g. spec.resourceInjection.cpu[1].
	Field *field.Path
	// Kind is the resourceInjection list that holds the path (replicas, cpu, memory, storage,
	// gpuCount, gpuVendor or gpuType); empty for a userFacingConfig helmValuePath.
	Kind string
	// Raw is the path as the class spells it.
	Raw string
}

// Injection returns every resourceInjection path of a class, under spec (the field of the class's
// spec), in a fixed order: replicas, cpu, memory, storage, gpuCount, gpuVendor, gpuType, each list
// in its own order.
func Injection(ri *workspacesv1.ResourceInjection, spec *field.Path) []Path {
	if ri == nil {
		return nil
	}
	var out []Path
	for _, l := range []struct {
		kind  string
		paths []string
	}{
		{"replicas", ri.Replicas}, {"cpu", ri.CPU}, {"memory", ri.Memory}, {"storage", ri.Storage},
		{"gpuCount", ri.GPUCount}, {"gpuVendor", ri.GPUVendor}, {"gpuType", ri.GPUType},
		{"nodeSelector", ri.NodeSelector}, {"affinity", ri.Affinity}, {"tolerations", ri.Tolerations},
	} {
		for i, p := range l.paths {
			out = append(out, Path{Field: spec.Child("resourceInjection", l.kind).Index(i), Kind: l.kind, Raw: p})
		}
	}
	return out
}

// Of returns every value path of a class spec, under spec: the resourceInjection paths (in
// Injection's order), then each userFacingConfig helmValuePath.
func Of(s *workspacesv1.WorkspaceClassSpec, spec *field.Path) []Path {
	out := Injection(s.ResourceInjection, spec)
	for i := range s.UserFacingConfig {
		out = append(out, Path{Field: spec.Child("userFacingConfig").Index(i).Child("helmValuePath"), Raw: s.UserFacingConfig[i].HelmValuePath})
	}
	return out
}

// Check applies the rule to paths: each parses (common/valuepath), none points into the _exalsius
// block (the operator writes it), no two name the same value however they are spelled (`a.b` and
// `["a"].b`), and none lies inside another (`a` and `a.b`: one value would overwrite the other). It
// returns one error per problem: first those of single paths, in the order given, then those of
// pairs, each on the later path's field and naming the earlier one. Empty when the paths keep the
// rule.
func Check(paths []Path) field.ErrorList {
	var errs field.ErrorList
	type parsed struct {
		field *field.Path
		segs  []string
	}
	var all []parsed
	for _, p := range paths {
		segs, err := valuepath.Parse(p.Raw)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Field, p.Raw, err.Error()))
		case segs[0] == workspacesv1.ExalsiusValuesKey:
			errs = append(errs, field.Forbidden(p.Field, fmt.Sprintf("the %s values block is written by the operator", workspacesv1.ExalsiusValuesKey)))
		default:
			all = append(all, parsed{p.Field, segs})
		}
	}
	for j := range all {
		for i := range j {
			a, b := all[i], all[j]
			switch {
			case slices.Equal(a.segs, b.segs):
				errs = append(errs, field.Invalid(b.field, valuepath.String(b.segs),
					fmt.Sprintf("names the same value as %s", a.field)))
			case valuepath.HasPrefix(b.segs, a.segs) || valuepath.HasPrefix(a.segs, b.segs):
				errs = append(errs, field.Invalid(b.field, valuepath.String(b.segs),
					fmt.Sprintf("overlaps %s (%s): one value would overwrite the other", a.field, valuepath.String(a.segs))))
			}
		}
	}
	return errs
}
