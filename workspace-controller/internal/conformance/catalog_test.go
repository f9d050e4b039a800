package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// Where the published artefacts are looked for: WORKSPACE_HUB and K0RDENT_CRDS when set, else the
// `shared` folder next to the repository (or next to its parent, for a git worktree).
const (
	envHub     = "WORKSPACE_HUB"
	envKCMCRDs = "K0RDENT_CRDS"
	kcmVersion = "v1.11.4"
)

// TestPublishedCatalogApplies applies every object of the published workspace catalog unchanged to an
// API server with the project's CRDs and KCM's own CRDs, then checks that the workspaceclass
// reconciler finds every published class valid once its ServiceTemplates are valid (KCM marks them
// valid after it resolved the chart; here the test does).
func TestPublishedCatalogApplies(t *testing.T) {
	hub, kcm := artefact(envHub, "workspace-hub"), artefact(envKCMCRDs, filepath.Join("k0rdent-crds", kcmVersion))
	if hub == "" || kcm == "" {
		t.Skipf("skipped: the published workspace catalog (%s, found %q) or KCM %s CRDs (%s, found %q) are not on this machine",
			envHub, hub, kcmVersion, envKCMCRDs, kcm)
	}
	t.Logf("catalog %s, KCM CRDs %s", hub, kcm)
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	bases, err := projectCRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:        []string{bases, kcm},
		ErrorIfCRDPathMissing:    true,
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	sch := scheme.New()
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	objs := readObjects(t, hub)
	if len(objs) < 10 {
		t.Fatalf("found %d objects under %s; the catalog has more", len(objs), hub)
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	// ServiceTemplates and classes first, so the example workspaces find them.
	sort.SliceStable(objs, func(i, j int) bool { return order(objs[i]) < order(objs[j]) })
	var classes []string
	for _, o := range objs {
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			continue
		}
		switch o.GetKind() {
		case "ServiceTemplate":
			markValid(ctx, t, c, o)
		case "WorkspaceClass":
			classes = append(classes, o.GetName())
		}
	}
	if len(classes) == 0 {
		t.Fatal("the catalog holds no WorkspaceClass")
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: sch, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &workspaceclass.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("workspace-controller")}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	for _, name := range classes {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			wc := &workspacesv1.WorkspaceClass{}
			err := c.Get(ctx, client.ObjectKey{Name: name}, wc)
			if err == nil && wc.Status.Valid && wc.Status.ObservedGeneration == wc.Generation {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("WorkspaceClass %s is not valid: %v %s", name, err, wc.Status.ValidationError)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func order(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "ServiceTemplate":
		return 0
	case "WorkspaceClass":
		return 1
	}
	return 2
}

// markValid sets a ServiceTemplate's status as KCM does once it resolved the chart.
func markValid(ctx context.Context, t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
		t.Fatal(err)
	}
	version, _, _ := unstructured.NestedString(got.Object, "spec", "helm", "chartSpec", "version")
	if err := unstructured.SetNestedField(got.Object, map[string]any{"valid": true, "chartVersion": version}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatalf("marking ServiceTemplate %s/%s valid: %v", o.GetNamespace(), o.GetName(), err)
	}
}

// readObjects reads every YAML document of every .yaml file under dir, unchanged.
func readObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := dec.Decode(&o.Object); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(o.Object) == 0 {
				continue
			}
			out = append(out, o)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// artefact finds a published artefact folder: the environment variable, else <shared>/<rel>.
func artefact(env, rel string) string {
	if v := os.Getenv(env); v != "" {
		if isDir(v) {
			return v
		}
		return ""
	}
	root, err := repoRoot()
	if err != nil {
		return ""
	}
	for _, shared := range []string{filepath.Join(root, "..", "shared"), filepath.Join(root, "..", "..", "shared")} {
		if p := filepath.Join(shared, rel); isDir(p) {
			return filepath.Clean(p)
		}
	}
	return ""
}

// repoRoot is the folder holding go.work, above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

func projectCRDs() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "common", "config", "crd", "bases"), nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
