package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
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
	return fmt.Sprintf("%-38s p50 %-8s p99 %-8s max %-8s %6.1f/s (%.1f%% of the reference %.0f/s)  writes/ws %.2f (events %.2f)  reconciles/ws %.2f %v  RSS %.0f MiB (peak %.0f)  CPU %.1f s  idle: %s writes/min, CPU %s  log errors %d",
		r.scenario, ms(r.p50), ms(r.p99), ms(r.max), r.throughput, r.share(), r.ref.eight, r.mgmtWrites, r.events, r.reconciles, r.reconcileResults,
		r.rssMiB, r.peakMiB, r.cpuSeconds, idle(r), idleCPU(r), r.logErrors)
}

// share is the throughput as a percentage of the same server's 8-client ConfigMap create rate.
func (r result) share() float64 {
	if r.ref.eight <= 0 {
		return 0
	}
	return 100 * r.throughput / r.ref.eight
}

// idleCPU renders the controller's CPU seconds in the idle window and the share of one core.
func idleCPU(r result) string {
	if r.idleCPUSeconds < 0 || r.idle <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f s (%.1f%% of a core)", r.idleCPUSeconds, 100*r.idleCPUSeconds/r.idle.Seconds())
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
	if !gpuClass(r.class) {
		return "—"
	}
	return fmt.Sprintf("%d over / %d unadmitted", r.doubleBooked, r.notAdmitted)
}

// renderTable is the Markdown table of the results: absolute figures, then the same figures as ratios
// to the scenario's reference, its own API server's ConfigMap create rate measured before the
// controller started (throughput as a share of the 8-client rate; latencies in units of one
// single-client create, 1/rate1).
func renderTable(results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| class | clusters | N | creators | p50 | p90 | p99 | max | workspaces/s (creates/s) | reference 8 clients/s | share | mgmt writes/ws | Events/ws | reconciles/ws | idle writes/min | idle CPU | RSS MiB (peak) | CPU s | GPUs over capacity |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s | %s | %.1f (%.0f) | %.0f | %.1f%% | %.2f | %.2f | %.2f | %s | %s | %.0f (%.0f) | %.1f | %s |\n",
			r.class, r.clusters, r.n, r.creators, ms(r.p50), ms(r.p90), ms(r.p99), ms(r.max), r.throughput, r.createRate, r.ref.eight, r.share(),
			r.mgmtWrites, r.events, r.reconciles, idle(r), idleCPU(r), r.rssMiB, r.peakMiB, r.cpuSeconds, gpuCheck(r))
	}
	fmt.Fprintf(&b, "\nAs ratios to each scenario's reference (its own management API server's ConfigMap creates, same client, "+
		"before the controller started): throughput as a share of the 8-client rate, latencies in single-client creates of that "+
		"server (rate1 creates/s, one create = 1/rate1), CPU in ms per workspace.\n\n")
	fmt.Fprintf(&b, "| class | clusters | N | creators | reference 1 client/s | reference 8 clients/s | throughput / 8-client rate | p50 | p90 | p99 | max | CPU ms/ws | CPU ms/ws × rate1 |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		unit := func(d time.Duration) string { return fmt.Sprintf("%.0f", d.Seconds()*r.ref.one) }
		cpuMs := r.cpuSeconds * 1000 / float64(r.n)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.0f | %.0f | %.1f%% | %s | %s | %s | %s | %.2f | %.2f |\n", r.class, r.clusters, r.n, r.creators,
			r.ref.one, r.ref.eight, r.share(), unit(r.p50), unit(r.p90), unit(r.p99), unit(r.max), cpuMs, cpuMs*r.ref.one/1000)
	}
	fmt.Fprintf(&b, "\nRequests per workspace by verb (management: the controller's, the bench's creates taken out; child: every request the children served):\n\n")
	fmt.Fprintf(&b, "| class | clusters | N | creators | management | child | management writes by resource |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s |\n", r.class, r.clusters, r.n, r.creators, perVerb(r.mgmt, r.n), perVerb(r.child, r.n), writesByResource(r.mgmt, r.n))
	}
	fmt.Fprintf(&b, "\nWhere the CPU went, in ms per workspace over the same span (the controller from /proc; the API servers and "+
		"etcds from their own `process_cpu_seconds_total`; the bench's own process is not counted). The management API "+
		"server's cost of one workspace is set against its cost of one ConfigMap create in the 8-client reference: if it "+
		"kept the CPU it had then and served nothing else, it could admit at most that share of the reference rate. The "+
		"machine's ceiling is its %d cores over the CPU a workspace costs all five together. The last two columns are the "+
		"reference's WorkspaceDeployment creates (the bench's own workspace, 8 clients, no controller running): what one "+
		"such create cost the management API server, and their rate as a share of the ConfigMap rate, the most the share "+
		"could be if the controller cost the server nothing.\n\n", runtime.NumCPU())
	fmt.Fprintf(&b, "| class | clusters | N | creators | controller | mgmt API server | mgmt etcd | child API servers | child etcds | all | mgmt API server per ConfigMap create | share the mgmt API server allows | share the machine's cores allow | mgmt API server per WorkspaceDeployment create | share the creates alone allow |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s |\n", r.class, r.clusters, r.n, r.creators, strings.Join(cpuSplit(r, runtime.NumCPU()), " | "))
	}
	return b.String()
}

// cpuSplit is the CPU a workspace cost each process of the scenario, in ms, then the share of the
// reference's 8-client rate the management API server's CPU and the machine's cores allow (see
// renderTable).
func cpuSplit(r result, cores int) []string {
	per := func(s float64) float64 { return s * 1000 / float64(r.n) }
	s := r.servers
	all := per(r.cpuSeconds + s.api + s.etcd + s.childAPI + s.childEtcd)
	out := []string{fmt.Sprintf("%.2f", per(r.cpuSeconds)), fmt.Sprintf("%.2f", per(s.api)), fmt.Sprintf("%.2f", per(s.etcd)),
		fmt.Sprintf("%.2f", per(s.childAPI)), fmt.Sprintf("%.2f", per(s.childEtcd)), fmt.Sprintf("%.2f", all)}
	alone := createsAlone(r.ref)
	if r.ref.apiPerCreate <= 0 || s.api <= 0 || r.ref.eight <= 0 || all <= 0 {
		return append(out, "—", "—", "—", alone[0], alone[1])
	}
	apiShare := 100 * r.ref.apiPerCreate * 1000 / per(s.api)
	machine := 100 * float64(cores) * 1000 / all / r.ref.eight
	return append(out, fmt.Sprintf("%.2f", r.ref.apiPerCreate*1000), fmt.Sprintf("%.1f%%", apiShare), fmt.Sprintf("%.1f%%", machine),
		alone[0], alone[1])
}

// createsAlone is what the reference's WorkspaceDeployment creates cost the management API server, in
// ms each, and their rate as a share of the ConfigMap rate: the most the share can be, whatever the
// controller does.
func createsAlone(ref rates) [2]string {
	if ref.workspaces <= 0 || ref.eight <= 0 {
		return [2]string{"—", "—"}
	}
	perCreate := "—"
	if ref.apiPerWorkspace > 0 {
		perCreate = fmt.Sprintf("%.2f", ref.apiPerWorkspace*1000)
	}
	return [2]string{perCreate, fmt.Sprintf("%.1f%%", 100*ref.workspaces/ref.eight)}
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
	return fmt.Sprintf("%d cores (%s)%s, %s/%s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH)
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, read when a run starts.
func loadAverage() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			return strings.Join(f[:3], " ")
		}
	}
	return "unknown"
}

// parseLoad checks s as three load averages (the first three fields of /proc/loadavg) and returns
// them separated by single spaces.
func parseLoad(s string) (string, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return "", fmt.Errorf("%q: want three load averages, such as \"0.93 1.20 2.05\"", s)
	}
	for _, v := range f {
		if x, err := strconv.ParseFloat(v, 64); err != nil || x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("%q: %q is not a load average", s, v)
		}
	}
	return strings.Join(f, " "), nil
}

// writeDoc replaces the admission section of the doc (between the markers; appended when missing)
// and leaves every other section as it is.
func writeDoc(c config, results []result, table string, wall time.Duration) error {
	var b strings.Builder
	b.WriteString("## Admission (`make bench`)\n\n")
	b.WriteString("`make bench` starts real API servers (one management server per scenario with the project's CRDs, or\n" +
		"k0rdent's real ones when `K0RDENT_CRDS` is set, and separate child servers with 8-GPU nodes), runs the built\n" +
		"workspace-controller binary as a separate process with its default flags, and creates N WorkspaceDeployments\n" +
		"spread round-robin over the clusters, from concurrent creators that share one unthrottled client: one at the\n" +
		"smaller N, and one and eight (`--creators`) at the largest N, where the controller's ceiling shows. At N=100\n" +
		"or less one client's creates end within a few seconds and the controller's queue never fills, so more creators\n" +
		"would only add scenarios. The CPU class asks no GPUs, the GPU class 1 GPU per workspace.\n\n" +
		"The reference: before the controller starts, the bench measures the scenario's own management API server\n" +
		"creating ConfigMaps, with the same client, from 1 and from 8 concurrent creators (`--reference-time` each), and\n" +
		"deletes them again. Throughput is reported as a share of that 8-client rate, latencies in that server's\n" +
		"single-client creates; these ratios hold across machines, the absolute figures do not.\n\n" +
		"Latency: the create returned → the workspace's ServiceSet seen on a watch. Throughput: N over the time from\n" +
		"the first create to the last ServiceSet (in brackets the bench's own creates per second: when they are close\n" +
		"to the workspaces per second, the creates bound the throughput, not the controller). The controller runs with\n" +
		"`--routing-retry=10m`: the bench has no regional cluster, and routing's 15 s poll for the missing\n" +
		"infrastructure is no part of an admission. Requests come from the API servers' `apiserver_request_total`\n" +
		"between the first create and the moment the controller stopped writing; reconciles from\n" +
		"`controller_runtime_reconcile_total`; RSS and CPU seconds from /proc of the controller process (CPU: utime +\n" +
		"stime). After the largest N of each class and cluster count, once the controller stopped writing, the bench\n" +
		"counts its writes and its CPU seconds for " + c.idle.String() + " (`--idle`): idle writes and idle CPU (with its share\n" +
		"of one core). GPUs over capacity: the admitted GPUs per node (status.admission) above the node's GPUs at the\n" +
		"end, and workspaces left without an admission.\n\n")
	crds := "the project's k0rdent mirror"
	if dir := os.Getenv("K0RDENT_CRDS"); dir != "" {
		crds = "k0rdent's real CRDs (K0RDENT_CRDS=" + filepath.Base(dir) + ")"
	}
	fmt.Fprintf(&b, "Last run: %s, commit %s, %s, machine: %s, load average at the start %s; sizes %s, clusters %s, creators %s; wall time %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), gitCommit(), crds, machine(), c.load, joinInts(c.sizes), joinInts(c.clusters), joinInts(c.creators), wall.Round(time.Second))
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
	return replaceSection(c.doc, beginMarker, endMarker, b.String())
}

// replaceSection replaces the part of the file between the markers (appended when missing) with body
// and leaves every other section as it is.
func replaceSection(path, begin, end, body string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	section := begin + "\n" + body + end + "\n"
	doc := string(old)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i >= 0 && j > i {
		doc = doc[:i] + section + strings.TrimPrefix(doc[j+len(end):], "\n")
	} else {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// targets checks the results against the admission targets and says which are met. The throughput
// and latency targets are set at N=1,000; a run with other sizes checks its largest N.
func targets(results []result) string {
	maxN := 0
	for _, r := range results {
		maxN = max(maxN, r.n)
	}
	find := func(class string, clusters, creators int) *result {
		for i := range results {
			if r := &results[i]; r.class == class && r.clusters == clusters && r.n == maxN && r.creators == creators {
				return r
			}
		}
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nTargets (on this machine, in this run; N=%d):\n\n| target | measured | met |\n|---|---|---|\n", maxN)
	row := func(target, measured string, ok bool) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", target, measured, map[bool]string{true: "yes", false: "**no**"}[ok])
	}
	for _, sc := range []struct {
		class    string
		clusters int
	}{{"cpu", 1}, {"gpu", 20}} {
		if r := find(sc.class, sc.clusters, 8); r != nil {
			split := cpuSplit(*r, runtime.NumCPU())
			row(fmt.Sprintf("%s, %d cluster(s), 8 creators: throughput ≥ 25%% of the 8-client create rate", sc.class, sc.clusters),
				fmt.Sprintf("%.1f/s of %.0f/s: %.1f%% (the management API server's CPU allows %s, the machine's cores %s; "+
					"the workspaces' creates alone, with no controller, %s)", r.throughput, r.ref.eight, r.share(), split[7], split[8], split[10]),
				r.share() >= 25)
			row(fmt.Sprintf("%s, %d cluster(s), 8 creators: p99 ≤ 3 s", sc.class, sc.clusters), ms(r.p99), r.p99 <= 3*time.Second)
		}
		if r := find(sc.class, sc.clusters, 1); r != nil {
			row(fmt.Sprintf("%s, %d cluster(s), 1 creator: p99 ≤ 1 s", sc.class, sc.clusters), ms(r.p99), r.p99 <= time.Second)
		}
	}
	over, unadmitted, maxWrites, maxRec, maxRSS, idleMax, classWrites, idleCPUMax := 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0
	for _, r := range results {
		over += r.doubleBooked
		unadmitted += r.notAdmitted
		if r.class == "cpu" {
			maxWrites = max(maxWrites, r.mgmt.writes(func(k string) bool {
				return apiServerOwn(k) || strings.HasPrefix(k, "workspaceclasses/status ")
			})/float64(r.n))
			classWrites = max(classWrites, r.mgmt.writes(func(k string) bool { return !strings.HasPrefix(k, "workspaceclasses/status ") }))
		}
		maxRec = max(maxRec, r.reconciles)
		if r.n == maxN {
			maxRSS = max(maxRSS, r.rssMiB)
		}
		idleMax = max(idleMax, r.idleWritesPerMinute)
		if r.idleCPUSeconds >= 0 && r.idle > 0 {
			idleCPUMax = max(idleCPUMax, 100*r.idleCPUSeconds/r.idle.Seconds())
		}
	}
	row("no GPU double-booked (checked against node capacity)", fmt.Sprintf("%d nodes over capacity, %d workspaces unadmitted", over, unadmitted), over == 0 && unadmitted == 0)
	row("≤ 4 management writes per admitted CPU-only workspace, Events included", fmt.Sprintf(
		"at most %.3f, plus the class's status.inUseBy count: at most %.0f writes in a whole run", maxWrites, classWrites), maxWrites <= 4)
	row("zero idle writes", fmt.Sprintf("at most %.1f/min", idleMax), idleMax <= 0)
	if idleCPUMax >= 0 {
		row("idle CPU < 1% of a core after the largest N", fmt.Sprintf("at most %.1f%%", idleCPUMax), idleCPUMax < 1)
	}
	row(fmt.Sprintf("RSS ≤ 100 MiB with %d workspaces", maxN), fmt.Sprintf("at most %.0f MiB", maxRSS), maxRSS <= 100)
	row("≤ 3 reconciles per admitted workspace", fmt.Sprintf("at most %.2f", maxRec), maxRec <= 3)
	return b.String()
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ",")
}
