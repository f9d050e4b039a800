package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// The markers around the section `make bench` owns in docs/benchmarks.md; other suites own theirs.
const (
	beginMarker = "<!-- BEGIN admission benchmark (written by make bench) -->"
	endMarker   = "<!-- END admission benchmark -->"
)

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func (r result) line() string {
	return fmt.Sprintf("%-26s p50 %-8s p99 %-8s max %-8s %6.1f/s  writes/ws %.2f (events %.2f)  reconciles/ws %.2f %v  RSS %.0f MiB (peak %.0f)  CPU %.1f s  log errors %d",
		r.scenario, ms(r.p50), ms(r.p99), ms(r.max), r.throughput, r.mgmtWrites, r.events, r.reconciles, r.reconcileResults, r.rssMiB, r.peakMiB, r.cpuSeconds, r.logErrors)
}

// perVerb renders requests per workspace by verb, e.g. "GET 1.0, PATCH 2.0".
func perVerb(r requests, n int) string {
	v := r.byVerb()
	keys := make([]string, 0, len(v))
	for k := range v {
		if v[k] != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, v[k]/float64(n)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// writesByResource renders the controller's management writes per workspace by resource and verb.
func writesByResource(r requests, n int) string {
	keys := make([]string, 0, len(r))
	for k, v := range r {
		_, verb, _ := strings.Cut(k, " ")
		if writeVerbs[verb] && v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, r[k]/float64(n)))
	}
	return strings.Join(parts, ", ")
}

func idle(r result) string {
	if r.idleWritesPerMinute < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", r.idleWritesPerMinute)
}

func gpuCheck(r result) string {
	if r.class != "gpu" {
		return "—"
	}
	return fmt.Sprintf("%d over / %d unadmitted", r.doubleBooked, r.notAdmitted)
}

// renderTable is the Markdown table of the results: absolute figures, then the same figures as ratios
// to the API server's own create rate (throughput as a share of the 8-client rate; latencies in units
// of one single-client create, 1/rate1).
func renderTable(results []result, base rates) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| class | clusters | N | p50 | p90 | p99 | max | workspaces/s (creates/s) | mgmt writes/ws | Events/ws | reconciles/ws | idle writes/min | RSS MiB (peak) | CPU s | GPUs over capacity |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %.1f (%.0f) | %.2f | %.2f | %.2f | %s | %.0f (%.0f) | %.1f | %s |\n",
			r.class, r.clusters, r.n, ms(r.p50), ms(r.p90), ms(r.p99), ms(r.max), r.throughput, r.createRate, r.mgmtWrites, r.events,
			r.reconciles, idle(r), r.rssMiB, r.peakMiB, r.cpuSeconds, gpuCheck(r))
	}
	fmt.Fprintf(&b, "\nAs ratios to the API server's own ConfigMap create rate in the same run (%.0f/s from 1 client, %.0f/s from 8): "+
		"throughput as a share of the 8-client rate, latencies in single-client creates (1 create = %.2f ms), CPU in ms per workspace.\n\n",
		base.one, base.eight, 1000/base.one)
	fmt.Fprintf(&b, "| class | clusters | N | throughput / 8-client rate | p50 | p90 | p99 | max | CPU ms/ws | CPU ms/ws × rate1 |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		unit := func(d time.Duration) string { return fmt.Sprintf("%.0f", d.Seconds()*base.one) }
		cpuMs := r.cpuSeconds * 1000 / float64(r.n)
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f%% | %s | %s | %s | %s | %.2f | %.2f |\n", r.class, r.clusters, r.n,
			100*r.throughput/base.eight, unit(r.p50), unit(r.p90), unit(r.p99), unit(r.max), cpuMs, cpuMs*base.one/1000)
	}
	fmt.Fprintf(&b, "\nRequests per workspace by verb (management: the controller's, the bench's creates taken out; child: every request the children served):\n\n")
	fmt.Fprintf(&b, "| class | clusters | N | management | child | management writes by resource |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s |\n", r.class, r.clusters, r.n, perVerb(r.mgmt, r.n), perVerb(r.child, r.n), writesByResource(r.mgmt, r.n))
	}
	return b.String()
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)docs/benchmarks.md").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = ", load average at the start " + strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s%s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, load)
}

// writeDoc replaces the admission section of the doc (between the markers; appended when missing)
// and leaves every other section as it is.
func writeDoc(c config, results []result, base rates, table string, wall time.Duration) error {
	old, err := os.ReadFile(c.doc)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(beginMarker + "\n")
	b.WriteString("## Admission (`make bench`)\n\n")
	b.WriteString("`make bench` starts real API servers (one management server per scenario with the project's CRDs, or\n" +
		"k0rdent's real ones when `K0RDENT_CRDS` is set, and separate child servers with 8-GPU nodes), runs the built\n" +
		"workspace-controller binary as a separate process with its default flags, and creates N WorkspaceDeployments\n" +
		"back to back from one client, spread round-robin over the clusters; the CPU class asks no GPUs, the GPU class\n" +
		"1 GPU per workspace. Latency: the create returned → the workspace's ServiceSet seen on a watch. Throughput: N\n" +
		"over the time from the first create to the last ServiceSet (in brackets the bench's own creates per second,\n" +
		"which bound it). The controller runs with `--routing-retry=10m`: the bench has no regional cluster, and\n" +
		"routing's 15 s poll for the missing infrastructure is no part of an admission. Requests come from the API servers'\n" +
		"`apiserver_request_total` between the first create and the moment the controller stopped writing; reconciles\n" +
		"from `controller_runtime_reconcile_total`; RSS and CPU seconds from /proc of the controller process. Idle\n" +
		"writes are counted for 60 s after the largest N of each class and cluster count. GPUs over capacity: the\n" +
		"admitted GPUs per node (status.admission) above the node's GPUs at the end, and workspaces left without an\n" +
		"admission. Ratios to the API server's own create rate, measured in the same run, hold across machines.\n" +
		"When the creates per second in brackets are close to the workspaces per second, the bench's own\n" +
		"creates bound the throughput, not the controller: compare the latencies (each workspace's own wait) and the\n" +
		"controller's CPU per workspace instead.\n\n")
	crds := "the project's k0rdent mirror"
	if dir := os.Getenv("K0RDENT_CRDS"); dir != "" {
		crds = "k0rdent's real CRDs (K0RDENT_CRDS=" + filepath.Base(dir) + ")"
	}
	fmt.Fprintf(&b, "Last run: %s, commit %s, %s, machine: %s; wall time %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), gitCommit(), crds, machine(), wall.Round(time.Second))
	b.WriteString(table)
	b.WriteString(targets(results))
	if c.goBench != "" {
		if out, err := os.ReadFile(c.goBench); err == nil {
			var lines []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "ok") || strings.HasPrefix(l, "pkg:") {
					lines = append(lines, l)
				}
			}
			b.WriteString("\nThe modules' Go benchmarks in the same run (`go test -bench`), among them the inventory benchmark\n(node change → Colony status over 200 ClusterDeployments):\n\n```\n")
			b.WriteString(strings.Join(lines, "\n"))
			b.WriteString("\n```\n")
		}
	}
	b.WriteString(endMarker + "\n")
	doc := string(old)
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if i >= 0 && j > i {
		doc = doc[:i] + b.String() + strings.TrimPrefix(doc[j+len(endMarker):], "\n")
	} else {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + b.String()
	}
	return os.WriteFile(c.doc, []byte(doc), 0o644)
}

// targets checks the results against the targets of the admission work and says which are met.
func targets(results []result) string {
	find := func(class string, clusters, n int) *result {
		for i := range results {
			if results[i].class == class && results[i].clusters == clusters && results[i].n == n {
				return &results[i]
			}
		}
		return nil
	}
	var b strings.Builder
	b.WriteString("\nTargets (on this machine, in this run):\n\n| target | measured | met |\n|---|---|---|\n")
	row := func(target, measured string, ok bool) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", target, measured, map[bool]string{true: "yes", false: "**no**"}[ok])
	}
	if r := find("cpu", 1, 1000); r != nil {
		row("≥ 300 workspaces/s, CPU-only, N=1,000, 1 cluster", fmt.Sprintf("%.1f/s", r.throughput), r.throughput >= 300)
		row("p99 ≤ 3 s at N=1,000", ms(r.p99), r.p99 <= 3*time.Second)
	}
	if r := find("cpu", 1, 100); r != nil {
		row("p99 ≤ 500 ms at N=100", ms(r.p99), r.p99 <= 500*time.Millisecond)
	}
	if r := find("gpu", 20, 1000); r != nil {
		row("≥ 150 workspaces/s, GPU, N=1,000 over 20 clusters", fmt.Sprintf("%.1f/s", r.throughput), r.throughput >= 150)
	}
	over, unadmitted, maxWrites, maxRec, maxRSS, idleMax, classWrites := 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0
	for _, r := range results {
		over += r.doubleBooked
		unadmitted += r.notAdmitted
		if r.class == "cpu" {
			maxWrites = max(maxWrites, r.mgmt.writes(func(k string) bool {
				return apiServerOwn(k) || strings.HasPrefix(k, "workspaceclasses/status ")
			})/float64(r.n))
			classWrites = max(classWrites, r.mgmt["workspaceclasses/status PATCH"])
		}
		maxRec = max(maxRec, r.reconciles)
		if r.n >= 1000 {
			maxRSS = max(maxRSS, r.rssMiB)
		}
		idleMax = max(idleMax, r.idleWritesPerMinute)
	}
	row("no GPU double-booked (checked against node capacity)", fmt.Sprintf("%d nodes over capacity, %d workspaces unadmitted", over, unadmitted), over == 0 && unadmitted == 0)
	row("≤ 4 management writes per admitted CPU-only workspace, Events included", fmt.Sprintf(
		"at most %.2f, plus the class's status.inUseBy count: at most %.0f writes in a whole run", maxWrites, classWrites), maxWrites <= 4)
	row("zero idle writes", fmt.Sprintf("at most %.1f/min", idleMax), idleMax <= 0)
	row("RSS ≤ 100 MiB with 1,000 workspaces", fmt.Sprintf("at most %.0f MiB", maxRSS), maxRSS <= 100)
	row("≤ 3 reconciles per admitted workspace", fmt.Sprintf("at most %.2f", maxRec), maxRec <= 3)
	return b.String()
}
