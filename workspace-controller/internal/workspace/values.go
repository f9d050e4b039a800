package workspace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/helmvalues"
)

// values builds the Helm values of the workspace for its resolved resources (docs/RECONCILIATION.md,
// step 14), the admitted node pinned by then.
func (r *Reconciler) values(ctx context.Context, s *scope) (stepResult, error) {
	return r.valuesFor(ctx, s, s.resources)
}

// valuesCheck builds the values before the gate (docs/RECONCILIATION.md, step 8), so that values that
// fail the workspace fail it before an admission is written. A workspace the gate admitted before
// has its node pinned already, as "pin to admitted nodes" will pin it: when the gate keeps the
// admission, as it does at every pass after the first, the "values" step finds the same input and
// does not build them again.
func (r *Reconciler) valuesCheck(ctx context.Context, s *scope) (stepResult, error) {
	res := s.resources
	if pin := gate.PinSelector(s.ws.Status.Admission); len(pin) > 0 && res != nil {
		res = res.DeepCopy()
		res.NodeSelector = withSelector(res.NodeSelector, pin)
	}
	return r.valuesFor(ctx, s, res)
}

// builtValues is the last values a pass built and what they were built from (besides the class, the
// workspace's spec and its valuesFrom sources, which do not change within a pass).
type builtValues struct {
	resources *workspacesv1.ResolvedResources
	admission *workspacesv1.Admission
	out       helmvalues.Output
}

// builtFrom tells whether b was built from res and the admission ad.
func (b *builtValues) builtFrom(res *workspacesv1.ResolvedResources, ad *workspacesv1.Admission) bool {
	return b != nil && apiequality.Semantic.DeepEqual(b.resources, res) && apiequality.Semantic.DeepEqual(b.admission, ad)
}

// valuesFor builds the Helm values of the workspace for res: spec.valuesFrom is read, the class's
// userFacingConfig defaults fill what is unset, required entries are checked, and the values are split
// into inline values and the values that travel in the workspace's values Secret (s.values,
// s.secretValues).
func (r *Reconciler) valuesFor(ctx context.Context, s *scope, res *workspacesv1.ResolvedResources) (stepResult, error) {
	// The pass runs this step twice (a check before the gate, then with the admitted node pinned):
	// the sources are read once per pass.
	if s.sourcesRead == nil {
		from, missing, problem, err := r.readValuesFrom(ctx, s.ws)
		if err != nil {
			return stop, err
		}
		s.sourcesRead = &valuesFromRead{from: from, missing: missing, problem: problem}
	}
	missing, problem := s.sourcesRead.missing, s.sourcesRead.problem
	if problem != "" {
		s.failed(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonInvalidValues, problem)
		return stop, nil
	}
	if len(missing) > 0 {
		msg := "spec.valuesFrom: waiting for " + strings.Join(missing, ", ") + " in namespace " + s.ws.Namespace + " (mark a source optional to go on without it)"
		if s.installed() {
			// Gone, often only briefly (a Secret re-created by its tool): the release keeps the values
			// it has.
			s.holding(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonValuesFromNotFound, msg+"; the installed release is left as it is")
			return stop, nil
		}
		s.waitFor(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonValuesFromNotFound, msg)
		return stop, nil
	}
	out, err := r.buildValues(s, res)
	if err != nil {
		s.failed(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonInvalidValues, err.Error())
		return stop, nil
	}
	if len(out.Missing) > 0 {
		s.failed(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonMissingRequiredValue,
			fmt.Sprintf("WorkspaceClass %s requires a value at %s; set it in spec.values or spec.valuesFrom",
				s.class.Name, strings.Join(out.Missing, ", ")))
		return stop, nil
	}
	s.values = out.Inline
	s.secretValues = out.Secret
	if len(out.Overwritten) > 0 {
		s.setCondition(workspacesv1.ResourcesInjectedCondition, "False", workspacesv1.ReasonUserValuesOverwritten,
			"the operator overwrote these user value paths with the resolved resources or the class's spec.enforcedValues: "+strings.Join(out.Overwritten, ", "))
	} else {
		s.setTrue(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonResourcesInjected,
			"resources are injected in _exalsius and the class's resourceInjection paths")
	}
	return next, nil
}

// buildValues builds the workspace's values for res, or returns the ones the pass built from the same
// input.
func (r *Reconciler) buildValues(s *scope, res *workspacesv1.ResolvedResources) (helmvalues.Output, error) {
	if s.built.builtFrom(res, s.ws.Status.Admission) {
		return s.built.out, nil
	}
	// helmvalues.Build takes the sources apart (secret values leave the inline ones): it gets a copy.
	out, err := helmvalues.Build(helmvalues.Input{Class: s.class, Workspace: s.ws, Resources: res, From: copySources(s.sourcesRead.from)})
	if err != nil {
		return out, err
	}
	s.built = &builtValues{resources: res.DeepCopy(), admission: s.ws.Status.Admission.DeepCopy(), out: out}
	return out, nil
}

// copySources deep-copies decoded values documents.
func copySources(in []helmvalues.Source) []helmvalues.Source {
	out := make([]helmvalues.Source, len(in))
	for i, src := range in {
		out[i] = helmvalues.Source{Values: copyValue(src.Values).(map[string]any), Secret: src.Secret}
	}
	return out
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if t == nil {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = copyValue(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = copyValue(x)
		}
		return l
	}
	return v
}

// valuesFromRead is what readValuesFrom returned.
type valuesFromRead struct {
	from    []helmvalues.Source
	missing []string
	problem string
}

// readValuesFrom reads the workspace's spec.valuesFrom sources from the API server (Secrets are not
// cached), in order. It returns the sources that are missing and not optional, by kind and name, and
// a problem when a source does not hold values. Messages name sources and keys, never the content of
// a Secret.
func (r *Reconciler) readValuesFrom(ctx context.Context, ws *workspacesv1.WorkspaceDeployment) (out []helmvalues.Source, missing []string, problem string, err error) {
	for i, ref := range ws.Spec.ValuesFrom {
		key := types.NamespacedName{Namespace: ws.Namespace, Name: ref.Name}
		var data map[string][]byte
		switch ref.Kind {
		case workspacesv1.ValuesSourceSecret:
			sec := &corev1.Secret{}
			if err := r.APIReader.Get(ctx, key, sec); err != nil {
				if apierrors.IsNotFound(err) {
					if !ref.Optional {
						missing = append(missing, "Secret "+ref.Name)
					}
					continue
				}
				return nil, nil, "", fmt.Errorf("reading spec.valuesFrom[%d] Secret %s: %w", i, key, err)
			}
			data = sec.Data
		case workspacesv1.ValuesSourceConfigMap:
			cm := &corev1.ConfigMap{}
			if err := r.APIReader.Get(ctx, key, cm); err != nil {
				if apierrors.IsNotFound(err) {
					if !ref.Optional {
						missing = append(missing, "ConfigMap "+ref.Name)
					}
					continue
				}
				return nil, nil, "", fmt.Errorf("reading spec.valuesFrom[%d] ConfigMap %s: %w", i, key, err)
			}
			data = make(map[string][]byte, len(cm.Data))
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
		default:
			return nil, nil, "", fmt.Errorf("spec.valuesFrom[%d].kind %q is neither Secret nor ConfigMap", i, ref.Kind)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			vals, err := helmvalues.Decode(data[k])
			if err != nil {
				problem = fmt.Sprintf("spec.valuesFrom[%d]: key %q of %s %s is not a YAML object of Helm values", i, k, ref.Kind, ref.Name)
				var limit *valuepath.LimitError
				switch {
				case errors.As(err, &limit):
					// A limit names no content: it is shown for a Secret too.
					problem = fmt.Sprintf("spec.valuesFrom[%d]: key %q of %s %s %s", i, k, ref.Kind, ref.Name, limit.Reason())
				case ref.Kind == workspacesv1.ValuesSourceConfigMap:
					problem += ": " + err.Error() // a parse error may quote content; only a ConfigMap's may be shown
				}
				return nil, nil, problem, nil
			}
			out = append(out, helmvalues.Source{Values: vals, Secret: ref.Kind == workspacesv1.ValuesSourceSecret})
		}
	}
	return out, missing, "", nil
}
