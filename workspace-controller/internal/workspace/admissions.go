package workspace

import (
	"strconv"
	"sync"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// admissions serialises the gate's decisions per cluster and remembers the admissions this process
// wrote that the manager's cache may not show yet. Decisions on one cluster are serialised by a
// per-cluster lock; decisions on different clusters run in parallel. What holds GPUs is read from the
// workspaces' status.admission and the ServiceSets that exist, which carry the admission they were
// made for (AnnotationAdmission), so the reservations survive a restart. The memory covers the time
// until the pass writes the status with a new admission, and then until the cache has caught up
// with this process's own writes.
type admissions struct {
	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	written map[string]writtenAdmission
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

func newAdmissions() *admissions {
	return &admissions{locks: map[string]*sync.Mutex{}, written: map[string]writtenAdmission{}}
}

// lock takes the cluster's gate lock and returns its unlock.
func (a *admissions) lock(cluster string) func() {
	a.mu.Lock()
	l := a.locks[cluster]
	if l == nil {
		l = &sync.Mutex{}
		a.locks[cluster] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// wrote remembers an admission written to the API server at a resourceVersion, in a status of that
// phase.
func (a *admissions) wrote(key string, ad *workspacesv1.Admission, resourceVersion string, phase workspacesv1.WorkspacePhase) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.written[key] = writtenAdmission{admission: ad.DeepCopy(), resourceVersion: resourceVersion, phase: phase}
}

// pend remembers an admission the gate made whose status write is still to come, later in the
// same pass: until then this process counts it from memory, and a restart counts it from the
// ServiceSet that carries it (AnnotationAdmission).
func (a *admissions) pend(key string, ad *workspacesv1.Admission) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.written[key] = writtenAdmission{admission: ad.DeepCopy(), pending: true}
}

// settle turns a pending admission into a written one once the pass wrote the workspace's status
// (ad is the admission in that status, resourceVersion and phase the write's); nil drops it.
func (a *admissions) settle(key string, ad *workspacesv1.Admission, resourceVersion string, phase workspacesv1.WorkspacePhase) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.written[key]
	if !ok || !w.pending {
		return
	}
	if ad == nil {
		delete(a.written, key)
		return
	}
	a.written[key] = writtenAdmission{admission: ad.DeepCopy(), resourceVersion: resourceVersion, phase: phase}
}

func (a *admissions) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.written, key)
}

// current returns a workspace's admission (see state).
func (a *admissions) current(o *workspacesv1.WorkspaceDeployment) *workspacesv1.Admission {
	ad, _ := a.state(o)
	return ad
}

// state returns a workspace's admission and phase: a pending admission (the pass admitted the
// workspace: Deploying, whatever the cached object still says), or the admission and phase this
// process wrote last while the cached object is older than that write, else the cached object's own.
func (a *admissions) state(o *workspacesv1.WorkspaceDeployment) (*workspacesv1.Admission, workspacesv1.WorkspacePhase) {
	key := o.Namespace + "/" + o.Name
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.written[key]
	if !ok {
		return o.Status.Admission, o.Status.Phase
	}
	if w.pending {
		return w.admission, workspacesv1.PhaseDeploying
	}
	if olderVersion(o.ResourceVersion, w.resourceVersion) {
		return w.admission, w.phase
	}
	delete(a.written, key)
	return o.Status.Admission, o.Status.Phase
}

// olderVersion reports whether resourceVersion a is older than b. Resource versions are opaque, but
// the API server's are increasing integers; anything else is treated as not older, so the cache
// is trusted.
func olderVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}
