package k0rdentsim

import (
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func js(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func TestParseHelmOptions(t *testing.T) {
	for _, tc := range []struct {
		raw          *apiextensionsv1.JSON
		wait, atomic bool
		timeout      time.Duration
		err          string
	}{
		{raw: nil, wait: true, atomic: true, timeout: 5 * time.Minute},
		// KCM v1.11.3 and later: atomic (so wait) unless atomic is false, with or without other options.
		{raw: js(`{"wait":true,"timeout":"30s"}`), wait: true, atomic: true, timeout: 30 * time.Second},
		{raw: js(`{"timeout":"30s"}`), wait: true, atomic: true, timeout: 30 * time.Second},
		{raw: js(`{"atomic":true}`), wait: true, atomic: true, timeout: 5 * time.Minute},
		{raw: js(`{}`), wait: true, atomic: true, timeout: 5 * time.Minute},
		{raw: js(`{"atomic":false}`), timeout: 5 * time.Minute},
		{raw: js(`{"atomic":false,"wait":false,"waitForJobs":false}`), timeout: 5 * time.Minute},
		{raw: js(`{"atomic":false,"wait":true}`), wait: true, timeout: 5 * time.Minute},
		{raw: js(`{"timeout":"soon"}`), err: "helmOptions.timeout"},
		{raw: js(`{"timeout":"-1s"}`), err: "helmOptions.timeout"},
		{raw: js(`[]`), err: "helmOptions"},
	} {
		o, err := parseHelmOptions(tc.raw)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %s", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || o.Wait != tc.wait || o.Atomic != tc.atomic || o.Timeout != tc.timeout {
			t.Errorf("%v: %+v %v", tc.raw, o, err)
		}
	}
}

func TestMergeHelmOptions(t *testing.T) {
	got := mergeHelmOptions(js(`{"wait":true,"timeout":"1m"}`), js(`{"timeout":"2m"}`))
	o, err := parseHelmOptions(got)
	if err != nil || !o.Wait || o.Timeout != 2*time.Minute {
		t.Fatalf("merged %s: %+v %v", got.Raw, o, err)
	}
	if mergeHelmOptions(nil, js(`{"a":1}`)).Raw[2] != 'a' || mergeHelmOptions(js(`{"b":1}`), nil).Raw[2] != 'b' {
		t.Fatal("one side missing must return the other")
	}
}

func TestUpToDate(t *testing.T) {
	chrt := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1.0.0"}}
	rel := &release.Release{Info: &release.Info{Status: release.StatusDeployed}, Chart: chrt, Config: map[string]interface{}{"a": 1.0}}
	if !upToDate(rel, chrt, map[string]interface{}{"a": 1}) {
		t.Error("same values must be up to date")
	}
	if upToDate(rel, chrt, map[string]interface{}{"a": 2}) {
		t.Error("changed values must not be up to date")
	}
	if upToDate(rel, &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1.0.1"}}, map[string]interface{}{"a": 1}) {
		t.Error("a new chart version must not be up to date")
	}
	failed := *rel
	failed.Info = &release.Info{Status: release.StatusFailed}
	if upToDate(&failed, chrt, map[string]interface{}{"a": 1}) {
		t.Error("a failed release must not be up to date")
	}
	empty := &release.Release{Info: &release.Info{Status: release.StatusDeployed}, Chart: chrt}
	if !upToDate(empty, chrt, map[string]interface{}{}) || upToDate(nil, chrt, nil) {
		t.Error("nil and empty values are alike; no release is never up to date")
	}
}

func TestLoadChart(t *testing.T) {
	dir := "../../../examples/charts"
	ok := ServiceTemplate("ns", "nb", "jupyter-notebook", "0.3.0")
	chrt, err := loadChart(dir, ok)
	if err != nil || chrt.Metadata.Version != "0.3.0" {
		t.Fatalf("notebook chart: %v", err)
	}
	for name, tmpl := range map[string]*k0rdentv1beta1.ServiceTemplate{
		"wrong version": ServiceTemplate("ns", "nb", "jupyter-notebook", "9.9.9"),
		"missing chart": ServiceTemplate("ns", "nb", "no-such-chart", ""),
		"path escape":   ServiceTemplate("ns", "nb", "../charts", ""),
		"no helm":       {},
	} {
		if _, err := loadChart(dir, tmpl); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	annotated := ServiceTemplate("ns", "x", "ignored", "")
	annotated.Annotations = map[string]string{ChartAnnotation: "broken"}
	if n, _ := chartName(annotated); n != "broken" {
		t.Errorf("annotation not honoured: %s", n)
	}
}
