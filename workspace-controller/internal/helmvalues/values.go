// Package helmvalues builds a workspace's Helm values: the class's defaultValues deep-merged with the
// workspace's values, the operator's `_exalsius` block, and the class's resourceInjection paths.
package helmvalues

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// Build returns the workspace's Helm values as YAML: the class's defaultValues deep-merged with
// the workspace's values, then the `_exalsius` block, then the class's resourceInjection paths. It also
// returns the paths the user set that the operator overwrote, sorted. An error names the value that
// blocks an injection path.
func Build(class *workspacesv1.WorkspaceClass, ws *workspacesv1.WorkspaceDeployment, res *workspacesv1.ResolvedResources) (string, []string, error) {
	defaults, err := decodeObject(class.Spec.DefaultValues)
	if err != nil {
		return "", nil, fmt.Errorf("WorkspaceClass %s spec.defaultValues: %v", class.Name, err)
	}
	user, err := decodeObject(ws.Spec.Values)
	if err != nil {
		return "", nil, fmt.Errorf("spec.values: %v", err)
	}
	merged := deepMerge(defaults, user)
	overwritten := map[string]bool{}
	if _, set := user[workspaceclass.ReservedValuesKey]; set {
		overwritten[workspaceclass.ReservedValuesKey] = true
	}
	merged[workspaceclass.ReservedValuesKey] = exalsiusBlock(res)

	if ri := class.Spec.ResourceInjection; ri != nil {
		for _, fp := range workspaceclass.InjectionPaths(ri) {
			v, ok := injectedValue(fp.Kind, res)
			if !ok {
				continue
			}
			keys, err := valuepath.Parse(fp.Path)
			if err != nil {
				return "", nil, fmt.Errorf("WorkspaceClass %s %s: %v", class.Name, fp.Field, err)
			}
			if keys[0] == workspaceclass.ReservedValuesKey {
				return "", nil, fmt.Errorf("WorkspaceClass %s %s: %q points into the %s block", class.Name, fp.Field, fp.Path, workspaceclass.ReservedValuesKey)
			}
			if old, set := valuepath.Get(user, keys); set && !sameValue(old, v) {
				overwritten[valuepath.String(keys)] = true
			}
			if err := valuepath.Set(merged, keys, v); err != nil {
				return "", nil, fmt.Errorf("cannot inject %s into %s (WorkspaceClass %s %s): %v", fp.Kind, fp.Path, class.Name, fp.Field, err)
			}
		}
	}
	out, err := yaml.Marshal(merged)
	if err != nil {
		return "", nil, fmt.Errorf("encoding values: %v", err)
	}
	paths := make([]string, 0, len(overwritten))
	for p := range overwritten {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return string(out), paths, nil
}

// decodeObject decodes a JSON object, keeping numbers exact; nil or null is an empty object.
func decodeObject(j *apiextensionsv1.JSON) (map[string]any, error) {
	if j == nil || len(bytes.TrimSpace(j.Raw)) == 0 || string(bytes.TrimSpace(j.Raw)) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(j.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be an object")
	}
	return m, nil
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

// exalsiusBlock is the `_exalsius` values block every chart receives.
func exalsiusBlock(r *workspacesv1.ResolvedResources) map[string]any {
	resources := map[string]any{}
	if q := r.PerReplica.CPU; q != nil {
		resources["cpu"] = q.String()
	}
	if q := r.PerReplica.Memory; q != nil {
		resources["memory"] = q.String()
	}
	if q := r.PerReplica.Storage; q != nil {
		resources["storage"] = q.String()
	}
	if n := gpus(r); n > 0 && r.GPUResourceName != "" {
		resources[r.GPUResourceName] = n
	}
	selector := map[string]any{}
	for k, v := range r.NodeSelector {
		selector[k] = v
	}
	return map[string]any{
		"resources":       resources,
		"replicas":        int64(r.Replicas),
		"scheduling":      map[string]any{"nodeSelector": selector},
		"gpuResourceName": r.GPUResourceName,
	}
}

// injectedValue returns the value of one resourceInjection kind, and false when the resolved
// resources leave it unset.
func injectedValue(kind string, r *workspacesv1.ResolvedResources) (any, bool) {
	p := r.PerReplica
	switch kind {
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

// gpus returns the GPUs per replica of resolved resources.
func gpus(r *workspacesv1.ResolvedResources) int64 {
	if r == nil || r.PerReplica.GPUCount == nil {
		return 0
	}
	return int64(*r.PerReplica.GPUCount)
}
