package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Sort orders errors by field path, then type, then detail, so that a denial is deterministic.
func Sort(errs field.ErrorList) field.ErrorList {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Detail < b.Detail
	})
	return errs
}

// plainKey matches value-path segments that read well as a field path child (`a.b`); others are
// shown as keys (`a[nvidia.com/gpu]`).
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValuePath turns the segments of a Helm value path into a field path under base.
func ValuePath(base *field.Path, segs []string) *field.Path {
	p := base
	for _, s := range segs {
		if plainKey.MatchString(s) {
			p = p.Child(s)
		} else {
			p = p.Key(s)
		}
	}
	return p
}

// redacted builds an Invalid error that omits the offending value, for secrets.
func redacted(p *field.Path, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeInvalid, Field: p.String(), BadValue: field.OmitValueType{}, Detail: detail}
}

// decodeJSON decodes raw JSON keeping numbers as json.Number, so that integers stay exact.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// decodeObject decodes raw JSON that must be an object. Empty input is an empty object.
func decodeObject(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be an object, not %s", jsonKind(v))
	}
	return m, nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// positiveQuantity checks that an optional quantity is greater than zero.
func positiveQuantity(q *resource.Quantity, p *field.Path) field.ErrorList {
	if q == nil {
		return nil
	}
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than zero")}
	}
	return nil
}

// labelMap checks that keys are qualified names and values are label values.
func labelMap(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p, k, "key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	return errs
}

// annotationKeys checks that annotation keys are qualified names.
func annotationKeys(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range m {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p, k, "key: "+msg))
		}
	}
	return errs
}

// dnsLabel returns an error per rule a DNS label breaks.
func dnsLabel(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// dnsSubdomain returns an error per rule a DNS subdomain name breaks.
func dnsSubdomain(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// labelValueErrors lists why v is not a label value.
func labelValueErrors(v string) []string {
	return validation.IsValidLabelValue(v)
}

// dnsLabelMsgs lists why v is not a DNS label.
func dnsLabelMsgs(v string) []string {
	return validation.IsDNS1123Label(v)
}
