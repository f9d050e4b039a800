// Package helmvalues builds a workspace's Helm values: the class's defaultValues deep-merged with the
// workspace's values, the operator's `_exalsius` block, and the class's resourceInjection paths.
package helmvalues

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/classpaths"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// Source is one decoded spec.valuesFrom document of a workspace.
type Source struct {
	// Values are the document's values.
	Values map[string]any
	// Secret is true when the document came from a Secret: its values then reach the release only
	// through the workspace's values Secret.
	Secret bool
}

// Input is what a workspace's values are built from.
type Input struct {
	Class     *workspacesv1.WorkspaceClass
	Workspace *workspacesv1.WorkspaceDeployment
	Resources *workspacesv1.ResolvedResources
	// From are the workspace's spec.valuesFrom documents, in merge order.
	From []Source
}

// Output are a workspace's values, split into what may travel inline in the ServiceSet and what must
// travel in a Secret. Both are YAML escaped for Go text/template (Sveltos renders values as templates),
// so the chart receives them verbatim.
type Output struct {
	// Inline are the values for the ServiceSet's service; they hold no secret value.
	Inline string
	// Secret are the values of userFacingConfig entries of type secret and every value read from a
	// Secret; empty when there is none.
	Secret string
	// Overwritten are the user paths the operator overwrote, sorted.
	Overwritten []string
	// Missing are the helmValuePaths of required userFacingConfig entries with no value, in class order.
	Missing []string
}

// Build returns the workspace's Helm values: the class's defaultValues deep-merged with the
// workspace's values and valuesFrom documents (a later one wins), the class's userFacingConfig
// defaults where nothing is set, then the `_exalsius` block, then the class's resourceInjection paths.
// An error names the value that blocks a path.
func Build(in Input) (Output, error) {
	class, ws, res := in.Class, in.Workspace, in.Resources
	var out Output
	defaults, err := decodeObject(class.Spec.DefaultValues)
	if err != nil {
		return out, fmt.Errorf("WorkspaceClass %s spec.defaultValues: %v", class.Name, err)
	}
	if ws.Spec.Values != nil {
		if err := valuepath.CheckSize("spec.values", len(ws.Spec.Values.Raw)); err != nil {
			return out, err
		}
	}
	user, err := decodeObject(ws.Spec.Values)
	if err != nil {
		return out, fmt.Errorf("spec.values: %v", err)
	}
	if err := valuepath.CheckShape("spec.values", user); err != nil {
		return out, err
	}
	declared, err := declaredPaths(class)
	if err != nil {
		return out, err
	}
	if err := checkDeclared(class, declared, "spec.values", user); err != nil {
		return out, err
	}
	secret := &mask{}
	for _, src := range in.From {
		// Decode checked the documents it read; a source built otherwise is checked here.
		if err := valuepath.CheckShape("a spec.valuesFrom document", src.Values); err != nil {
			return out, err
		}
		if err := checkDeclared(class, declared, "a spec.valuesFrom document", src.Values); err != nil {
			return out, err
		}
		user = deepMerge(user, src.Values)
		if src.Secret {
			secret.addLeaves(src.Values)
		}
	}
	merged := deepMerge(defaults, user)
	for i, u := range class.Spec.UserFacingConfig {
		keys, err := valuepath.Parse(u.HelmValuePath)
		if err != nil {
			return out, fmt.Errorf("WorkspaceClass %s spec.userFacingConfig[%d].helmValuePath: %v", class.Name, i, err)
		}
		if v, set := valuepath.Get(merged, keys); !set || v == nil {
			if u.Default != nil && len(u.Default.Raw) > 0 && string(u.Default.Raw) != "null" {
				def, err := decodeValue(u.Default.Raw)
				if err != nil {
					return out, fmt.Errorf("WorkspaceClass %s spec.userFacingConfig[%d].default: %v", class.Name, i, err)
				}
				if err := valuepath.Set(merged, keys, def); err != nil {
					return out, fmt.Errorf("cannot set the default of %s (WorkspaceClass %s spec.userFacingConfig[%d]): %v", u.HelmValuePath, class.Name, i, err)
				}
			} else if u.Required {
				out.Missing = append(out.Missing, u.HelmValuePath)
			}
		}
		if u.Type == workspacesv1.UserFacingConfigSecret {
			secret.add(keys)
		}
	}
	overwritten := map[string]bool{}
	enforced, err := decodeObject(class.Spec.EnforcedValues)
	if err != nil {
		return out, fmt.Errorf("WorkspaceClass %s spec.enforcedValues: %v", class.Name, err)
	}
	if len(enforced) > 0 {
		// The class's enforced values win over the workspace's; a user value they replace is named.
		paths, _ := valuepath.Overlapping(user, valuepath.Leaves(enforced))
		for _, p := range paths {
			keys := valuepath.MustParse(p)
			uv, _ := valuepath.Get(user, keys)
			if ev, set := valuepath.Get(enforced, keys); !set || !sameValue(uv, ev) {
				overwritten[p] = true
			}
		}
		merged = deepMerge(merged, enforced)
	}
	if _, set := user[workspacesv1.ExalsiusValuesKey]; set {
		overwritten[workspacesv1.ExalsiusValuesKey] = true
	}
	block := exalsiusBlock(res, ws.Status.Admission)
	merged[workspacesv1.ExalsiusValuesKey] = block

	if ri := class.Spec.ResourceInjection; ri != nil {
		scheduling, _ := block["scheduling"].(map[string]any)
		for _, fp := range classpaths.Injection(ri, field.NewPath("spec")) {
			v, ok := injectedValue(fp.Kind, res, scheduling)
			if !ok {
				continue
			}
			keys, err := valuepath.Parse(fp.Raw)
			if err != nil {
				return out, fmt.Errorf("WorkspaceClass %s %s: %v", class.Name, fp.Field, err)
			}
			if keys[0] == workspacesv1.ExalsiusValuesKey {
				return out, fmt.Errorf("WorkspaceClass %s %s: %q points into the %s block", class.Name, fp.Field, fp.Raw, workspacesv1.ExalsiusValuesKey)
			}
			if old, set := valuepath.Get(user, keys); set && !sameValue(old, v) {
				overwritten[valuepath.String(keys)] = true
			}
			if err := valuepath.Set(merged, keys, v); err != nil {
				return out, fmt.Errorf("cannot inject %s into %s (WorkspaceClass %s %s): %v", fp.Kind, fp.Raw, class.Name, fp.Field, err)
			}
		}
	}
	secretValues := secret.extract(merged)
	if out.Inline, err = encode(merged); err != nil {
		return out, err
	}
	if len(secretValues) > 0 {
		if out.Secret, err = encode(secretValues); err != nil {
			return out, err
		}
	}
	out.Overwritten = make([]string, 0, len(overwritten))
	for p := range overwritten {
		out.Overwritten = append(out.Overwritten, p)
	}
	sort.Strings(out.Overwritten)
	return out, nil
}

// declaredPaths are the parsed userFacingConfig paths of a class whose valuesPolicy is Declared (nil
// for any other policy).
func declaredPaths(class *workspacesv1.WorkspaceClass) ([][]string, error) {
	if class.Spec.ValuesPolicy != workspacesv1.ValuesPolicyDeclared {
		return nil, nil
	}
	out := make([][]string, 0, len(class.Spec.UserFacingConfig))
	for i, u := range class.Spec.UserFacingConfig {
		keys, err := valuepath.Parse(u.HelmValuePath)
		if err != nil {
			return nil, fmt.Errorf("WorkspaceClass %s spec.userFacingConfig[%d].helmValuePath: %v", class.Name, i, err)
		}
		out = append(out, keys)
	}
	return out, nil
}

// checkDeclared refuses, under valuesPolicy Declared, a document of user values (where names it) that
// sets a path the class does not declare, naming the paths (never the values).
func checkDeclared(class *workspacesv1.WorkspaceClass, declared [][]string, where string, values map[string]any) error {
	if class.Spec.ValuesPolicy != workspacesv1.ValuesPolicyDeclared {
		return nil
	}
	paths, more := valuepath.Undeclared(values, declared)
	if len(paths) == 0 {
		return nil
	}
	list := strings.Join(paths, ", ")
	if more {
		list += ", ..."
	}
	return fmt.Errorf("%s sets %s, which WorkspaceClass %s does not declare in spec.userFacingConfig (its valuesPolicy is Declared)",
		where, list, class.Name)
}

// Decode reads one valuesFrom document: a YAML (or JSON) object; empty is an empty object. A document
// over the limits of common/valuepath (MaxValuesBytes, MaxValuesDepth, MaxValuesLeaves) is refused
// with a *valuepath.LimitError, which names the limit and never the content.
func Decode(doc []byte) (map[string]any, error) {
	const field = "a spec.valuesFrom document"
	if err := valuepath.CheckSize(field, len(doc)); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %v", err)
	}
	if err := valuepath.CheckSize(field, len(j)); err != nil { // YAML aliases expand
		return nil, err
	}
	m, err := decodeObject(&apiextensionsv1.JSON{Raw: j})
	if err != nil {
		return nil, err
	}
	if err := valuepath.CheckShape(field, m); err != nil {
		return nil, err
	}
	return m, nil
}

// encode marshals values to YAML and escapes it for Go templates. YAML cannot carry some strings JSON
// can (control characters); those values are written as JSON, which every YAML reader of values
// (Helm, Sveltos) reads as well.
func encode(v map[string]any) (string, error) {
	y, err := yaml.Marshal(v)
	if err != nil {
		j, jerr := json.Marshal(v)
		if jerr != nil {
			return "", fmt.Errorf("encoding values: %v", jerr)
		}
		y = append(yamlSafeJSON(j), '\n')
	}
	return EscapeTemplate(string(y)), nil
}

// yamlSafeJSON escapes, in JSON text, every character a YAML reader refuses to read (control
// characters such as DEL, C1 controls, U+FEFF): as \uXXXX inside strings, they read back the same.
func yamlSafeJSON(j []byte) []byte {
	var b strings.Builder
	for _, r := range string(j) {
		if yamlPrintable(r) {
			b.WriteRune(r)
			continue
		}
		fmt.Fprintf(&b, "\\u%04x", r)
	}
	return []byte(b.String())
}

// yamlPrintable reports whether a YAML 1.1 reader accepts r as it is.
func yamlPrintable(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return true
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xd7ff && r != 0x2028 && r != 0x2029:
		return true // NEL, LS and PS are line breaks to YAML, folded inside quotes: escaped
	case r >= 0xe000 && r <= 0xfffd:
		return r != 0xfeff
	case r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

// mask marks the parts of a values tree that are secret: a node marked whole stands for everything
// under its path; otherwise its children say which parts below it are. It is built from the secret
// documents themselves, node for node, so that its size and the work of extract are linear in the
// documents' size. A list of leaf paths (one copy of every ancestor key per leaf) cost memory
// quadratic in the nesting depth: a Secret nested a few thousand levels deep took gigabytes.
type mask struct {
	whole bool
	sub   map[string]*mask
}

// addLeaves marks every value of m that is not a non-empty map.
func (k *mask) addLeaves(m map[string]any) {
	if k.whole {
		return
	}
	for key, v := range m {
		child := k.child(key)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			child.addLeaves(sub)
			continue
		}
		child.markWhole()
	}
}

// add marks the value at keys.
func (k *mask) add(keys []string) {
	cur := k
	for _, key := range keys {
		if cur.whole {
			return
		}
		cur = cur.child(key)
	}
	cur.markWhole()
}

func (k *mask) child(key string) *mask {
	if k.sub == nil {
		k.sub = map[string]*mask{}
	}
	c := k.sub[key]
	if c == nil {
		c = &mask{}
		k.sub[key] = c
	}
	return c
}

func (k *mask) markWhole() {
	k.whole, k.sub = true, nil
}

// extract moves the marked values out of values into a new tree, which it returns; maps left empty by
// the move stay. The reserved block is left alone: the operator writes it.
func (k *mask) extract(values map[string]any) map[string]any {
	out := map[string]any{}
	for key, c := range k.sub {
		if key == workspacesv1.ExalsiusValuesKey {
			continue
		}
		c.moveInto(values, key, out)
	}
	return out
}

// moveInto moves the marked parts of from[key] into to[key].
func (k *mask) moveInto(from map[string]any, key string, to map[string]any) {
	v, ok := from[key]
	if !ok {
		return
	}
	if k.whole {
		to[key] = v
		delete(from, key)
		return
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return
	}
	dst, _ := to[key].(map[string]any)
	if dst == nil {
		dst = map[string]any{}
	}
	for ck, c := range k.sub {
		c.moveInto(sub, ck, dst)
	}
	if len(dst) > 0 {
		to[key] = dst
	}
}

// decodeObject decodes a JSON object, keeping numbers exact; nil or null is an empty object.
func decodeObject(j *apiextensionsv1.JSON) (map[string]any, error) {
	if j == nil || len(bytes.TrimSpace(j.Raw)) == 0 || string(bytes.TrimSpace(j.Raw)) == "null" {
		return map[string]any{}, nil
	}
	v, err := decodeValue(j.Raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be an object")
	}
	return m, nil
}

// decodeValue decodes any JSON value, keeping numbers exact.
func decodeValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return v, nil
}

// deepMerge returns base with over merged on top: maps merge key by key, anything else in over
// replaces base's value. Neither input is modified.
func deepMerge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = deepMerge(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// exalsiusBlock is the `_exalsius` values block every chart receives, in the shape the published
// workspace charts read:
//
//	_exalsius:
//	  resources:
//	    replicas: 1
//	    perReplica: {cpu, memory, storage, gpuCount, gpuVendor, gpuType, gpuResourceName}
//	  scheduling:
//	    nodeSelector: {...}   # the selector the GPU gate checked, the admitted node pinned
//	    affinity: {...}       # required node affinity to the admitted nodes
//	    tolerations: [...]    # the GPU resource's taint
//
// Quantities are strings, gpuCount and replicas integers; unset fields are left out. affinity and
// tolerations are there once the GPU gate admitted the workspace with GPUs (ad), so that a chart
// that reads them, or a class that injects them into the chart's own paths, puts the pods on the
// GPUs the gate counted for this workspace and nowhere else.
func exalsiusBlock(r *workspacesv1.ResolvedResources, ad *workspacesv1.Admission) map[string]any {
	p := r.PerReplica
	per := map[string]any{}
	if p.CPU != nil {
		per["cpu"] = p.CPU.String()
	}
	if p.Memory != nil {
		per["memory"] = p.Memory.String()
	}
	if p.Storage != nil {
		per["storage"] = p.Storage.String()
	}
	if p.GPUCount != nil {
		per["gpuCount"] = int64(*p.GPUCount)
	}
	if p.GPUVendor != "" {
		per["gpuVendor"] = string(p.GPUVendor)
	}
	if p.GPUType != "" {
		per["gpuType"] = p.GPUType
	}
	if r.GPUResourceName != "" {
		per["gpuResourceName"] = r.GPUResourceName
	}
	resources := map[string]any{"replicas": int64(r.Replicas)}
	if len(per) > 0 {
		resources["perReplica"] = per
	}
	block := map[string]any{"resources": resources}
	scheduling := map[string]any{}
	if len(r.NodeSelector) > 0 {
		selector := make(map[string]any, len(r.NodeSelector))
		for k, v := range r.NodeSelector {
			selector[k] = v
		}
		scheduling["nodeSelector"] = selector
	}
	if hosts := admittedHostnames(ad); len(hosts) > 0 {
		values := make([]any, len(hosts))
		for i, h := range hosts {
			values[i] = h
		}
		scheduling["affinity"] = map[string]any{"nodeAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
				map[string]any{"matchExpressions": []any{
					map[string]any{"key": corev1.LabelHostname, "operator": "In", "values": values},
				}},
			}},
		}}
	}
	if ad != nil && ad.GPUsPerReplica > 0 && r.GPUResourceName != "" {
		scheduling["tolerations"] = []any{
			map[string]any{"key": r.GPUResourceName, "operator": "Exists", "effect": "NoSchedule"},
		}
	}
	if len(scheduling) > 0 {
		block["scheduling"] = scheduling
	}
	return block
}

// admittedHostnames are the hostnames of the nodes a GPU admission counted replicas on, sorted; none
// when the admission holds no GPUs or a node's hostname is unknown (an affinity without it would
// shut a replica out of the node the gate counted it on).
func admittedHostnames(ad *workspacesv1.Admission) []string {
	if ad == nil || ad.GPUsPerReplica == 0 || len(ad.Nodes) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range ad.Nodes {
		if n.Hostname == "" {
			return nil
		}
		if !seen[n.Hostname] {
			seen[n.Hostname] = true
			out = append(out, n.Hostname)
		}
	}
	sort.Strings(out)
	return out
}

// injectedValue returns the value of one resourceInjection kind, and false when the resolved
// resources (or, for the scheduling kinds, the `_exalsius.scheduling` block) leave it unset.
func injectedValue(kind string, r *workspacesv1.ResolvedResources, scheduling map[string]any) (any, bool) {
	p := r.PerReplica
	switch kind {
	case "nodeSelector", "affinity", "tolerations":
		v, ok := scheduling[kind]
		return v, ok
	case "replicas":
		return int64(r.Replicas), true
	case "cpu":
		if p.CPU != nil {
			return p.CPU.String(), true
		}
	case "memory":
		if p.Memory != nil {
			return p.Memory.String(), true
		}
	case "storage":
		if p.Storage != nil {
			return p.Storage.String(), true
		}
	case "gpuCount":
		if p.GPUCount != nil {
			return int64(*p.GPUCount), true
		}
	case "gpuVendor":
		if p.GPUVendor != "" {
			return string(p.GPUVendor), true
		}
	case "gpuType":
		if p.GPUType != "" {
			return p.GPUType, true
		}
	}
	return nil, false
}

// sameValue compares a user value (decoded JSON, numbers as json.Number) with an injected one.
func sameValue(user, injected any) bool {
	if n, ok := user.(json.Number); ok {
		return n.String() == fmt.Sprint(injected)
	}
	return reflect.DeepEqual(user, injected)
}
