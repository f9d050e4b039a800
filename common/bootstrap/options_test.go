package bootstrap

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions("workspace-controller")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

func TestFlagDefaults(t *testing.T) {
	o := parse(t)
	checks := map[string][2]any{
		"metrics-bind-address":      {o.MetricsBindAddress, ":8443"},
		"metrics-secure":            {o.MetricsSecure, true},
		"enable-http2":              {o.EnableHTTP2, false},
		"health-probe-bind-address": {o.HealthProbeBindAddress, ":8081"},
		"leader-elect":              {o.LeaderElect, true},
		"leader-election-namespace": {o.LeaderElectionNamespace, ""},
		"watch-namespace":           {o.WatchNamespace, ""},
		"log-format":                {o.LogFormat, ""},
		"log-level":                 {o.LogLevel, "info"},
		"development":               {o.Development, false},
		"graceful-shutdown-timeout": {o.GracefulShutdownTimeout, 25 * time.Second},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("--%s default = %v, want %v", name, c[0], c[1])
		}
	}
	if got := o.LeaderElectionID(); got != "workspace-controller.exalsius.ai" {
		t.Errorf("LeaderElectionID = %q", got)
	}
	if o.WatchNamespaces() != nil {
		t.Errorf("empty watch namespace must mean all namespaces")
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestFlagsParse(t *testing.T) {
	o := parse(t, "--metrics-bind-address=0", "--metrics-secure=false", "--health-probe-bind-address=:9000",
		"--leader-elect=false", "--leader-election-namespace=exalsius-system", "--watch-namespace= team-a, team-b ,",
		"--log-format=console", "--log-level=debug", "--development", "--graceful-shutdown-timeout=5s",
		"--kube-api-qps=10", "--kube-api-burst=20", "--metrics-cert-dir=/certs", "--enable-http2")
	if o.MetricsBindAddress != "0" || o.MetricsSecure || o.HealthProbeBindAddress != ":9000" || o.LeaderElect ||
		o.LeaderElectionNamespace != "exalsius-system" || o.LogFormat != "console" || o.LogLevel != "debug" ||
		!o.Development || o.GracefulShutdownTimeout != 5*time.Second || o.KubeAPIQPS != 10 || o.KubeAPIBurst != 20 ||
		o.MetricsCertDir != "/certs" || !o.EnableHTTP2 {
		t.Errorf("flags not applied: %+v", o)
	}
	if got := strings.Join(o.WatchNamespaces(), ","); got != "team-a,team-b" {
		t.Errorf("WatchNamespaces = %q", got)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	cases := map[string]func(*Options){
		"--watch-namespace":           func(o *Options) { o.WatchNamespace = "ok,Not_Valid" },
		"--leader-election-namespace": func(o *Options) { o.LeaderElectionNamespace = "UPPER" },
		"--log-format":                func(o *Options) { o.LogFormat = "xml" },
		"--log-level":                 func(o *Options) { o.LogLevel = "loud" },
		"--graceful-shutdown-timeout": func(o *Options) { o.GracefulShutdownTimeout = -time.Second },
		"--kube-api-qps":              func(o *Options) { o.KubeAPIQPS = 0 },
		"--kube-api-burst":            func(o *Options) { o.KubeAPIBurst = -1 },
		"component":                   func(o *Options) { o.Component = "Bad Component" },
	}
	for flagName, mutate := range cases {
		o := NewOptions("webhook")
		mutate(o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), flagName) {
			t.Errorf("%s: error %v does not name the flag", flagName, err)
		}
	}
}

func TestLoggerJSONByDefault(t *testing.T) {
	var buf bytes.Buffer
	o := NewOptions("colony-controller")
	o.LogWriter = &buf
	log, err := NewLogger(o)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", "colony", "demo")
	log.V(1).Info("hidden at info level")
	var entry map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &entry); err != nil {
		t.Fatalf("production log line is not one JSON object: %v\n%s", err, buf.String())
	}
	if entry["logger"] != "colony-controller" || entry["msg"] != "hello" || entry["colony"] != "demo" || entry["level"] != "info" {
		t.Errorf("unexpected entry %v", entry)
	}
	if _, ok := entry["ts"]; !ok {
		t.Errorf("no timestamp in %v", entry)
	}
}

func TestLoggerConsoleInDevelopment(t *testing.T) {
	var buf bytes.Buffer
	o := NewOptions("webhook")
	o.Development = true
	o.LogLevel = "debug"
	o.LogWriter = &buf
	log, err := NewLogger(o)
	if err != nil {
		t.Fatal(err)
	}
	log.V(1).Info("debug line", "k", "v")
	out := buf.String()
	if strings.HasPrefix(strings.TrimSpace(out), "{") || !strings.Contains(out, "DEBUG") || !strings.Contains(out, "webhook") ||
		!strings.Contains(out, "debug line") {
		t.Errorf("development output is not console format at debug level: %q", out)
	}
	// An explicit --log-format wins over --development.
	buf.Reset()
	o.LogFormat = LogFormatJSON
	log, _ = NewLogger(o)
	log.Info("x")
	if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
		t.Errorf("--log-format=json ignored in development: %q", buf.String())
	}
}

func TestLoggerLevels(t *testing.T) {
	for _, c := range []struct {
		level      string
		v2, errors bool
	}{{"error", false, true}, {"2", true, true}, {"info", false, true}} {
		var buf bytes.Buffer
		o := NewOptions("webhook")
		o.LogLevel = c.level
		o.LogWriter = &buf
		log, err := NewLogger(o)
		if err != nil {
			t.Fatal(err)
		}
		log.V(2).Info("verbose")
		log.Info("info")
		got := buf.String()
		if strings.Contains(got, "verbose") != c.v2 {
			t.Errorf("level %s: V(2) shown = %v", c.level, !c.v2)
		}
		if c.level == "error" && strings.Contains(got, `"info"`) {
			t.Errorf("level error shows info lines: %s", got)
		}
	}
	if _, err := NewLogger(&Options{Component: "x", LogLevel: "-3"}); err == nil {
		t.Errorf("negative verbosity accepted")
	}
}

func TestMetricsNames(t *testing.T) {
	if got := MetricsPrefix("workspace-controller"); got != "exalsius_workspace_controller" {
		t.Errorf("MetricsPrefix = %q", got)
	}
	if got := MetricName("inventory-collector", "gpus_total"); got != "exalsius_inventory_collector_gpus_total" {
		t.Errorf("MetricName = %q", got)
	}
}
