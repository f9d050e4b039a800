package validation

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// classPath is one Helm value path a class writes to, with the field that names it.
type classPath struct {
	field *field.Path
	segs  []string
}

// injectionLists returns the resourceInjection lists by JSON name, in a fixed order.
func injectionLists(ri *workspacesv1.ResourceInjection) []struct {
	name  string
	paths []string
} {
	if ri == nil {
		return nil
	}
	return []struct {
		name  string
		paths []string
	}{
		{"replicas", ri.Replicas}, {"cpu", ri.CPU}, {"memory", ri.Memory}, {"storage", ri.Storage},
		{"gpuCount", ri.GPUCount}, {"gpuVendor", ri.GPUVendor}, {"gpuType", ri.GPUType},
	}
}

// parsePath parses one path, reporting a parse error or a write to the operator's own block.
func parsePath(path string, p *field.Path) ([]string, field.ErrorList) {
	segs, err := valuepath.Parse(path)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(p, path, err.Error())}
	}
	if segs[0] == workspacesv1.ExalsiusValuesKey {
		return nil, field.ErrorList{field.Forbidden(p, fmt.Sprintf("the %s values block is written by the operator", workspacesv1.ExalsiusValuesKey))}
	}
	return segs, nil
}

// valuePaths checks that every resourceInjection path and userFacingConfig helmValuePath parses, that
// no path is named twice, and that no path lies inside another (one would overwrite the other).
func valuePaths(s *workspacesv1.WorkspaceClassSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	var all []classPath
	for _, l := range injectionLists(s.ResourceInjection) {
		for i, path := range l.paths {
			p := spec.Child("resourceInjection", l.name).Index(i)
			segs, perrs := parsePath(path, p)
			errs = append(errs, perrs...)
			if segs != nil {
				all = append(all, classPath{p, segs})
			}
		}
	}
	for i := range s.UserFacingConfig {
		p := spec.Child("userFacingConfig").Index(i).Child("helmValuePath")
		segs, perrs := parsePath(s.UserFacingConfig[i].HelmValuePath, p)
		errs = append(errs, perrs...)
		if segs != nil {
			all = append(all, classPath{p, segs})
		}
	}
	for j := range all {
		for i := 0; i < j; i++ {
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

// parsedConfig is a userFacingConfig entry with its path and options decoded.
type parsedConfig struct {
	cfg     *workspacesv1.UserFacingConfig
	segs    []string // nil when the path does not parse
	options []any
	def     any
	hasDef  bool
}

// parseConfig decodes an entry's path, options and default, reporting what does not decode.
func parseConfig(cfg *workspacesv1.UserFacingConfig, p *field.Path) (parsedConfig, field.ErrorList) {
	pc := parsedConfig{cfg: cfg}
	var errs field.ErrorList
	if segs, err := valuepath.Parse(cfg.HelmValuePath); err == nil {
		pc.segs = segs
	}
	for i, o := range cfg.Options {
		v, err := decodeJSON(o.Raw)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("options").Index(i), field.OmitValueType{}, "is not valid JSON"))
			continue
		}
		pc.options = append(pc.options, v)
	}
	if cfg.Default != nil && len(cfg.Default.Raw) > 0 {
		v, err := decodeJSON(cfg.Default.Raw)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("default"), field.OmitValueType{}, "is not valid JSON"))
		} else if v != nil {
			pc.def, pc.hasDef = v, true
		}
	}
	return pc, errs
}

// userFacingConfig checks each entry: a known type, options and default of that type, the default
// among the options, no default or options for secrets, and defaultValues at the entry's path
// matching it.
func userFacingConfig(s *workspacesv1.WorkspaceClassSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	defaults, _ := defaultValues(s)
	for i := range s.UserFacingConfig {
		cfg := &s.UserFacingConfig[i]
		p := spec.Child("userFacingConfig").Index(i)
		if cfg.DisplayName == "" {
			errs = append(errs, field.Required(p.Child("displayName"), "shown in catalogs"))
		}
		switch cfg.Type {
		case workspacesv1.UserFacingConfigString, workspacesv1.UserFacingConfigInt, workspacesv1.UserFacingConfigBool,
			workspacesv1.UserFacingConfigSecret, workspacesv1.UserFacingConfigPublicKey:
		default:
			errs = append(errs, field.NotSupported(p.Child("type"), cfg.Type, []workspacesv1.UserFacingConfigType{
				workspacesv1.UserFacingConfigString, workspacesv1.UserFacingConfigInt, workspacesv1.UserFacingConfigBool,
				workspacesv1.UserFacingConfigSecret, workspacesv1.UserFacingConfigPublicKey}))
			continue
		}
		pc, perrs := parseConfig(cfg, p)
		errs = append(errs, perrs...)
		if cfg.Type == workspacesv1.UserFacingConfigSecret {
			if pc.hasDef {
				errs = append(errs, field.Forbidden(p.Child("default"), "a secret may not have a default: everyone who can read the class would see it"))
			}
			if len(cfg.Options) > 0 {
				errs = append(errs, field.Forbidden(p.Child("options"), "a secret may not list options: everyone who can read the class would see them"))
			}
		}
		for j, o := range pc.options {
			op := p.Child("options").Index(j)
			if msg := checkType(cfg.Type, o); msg != "" {
				errs = append(errs, valueError(cfg.Type, op, o, msg))
				continue
			}
			if inOptions(o, pc.options[:j]) {
				errs = append(errs, field.Duplicate(op, display(cfg.Type, o)))
			}
		}
		if pc.hasDef && cfg.Type != workspacesv1.UserFacingConfigSecret {
			errs = append(errs, checkUserValue(cfg, pc.options, pc.def, p.Child("default"))...)
		}
		if defaults != nil && pc.segs != nil {
			if v, ok := lookup(defaults, pc.segs); ok && v != nil {
				vp := ValuePath(spec.Child("defaultValues"), pc.segs)
				if cfg.Type == workspacesv1.UserFacingConfigSecret {
					errs = append(errs, field.Forbidden(vp, fmt.Sprintf("%s is a secret; the class may not hold a value for it", p)))
				} else {
					errs = append(errs, checkUserValue(cfg, pc.options, v, vp)...)
				}
			}
		}
	}
	return errs
}

// defaultValues decodes the class's defaultValues, nil when unset or not an object.
func defaultValues(s *workspacesv1.WorkspaceClassSpec) (map[string]any, error) {
	if s.DefaultValues == nil {
		return nil, nil
	}
	return decodeObject(s.DefaultValues.Raw)
}

// lookup walks decoded values along segs.
func lookup(values map[string]any, segs []string) (any, bool) {
	return valuepath.Get(values, segs)
}
