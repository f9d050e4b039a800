package gitops

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
)

// A state of an object as its controller writes it: Ready, and the kstatus condition the controller
// sets beside it through conditions.SetKstatus, the one function every component uses.
type state struct {
	name     string
	ready    metav1.ConditionStatus // "" writes no status at all (the controller has not run yet)
	progress conditions.Progress
	lag      bool // the spec changed after the controller last wrote the status
	deleting bool
	// want is what kstatus says, and so what the health checks must say; for the states that differ
	// on purpose (a status not written yet) custom says what the health checks say instead.
	want   status.Status
	custom status.Status
}

var states = []state{
	{name: "ready", ready: metav1.ConditionTrue, want: status.CurrentStatus},
	{name: "progressing", ready: metav1.ConditionFalse, progress: conditions.InProgress, want: status.InProgressStatus},
	{name: "stalled", ready: metav1.ConditionFalse, progress: conditions.Failed, want: status.FailedStatus},
	// Not Ready and neither kstatus condition (a workspace holding on an input that went away).
	{name: "not ready", ready: metav1.ConditionFalse, want: status.InProgressStatus},
	{name: "ready, spec changed since", ready: metav1.ConditionTrue, lag: true, want: status.InProgressStatus},
	{name: "stalled, spec changed since", ready: metav1.ConditionFalse, progress: conditions.Failed, lag: true, want: status.InProgressStatus},
	{name: "deleting", ready: metav1.ConditionFalse, progress: conditions.InProgress, deleting: true, want: status.TerminatingStatus},
	// kstatus takes an object without status for current; the health checks wait for the controller.
	{name: "no status yet", want: status.CurrentStatus, custom: status.InProgressStatus},
}

// object builds kind in state st, with the status fields its controller writes.
func object(t *testing.T, kind string, st state) *unstructured.Unstructured {
	t.Helper()
	meta := metav1.ObjectMeta{Name: "x", Namespace: "team", Generation: 3}
	if st.deleting {
		now := metav1.Now()
		meta.DeletionTimestamp = &now
		meta.Finalizers = []string{"f"}
	}
	var conds []metav1.Condition
	observed := int64(0)
	if st.ready != "" {
		observed = meta.Generation
		conds = []metav1.Condition{{Type: "Ready", Status: st.ready, Reason: "Because", Message: "the reason",
			ObservedGeneration: observed, LastTransitionTime: metav1.Now()}}
		conditions.SetKstatus(&conds, "Ready", observed, st.progress)
	}
	if st.lag {
		meta.Generation++
	}
	var obj runtime.Object
	switch kind {
	case "Colony":
		obj = &infrav1.Colony{TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: kind}, ObjectMeta: meta,
			Status: infrav1.ColonyStatus{ObservedGeneration: observed, Conditions: conds}}
	case "WorkspaceClass":
		meta.Namespace = ""
		obj = &workspacesv1.WorkspaceClass{TypeMeta: metav1.TypeMeta{APIVersion: workspacesv1.GroupVersion.String(), Kind: kind}, ObjectMeta: meta,
			Status: workspacesv1.WorkspaceClassStatus{ObservedGeneration: observed, Conditions: conds, Valid: st.ready == metav1.ConditionTrue}}
	case "WorkspaceDeployment":
		obj = &workspacesv1.WorkspaceDeployment{TypeMeta: metav1.TypeMeta{APIVersion: workspacesv1.GroupVersion.String(), Kind: kind}, ObjectMeta: meta,
			Status: workspacesv1.WorkspaceDeploymentStatus{ObservedGeneration: observed, Conditions: conds}}
	case "WorkspaceQuota":
		obj = &workspacesv1.WorkspaceQuota{TypeMeta: metav1.TypeMeta{APIVersion: workspacesv1.GroupVersion.String(), Kind: kind}, ObjectMeta: meta,
			Status: workspacesv1.WorkspaceQuotaStatus{ObservedGeneration: observed, Summary: "workspaces 1/5"}}
	default:
		t.Fatalf("unknown kind %s", kind)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: raw}
}

// quotaState is st as a WorkspaceQuota has it: no conditions, so only whether its status describes
// its spec (and deletion) tells.
func quotaState(st state) (state, bool) {
	switch {
	case st.ready == "" || st.deleting:
		return st, true
	case st.progress == conditions.Current && st.ready == metav1.ConditionTrue:
		return st, true
	}
	return st, false
}

// TestHealthChecksAgreeWithKstatus evaluates the Flux expressions of examples/gitops/flux and the Argo
// CD scripts of examples/gitops/argocd on each kind in each state its controller writes, and asserts
// that both say what kstatus (the library Flux's and the e2e suite's checks use) says: Current is
// current and Healthy, InProgress and Terminating are in progress and Progressing, Failed is failed
// and Degraded. Where they are stricter on purpose (a status not written yet), they say so.
func TestHealthChecksAgreeWithKstatus(t *testing.T) {
	exprs := fluxExprs(t)
	scripts := argoScripts(t)
	for _, kind := range []string{"Colony", "WorkspaceClass", "WorkspaceDeployment", "WorkspaceQuota"} {
		if exprs[kind] == nil || scripts[kind] == "" {
			t.Fatalf("%s: no Flux expressions or no Argo CD script", kind)
		}
		for _, st := range states {
			if kind == "WorkspaceQuota" {
				var ok bool
				if st, ok = quotaState(st); !ok {
					continue
				}
			}
			t.Run(kind+"/"+st.name, func(t *testing.T) {
				obj := object(t, kind, st)
				res, err := status.Compute(obj)
				if err != nil {
					t.Fatalf("kstatus: %v", err)
				}
				if res.Status != st.want {
					t.Fatalf("kstatus %s (%s), want %s: the fixture is not the state it names", res.Status, res.Message, st.want)
				}
				want := st.want
				if st.custom != "" {
					want = st.custom
				}
				if want == status.TerminatingStatus {
					want = status.InProgressStatus // neither Flux nor Argo CD has a deleting health
				}
				if got := exprs[kind].evaluate(t, obj); got != want {
					t.Errorf("Flux expressions say %s, want %s", got, want)
				}
				wantArgo := map[status.Status]string{status.CurrentStatus: "Healthy", status.InProgressStatus: "Progressing", status.FailedStatus: "Degraded"}[want]
				if got, msg := runLua(t, scripts[kind], obj); got != wantArgo {
					t.Errorf("Argo CD script says %s (%s), want %s", got, msg, wantArgo)
				}
			})
		}
	}
}

// celCheck is one entry of a Kustomization's healthCheckExprs, compiled.
type celCheck struct {
	inProgress, failed, current cel.Program
}

// fluxExprs compiles the healthCheckExprs of the example Kustomization in an environment like
// Flux's: the object's top-level fields are the variables, with CEL's optional types and string
// extensions.
func fluxExprs(t *testing.T) map[string]*celCheck {
	t.Helper()
	ks := find(t, manifests(t, "flux"), "kustomize.toolkit.fluxcd.io/v1", "Kustomization")
	list, _, err := unstructured.NestedSlice(ks.Object, "spec", "healthCheckExprs")
	if err != nil || len(list) == 0 {
		t.Fatalf("the Kustomization has no healthCheckExprs (%v)", err)
	}
	opts := []cel.EnvOption{cel.HomogeneousAggregateLiterals(), cel.EagerlyValidateDeclarations(true), cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true), cel.OptionalTypes(), ext.Strings()}
	for _, v := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
		opts = append(opts, cel.Variable(v, cel.ObjectType("google.protobuf.Struct")))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(where, expr string) cel.Program {
		if expr == "" {
			return nil
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", where, iss.Err())
		}
		if ast.OutputType() != cel.BoolType {
			t.Fatalf("%s: returns %s, not a bool", where, ast.OutputType())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return prg
	}
	out := map[string]*celCheck{}
	for _, item := range list {
		m := item.(map[string]any)
		kind, _ := m["kind"].(string)
		apiVersion, _ := m["apiVersion"].(string)
		get := func(k string) string { s, _ := m[k].(string); return s }
		c := &celCheck{inProgress: compile(kind+".inProgress", get("inProgress")), failed: compile(kind+".failed", get("failed")),
			current: compile(kind+".current", get("current"))}
		if c.current == nil {
			t.Fatalf("%s: current is required", kind)
		}
		want := map[string]string{"Colony": infrav1.GroupVersion.String()}[kind]
		if want == "" {
			want = workspacesv1.GroupVersion.String()
		}
		if apiVersion != want {
			t.Errorf("%s: apiVersion %s, want %s", kind, apiVersion, want)
		}
		out[kind] = c
	}
	return out
}

// evaluate runs the expressions in Flux's order (inProgress, failed, current; the first true one
// decides, none means in progress).
func (c *celCheck) evaluate(t *testing.T, obj *unstructured.Unstructured) status.Status {
	t.Helper()
	for _, e := range []struct {
		prg  cel.Program
		then status.Status
	}{{c.inProgress, status.InProgressStatus}, {c.failed, status.FailedStatus}, {c.current, status.CurrentStatus}} {
		if e.prg == nil {
			continue
		}
		v, _, err := e.prg.ContextEval(context.Background(), vars(obj))
		if err != nil {
			t.Fatalf("evaluating for %s: %v", e.then, err)
		}
		if v.Value() == true {
			return e.then
		}
	}
	return status.InProgressStatus
}

// argoScripts reads the health scripts of the example argocd-cm, by kind.
func argoScripts(t *testing.T) map[string]string {
	t.Helper()
	cm := find(t, manifests(t, "argocd"), "v1", "ConfigMap")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	const prefix = "resource.customizations.health."
	out := map[string]string{}
	for k, v := range data {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		group, kind, ok := strings.Cut(strings.TrimPrefix(k, prefix), "_")
		want := map[string]string{"Colony": infrav1.GroupVersion.Group}[kind]
		if want == "" {
			want = workspacesv1.GroupVersion.Group
		}
		if !ok || group != want {
			t.Errorf("%s: want the key %s%s_%s", k, prefix, want, kind)
		}
		out[kind] = v
	}
	return out
}

// runLua runs a health script the way Argo CD does: obj is the object as a Lua table, and the script
// returns a table with status and message.
func runLua(t *testing.T, script string, obj *unstructured.Unstructured) (string, string) {
	t.Helper()
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.fn))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(script); err != nil {
		t.Fatalf("running the script: %v", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the script returned %s, not a table", l.Get(-1).Type())
	}
	return ret.RawGetString("status").String(), ret.RawGetString("message").String()
}

// toLua converts a JSON-like value into Lua values, numbers as Lua numbers, as Argo CD does.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	}
	panic(fmt.Sprintf("no Lua value for %T", v))
}

// TestHealthChecksWithoutStatus: an object as the API server stores it before its controller wrote
// any status has no status field at all. The Argo CD scripts call it Progressing; the Flux expressions
// cannot be evaluated on it (status is unbound), which Flux treats by waiting, as for an object in
// progress, until the controller writes a status.
func TestHealthChecksWithoutStatus(t *testing.T) {
	exprs := fluxExprs(t)
	scripts := argoScripts(t)
	for _, kind := range []string{"Colony", "WorkspaceClass", "WorkspaceDeployment", "WorkspaceQuota"} {
		obj := object(t, kind, state{})
		delete(obj.Object, "status")
		if got, msg := runLua(t, scripts[kind], obj); got != "Progressing" {
			t.Errorf("%s: Argo CD script says %s (%s), want Progressing", kind, got, msg)
		}
		if _, _, err := exprs[kind].inProgress.ContextEval(context.Background(), vars(obj)); err == nil {
			t.Errorf("%s: the Flux inProgress expression evaluates without a status", kind)
		}
	}
}

// vars are the CEL variables Flux binds for an object: its top-level fields.
func vars(obj *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range obj.Object {
		out[k] = v
	}
	return out
}
