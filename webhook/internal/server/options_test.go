package server_test

import (
	"flag"
	"testing"

	"github.com/exalsius/exalsius-operator/webhook/internal/server"
)

// TestOptionsFlags: the webhook's flags keep the names the chart and docs/WEBHOOK.md use, with their
// documented defaults, and the defaults are valid.
func TestOptionsFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	want := map[string]string{
		"host": "", "port": "9443", "cert-dir": "/tmp/k8s-webhook-server/serving-certs", "cert-mode": "self", "workspace-controller-user": "",
		"cert-secret-name": "", "service-name": "exalsius-operator-webhook", "service-namespace": "exalsius-system",
		"webhook-config-name": "exalsius-operator-webhook", "cert-extra-dns-names": "", "cert-ip-addresses": "",
		"ca-bundle-file": "", "ca-validity": "", "cert-validity": "", "cert-check-interval": "",
		"ca-injection-grace": "", "max-replicas": "64",
	}
	opts := server.DefaultOptions()
	fs := flag.NewFlagSet(server.Component, flag.ContinueOnError)
	opts.BindFlags(fs)
	got := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { got[f.Name] = f.DefValue })
	if len(got) != len(want) {
		t.Errorf("flags %v, want the names of %v", got, want)
	}
	for name, def := range want {
		d, ok := got[name]
		if !ok {
			t.Errorf("flag --%s is missing", name)
			continue
		}
		// An empty want checks the name only (the default comes from another package's constant).
		if def != "" && d != def {
			t.Errorf("flag --%s: default %q, want %q", name, d, def)
		}
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
}
