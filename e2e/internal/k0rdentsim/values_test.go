package k0rdentsim

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMergeValues(t *testing.T) {
	data := templateData{Cluster: clusterObject("team", "gpu-1")}
	for _, tc := range []struct {
		name, values string
		docs         []valuesDoc
		want, err    string
	}{
		{name: "empty", want: `{}`},
		{name: "inline values are rendered with the Cluster", values: "cluster: '{{ .Cluster.metadata.name }}'\nns: {{ .Cluster.metadata.namespace | upper }}",
			want: `{"cluster":"gpu-1","ns":"TEAM"}`},
		{name: "sprig functions", values: `x: {{ "a,b" | splitList "," | len }}`, want: `{"x":2}`},
		{name: "escaped delimiters arrive verbatim", values: `x: '{{ "{{ .Release.Name }}" }}'`, want: `{"x":"{{ .Release.Name }}"}`},
		{name: "a missing key is an error", values: `x: {{ .Cluster.nothing.here }}`, err: "values:"},
		{name: "bad template syntax names the field", values: `x: {{ .Cluster`, err: "values:"},
		{name: "valuesFrom overrides values key by key", values: "a: {b: 1, c: 2}\nd: 3",
			docs: []valuesDoc{{Where: "cm", Text: "a: {b: 10}"}}, want: `{"a":{"b":10,"c":2},"d":3}`},
		{name: "valuesFrom without the annotation is not rendered", docs: []valuesDoc{{Where: "cm", Text: `p: "{{ .Cluster.metadata.name }}"`}},
			want: `{"p":"{{ .Cluster.metadata.name }}"}`},
		{name: "rendered valuesFrom come after the plain ones", docs: []valuesDoc{
			{Where: "tmpl", Text: `p: '{{ .Cluster.metadata.name }}'`, Render: true},
			{Where: "plain", Text: `p: plain`},
		}, want: `{"p":"gpu-1"}`},
		{name: "a bad valuesFrom document names its source", docs: []valuesDoc{{Where: "valuesFrom[0] Secret s key k", Text: "[1"}}, err: "valuesFrom[0] Secret s key k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeValues("n", tc.values, tc.docs, data)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want prefix %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if string(b) != tc.want {
				t.Fatalf("got %s, want %s", b, tc.want)
			}
		})
	}
}
