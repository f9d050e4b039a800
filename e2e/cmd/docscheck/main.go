// Command docscheck checks the documentation of the repository (`make verify` runs it): relative
// links in Markdown resolve, the manifests under examples/ parse into the API types, and the
// workspace reconciler's step table in docs/RECONCILIATION.md matches its pass (docscheck.Steps), and
// what the docs say about kinds, metrics, phases, flags and route namespaces holds (docscheck.Names),
// and every condition and event reason the code defines is in a reason table (docscheck.Reasons).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/e2e/internal/docscheck"
)

func main() {
	root := flag.String("repo-root", "..", "the repository root")
	flag.Parse()
	rep, errs := docscheck.Links(*root)
	n, exErrs := docscheck.Examples(filepath.Join(*root, "examples"), scheme.New())
	errs = append(errs, exErrs...)
	steps, stErrs := docscheck.Steps(*root)
	errs = append(errs, stErrs...)
	names, nmErrs := docscheck.Names(*root)
	errs = append(errs, nmErrs...)
	reasons, rsErrs := docscheck.Reasons(*root)
	errs = append(errs, rsErrs...)
	docscheck.SortErrors(errs)
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, "[docs]", err)
	}
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "[docs] %d problems\n", len(errs))
		os.Exit(1)
	}
	fmt.Printf("[docs] %d links in %d Markdown files resolve; %d example objects parse; the step table names the %d steps of the pass; %d statements about kinds, metrics, phases, flags and route namespaces hold; the reason tables name the %d reasons of the code\n",
		rep.Links, rep.Files, n, steps, names, reasons)
}
