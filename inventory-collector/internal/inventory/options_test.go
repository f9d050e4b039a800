package inventory

import (
	"flag"
	"strings"
	"testing"
)

// TestOptionsFlags: the flags keep the names and defaults the chart and the docs use, and the
// defaults are valid; an invalid option is reported with its flag name.
func TestOptionsFlags(t *testing.T) {
	want := map[string]string{
		"shard-index": "-1", "shard-count": "1", "max-concurrent-reconciles": "4", "max-concurrent-connects": "8",
		"child-sync-timeout": "30s", "child-health-interval": "15s", "debounce": "2s",
		"child-api-qps": "20", "child-api-burst": "40", "contact-refresh": "10m0s",
		"insecure-kubeconfig-tls": "false",
	}
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
	if err := fs.Parse([]string{"--shard-count=3", "--shard-index=2"}); err != nil {
		t.Fatal(err)
	}
	shard, err := opts.Shard()
	if err != nil || shard.Index != 2 || shard.Count != 3 {
		t.Errorf("shard %+v, %v; want 2 of 3", shard, err)
	}
	for flagName, set := range map[string]func(*Options){
		"--shard-count":               func(o *Options) { o.ShardCount = 0 },
		"--max-concurrent-reconciles": func(o *Options) { o.MaxConcurrentReconciles = 0 },
		"--contact-refresh":           func(o *Options) { o.ContactRefresh = 0 },
	} {
		o := DefaultOptions()
		set(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), flagName) {
			t.Errorf("error %v, want one naming %s", err, flagName)
		}
	}
}
