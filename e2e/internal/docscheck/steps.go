package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The workspace reconciler's pass and the step table that documents it.
const (
	stepsCode  = "workspace-controller/internal/workspace/reconciler.go"
	stepsTable = "docs/RECONCILIATION.md"
)

var (
	// stepEntry is one entry of reconcileNormal's step list: {"name", r.method}.
	stepEntry = regexp.MustCompile(`^\s*\{"([^"]+)", r\.\w+\},`)
	// stepRow is one row of the step table: | N | name | ...
	stepRow = regexp.MustCompile(`^\| (\S+) \| ([^|]+?) \|`)
	// stepCite is a code comment citing a row of the table by its number.
	stepCite = regexp.MustCompile(`RECONCILIATION\.md, steps? (\S+?)[),.;:]`)
)

// Steps checks that the step table in docs/RECONCILIATION.md is numbered 1..N and names
// reconcileNormal's steps, in order, and that every Go comment citing a step of that document cites
// a row that exists. It returns the number of steps.
func Steps(root string) (int, []error) {
	code, err := os.ReadFile(filepath.Join(root, stepsCode))
	if err != nil {
		return 0, []error{err}
	}
	doc, err := os.ReadFile(filepath.Join(root, stepsTable))
	if err != nil {
		return 0, []error{err}
	}
	var steps []string
	in := false
	for _, line := range strings.Split(string(code), "\n") {
		switch {
		case strings.Contains(line, "steps := []struct {"):
			in = true
		case in && strings.HasPrefix(strings.TrimSpace(line), "for _, st := range steps"):
			in = false
		case in:
			if m := stepEntry.FindStringSubmatch(line); m != nil {
				steps = append(steps, m[1])
			}
		}
	}
	var errs []error
	if len(steps) == 0 {
		return 0, []error{fmt.Errorf("%s: no step list found in reconcileNormal", stepsCode)}
	}
	var rows []string
	table := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| # | step |") {
			table = true
			continue
		}
		if !table {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := stepRow.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], "-") {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err != nil || n != len(rows)+1 {
			errs = append(errs, fmt.Errorf("%s: step row %q: the rows are numbered 1..N in order, want %d", stepsTable, m[1], len(rows)+1))
		}
		rows = append(rows, strings.TrimSpace(m[2]))
	}
	if len(rows) != len(steps) {
		errs = append(errs, fmt.Errorf("%s: %d step rows, but reconcileNormal runs %d steps", stepsTable, len(rows), len(steps)))
	}
	for i := 0; i < len(rows) && i < len(steps); i++ {
		if rows[i] != steps[i] {
			errs = append(errs, fmt.Errorf("%s: step %d is %q, but reconcileNormal's step %d is %q", stepsTable, i+1, rows[i], i+1, steps[i]))
		}
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range stepCite.FindAllStringSubmatch(line, -1) {
				if n, err := strconv.Atoi(m[1]); err != nil || n < 1 || n > len(rows) {
					rel, _ := filepath.Rel(root, path)
					errs = append(errs, fmt.Errorf("%s:%d cites %s step %s, which is not a row of its step table (1..%d)", rel, i+1, stepsTable, m[1], len(rows)))
				}
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return len(steps), errs
}
