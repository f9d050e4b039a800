package validation

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/text"
)

// sshKeyTypes are the public key algorithms accepted for userFacingConfig values of type publicKey.
var sshKeyTypes = map[string]bool{
	"ssh-ed25519":                        true,
	"ssh-rsa":                            true,
	"ecdsa-sha2-nistp256":                true,
	"ecdsa-sha2-nistp384":                true,
	"ecdsa-sha2-nistp521":                true,
	"sk-ssh-ed25519@openssh.com":         true,
	"sk-ecdsa-sha2-nistp256@openssh.com": true,
}

// checkType reports why v is not a value of type t, or "" when it is. Detail texts never include v.
func checkType(t workspacesv1.UserFacingConfigType, v any) string {
	switch t {
	case workspacesv1.UserFacingConfigString, workspacesv1.UserFacingConfigSecret:
		if _, ok := v.(string); !ok {
			return fmt.Sprintf("must be a string, not %s", jsonKind(v))
		}
	case workspacesv1.UserFacingConfigBool:
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("must be true or false, not %s", jsonKind(v))
		}
	case workspacesv1.UserFacingConfigInt:
		if _, ok := asInt(v); !ok {
			return fmt.Sprintf("must be a whole number, not %s", jsonKind(v))
		}
	case workspacesv1.UserFacingConfigPublicKey:
		s, ok := v.(string)
		if !ok {
			return fmt.Sprintf("must be an SSH public key string, not %s", jsonKind(v))
		}
		if msg := checkPublicKey(s); msg != "" {
			return msg
		}
	default:
		return fmt.Sprintf("has unknown type %q", t)
	}
	return ""
}

// asInt returns v as an integer when it is a JSON number without a fraction.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false
		}
		return int64(f), true
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// publicKeyPlaceholder says whether s is an SSH public key line (one line, a known key type) whose key
// field is a placeholder: not base64, or too short to hold a key, as in `ssh-ed25519 AAAA...`. The
// upstream operator admits such values; a key that decodes but names another type is not one.
func publicKeyPlaceholder(s string) bool {
	if strings.ContainsAny(s, "\r\n") {
		return false
	}
	fields := strings.Fields(s)
	if len(fields) < 2 || !sshKeyTypes[fields[0]] {
		return false
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	return err != nil || len(blob) < 4
}

// checkPublicKey checks the authorized_keys form `<type> <base64 blob> [comment]`, where the blob
// starts with the same type name.
func checkPublicKey(s string) string {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return "must be an SSH public key: `<type> <base64 key> [comment]`"
	}
	if !sshKeyTypes[fields[0]] {
		return fmt.Sprintf("must be an SSH public key of a known type (ssh-ed25519, ssh-rsa, ecdsa-sha2-*, sk-*), not %q", text.Truncate(fields[0], 40+len(text.Ellipsis)))
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return "must be an SSH public key: the key is not valid base64"
	}
	if len(blob) < 4 {
		return "must be an SSH public key: the key is too short"
	}
	n := binary.BigEndian.Uint32(blob)
	if uint64(n) > uint64(len(blob)-4) || string(blob[4:4+n]) != fields[0] {
		return "must be an SSH public key: the key does not match its type"
	}
	return ""
}

// normalize turns decoded JSON into comparable values: integral numbers become int64, others float64.
func normalize(v any) any {
	switch n := v.(type) {
	case json.Number:
		if i, ok := asInt(n); ok {
			return i
		}
		if f, err := n.Float64(); err == nil {
			return f
		}
		return n.String()
	case float64:
		if i, ok := asInt(n); ok {
			return i
		}
		return n
	case []any:
		out := make([]any, len(n))
		for i := range n {
			out[i] = normalize(n[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(n))
		for k, e := range n {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

// inOptions reports whether v equals one of the decoded options.
func inOptions(v any, options []any) bool {
	nv := normalize(v)
	for _, o := range options {
		if reflect.DeepEqual(nv, normalize(o)) {
			return true
		}
	}
	return false
}

// display renders a value for an error message; secrets are never rendered.
func display(t workspacesv1.UserFacingConfigType, v any) any {
	if t == workspacesv1.UserFacingConfigSecret {
		return field.OmitValueType{}
	}
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	if s, ok := v.(string); ok {
		return text.Truncate(s, 128+len(text.Ellipsis))
	}
	return v
}

// valueError builds an Invalid error for a user value, omitting the value of secrets.
func valueError(t workspacesv1.UserFacingConfigType, p *field.Path, v any, detail string) *field.Error {
	if t == workspacesv1.UserFacingConfigSecret {
		return redacted(p, detail)
	}
	return field.Invalid(p, display(t, v), detail)
}

// checkUserValue checks one value against a userFacingConfig entry's type and options.
func checkUserValue(ufc *workspacesv1.UserFacingConfig, options []any, v any, p *field.Path) field.ErrorList {
	if msg := checkType(ufc.Type, v); msg != "" {
		return field.ErrorList{valueError(ufc.Type, p, v, msg)}
	}
	if len(options) > 0 && !inOptions(v, options) {
		return field.ErrorList{valueError(ufc.Type, p, v, "must be one of "+optionList(ufc.Type, options))}
	}
	return nil
}

// optionList renders the allowed options, or a count for secrets.
func optionList(t workspacesv1.UserFacingConfigType, options []any) string {
	if t == workspacesv1.UserFacingConfigSecret {
		return fmt.Sprintf("the %d options the class allows", len(options))
	}
	parts := make([]string, 0, len(options))
	for _, o := range options {
		b, err := json.Marshal(o)
		if err != nil {
			b = []byte(fmt.Sprint(o))
		}
		parts = append(parts, text.Truncate(string(b), 64+len(text.Ellipsis)))
	}
	return strings.Join(parts, ", ")
}
