package bootstrap

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// TestFlagsSetTheClientRateLimit: --kube-api-qps and --kube-api-burst bound the client made from a
// kubeconfig (controller-runtime's loader turns the client-side limiter off, and the flags used to be
// ignored then); a configuration handed in keeps the limit it sets.
func TestFlagsSetTheClientRateLimit(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	opts := NewOptions("test-component")
	opts.KubeAPIQPS, opts.KubeAPIBurst = 123, 456
	cfg, err := restConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 123 || cfg.Burst != 456 {
		t.Fatalf("the client from the kubeconfig has QPS %v and burst %d, want the flags' 123 and 456", cfg.QPS, cfg.Burst)
	}

	opts.RestConfig = &rest.Config{Host: "https://127.0.0.1:6443", QPS: 7, Burst: 9}
	if cfg, err = restConfig(opts); err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 7 || cfg.Burst != 9 {
		t.Fatalf("a configuration handed in with QPS 7 and burst 9 got %v and %d", cfg.QPS, cfg.Burst)
	}
	opts.RestConfig = &rest.Config{Host: "https://127.0.0.1:6443"}
	if cfg, err = restConfig(opts); err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 123 || cfg.Burst != 456 {
		t.Fatalf("a configuration handed in without a limit got QPS %v and burst %d, want the flags'", cfg.QPS, cfg.Burst)
	}
}
