package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Where the condition and event reasons are defined, and the documents whose reason tables a reader
// (and docs/troubleshooting.md's links) relies on.
var (
	reasonSources = []string{"common/api/workspaces/v1", "common/api/infra/v1", "common/gpu", "workspace-controller/internal"}
	reasonDocs    = []string{"docs/STATUS_AND_EVENTS.md", "docs/COLONY.md"}
	// reasonConst is the name of a reason constant: ReasonRunning, ColonyReasonNoClusters,
	// EventReasonCleanupIncomplete.
	reasonConst = regexp.MustCompile(`^([A-Z][a-z]+)?Reason[A-Z]`)
)

// Reasons checks that every reason the code defines as a constant (a string literal named
// Reason<X>, <Kind>Reason<X>) appears, in backquotes, in a reason table of docs/STATUS_AND_EVENTS.md
// or docs/COLONY.md. Constants that alias another (ReasonFeasible = workspacesv1.ReasonFeasible)
// are checked where they are defined. It returns the number of reasons checked.
func Reasons(root string) (int, []error) {
	var docs strings.Builder
	for _, d := range reasonDocs {
		b, err := os.ReadFile(filepath.Join(root, d))
		if err != nil {
			return 0, []error{err}
		}
		docs.Write(b)
	}
	text := docs.String()
	defined := map[string]string{} // value -> where
	var errs []error
	for _, src := range reasonSources {
		err := filepath.WalkDir(filepath.Join(root, src), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) || !reasonConst.MatchString(name.Name) {
							continue
						}
						if v, ok := stringLit(vs.Values[i]); ok {
							if _, seen := defined[v]; !seen {
								defined[v] = rel + " " + name.Name
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	values := make([]string, 0, len(defined))
	for v := range defined {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, v := range values {
		if !strings.Contains(text, "`"+v+"`") {
			errs = append(errs, fmt.Errorf("%s: reason %q is in no reason table of %s", defined[v], v, strings.Join(reasonDocs, " or ")))
		}
	}
	return len(values), errs
}
