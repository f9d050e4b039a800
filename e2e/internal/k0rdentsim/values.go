package k0rdentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/template"

	"dario.cat/mergo"
	"github.com/Masterminds/sprig/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// TemplateAnnotation on a valuesFrom ConfigMap or Secret makes Sveltos render its data as Go
// templates; without it the data are used as written.
const TemplateAnnotation = "projectsveltos.io/template"

// templateData is what a values template sees, as with Sveltos: the cluster's Cluster API objects as
// plain maps. The simulator has no Cluster API, so Cluster is the Cluster object CAPI would hold for
// the ClusterDeployment (name, namespace, labels); the control plane and infrastructure objects and
// templateResourceRefs (MgmtResources) are absent.
type templateData struct {
	Cluster                map[string]interface{}
	KubeadmControlPlane    map[string]interface{}
	InfrastructureProvider map[string]interface{}
	MgmtResources          map[string]map[string]interface{}
}

// clusterObject returns the Cluster API Cluster KCM's templates create for a ClusterDeployment.
func clusterObject(namespace, cd string) map[string]interface{} {
	return map[string]interface{}{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       "Cluster",
		"metadata": map[string]interface{}{
			"name":      cd,
			"namespace": namespace,
			"labels":    map[string]interface{}{"helm.toolkit.fluxcd.io/name": cd},
		},
		"spec": map[string]interface{}{},
	}
}

// funcMap is Sveltos's template function map: sprig's text functions plus Helm's
// toYaml/fromYaml/toJson/fromJson/toToml family.
func funcMap() template.FuncMap {
	m := sprig.TxtFuncMap()
	m["toYaml"] = func(v interface{}) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	m["fromYaml"] = func(s string) map[string]interface{} {
		out := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &out); err != nil {
			out["Error"] = err.Error()
		}
		return out
	}
	m["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	m["fromJson"] = func(s string) map[string]interface{} {
		out := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			out["Error"] = err.Error()
		}
		return out
	}
	return m
}

// renderValues renders a values document as one Go template, as Sveltos instantiates helm values:
// sprig functions, missing keys are errors, data is templateData.
func renderValues(name, values string, data templateData) (string, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(funcMap()).Parse(values)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// parseValues decodes a rendered values document; empty is an empty map.
func parseValues(doc string) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	if strings.TrimSpace(doc) == "" {
		return out, nil
	}
	if err := yaml.Unmarshal([]byte(doc), &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]interface{}{}
	}
	return out, nil
}

// serviceValues computes a service's Helm values as Sveltos does: the inline values rendered as a Go
// template come first; then the valuesFrom documents used as written (objects without the
// projectsveltos.io/template annotation); then the rendered ones. Each later document overrides
// the earlier ones key by key (mergo with override), so valuesFrom takes precedence over values.
// Within one object, keys are read in sorted order (Sveltos ranges over the map).
func serviceValues(ctx context.Context, c client.Reader, namespace, cluster string, svc k0rdentv1beta1.ServiceWithValues) (map[string]interface{}, error) {
	var docs []valuesDoc
	for i, vf := range svc.ValuesFrom {
		data := map[string]string{}
		var annotations map[string]string
		key := types.NamespacedName{Namespace: namespace, Name: vf.Name}
		switch vf.Kind {
		case k0rdentv1beta1.ValuesFromConfigMap:
			var cm corev1.ConfigMap
			if err := c.Get(ctx, key, &cm); err != nil {
				return nil, fmt.Errorf("valuesFrom[%d]: ConfigMap %s: %w", i, vf.Name, err)
			}
			data, annotations = cm.Data, cm.Annotations
		case k0rdentv1beta1.ValuesFromSecret:
			var s corev1.Secret
			if err := c.Get(ctx, key, &s); err != nil {
				return nil, fmt.Errorf("valuesFrom[%d]: Secret %s: %w", i, vf.Name, err)
			}
			for k, v := range s.Data {
				data[k] = string(v)
			}
			annotations = s.Annotations
		default:
			return nil, fmt.Errorf("valuesFrom[%d].kind: %q is not ConfigMap or Secret", i, vf.Kind)
		}
		_, render := annotations[TemplateAnnotation]
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			docs = append(docs, valuesDoc{Where: fmt.Sprintf("valuesFrom[%d] %s %s key %s", i, vf.Kind, vf.Name, k), Text: data[k], Render: render})
		}
	}
	return mergeValues(namespace+"-"+cluster+"-"+svc.Name, svc.Values, docs, templateData{Cluster: clusterObject(namespace, cluster)})
}

// valuesDoc is one valuesFrom document: where it comes from (for errors), its text and whether it is
// rendered as a template.
type valuesDoc struct {
	Where, Text string
	Render      bool
}

// mergeValues renders and merges the inline values and the valuesFrom documents in Sveltos's order:
// inline values first, then the documents used as written, then the rendered ones; later documents
// override earlier ones key by key.
func mergeValues(name, values string, docs []valuesDoc, data templateData) (map[string]interface{}, error) {
	rendered, err := renderValues(name, values, data)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out, err := parseValues(rendered)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var asIs, toRender []valuesDoc
	for _, d := range docs {
		if d.Render {
			toRender = append(toRender, d)
		} else {
			asIs = append(asIs, d)
		}
	}
	for _, d := range append(asIs, toRender...) {
		text := d.Text
		if d.Render {
			if text, err = renderValues(name, text, data); err != nil {
				return nil, fmt.Errorf("%s: %w", d.Where, err)
			}
		}
		m, err := parseValues(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Where, err)
		}
		if err := mergo.Merge(&out, m, mergo.WithOverride); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Where, err)
		}
	}
	return out, nil
}
