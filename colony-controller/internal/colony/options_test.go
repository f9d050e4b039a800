package colony

import (
	"flag"
	"strings"
	"testing"
)

// TestOptionsFlags: the flags keep the names and defaults the chart and the docs use, and the
// defaults are valid; an invalid option is reported with its flag or field name.
func TestOptionsFlags(t *testing.T) {
	want := map[string]string{"max-concurrent-reconciles": "2", "api-endpoint-configmap": "false", "insecure-kubeconfig-tls": "false"}
	opts := DefaultOptions()
	fs := flag.NewFlagSet(Component, flag.ContinueOnError)
	opts.BindFlags(fs)
	got := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { got[f.Name] = f.DefValue })
	if len(got) != len(want) {
		t.Errorf("flags %v, want %v", got, want)
	}
	for name, def := range want {
		if got[name] != def {
			t.Errorf("flag --%s: default %q, want %q", name, got[name], def)
		}
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	if err := fs.Parse([]string{"--api-endpoint-configmap", "--max-concurrent-reconciles=3"}); err != nil {
		t.Fatal(err)
	}
	if !opts.APIEndpointConfigMap || opts.MaxConcurrentReconciles != 3 {
		t.Errorf("parsed options %+v", opts)
	}
	o := DefaultOptions()
	o.MaxConcurrentReconciles = 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--max-concurrent-reconciles") {
		t.Errorf("error %v, want one naming --max-concurrent-reconciles", err)
	}
	o = DefaultOptions()
	o.RetryRefused = 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "RetryRefused") {
		t.Errorf("error %v, want one naming RetryRefused", err)
	}
}
