// Package docscheck checks the repository's documentation: every relative link in a Markdown file
// resolves to a file or folder of the repository (and, with a #fragment into a Markdown file, to one
// of its headings), and every manifest under examples/ parses strictly into the API types. `make
// verify` runs it through cmd/docscheck; whether the API server accepts the examples is tested by
// webhook/internal/server/examples_test.go.
package docscheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Report counts what was checked.
type Report struct {
	Files, Links, Examples int
}

// skipDirs are folders that hold no documentation of the repository.
var skipDirs = map[string]bool{".git": true, "node_modules": true, "dist": true, "vendor": true}

// Links checks every Markdown file under root and returns one error per broken link.
func Links(root string) (Report, []error) {
	var rep Report
	var errs []error
	headings := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] || (strings.HasPrefix(d.Name(), ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rep.Files++
		rel, _ := filepath.Rel(root, path)
		for _, l := range ExtractLinks(string(data)) {
			rep.Links++
			if e := check(root, path, l, headings); e != "" {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: %s", filepath.ToSlash(rel), l.Line, l.Target, e))
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return rep, errs
}

// Link is one link of a Markdown file.
type Link struct {
	Target string
	Line   int
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// ExtractLinks returns the link targets of a Markdown text, outside fenced code blocks and code spans.
func ExtractLinks(md string) []Link {
	var out []Link
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Target: m[1], Line: i + 1})
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Target: m[1], Line: i + 1})
		}
	}
	return out
}

// external reports whether a link leaves the repository (a URL with a scheme, or a protocol-relative one).
func external(target string) bool {
	if strings.HasPrefix(target, "//") {
		return true
	}
	u, err := url.Parse(target)
	return err == nil && u.Scheme != ""
}

// check returns why a link does not resolve, or "".
func check(root, from string, l Link, headings map[string]map[string]bool) string {
	if external(l.Target) {
		return ""
	}
	target, frag, _ := strings.Cut(l.Target, "#")
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	var path string
	switch {
	case target == "":
		path = from
	case strings.HasPrefix(target, "/"):
		return "absolute paths do not resolve on every host: use a path relative to the file"
	default:
		t, err := url.PathUnescape(target)
		if err != nil {
			return err.Error()
		}
		path = filepath.Join(filepath.Dir(from), filepath.FromSlash(t))
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "points outside the repository"
	}
	st, err := os.Stat(path)
	if err != nil {
		return "no such file or folder"
	}
	if frag == "" || st.IsDir() || !strings.HasSuffix(path, ".md") {
		return ""
	}
	hs, ok := headings[path]
	if !ok {
		data, err := os.ReadFile(path)
		if err != nil {
			return err.Error()
		}
		hs = Anchors(string(data))
		headings[path] = hs
	}
	if !hs[strings.ToLower(frag)] {
		return "no heading has the anchor #" + frag
	}
	return ""
}

var htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)

// Anchors returns the anchors of a Markdown text's headings as GitHub renders them (lower case,
// punctuation dropped, spaces as hyphens, repeats numbered -1, -2, ...), and explicit <a id> anchors.
func Anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[strings.ToLower(m[1])] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		s := Slug(text)
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			s = fmt.Sprintf("%s-%d", s, n+1)
		} else {
			seen[s] = 0
		}
		out[s] = true
	}
	return out
}

var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// Slug is GitHub's anchor of a heading text.
func Slug(heading string) string {
	h := strings.TrimSpace(heading)
	h = mdLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Examples parses every manifest under dir (skipping the charts and gitops folders) strictly: each YAML document
// needs apiVersion, kind and metadata.name, and a kind the scheme knows must decode into its Go type
// without unknown fields. It also checks that dir/README.md names every example folder.
func Examples(dir string, scheme *runtime.Scheme) (int, []error) {
	var errs []error
	n := 0
	var folders []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "charts" {
				return filepath.SkipDir
			}
			if d.Name() == "gitops" && filepath.Dir(path) == filepath.Clean(dir) {
				// Flux's and Argo CD's objects, not the operator's: e2e/gitops checks them.
				folders = append(folders, d.Name())
				return filepath.SkipDir
			}
			if path != dir {
				folders = append(folders, d.Name())
			}
			return nil
		}
		if !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") {
			return nil
		}
		objs, e := parseManifests(path, scheme)
		n += objs
		errs = append(errs, e...)
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, f := range folders {
		if !bytes.Contains(readme, []byte("("+f+"/)")) {
			errs = append(errs, fmt.Errorf("%s/README.md does not link the example folder %s/", filepath.Base(dir), f))
		}
	}
	return n, errs
}

func parseManifests(path string, scheme *runtime.Scheme) (int, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, []error{err}
	}
	var errs []error
	n := 0
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, append(errs, fmt.Errorf("%s: %w", path, err))
		}
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
			continue
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
			continue
		}
		if u.GetName() == "" {
			errs = append(errs, fmt.Errorf("%s: document %d: metadata.name is missing", path, doc))
			continue
		}
		n++
		gvk := u.GroupVersionKind()
		if !scheme.Recognizes(gvk) {
			errs = append(errs, fmt.Errorf("%s: %s %s: unknown kind", path, gvk, u.GetName()))
			continue
		}
		obj, _ := scheme.New(gvk)
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %s: %w", path, gvk.Kind, u.GetName(), err))
		}
	}
	return n, errs
}

// SortErrors orders errors by message, for stable output.
func SortErrors(errs []error) {
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
}
