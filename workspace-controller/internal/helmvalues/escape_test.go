package helmvalues

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"text/template"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// templateFuncs stand in for the Sprig functions Sveltos adds: an escaped text must not call any.
var templateFuncs = template.FuncMap{"upper": strings.ToUpper, "required": func(string, any) any { return nil }}

// render renders text as a Go template the way Sveltos renders Helm values: with functions, with
// data, and failing on missing keys.
func render(t testing.TB, text string) string {
	t.Helper()
	tmpl, err := template.New("values").Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		t.Fatalf("escaped text does not parse as a template: %v\n%q", err, text)
	}
	var buf bytes.Buffer
	data := map[string]any{"Cluster": map[string]any{"metadata": map[string]any{"name": "cd"}}}
	if err := tmpl.Execute(&buf, data); err != nil {
		t.Fatalf("escaped text does not render: %v\n%q", err, text)
	}
	return buf.String()
}

// exalsiusJSON is the _exalsius block as it reads back from YAML.
func exalsiusJSON(t testing.TB, res *workspacesv1.ResolvedResources) map[string]any {
	t.Helper()
	raw, err := json.Marshal(exalsiusBlock(res, nil))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEscapeTemplateRendersBack(t *testing.T) {
	for _, s := range []string{
		"", "plain", "{{ .Release.Name }}", "{{- trim -}}", "{{/* comment */}}", "{{{", "{{{{", "a{", "}}", "{{ upper \"x\" }}",
		"{{\"{{\"}}", "{", "x{{", "{{ end }}", "{{ define \"t\" }}{{ end }}", "{{ .Missing.Key }}", "pass{{word}}{{",
	} {
		if got := render(t, EscapeTemplate(s)); got != s {
			t.Errorf("render(escape(%q)) = %q", s, got)
		}
	}
}

// FuzzEscapeTemplate: rendering the escaped text gives back the text, for any text.
func FuzzEscapeTemplate(f *testing.F) {
	for _, s := range []string{"{{ .Values.x }}", "{{-", "-}}", "{{{", "a{{b}}c", "{{/*", "\x00{{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := render(t, EscapeTemplate(s)); got != s {
			t.Fatalf("render(escape(%q)) = %q", s, got)
		}
	})
}

// FuzzValuesRenderVerbatim: any string a user writes into values reaches the chart verbatim after
// Sveltos renders the values as a template, inline or from the values Secret.
func FuzzValuesRenderVerbatim(f *testing.F) {
	for _, s := range []string{"{{ .Release.Name }}", "p{{a}}ss", "{{- x -}}", "- {{", "'{{'", "\"{{\"", "{{\n}}"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, plain, secret string) {
		if plain == "auth" || plain == "greeting" || plain == "_exalsius" {
			t.Skip() // keys the test itself uses
		}
		if !utf8.ValidString(plain) || !utf8.ValidString(secret) {
			t.Skip() // values arrive as JSON, which holds only UTF-8
		}
		class := &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{UserFacingConfig: []workspacesv1.UserFacingConfig{
			{HelmValuePath: "auth.password", Type: workspacesv1.UserFacingConfigSecret},
		}}}
		vals, err := json.Marshal(map[string]any{"greeting": plain, plain: "key", "auth": map[string]any{"password": secret}})
		if err != nil {
			t.Skip() // not UTF-8 JSON
		}
		ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(string(vals))}}
		built, err := Build(Input{Class: class, Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1}})
		if err != nil {
			t.Fatal(err)
		}
		inline, sec := map[string]any{}, map[string]any{}
		if err := yaml.Unmarshal([]byte(render(t, built.Inline)), &inline); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(render(t, built.Secret)), &sec); err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		_ = json.Unmarshal(vals, &want)
		if inline["greeting"] != want["greeting"] || inline[plain] != "key" {
			t.Fatalf("inline values changed: %q -> %v", plain, inline)
		}
		if !reflect.DeepEqual(sec, map[string]any{"auth": want["auth"]}) {
			t.Fatalf("secret values changed: %v -> %v", want["auth"], sec)
		}
	})
}
