package charttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	allcomponents "github.com/exalsius/exalsius-operator/common/components"
)

const (
	releaseName      = "exalsius-operator"
	releaseNamespace = "exalsius-system"
	kubeVersion      = "v1.37.2"
)

var components = allcomponents.Names()

// repoRoot is the directory holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.work not found above the test directory")
		}
		dir = parent
	}
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "exalsius-operator") }

// helmBinary is $HELM, or helm in the tools directory `make tools` fills.
func helmBinary(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	out, err := exec.Command(filepath.Join(repoRoot(t), "hack", "tools.sh"), "bindir").Output()
	if err != nil {
		t.Fatalf("hack/tools.sh bindir: %v", err)
	}
	h := filepath.Join(strings.TrimSpace(string(out)), "helm")
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm not found at %s: run `make tools` (or set HELM)", h)
	}
	return h
}

// helmTemplate runs helm template with the extra arguments and returns stdout, or the error with
// stderr.
func helmTemplate(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	full := append([]string{"template", releaseName, chartDir(t), "--namespace", releaseNamespace, "--kube-version", kubeVersion}, args...)
	cmd := exec.Command(helmBinary(t), full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(full, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// rendered is the chart's output as objects.
type rendered []*unstructured.Unstructured

func render(t testing.TB, args ...string) rendered {
	t.Helper()
	out, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("decoding the rendered chart: %v", err)
	}
	return objs
}

func renderValuesFile(t testing.TB, name string) rendered {
	return render(t, "--values", filepath.Join(chartDir(t), "ci", name))
}

func decode(data []byte) (rendered, error) {
	var out rendered
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("object without kind or name: %v", m)
		}
		out = append(out, u)
	}
}

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func (r rendered) byKey() map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, u := range r {
		m[key(u)] = u
	}
	return m
}

func (r rendered) ofKind(kind string) rendered {
	var out rendered
	for _, u := range r {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func (r rendered) get(kind, name string) *unstructured.Unstructured {
	for _, u := range r {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func (r rendered) component(c string) rendered {
	var out rendered
	for _, u := range r {
		if u.GetLabels()["app.kubernetes.io/component"] == c {
			out = append(out, u)
		}
	}
	return out
}

// into converts an object to its typed form.
func into[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &out, true); err != nil {
		t.Fatalf("%s: %v", key(u), err)
	}
	return &out
}

// helmRaw runs helm with the arguments and returns stdout, or the error with stderr.
func helmRaw(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}
