package docscheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSteps(t *testing.T, code, table, cite string) string {
	t.Helper()
	root := t.TempDir()
	for path, body := range map[string]string{
		stepsCode:   "package workspace\n\nfunc (r *Reconciler) reconcileNormal() {\n\tsteps := []struct {\n\t}{\n" + code + "\t}\n\tfor _, st := range steps {\n\t}\n}\n",
		stepsTable:  "# Steps\n\n| # | step | file | what it does | on problem |\n|---|---|---|---|---|\n" + table + "\nafter\n",
		"x/cite.go": "package x\n\n// " + cite + "\n",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSteps(t *testing.T) {
	code := "\t\t{\"adopt\", r.adopt},\n\t\t// a comment\n\t\t{\"gate\", r.gate},\n"
	good := "| 1 | adopt | a.go | x | – |\n| 2 | gate | g.go | y | – |"
	for _, c := range []struct {
		name, table, cite, want string
	}{
		{"matching", good, "see docs/RECONCILIATION.md, " + "step 2.", ""},
		{"a row out of order", "| 1 | adopt | a.go | x | – |\n| 3 | gate | g.go | y | – |", "", "numbered 1..N"},
		{"a step renamed", "| 1 | adopt | a.go | x | – |\n| 2 | admit | g.go | y | – |", "", `reconcileNormal's step 2 is "gate"`},
		{"a step missing", "| 1 | adopt | a.go | x | – |", "", "1 step rows, but reconcileNormal runs 2"},
		{"a citation of no row", good, "docs/RECONCILIATION.md, " + "step 7)", "cites docs/RECONCILIATION.md step 7"},
		{"a lettered citation", good, "docs/RECONCILIATION.md, " + "step 1b)", "step 1b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, errs := Steps(writeSteps(t, code, c.table, c.cite))
			if n != 2 {
				t.Errorf("%d steps, want 2", n)
			}
			var all []string
			for _, err := range errs {
				all = append(all, err.Error())
			}
			got := strings.Join(all, "\n")
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("errors %q, want %q", got, c.want)
			}
		})
	}
}
