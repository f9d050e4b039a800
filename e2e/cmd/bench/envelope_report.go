package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// renderEnvelope is the envelope's section of docs/benchmarks.md: how it runs, then what it measured,
// each figure against its target where one is set.
func renderEnvelope(r envelopeResult, c config, wall time.Duration) string {
	var b strings.Builder
	b.WriteString("## Scale envelope (`make bench-envelope`)\n\n")
	b.WriteString("`make bench-envelope` (not part of `make test` or `make bench`) runs the built workspace-controller\n" +
		"against one management API server with `--clusters` ClusterDeployments whose kubeconfig Secrets point,\n" +
		"round-robin, at `--child-servers` real child API servers (children are shared, as in the inventory\n" +
		"benchmark, so that one machine holds 200 clusters; the ClusterDeployments on one server are peers to\n" +
		"the GPU gate, which counts their GPUs together). Each server has enough 8-GPU nodes for its share of the\n" +
		"GPU workspaces with 25% to spare, plus one per change. The bench creates `--workspaces` workspaces from\n" +
		"the largest `--creators` count, every second one asking 1 GPU, spread over the ClusterDeployments, and\n" +
		"waits until each status names its ServiceSet (admitted). Once the controller stopped writing it measures\n" +
		"the controller at rest for `--rest`: RSS, CPU seconds (utime + stime from /proc) and writes. Then it makes\n" +
		"`--changes` child changes, one at a time, on the child servers in turn: alternately a node cordoned and a\n" +
		"pod bound to a node taking all its GPUs, each time on the node of that server holding the most admissions.\n" +
		"Either change makes the admissions on that node lost (no pod of those workspaces runs there), so each\n" +
		"affected workspace's status must stop naming the node: the time from the change to that status, seen on a\n" +
		"watch, is the change's latency. Reconciles per change: the growth of `controller_runtime_reconcile_total`\n" +
		"after the change beyond its rate at rest (measured for 5 s before each change), until that excess stays\n" +
		"the same for 2 s. Since no k0rdent runs, every workspace stays Deploying (the classes' deployTimeout is\n" +
		"24 h, longer than the run) and is looked at again every 2 to 2.4 minutes, which is the rate at rest; a\n" +
		"child event brings back the workspaces it concerns on every\n" +
		"ClusterDeployment of that child (a Pod change those whose release namespace it is in, a Node change those\n" +
		"failed or pending for GPUs): with shared children that includes the peers', which a real fleet (one child\n" +
		"per ClusterDeployment) does not have.\n" +
		"With `--webhook-bin` the webhook binary runs too (its configurations registered by URL, its own CA), every\n" +
		"create passes through it, and at the end the bench times `--webhook-creates` WorkspaceDeployment creates one\n" +
		"at a time, next to as many ConfigMap creates on the same server (no webhook), and reads the webhook's own\n" +
		"`controller_runtime_webhook_latency_seconds` over them.\n\n")
	fmt.Fprintf(&b, "Last run: %s, commit %s, machine: %s, load average at the start %s; %d workspaces over %d ClusterDeployments on %d child servers (%d 8-GPU nodes each), %d creators; wall time %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), gitCommit(), machine(), c.load, r.workspaces, r.clusters, r.servers, r.nodesPerServer,
		r.creators, wall.Round(time.Second))
	b.WriteString("| figure | measured | target | met |\n|---|---|---|---|\n")
	row := func(figure, measured, target string, ok *bool) {
		met := "—"
		if ok != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*ok]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", figure, measured, target, met)
	}
	is := func(v bool) *bool { return &v }
	row("reference: ConfigMap creates on the management server", fmt.Sprintf("%.0f/s from 1 client, %.0f/s from 8", r.ref.one, r.ref.eight), "", nil)
	row("admission: workspaces/s (share of the 8-client rate)", fmt.Sprintf("%.1f/s (%.1f%%), all in %s", r.throughput, 100*r.throughput/r.ref.eight, r.admitWall.Round(time.Second)), "", nil)
	row("admission: create → ServiceSet in status, p50 / p99", fmt.Sprintf("%s / %s", ms(r.p50), ms(r.p99)), "", nil)
	row("controller RSS at rest (peak in the whole run)", fmt.Sprintf("%.0f MiB (%.0f MiB)", r.rssMiB, r.peakMiB), "≤ 600 MiB", is(r.rssMiB <= 600))
	row("controller RSS after the changes", fmt.Sprintf("%.0f MiB", r.rssAfterChangesMiB), "", nil)
	rest := r.rest(c)
	row(fmt.Sprintf("controller CPU at rest (%s)", rest), fmt.Sprintf("%.1f s (%.1f%% of a core)", r.restCPUSeconds, 100*r.restCPUSeconds/rest.Seconds()), "", nil)
	row("controller writes at rest", fmt.Sprintf("%.1f/min", r.restWritesPerMinute), "0", is(r.restWritesPerMinute == 0))
	var all []time.Duration
	byKind := map[string][]time.Duration{}
	affected, timedOut := 0, 0
	var rec []float64
	var perAffected []float64
	for _, ch := range r.changes {
		all = append(all, ch.latencies...)
		byKind[ch.kind] = append(byKind[ch.kind], ch.latencies...)
		affected += ch.affected
		timedOut += ch.timedOut
		rec = append(rec, ch.reconciles)
		if ch.affected > 0 {
			perAffected = append(perAffected, ch.reconciles/float64(ch.affected))
		}
	}
	if len(r.changes) == 0 {
		row("child changes", "none made", "", nil)
	} else {
		s := sortedCopy(all)
		row(fmt.Sprintf("child change → affected status, p50 / p99 (%d changes, %d affected workspaces)", len(r.changes), affected),
			fmt.Sprintf("%s / %s", ms(pct(s, 50)), ms(pct(s, 99))), "p99 ≤ 2 s", is(pct(s, 99) <= 2*time.Second && timedOut == 0))
		kinds := make([]string, 0, len(byKind))
		for k := range byKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			s := sortedCopy(byKind[k])
			row("… "+k+", p50 / p99", fmt.Sprintf("%s / %s", ms(pct(s, 50)), ms(pct(s, 99))), "", nil)
		}
		row("affected workspaces still on the changed node after --change-timeout", fmt.Sprint(timedOut), "0", is(timedOut == 0))
		sort.Float64s(rec)
		sort.Float64s(perAffected)
		var rates []float64
		for _, ch := range r.changes {
			rates = append(rates, ch.restRate)
		}
		sort.Float64s(rates)
		row("reconciles per child change beyond the rate at rest, median / max", fmt.Sprintf("%.0f / %.0f", median(rec), rec[len(rec)-1]), "", nil)
		row("… per affected workspace, median", fmt.Sprintf("%.1f", median(perAffected)), "", nil)
		row("… the rate at rest before a change (Deploying workspaces looked at again), median", fmt.Sprintf("%.1f/s", median(rates)), "", nil)
		row("… workspaces per child server", fmt.Sprintf("%d (%d ClusterDeployments)",
			r.workspaces/r.servers, r.clusters/r.servers), "", nil)
	}
	if r.webhook != "" {
		row("webhook create latency", r.webhook, "p99 ≤ 100 ms", nil)
	} else {
		row("create through the webhook (API server round trip), p50 / p99", fmt.Sprintf("%s / %s", ms(r.webhookP50), ms(r.webhookP99)), "", nil)
		row("ConfigMap create on the same server, p50 / p99 (ratio of the p99s)", fmt.Sprintf("%s / %s (%.1f×)", ms(r.refCreateP50), ms(r.refCreateP99),
			float64(r.webhookP99)/float64(max(r.refCreateP99, time.Microsecond))), "", nil)
		switch {
		case r.webhookServerP99 < 0:
			row("the webhook's own latency (its histogram): mean, p99", fmt.Sprintf("%.2f ms, above the largest bucket", r.webhookServerMean.Seconds()*1000), "p99 ≤ 100 ms", is(false))
		default:
			row("the webhook's own latency (its histogram): mean, p99", fmt.Sprintf("%.2f ms, ≤ %s ms (bucket bound)", r.webhookServerMean.Seconds()*1000,
				strconv.FormatFloat(r.webhookServerP99*1000, 'f', -1, 64)), "p99 ≤ 100 ms", is(r.webhookServerP99 <= 0.1))
		}
	}
	return b.String()
}

func (r envelopeResult) rest(c config) time.Duration { return c.envelope.rest }

func median(sorted []float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}
