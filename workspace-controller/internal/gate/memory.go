package gate

import (
	"sort"
	"sync"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// memory serialises the gate's decisions per cluster and remembers the admissions and placements
// this process wrote that the manager's cache may not show yet. Decisions on one cluster are
// serialised by a per-cluster lock; decisions on different clusters run in parallel. What holds GPUs
// is read from the workspaces' status.admission and the ServiceSets that exist, which carry the
// admission they were made for (owned.AnnotationAdmission), so the reservations survive a restart.
// The memory covers the time until the pass writes the status with a new admission, and then until
// the cache has caught up with this process's own writes.
type memory struct {
	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	written map[string]writtenAdmission
	placed  map[string]writtenPlacement
	waits   map[string]decidedWait
}

// decidedWait is a decision to wait for GPUs on a cluster, made on the workspace's object at
// resourceVersion with these resources: the pass writes the Waiting status after the gate's locks are
// released, and until the cache shows that write (a newer resourceVersion) the other decisions on
// the cluster still see the object the decision was made on, which may not say Waiting yet (a first
// pass has no resolved resources at all). For that moment the memory says the workspace waits, so
// that it keeps its place ahead of later workspaces: a node replaced while workspaces are admitted
// would otherwise let a newer workspace take GPUs an older one had just been told to wait for.
type decidedWait struct {
	resourceVersion string
	resources       *workspacesv1.ResolvedResources
}

// writtenAdmission is an admission this process wrote, with the resourceVersion and the phase of the
// write; or, when pending, an admission the gate made that the pass has not written to the status
// yet. The phase matters as much as the admission: a cached object older than the write may still
// show the phase before it (Failed, for a workspace that failed before the GPUs appeared), and a
// Failed workspace's admission holds no GPUs.
type writtenAdmission struct {
	admission       *workspacesv1.Admission
	resourceVersion string
	phase           workspacesv1.WorkspacePhase
	pending         bool
}

// writtenPlacement is a placement this process wrote, with the resourceVersion of the write.
type writtenPlacement struct {
	placement       *workspacesv1.Placement
	resourceVersion string
}

func newMemory() *memory {
	return &memory{locks: map[string]*sync.Mutex{}, written: map[string]writtenAdmission{}, placed: map[string]writtenPlacement{},
		waits: map[string]decidedWait{}}
}

// lock takes a gate lock (a cluster's, or "quota:<namespace>") and returns its unlock.
func (m *memory) lock(key string) func() {
	m.mu.Lock()
	l := m.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[key] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// wrote remembers an admission written to the API server at a resourceVersion, in a status of that
// phase.
func (m *memory) wrote(key string, ad *workspacesv1.Admission, resourceVersion string, phase workspacesv1.WorkspacePhase) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written[key] = writtenAdmission{admission: ad.DeepCopy(), resourceVersion: resourceVersion, phase: phase}
}

// pend remembers an admission the gate made whose status write is still to come, later in the
// same pass: until then this process counts it from memory, and a restart counts it from the
// ServiceSet that carries it (owned.AnnotationAdmission).
func (m *memory) pend(key string, ad *workspacesv1.Admission) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written[key] = writtenAdmission{admission: ad.DeepCopy(), pending: true}
}

// settle turns a pending admission into a written one once the pass wrote the workspace's status
// (ad is the admission in that status, resourceVersion and phase the write's); nil drops it.
func (m *memory) settle(key string, ad *workspacesv1.Admission, resourceVersion string, phase workspacesv1.WorkspacePhase) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.written[key]
	if !ok || !w.pending {
		return
	}
	if ad == nil {
		delete(m.written, key)
		return
	}
	m.written[key] = writtenAdmission{admission: ad.DeepCopy(), resourceVersion: resourceVersion, phase: phase}
}

func (m *memory) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, key)
	delete(m.placed, key)
	delete(m.waits, key)
}

// decided remembers the gate's decision on a workspace: whether it was told to wait for GPUs (with
// the resourceVersion of the object decided on and its resources), or anything else (forgotten).
func (m *memory) decided(key, resourceVersion string, res *workspacesv1.ResolvedResources, wait bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !wait {
		delete(m.waits, key)
		return
	}
	m.waits[key] = decidedWait{resourceVersion: resourceVersion, resources: res.DeepCopy()}
}

// waiting returns the resources of a workspace the gate told to wait for GPUs while the cached object
// is still the one that decision was made on; nil once the cache shows a newer object (its status
// then says what the pass wrote).
func (m *memory) waiting(o *workspacesv1.WorkspaceDeployment) *workspacesv1.ResolvedResources {
	key := o.Namespace + "/" + o.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.waits[key]
	if !ok {
		return nil
	}
	if o.ResourceVersion == w.resourceVersion {
		return w.resources
	}
	delete(m.waits, key)
	return nil
}

// state returns a workspace's admission and phase: a pending admission (the pass admitted the
// workspace: Deploying, whatever the cached object still says), or the admission and phase this
// process wrote last while the cached object is older than that write, else the cached object's own.
func (m *memory) state(o *workspacesv1.WorkspaceDeployment) (*workspacesv1.Admission, workspacesv1.WorkspacePhase) {
	key := o.Namespace + "/" + o.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.written[key]
	if !ok {
		return o.Status.Admission, o.Status.Phase
	}
	if w.pending {
		return w.admission, workspacesv1.PhaseDeploying
	}
	if owned.OlderVersion(o.ResourceVersion, w.resourceVersion) {
		return w.admission, w.phase
	}
	delete(m.written, key)
	return o.Status.Admission, o.Status.Phase
}

// keysOn lists the workspaces (namespace/name) whose admission this process wrote, the cache may not
// show yet, and on reports true for (an admission on the cluster: site.counts).
func (m *memory) keysOn(on func(*workspacesv1.Admission) bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, w := range m.written {
		if w.admission != nil && on(w.admission) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (m *memory) wrotePlacement(key string, p *workspacesv1.Placement, resourceVersion string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.placed[key] = writtenPlacement{placement: p.DeepCopy(), resourceVersion: resourceVersion}
}

// placement is the workspace's placement: the one this process wrote while the cached object is
// older than that write, else the object's own.
func (m *memory) placement(o *workspacesv1.WorkspaceDeployment) *workspacesv1.Placement {
	key := o.Namespace + "/" + o.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.placed[key]
	if !ok {
		return o.Status.Placement
	}
	if o.Status.Placement == nil && owned.OlderVersion(o.ResourceVersion, w.resourceVersion) {
		return w.placement.DeepCopy()
	}
	delete(m.placed, key)
	return o.Status.Placement
}
