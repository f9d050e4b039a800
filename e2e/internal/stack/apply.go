package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the server-side apply field manager of manifests the local world applies.
const FieldManager = "exalsius-localworld"

// ReadManifests decodes every YAML document of the .yaml files in dir (in file-name order).
func ReadManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
				return nil, fmt.Errorf("%s document %d: %w", f, i, err)
			}
			if u.GetKind() == "" {
				return nil, fmt.Errorf("%s document %d: no kind", f, i)
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

func stripComments(doc []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Apply server-side applies objects in order, as `kubectl apply --server-side` would.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetResourceVersion("")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

// ApplyDir applies every manifest of a folder.
func (s *Stack) ApplyDir(ctx context.Context, dir string) error {
	objs, err := ReadManifests(dir)
	if err != nil {
		return err
	}
	return Apply(ctx, s.Client, objs)
}
