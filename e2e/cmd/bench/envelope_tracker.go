package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// tracker follows every workspace's admission through its events (follow), and times the changes.
type tracker struct {
	mu        sync.Mutex
	admission map[string]*workspacesv1.Admission
	admitted  map[string]time.Time // when the workspace's ServiceSet name was first seen in its status
	pending   map[string]bool      // the workspaces a change waits for
	node      string               // the node they must leave
	moved     map[string]time.Time
	done      chan struct{}
}

func newTracker() *tracker {
	return &tracker{admission: map[string]*workspacesv1.Admission{}, admitted: map[string]time.Time{}}
}

// observe takes one event of a workspace (a listed one comes as Added, and may come again).
func (t *tracker) observe(ev watch.Event) {
	ws, ok := ev.Object.(*workspacesv1.WorkspaceDeployment)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.admission[ws.Name] = ws.Status.Admission
	if _, ok := t.admitted[ws.Name]; !ok && ws.Status.ServiceSetName != "" {
		t.admitted[ws.Name] = now
	}
	if t.pending[ws.Name] && !admittedOn(ws.Status.Admission, t.node) {
		delete(t.pending, ws.Name)
		t.moved[ws.Name] = now
		if len(t.pending) == 0 && t.done != nil {
			close(t.done)
			t.done = nil
		}
	}
}

func admittedOn(ad *workspacesv1.Admission, node string) bool {
	if ad == nil {
		return false
	}
	for _, n := range ad.Nodes {
		if n.Name == node {
			return true
		}
	}
	return false
}

func (t *tracker) admittedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.admitted)
}

func (t *tracker) allAdmitted(n int) bool { return t.admittedCount() >= n }

// admissionLatencies returns the sorted create → ServiceSet-in-status times and the last admission.
func (t *tracker) admissionLatencies(created []time.Time) ([]time.Duration, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat []time.Duration
	var last time.Time
	for name, at := range t.admitted {
		i, err := strconv.Atoi(strings.TrimPrefix(name, "ws-"))
		if err != nil || i >= len(created) {
			continue
		}
		lat = append(lat, max(at.Sub(created[i]), 0))
		if at.After(last) {
			last = at
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, last
}

// busiestNode returns the node of a child server holding the most admissions, leaving out changed.
func (t *tracker) busiestNode(server int, serverOf map[string]int, changed map[string]bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	count := map[string]int{}
	for _, ad := range t.admission {
		if s, ok := serverOf[clusterOf(ad)]; !ok || s != server {
			continue
		}
		for _, n := range ad.Nodes {
			if !changed[fmt.Sprint(server, "/", n.Name)] {
				count[n.Name]++
			}
		}
	}
	best := ""
	for n, k := range count {
		if best == "" || k > count[best] || (k == count[best] && n < best) {
			best = n
		}
	}
	return best
}

// onNode returns the workspaces admitted on node of a child server.
func (t *tracker) onNode(server int, node string, serverOf map[string]int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, ad := range t.admission {
		if s, ok := serverOf[clusterOf(ad)]; ok && s == server && admittedOn(ad, node) {
			out = append(out, name)
		}
	}
	return out
}

func clusterOf(ad *workspacesv1.Admission) string {
	if ad == nil {
		return ""
	}
	return ad.Cluster
}

// expect starts timing a change: the returned channel closes once none of names is admitted on node.
func (t *tracker) expect(names []string, node string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending, t.node, t.moved = map[string]bool{}, node, map[string]time.Time{}
	done := make(chan struct{})
	for _, n := range names {
		t.pending[n] = true
	}
	if len(t.pending) == 0 {
		close(done)
		return done
	}
	t.done = done
	return done
}

// collect ends a change: the times from at to each workspace leaving the node, and those still on it.
func (t *tracker) collect(at time.Time) ([]time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, m := range t.moved {
		out = append(out, m.Sub(at))
	}
	timedOut := len(t.pending)
	t.pending, t.done = nil, nil
	return out, timedOut
}

func sortedCopy(d []time.Duration) []time.Duration {
	out := append([]time.Duration(nil), d...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) == 0 {
		return []time.Duration{0}
	}
	return out
}
