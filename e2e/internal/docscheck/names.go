package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Names checks what the documentation states about names the code defines, so that a renamed or
// added kind, metric, phase or flag cannot leave the docs behind:
//
//   - kinds: "N kinds", "N CRDs" and "N custom resources" say the number of CRDs the chart installs,
//     and a line about CRDs (or a `kubectl get` of them) that lists several kinds lists them all;
//   - metrics: each component's metric table in docs/operations.md lists exactly the metrics its code
//     registers, and a metric name of a component mentioned anywhere (docs, alerts, dashboards)
//     exists;
//   - phases: a list of phases given for `phase` is one kind's whole phase enum;
//   - flags: each row of docs/operations.md's flag table names flags its component registers, and
//     every flag a component registers is documented (its own in docs/operations.md, or docs/WEBHOOK.md
//     for the webhook's certificate flags; the shared ones in docs/PRODUCTION_RUNTIME.md);
//   - route namespaces: a line about routes on the regional cluster names `wsr-`, not `ws-`.
//
// CHANGELOG.md is history and is not checked. It returns how many statements were checked.
func Names(root string) (int, []error) {
	c := &namesCheck{root: root}
	c.load()
	if len(c.errs) > 0 {
		return 0, c.errs
	}
	c.walkDocs()
	c.metricTables()
	c.flagTables()
	return c.checked, c.errs
}

const (
	crdDir        = "charts/exalsius-operator/files/crds"
	operationsDoc = "docs/operations.md"
	runtimeDoc    = "docs/PRODUCTION_RUNTIME.md"
	webhookDoc    = "docs/WEBHOOK.md"
	componentList = "common/components/names"
	apiDir        = "common/api"
	sharedModule  = "common"
)

var (
	numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
	// kindCount is "three kinds", "Four CRDs", "the three custom resources" (not "three kinds of").
	kindCount = regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight|nine|ten)\s+(kinds|crds|custom resources|custom resource definitions)\b(\s+of\b)?`)
	// crdsWord marks a line about the CRDs as a set (not "the CRD schema").
	crdsWord = regexp.MustCompile(`(?i)\bcrds\b`)
	// kubectlGet is the resource list of a `kubectl get`.
	kubectlGet = regexp.MustCompile(`kubectl(?:\s+-\S+(?:\s+\S+)?)*\s+get\s+([a-z.,]+)`)
	// phaseList is "`phase` (A, B, C)" or "`phase` (A, B and C)".
	phaseList = regexp.MustCompile("`phase`[^(`|]{0,20}\\(([A-Z][A-Za-z]+(?:(?:, | and |, and )[A-Z][A-Za-z]+)+)\\)")
	phaseSep  = regexp.MustCompile(`, and |, | and `)
	// enumMarker is a kubebuilder enum marker; the type it sits on is on the next line.
	enumMarker = regexp.MustCompile(`^// \+kubebuilder:validation:Enum=(.+)$`)
	phaseType  = regexp.MustCompile(`^type (\w+Phase) string`)
	// flagToken is a flag in backticks, as the flag tables write them.
	flagToken = regexp.MustCompile("`--([a-z0-9][a-z0-9-]*)")
	// routeLine mentions Gateway API routes.
	routeLine = regexp.MustCompile(`(?i)httproute|tcproute`)
	// wsNamespace is a release namespace (`ws-<name>`, `-n ws-my-notebook`), not `wsr-` or `wst-`.
	wsNamespace = regexp.MustCompile("(?:^|[\\s`(/])ws-[a-z<]")
	// flagMethods are the flag.FlagSet methods that register a flag.
	flagMethods = map[string]bool{
		"String": true, "StringVar": true, "Bool": true, "BoolVar": true, "Int": true, "IntVar": true,
		"Int64": true, "Int64Var": true, "Uint": true, "UintVar": true, "Float64": true, "Float64Var": true,
		"Duration": true, "DurationVar": true, "Var": true, "Func": true, "BoolFunc": true, "TextVar": true,
	}
)

type namesCheck struct {
	root    string
	checked int
	errs    []error

	kinds      []kind
	components []string
	// metrics by component: the names MetricName(component.Name, "x") registers, with the prefix.
	metrics map[string]map[string]bool
	// flags by module (the components and common).
	flags map[string]map[string]bool
	// phases are the phase enums of the API, by type.
	phases map[string][]string
}

type kind struct{ name, plural string }

func (c *namesCheck) errf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *namesCheck) load() {
	if err := c.loadKinds(); err != nil {
		c.errs = append(c.errs, err)
	}
	data, err := os.ReadFile(filepath.Join(c.root, componentList))
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	c.components = strings.Fields(string(data))
	c.metrics = map[string]map[string]bool{}
	c.flags = map[string]map[string]bool{}
	for _, m := range append([]string{sharedModule}, c.components...) {
		metrics, flags, err := scanModule(filepath.Join(c.root, m), prefixOf(m))
		if err != nil {
			c.errs = append(c.errs, err)
			continue
		}
		c.metrics[m], c.flags[m] = metrics, flags
	}
	c.phases, err = phaseEnums(filepath.Join(c.root, apiDir))
	if err != nil {
		c.errs = append(c.errs, err)
	} else if len(c.phases) == 0 {
		c.errf("%s: no phase enum found", apiDir)
	}
}

// prefixOf is bootstrap.MetricsPrefix: exalsius_, then the component word with '-' as '_'.
func prefixOf(component string) string { return "exalsius_" + retiredPrefixOf(component) }

// retiredPrefixOf is the prefix a component's metrics had before the exalsius_ namespace.
func retiredPrefixOf(component string) string { return strings.ReplaceAll(component, "-", "_") }

var (
	crdKind   = regexp.MustCompile(`(?m)^    kind: (\w+)$`)
	crdPlural = regexp.MustCompile(`(?m)^    plural: (\w+)$`)
)

func (c *namesCheck) loadKinds() error {
	entries, err := os.ReadDir(filepath.Join(c.root, crdDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(c.root, crdDir, e.Name()))
		if err != nil {
			return err
		}
		k, p := crdKind.FindSubmatch(data), crdPlural.FindSubmatch(data)
		if k == nil || p == nil {
			return fmt.Errorf("%s/%s: no spec.names.kind or plural", crdDir, e.Name())
		}
		c.kinds = append(c.kinds, kind{name: string(k[1]), plural: string(p[1])})
	}
	if len(c.kinds) == 0 {
		return fmt.Errorf("%s: no CRDs", crdDir)
	}
	return nil
}

// scanModule parses the module's Go files (not its tests) and returns the metric names registered
// with MetricName(component.Name, "x") (or MetricName(<anything>, "x"): the component is the
// module's) and the flags registered with a flag.FlagSet method.
func scanModule(dir, prefix string) (map[string]bool, map[string]bool, error) {
	metrics, flags := map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch {
			case sel.Sel.Name == "MetricName" && len(call.Args) == 2:
				if s, ok := stringLit(call.Args[1]); ok {
					metrics[prefix+"_"+s] = true
				}
			case flagMethods[sel.Sel.Name]:
				// The name is the first argument, or the second after the destination pointer.
				for i := 0; i < len(call.Args) && i < 2; i++ {
					if s, ok := stringLit(call.Args[i]); ok {
						flags[s] = true
						break
					}
				}
			}
			return true
		})
		return nil
	})
	return metrics, flags, err
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil && s != ""
}

// phaseEnums reads the enum marker of every `type <X>Phase string` of the API.
func phaseEnums(dir string) (map[string][]string, error) {
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_types.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(data), "\n")
		for i := 1; i < len(lines); i++ {
			t := phaseType.FindStringSubmatch(lines[i])
			if t == nil {
				continue
			}
			if m := enumMarker.FindStringSubmatch(lines[i-1]); m != nil {
				out[t[1]] = strings.Split(m[1], ";")
			}
		}
		return nil
	})
	return out, err
}

// docFiles are the files whose statements are checked: Markdown (but the changelog), the chart's
// values, NOTES.txt, alerts and dashboards, and the alerts' unit tests.
func (c *namesCheck) docFile(rel string) bool {
	switch {
	case filepath.Base(rel) == "CHANGELOG.md":
		return false
	case strings.HasSuffix(rel, ".md"):
		return true
	case strings.HasPrefix(rel, "charts/"):
		return strings.HasSuffix(rel, "values.yaml") || strings.HasSuffix(rel, "NOTES.txt") ||
			strings.HasSuffix(rel, "prometheusrule.yaml") || strings.Contains(rel, "/dashboards/")
	case strings.HasPrefix(rel, "hack/alerts/"):
		return true // the alerts' unit tests
	}
	return false
}

func (c *namesCheck) walkDocs() {
	err := filepath.WalkDir(c.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && path != c.root) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(c.root, path)
		rel = filepath.ToSlash(rel)
		if !c.docFile(rel) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			c.checkLine(rel, i+1, line)
		}
		return nil
	})
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

func (c *namesCheck) checkLine(file string, n int, line string) {
	at := fmt.Sprintf("%s:%d", file, n)
	for _, m := range kindCount.FindAllStringSubmatch(line, -1) {
		if m[3] != "" {
			continue // "three kinds of ..."
		}
		c.checked++
		if got := numberWords[strings.ToLower(m[1])]; got != len(c.kinds) {
			c.errf("%s: %q, but the chart installs %d CRDs (%s)", at, strings.TrimSpace(m[0]), len(c.kinds), c.kindNames())
		}
	}
	if crdsWord.MatchString(line) {
		if named := c.kindsIn(line, false); len(named) >= 2 {
			c.checked++
			if len(named) < len(c.kinds) {
				c.errf("%s: a line about the CRDs names %s but not %s", at, strings.Join(named, ", "), strings.Join(c.missing(named), ", "))
			}
		}
	}
	for _, m := range kubectlGet.FindAllStringSubmatch(line, -1) {
		if named := c.kindsIn(m[1], true); len(named) >= 2 {
			c.checked++
			if len(named) < len(c.kinds) {
				c.errf("%s: `kubectl get %s` lists %s but not %s", at, m[1], strings.Join(named, ", "), strings.Join(c.missing(named), ", "))
			}
		}
	}
	for _, m := range phaseList.FindAllStringSubmatch(line, -1) {
		c.checked++
		if !c.isPhaseEnum(phaseSep.Split(m[1], -1)) {
			c.errf("%s: phases (%s) are not the phases of any kind (%s)", at, m[1], c.phaseNames())
		}
	}
	for _, comp := range c.components {
		prefix := prefixOf(comp) + "_"
		for _, name := range metricTokens(line, prefix) {
			c.checked++
			if !c.hasMetric(comp, name) {
				c.errf("%s: metric %s is not registered by the %s", at, name, comp)
			}
		}
		// A name from before the exalsius_ namespace may stand only next to its new name (the table
		// of renamed metrics).
		for _, old := range metricTokens(line, retiredPrefixOf(comp)+"_") {
			c.checked++
			if !slices.Contains(metricTokens(line, prefix), "exalsius_"+old) {
				c.errf("%s: %s is the old name of exalsius_%s", at, old, old)
			}
		}
	}
	if routeLine.MatchString(line) {
		c.checked++
	}
	if routeLine.MatchString(line) && wsNamespace.MatchString(line) && !strings.Contains(line, "wsr-") {
		c.errf("%s: routes live in the route namespace wsr-<name> on the regional cluster, not in ws-<name>", at)
	}
}

var metricWord = regexp.MustCompile(`[a-z_:][a-z0-9_:]*`)

// metricTokens returns the words of line that begin with a component's metric prefix.
func metricTokens(line, prefix string) []string {
	var out []string
	for _, w := range metricWord.FindAllString(line, -1) {
		if strings.HasPrefix(w, prefix) && len(w) > len(prefix) {
			out = append(out, w)
		}
	}
	return out
}

// hasMetric says whether comp registers name, also as a histogram's _bucket, _sum or _count series.
func (c *namesCheck) hasMetric(comp, name string) bool {
	if c.metrics[comp][name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && c.metrics[comp][base] {
			return true
		}
	}
	return false
}

// kindsIn returns the kinds a text names, by kind (Colony) or, with plurals, by resource (colonies).
func (c *namesCheck) kindsIn(text string, plurals bool) []string {
	var out []string
	for _, k := range c.kinds {
		re := regexp.MustCompile(`\b` + k.name + `\b`)
		if plurals {
			re = regexp.MustCompile(`\b` + k.plural + `\b`)
		}
		if re.MatchString(text) {
			out = append(out, k.name)
		}
	}
	return out
}

func (c *namesCheck) missing(named []string) []string {
	var out []string
	for _, k := range c.kinds {
		if !slices.Contains(named, k.name) {
			out = append(out, k.name)
		}
	}
	return out
}

func (c *namesCheck) kindNames() string {
	var out []string
	for _, k := range c.kinds {
		out = append(out, k.name)
	}
	return strings.Join(out, ", ")
}

func (c *namesCheck) isPhaseEnum(list []string) bool {
	got := slices.Sorted(slices.Values(list))
	for _, enum := range c.phases {
		if slices.Equal(got, slices.Sorted(slices.Values(enum))) {
			return true
		}
	}
	return false
}

func (c *namesCheck) phaseNames() string {
	var out []string
	for t, enum := range c.phases {
		out = append(out, t+": "+strings.Join(enum, ", "))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// section returns the lines of a Markdown document under the heading that starts with title, up to
// the next heading of the same or a higher level.
func section(doc, title string) []string {
	var out []string
	level := 0
	for _, line := range strings.Split(doc, "\n") {
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		isHeading := hashes > 0 && strings.HasPrefix(line[hashes:], " ")
		if level > 0 {
			if isHeading && hashes <= level {
				break
			}
			out = append(out, line)
			continue
		}
		if isHeading && strings.HasPrefix(strings.TrimSpace(line[hashes:]), title) {
			level = hashes
		}
	}
	return out
}

// metricTables checks that each component's table in docs/operations.md lists exactly its metrics.
func (c *namesCheck) metricTables() {
	data, err := os.ReadFile(filepath.Join(c.root, operationsDoc))
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	for _, comp := range c.components {
		if len(c.metrics[comp]) == 0 {
			continue // the webhook's metrics are controller-runtime's
		}
		prefix := prefixOf(comp) + "_"
		lines := section(string(data), comp+" (`"+prefix+"`)")
		if len(lines) == 0 {
			c.errf("%s: no section \"### %s (`%s`)\" with its metrics", operationsDoc, comp, prefix)
			continue
		}
		listed := map[string]bool{}
		for _, line := range lines {
			if !strings.HasPrefix(line, "| `") {
				continue
			}
			first := strings.SplitN(line[1:], "|", 2)[0]
			for _, name := range metricTokens(first, prefix) {
				listed[name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.metrics[comp])) {
			c.checked++
			if !listed[name] {
				c.errf("%s: the %s table does not list %s, which the code registers", operationsDoc, comp, name)
			}
		}
	}
}

// flagTables checks the flag table of docs/operations.md against the flags each component registers,
// and that every registered flag is documented.
func (c *namesCheck) flagTables() {
	ops, err := os.ReadFile(filepath.Join(c.root, operationsDoc))
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	runtime, err := os.ReadFile(filepath.Join(c.root, runtimeDoc))
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	webhook, err := os.ReadFile(filepath.Join(c.root, webhookDoc))
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	table := section(string(ops), "Flags")
	documented := map[string]map[string]bool{}
	for _, line := range table {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !slices.Contains(c.components, strings.TrimSpace(cells[1])) {
			continue
		}
		comp := strings.TrimSpace(cells[1])
		if documented[comp] == nil {
			documented[comp] = map[string]bool{}
		}
		for _, m := range flagToken.FindAllStringSubmatch(cells[2], -1) {
			c.checked++
			documented[comp][m[1]] = true
			if !c.flags[comp][m[1]] && !c.flags[sharedModule][m[1]] {
				c.errf("%s: the flag table says the %s has --%s, but it registers no such flag", operationsDoc, comp, m[1])
			}
		}
	}
	inDoc := func(doc []byte, flag string) bool {
		return regexp.MustCompile("`--" + regexp.QuoteMeta(flag) + "[`= ]").Match(doc)
	}
	for _, comp := range c.components {
		for _, f := range slices.Sorted(maps.Keys(c.flags[comp])) {
			c.checked++
			if c.flags[sharedModule][f] {
				continue // a shared flag the component's options see too
			}
			if !documented[comp][f] && (comp != "webhook" || !inDoc(webhook, f)) {
				c.errf("%s: the %s registers --%s, which the flag table does not list", operationsDoc, comp, f)
			}
		}
	}
	for _, f := range slices.Sorted(maps.Keys(c.flags[sharedModule])) {
		c.checked++
		if !inDoc(runtime, f) {
			c.errf("%s: the shared flag --%s (common) is not documented", runtimeDoc, f)
		}
	}
}
