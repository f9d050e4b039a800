package docscheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/exalsius/exalsius-operator/common/scheme"
)

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		" Step 6: the ServiceSet (k0rdent contract checklist)": "step-6-the-serviceset-k0rdent-contract-checklist",
		" Workspace URLs through the regional cluster":         "workspace-urls-through-the-regional-cluster",
		" `make run`, the local world":                         "make-run-the-local-world",
		" See [the API](api.md) now":                           "see-the-api-now",
		" snake_case and dash-case":                            "snake_case-and-dash-case",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnchorsNumberRepeatsAndSkipCode(t *testing.T) {
	md := "# Title\n## Logs\n```sh\n# not a heading\n```\n## Logs\n<a id=\"Custom\"></a>\n#nospace\n"
	got := Anchors(md)
	for _, want := range []string{"title", "logs", "logs-1", "custom"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "nospace"} {
		if got[not] {
			t.Errorf("anchor %q should not exist", not)
		}
	}
}

func TestExtractLinks(t *testing.T) {
	md := strings.Join([]string{
		"See [a](a.md) and ![img](img/x.png \"title\").",
		"`[not](code.md)` and [b](<b.md>)",
		"```",
		"[fenced](fenced.md)",
		"```",
		"[ref]: ../ref.md",
		"[ext](https://example.com/x.md)",
	}, "\n")
	var got []string
	for _, l := range ExtractLinks(md) {
		got = append(got, l.Target)
	}
	want := []string{"a.md", "img/x.png", "b.md", "../ref.md", "https://example.com/x.md"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLinksFindsBrokenOnes(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "docs", "b.md"), "# B\n## Some section\n")
	write(t, filepath.Join(root, "docs", "a.md"), strings.Join([]string{
		"[ok](b.md#some-section) [ok dir](../docs/) [self](#a) [ext](https://x.y/z)",
		"# A",
		"[missing](c.md)",
		"[bad anchor](b.md#other)",
		"[outside](../../etc/passwd)",
		"[absolute](/docs/b.md)",
	}, "\n"))
	rep, errs := Links(root)
	if rep.Files != 2 || rep.Links != 8 {
		t.Errorf("report %+v, want 2 files and 8 links", rep)
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{`"c.md": no such file`, `"b.md#other": no heading`, `"../../etc/passwd": points outside`, `"/docs/b.md": absolute paths`} {
		if !strings.Contains(joined, want) {
			t.Errorf("no error containing %s in:\n%s", want, joined)
		}
	}
	if len(errs) != 4 {
		t.Errorf("want 4 errors, got %d:\n%s", len(errs), joined)
	}
}

func TestExamplesParseStrictly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "examples")
	write(t, filepath.Join(dir, "README.md"), "[good](good/)\n")
	write(t, filepath.Join(dir, "charts", "x", "values.yaml"), "not: [a manifest\n")
	// Flux's and Argo CD's kinds are not the scheme's: gitops/ is left to e2e/gitops, but README links it.
	write(t, filepath.Join(dir, "gitops", "flux", "a.yaml"), "apiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: zz}\n")
	write(t, filepath.Join(dir, "good", "a.yaml"), "# comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n")
	write(t, filepath.Join(dir, "bad", "a.yaml"), strings.Join([]string{
		"apiVersion: workspaces.exalsius.ai/v1",
		"kind: WorkspaceDeployment",
		"metadata: {name: x}",
		"spec: {workspaceClassRef: c, clusterDeploymentRef: {name: cd}, resourcez: {}}",
		"---",
		"apiVersion: example.com/v1",
		"kind: Unknown",
		"metadata: {name: yy}",
		"---",
		"apiVersion: v1",
		"kind: ConfigMap",
		"metadata: {}",
		"---",
		"a: 1",
		"a: 2",
	}, "\n"))
	n, errs := Examples(dir, scheme.New())
	if n != 3 {
		t.Errorf("parsed %d objects, want 3", n)
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{`unknown field "resourcez"`, "Unknown yy: unknown kind", "metadata.name is missing", "document 4", "does not link the example folder bad/",
		"does not link the example folder gitops/"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no error containing %q in:\n%s", want, joined)
		}
	}
	if len(errs) != 6 {
		t.Errorf("want 6 errors, got %d:\n%s", len(errs), joined)
	}
}
