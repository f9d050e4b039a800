// Package chaos holds the pure parts of the chaos suite (e2e/chaos): the seeded fault schedule, the
// figures of a run and their section in docs/benchmarks.md.
//
// It is test tooling: nothing here runs in production.
package chaos

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"time"
)

// Figures are what a chaos run reports: what was injected and what survived.
type Figures struct {
	Seed       int64
	Mode       string
	Rounds     int
	Workspaces int // per rollout
	// Faults counts the faults injected by kind.
	Faults map[string]int
	// LongestConvergence is the longest time from a round's fault to every workspace converged.
	LongestConvergence time.Duration
	// Lost counts workspaces Failed because of a fault, Running without their ServiceSet, and
	// deletions that did not complete.
	Lost int
	// DoubleBooked counts samples where the GPUs admitted on a cluster exceeded the GPUs it has.
	DoubleBooked int
	// Orphans counts ServiceSets, ws- namespaces and Helm releases left without their workspace.
	Orphans int
	// StoppedHoldingGPUs counts samples where a Stopped workspace had a pod on its child that holds
	// a GPU (requests one and has not ended).
	StoppedHoldingGPUs int
	// QueueInversions counts pairs of waiters of one cluster where the one behind was admitted while
	// the one ahead (priority, then creation) still waited, or before it.
	QueueInversions int
	// Reclaimed counts the workspaces a reclaim stopped (the reclaim fault), each of which must come
	// back through the queue.
	Reclaimed int
	// Findings are the failed checks, one line each, with their round.
	Findings []string
	Duration time.Duration
}

// About describes the chaos suite at the top of its section.
const About = "`make chaos` rolls out 200 workspaces per round for 20 rounds, a third of them asking for GPUs on two\n" +
	"clusters that have fewer GPUs than asked in total (a third of those with a chart that fixes its\n" +
	"replica count and keeps a claim, as the published catalog's charts do), and injects one fault per\n" +
	"round at a moment drawn from a seeded random source: kill -9 of each component in turn (the local\n" +
	"world runs one replica of each), a child API server stopped for 60 s, a child's kubeconfig Secret\n" +
	"replaced by a credential the child refuses (certificates cannot be revoked, so revocation is played\n" +
	"by a client certificate of an untrusted CA) and then rotated to a new identity, the management API\n" +
	"server restarted, the webhook down while the round's workspaces are deleted, a child's nodes\n" +
	"cordoned for 30 s (no workspace there may fail meanwhile), a child's GPU node replaced under a new\n" +
	"name (its workspaces admitted again on the new node), up to three workspaces of the fixed-replica\n" +
	"chart stopped for 30 s and started again, and a ClusterDeployment deleted and re-created by its\n" +
	"Colony (a new child behind the same name), and borrowed GPUs reclaimed by stop (the chaos\n" +
	"namespace borrows a second team's idle guarantee in every round; in this one the team's workspaces\n" +
	"arrive, the borrowers get their notice, the workspace controller is killed between notice and stop,\n" +
	"and the borrowers, stopped with reason Reclaimed and their spec untouched, come back once the\n" +
	"team's workspaces are deleted); a few workspaces are also deleted while each fault is\n" +
	"on. After each round it checks: exactly one ServiceSet per workspace; no ServiceSet, `ws-` namespace\n" +
	"or Helm release without its workspace; no Running workspace without its ServiceSet; GPUs admitted\n" +
	"(Running and Deploying, not being deleted) never above a cluster's GPUs, sampled twice a second\n" +
	"during the whole round (an admission whose nodes are all gone from the child holds no GPU and is left\n" +
	"out: its replicas are pinned there by hostname); no pod holding a GPU on the child of a workspace\n" +
	"that says Stopped, sampled\n" +
	"every second while stopped; the workspaces waiting in a cluster's GPU queue when the fault ends (for\n" +
	"the cordon: before the nodes come back) admitted in queue order (a smaller request behind may use\n" +
	"GPUs a larger one ahead cannot use yet); every workspace Running, or Waiting\n" +
	"while the admitted GPUs really leave no room, within a bound, and none Failed; the inventory marking\n" +
	"the stopped child (and the refused credential, naming Unauthorized) `reachable: false` and\n" +
	"recovering; every deletion completing. `make test` runs a short version (`make test-chaos-short`: 4\n" +
	"rounds of 15 workspaces). `CHAOS_SEED=<n>` replays a run; `CHAOS_ROUNDS`, `CHAOS_WORKSPACES` and\n" +
	"`CHAOS_FAULTS` (comma-separated: kill-<component>, child-stop, credential, mgmt-restart,\n" +
	"webhook-outage, cordon, node-replaced, stop-start, cd-recreated, reclaim) change its size and\n" +
	"faults.\n" +
	"This section is rewritten by each `make chaos` run.\n"

// Markdown renders the figures as the docs/benchmarks.md section (without its heading).
func (f Figures) Markdown() string {
	var b strings.Builder
	b.WriteString(About + "\n")
	fmt.Fprintf(&b, "Last `make chaos` run (%s, seed %d, replay with `CHAOS_SEED=%d make chaos`):\n\n", f.Mode, f.Seed, f.Seed)
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| rounds | %d |\n", f.Rounds)
	fmt.Fprintf(&b, "| workspaces per rollout | %d (a third asking for GPUs beyond the clusters' total) |\n", f.Workspaces)
	kinds := make([]string, 0, len(f.Faults))
	for k := range f.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "| faults: %s | %d |\n", k, f.Faults[k])
	}
	fmt.Fprintf(&b, "| longest convergence after a fault | %s |\n", f.LongestConvergence.Round(time.Second))
	fmt.Fprintf(&b, "| lost (Failed by a fault, Running without ServiceSet, deletion not completed) | %d |\n", f.Lost)
	fmt.Fprintf(&b, "| double-booked GPU samples | %d |\n", f.DoubleBooked)
	fmt.Fprintf(&b, "| orphans (ServiceSet, ws- namespace or Helm release without its workspace) | %d |\n", f.Orphans)
	fmt.Fprintf(&b, "| samples of a Stopped workspace holding a GPU on its child | %d |\n", f.StoppedHoldingGPUs)
	fmt.Fprintf(&b, "| queue-order inversions | %d |\n", f.QueueInversions)
	fmt.Fprintf(&b, "| workspaces stopped by a reclaim (each back through the queue) | %d |\n", f.Reclaimed)
	fmt.Fprintf(&b, "| wall time | %s |\n", f.Duration.Round(time.Second))
	if len(f.Findings) == 0 {
		b.WriteString("\nEvery check passed.\n")
	} else {
		fmt.Fprintf(&b, "\nFailed checks (%d):\n\n", len(f.Findings))
		for _, l := range f.Findings {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(l, "\n", " "))
		}
	}
	return b.String()
}

// SectionHeading is the heading of the chaos section in docs/benchmarks.md.
const SectionHeading = "## Chaos (`make chaos`)"

// ReplaceSection returns doc with the level-2 section titled heading replaced by body (appended when
// absent); every other section is kept as it was.
func ReplaceSection(doc, heading, body string) string {
	section := heading + "\n\n" + strings.TrimRight(body, "\n") + "\n"
	lines := strings.SplitAfter(doc, "\n")
	start, end := -1, len(lines)
	for i, l := range lines {
		t := strings.TrimRight(l, "\r\n")
		if start < 0 && t == heading {
			start = i
			continue
		}
		if start >= 0 && strings.HasPrefix(t, "## ") {
			end = i
			break
		}
	}
	if start < 0 {
		if doc == "" {
			return "# Benchmarks\n\n" + section
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	rest := strings.Join(lines[end:], "")
	if rest != "" {
		section += "\n"
	}
	return strings.Join(lines[:start], "") + section + rest
}

// WriteSection rewrites the chaos section of the Markdown file at path, creating the file if missing.
func WriteSection(path string, f Figures) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(path, []byte(ReplaceSection(string(old), SectionHeading, f.Markdown())), 0o644)
}

// Schedule picks, from a seeded source, the moment of each round's fault: the number of workspaces
// created before it is injected (0 <= at < n) and, for the held faults, how long it lasts.
type Schedule struct{ rng *rand.Rand }

// NewSchedule returns the schedule of a seed.
func NewSchedule(seed int64) *Schedule { return &Schedule{rng: rand.New(rand.NewSource(seed))} } //nolint:gosec // a replayable schedule, not a secret

// Intn returns a number in [0, n) (0 when n <= 0).
func (s *Schedule) Intn(n int) int {
	if n <= 0 {
		return 0
	}
	return s.rng.Intn(n)
}

// Perm returns a permutation of [0, n).
func (s *Schedule) Perm(n int) []int { return s.rng.Perm(n) }
