package workspace

import (
	"flag"
	"strings"
	"testing"
)

// TestOptionsFlags: the flags keep the names and defaults the chart and the docs use, and parsing
// them fills the options.
func TestOptionsFlags(t *testing.T) {
	want := map[string]string{
		"max-concurrent-reconciles":  "16",
		"child-api-qps":              "500",
		"child-api-burst":            "1000",
		"prerequisite-grace-period":  "10m0s",
		"unreachable-delete-timeout": "10m0s",
		"gateway-name":               "tenant-gateway",
		"gateway-namespace":          "istio-ingress",
		"default-regional-cluster":   "",
		"routing-retry":              "15s",
		"routing-resync":             "5m0s",
		"route-sweep-interval":       "10m0s",
		"child-idle-timeout":         "0s",
		"insecure-kubeconfig-tls":    "false",
		"release-ingress-namespaces": "istio-system",
		// This product's default is today's behaviour; the upstream operator's was ambient with waypoints.
		"workspace-mesh-mode":          "none",
		"workspace-waypoint-enabled":   "false",
		"workspace-waypoint-namespace": "istio-system",
	}
	opts := DefaultOptions()
	fs := flag.NewFlagSet("workspace-controller", flag.ContinueOnError)
	opts.BindFlags(fs)
	got := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { got[f.Name] = f.DefValue })
	for name, def := range want {
		if d, ok := got[name]; !ok || d != def {
			t.Errorf("flag --%s: default %q (present %v), want %q", name, d, ok, def)
		}
	}
	if len(got) != len(want) {
		t.Errorf("flags %v, want exactly %v", got, want)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	if err := fs.Parse([]string{"--gateway-name=gw", "--routing-retry=3s", "--default-regional-cluster=kof/regional",
		"--release-ingress-namespaces=istio-system, linkerd"}); err != nil {
		t.Fatal(err)
	}
	if opts.GatewayName != "gw" || opts.RoutingRetry.String() != "3s" || opts.DefaultRegionalCluster != "kof/regional" ||
		strings.Join(opts.ReleaseIngressNamespaces, ",") != "istio-system,linkerd" {
		t.Errorf("parsed options %+v", opts)
	}
	if err := fs.Parse([]string{"--workspace-mesh-mode=ambient", "--workspace-waypoint-enabled"}); err != nil {
		t.Fatal(err)
	}
	if m, err := opts.Mesh(); err != nil || m.Mode != "waypoint" || m.WaypointNamespace != "istio-system" {
		t.Errorf("ambient with the upstream waypoint switch: %+v, %v; want waypoint in istio-system", m, err)
	}
	if err := fs.Parse([]string{"--release-ingress-namespaces=Not_A_Namespace"}); err == nil || !strings.Contains(err.Error(), "release-ingress-namespaces") {
		t.Errorf("an invalid namespace: %v", err)
	}
}

// TestOptionsValidateNamesTheFlag: each invalid option is reported with its flag or field name.
func TestOptionsValidateNamesTheFlag(t *testing.T) {
	for name, c := range map[string]struct {
		set  func(*Options)
		want string
	}{
		"workers":         {func(o *Options) { o.MaxConcurrentReconciles = 0 }, "--max-concurrent-reconciles"},
		"qps":             {func(o *Options) { o.ChildAPIQPS = 0 }, "--child-api-qps"},
		"delete timeout":  {func(o *Options) { o.UnreachableDeleteTimeout = -1 }, "--unreachable-delete-timeout"},
		"regional":        {func(o *Options) { o.DefaultRegionalCluster = "a/b/c" }, "--default-regional-cluster"},
		"gateway":         {func(o *Options) { o.GatewayName = "" }, "--gateway-name"},
		"sweep":           {func(o *Options) { o.RouteSweepInterval = 0 }, "--route-sweep-interval"},
		"grace":           {func(o *Options) { o.PrerequisiteGracePeriod = -1 }, "--prerequisite-grace-period"},
		"idle":            {func(o *Options) { o.ChildIdleTimeout = -1 }, "--child-idle-timeout"},
		"mesh mode":       {func(o *Options) { o.MeshMode = "linkerd" }, "--workspace-mesh-mode"},
		"waypoint switch": {func(o *Options) { o.WaypointEnabled = true }, "--workspace-waypoint-enabled"},
		"waypoint ns":     {func(o *Options) { o.MeshMode, o.WaypointNamespace = "waypoint", "" }, "--workspace-waypoint-namespace"},
		"rollout settle":  {func(o *Options) { o.RolloutSettle = 0 }, "RolloutSettle"},
		"unreachable":     {func(o *Options) { o.UnreachableRetry = 0 }, "UnreachableRetry"},
		"request timeout": {func(o *Options) { o.ChildRequestTimeout = 0 }, "ChildRequestTimeout"},
		"waiting retry":   {func(o *Options) { o.WaitingRetry = 0 }, "WaitingRetry"},
		"unschedulable":   {func(o *Options) { o.UnschedulableAfter = 0 }, "UnschedulableAfter"},
		"cluster gone":    {func(o *Options) { o.ClusterGoneGrace = 0 }, "ClusterGoneGrace"},
		"deploying":       {func(o *Options) { o.DeployingRecheck = 0 }, "DeployingRecheck"},
	} {
		o := DefaultOptions()
		c.set(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", name, err, c.want)
		}
	}
}
