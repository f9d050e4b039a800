package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

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
