package node

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// ChartImages renders the umbrella chart (helm template) with the given extra arguments (e.g. --set
// ...) and returns every container image its workloads and test pods run, sorted.
func (w *World) ChartImages(ctx context.Context, extra ...string) ([]string, error) {
	args := append([]string{"template", Release, w.ChartDir(), "--namespace", Namespace, "--kube-version", "v1.37.2"}, extra...)
	out, err := w.Helm(ctx, args...)
	if err != nil {
		return nil, err
	}
	return renderedImages(out)
}

// CheckImages fails, naming them, when images the chart would run with these arguments are not in
// the node's containerd: nothing can be pulled here, and the install would wait for pods that never
// start. (With the default values they are IMAGE_REGISTRY/<component>:IMAGE_TAG from `make images`.)
func (w *World) CheckImages(ctx context.Context, extra ...string) error {
	want, err := w.ChartImages(ctx, extra...)
	if err != nil {
		return err
	}
	have, err := w.Node.Images(ctx)
	if err != nil {
		return err
	}
	var missing, present []string
	for _, img := range want {
		if !have[img] {
			missing = append(missing, img)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	for img := range have {
		if !strings.HasPrefix(img, "sha256:") {
			present = append(present, img)
		}
	}
	sort.Strings(present)
	return fmt.Errorf("the chart runs images the node does not have: %s (the node has %s); build them with `make images` "+
		"(hack/images.sh names them IMAGE_REGISTRY/<component>:IMAGE_TAG, by default the chart's references)",
		strings.Join(missing, ", "), strings.Join(present, ", "))
}

// renderedImages returns the images of every container and init container in a multi-document YAML
// stream of rendered manifests, sorted and without duplicates.
func renderedImages(manifests string) ([]string, error) {
	seen := map[string]bool{}
	for i, doc := range strings.Split("\n"+manifests, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("rendered manifest %d: %w", i, err)
		}
		collectImages(obj, seen)
	}
	images := make([]string, 0, len(seen))
	for img := range seen {
		images = append(images, img)
	}
	sort.Strings(images)
	return images, nil
}

func collectImages(v any, seen map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if list, ok := child.([]any); ok && (k == "containers" || k == "initContainers") {
				for _, c := range list {
					if m, ok := c.(map[string]any); ok {
						if img, ok := m["image"].(string); ok && img != "" {
							seen[img] = true
						}
					}
				}
			}
			collectImages(child, seen)
		}
	case []any:
		for _, child := range v {
			collectImages(child, seen)
		}
	}
}
