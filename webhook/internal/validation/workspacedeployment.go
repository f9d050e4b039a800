package validation

import (
	"encoding/json"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/classpaths"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// DefaultMaxReplicas is the default upper bound of a WorkspaceDeployment's replicas.
const DefaultMaxReplicas = 64

// MaxWorkspaceNameLength keeps `ws-<name>` within 63 characters.
const MaxWorkspaceNameLength = 60

// DeploymentOptions tune the WorkspaceDeployment rules.
type DeploymentOptions struct {
	// MaxReplicas bounds spec.resources.replicas; DefaultMaxReplicas when zero.
	MaxReplicas int32
}

func (o DeploymentOptions) maxReplicas() int32 {
	if o.MaxReplicas <= 0 {
		return DefaultMaxReplicas
	}
	return o.MaxReplicas
}

// WorkspaceDeployment checks a deployment on create (and on an update that changes its spec). class
// is nil when the class does not exist (yet): the checks that need it are skipped and the caller warns.
// It returns the denials and the warnings.
func WorkspaceDeployment(wsd *workspacesv1.WorkspaceDeployment, class *workspacesv1.WorkspaceClass, opts DeploymentOptions) (field.ErrorList, []string) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	var warnings []string
	name := field.NewPath("metadata", "name")
	errs = append(errs, dnsLabel(wsd.Name, name)...)
	if len(wsd.Name) > MaxWorkspaceNameLength {
		errs = append(errs, field.TooLong(name, wsd.Name, MaxWorkspaceNameLength))
	}
	if wsd.Spec.WorkspaceClassRef == "" {
		errs = append(errs, field.Required(spec.Child("workspaceClassRef"), "the WorkspaceClass to deploy"))
	} else {
		errs = append(errs, dnsSubdomain(wsd.Spec.WorkspaceClassRef, spec.Child("workspaceClassRef"))...)
	}
	errs = append(errs, target(wsd, spec)...)
	errs = append(errs, overrides(wsd.Spec.Resources, class, opts, spec.Child("resources"))...)
	errs = append(errs, valuesFrom(wsd.Spec.ValuesFrom, spec.Child("valuesFrom"))...)
	errs = append(errs, positiveDuration(wsd.Spec.StopAfter, spec.Child("stopAfter"))...)
	verrs, vwarn := values(wsd, class, spec.Child("values"))
	errs = append(errs, verrs...)
	warnings = append(warnings, vwarn...)
	return Sort(errs), warnings
}

// target checks where the workspace runs: exactly one of spec.clusterDeploymentRef, spec.colonyRef
// and spec.clusterSelector, each well formed.
func target(wsd *workspacesv1.WorkspaceDeployment, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	ref := wsd.Spec.ClusterDeploymentRef
	set := 0
	for _, on := range []bool{ref.Name != "" || ref.Namespace != "", wsd.Spec.ColonyRef != nil, wsd.Spec.ClusterSelector != nil} {
		if on {
			set++
		}
	}
	switch {
	case set == 0:
		return field.ErrorList{field.Required(spec.Child("clusterDeploymentRef", "name"),
			"the ClusterDeployment to deploy on; or set spec.colonyRef or spec.clusterSelector to let the controller place the workspace")}
	case set > 1:
		errs = append(errs, field.Invalid(spec, "clusterDeploymentRef, colonyRef, clusterSelector",
			"exactly one of spec.clusterDeploymentRef, spec.colonyRef and spec.clusterSelector must be set"))
	}
	cd := spec.Child("clusterDeploymentRef")
	if ref.Name != "" || ref.Namespace != "" {
		if ref.Name == "" {
			errs = append(errs, field.Required(cd.Child("name"), "the ClusterDeployment to deploy on"))
		} else {
			errs = append(errs, dnsSubdomain(ref.Name, cd.Child("name"))...)
		}
		if ref.Namespace != "" {
			errs = append(errs, dnsLabel(ref.Namespace, cd.Child("namespace"))...)
		}
	}
	if c := wsd.Spec.ColonyRef; c != nil {
		if c.Name == "" {
			errs = append(errs, field.Required(spec.Child("colonyRef", "name"), "the Colony whose clusters the workspace may run on"))
		} else {
			errs = append(errs, dnsSubdomain(c.Name, spec.Child("colonyRef", "name"))...)
		}
		if c.Namespace != "" {
			errs = append(errs, dnsLabel(c.Namespace, spec.Child("colonyRef", "namespace"))...)
		}
	}
	if sel := wsd.Spec.ClusterSelector; sel != nil {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(spec.Child("clusterSelector"), sel.String(), err.Error()))
		}
	}
	if n := wsd.Spec.ClusterSelectorNamespace; n != "" {
		if wsd.Spec.ClusterSelector == nil {
			errs = append(errs, field.Forbidden(spec.Child("clusterSelectorNamespace"), "is only used with spec.clusterSelector"))
		}
		errs = append(errs, dnsLabel(n, spec.Child("clusterSelectorNamespace"))...)
	}
	return errs
}

// Priority checks spec.priority against the highest priority the namespace's WorkspaceQuotas allow.
func Priority(wsd *workspacesv1.WorkspaceDeployment, maxPriority int32) field.ErrorList {
	if wsd.Spec.Priority <= maxPriority {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "priority"), fmt.Sprintf(
		"%d is above %d, the highest priority the WorkspaceQuotas of namespace %s allow (spec.maxPriority; 0 without one)",
		wsd.Spec.Priority, maxPriority, wsd.Namespace))}
}

// OnlyStoppedChanged reports whether an update changes spec.stopped and nothing else of the spec: a
// stop or a start, by a user or by the controller's spec.stopAfter, is never held up by checks of
// fields it leaves alone.
func OnlyStoppedChanged(oldWSD, newWSD *workspacesv1.WorkspaceDeployment) bool {
	if oldWSD.Spec.Stopped == newWSD.Spec.Stopped {
		return false
	}
	o, n := oldWSD.Spec.DeepCopy(), newWSD.Spec.DeepCopy()
	o.Stopped = n.Stopped
	return apiequality.Semantic.DeepEqual(o, n)
}

// WorkspaceDeploymentUpdate checks the fields that never change after creation.
func WorkspaceDeploymentUpdate(oldWSD, newWSD *workspacesv1.WorkspaceDeployment) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if oldWSD.Spec.WorkspaceClassRef != newWSD.Spec.WorkspaceClassRef {
		errs = append(errs, field.Forbidden(spec.Child("workspaceClassRef"),
			"is immutable: delete the WorkspaceDeployment and create it again with the new class (its volumes go with it), or create another WorkspaceDeployment beside it; stop and start keep the class"))
	}
	if !apiequality.Semantic.DeepEqual(oldWSD.Spec.ColonyRef, newWSD.Spec.ColonyRef) {
		errs = append(errs, field.Forbidden(spec.Child("colonyRef"),
			"is immutable: delete the WorkspaceDeployment and create it again with the other Colony"))
	}
	if !apiequality.Semantic.DeepEqual(oldWSD.Spec.ClusterSelector, newWSD.Spec.ClusterSelector) {
		errs = append(errs, field.Forbidden(spec.Child("clusterSelector"),
			"is immutable: delete the WorkspaceDeployment and create it again with the other selector"))
	}
	if oldWSD.Spec.ClusterSelectorNamespace != newWSD.Spec.ClusterSelectorNamespace {
		errs = append(errs, field.Forbidden(spec.Child("clusterSelectorNamespace"),
			"is immutable: delete the WorkspaceDeployment and create it again with the other namespace"))
	}
	oldRef, newRef := oldWSD.Spec.ClusterDeploymentRef, newWSD.Spec.ClusterDeploymentRef
	if oldRef.Name == "" && newRef.Name == "" {
		return Sort(errs)
	}
	if oldRef.Name != newRef.Name {
		errs = append(errs, field.Forbidden(spec.Child("clusterDeploymentRef", "name"),
			"is immutable: delete the WorkspaceDeployment and create it again on the other cluster"))
	}
	if effectiveNamespace(oldRef.Namespace, oldWSD.Namespace) != effectiveNamespace(newRef.Namespace, newWSD.Namespace) {
		errs = append(errs, field.Forbidden(spec.Child("clusterDeploymentRef", "namespace"),
			"is immutable: delete the WorkspaceDeployment and create it again on the other cluster"))
	}
	return Sort(errs)
}

func effectiveNamespace(ref, own string) string {
	if ref == "" {
		return own
	}
	return ref
}

// overrides checks resource overrides: positive quantities, bounded replicas, GPU selection only with
// GPUs, a vendor that agrees with the class, and valid label selectors.
func overrides(r *workspacesv1.ResourceOverrides, class *workspacesv1.WorkspaceClass, opts DeploymentOptions, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if r.Replicas != nil {
		if max := opts.maxReplicas(); *r.Replicas < 1 || *r.Replicas > max {
			errs = append(errs, field.Invalid(p.Child("replicas"), *r.Replicas, fmt.Sprintf("must be between 1 and %d", max)))
		}
	}
	pr := r.PerReplica
	if pr == nil {
		return errs
	}
	pp := p.Child("perReplica")
	errs = append(errs, perReplicaQuantities(pr, pp)...)
	gpus := pr.GPUCount != nil && *pr.GPUCount > 0
	if pr.GPUType != "" && !gpus {
		errs = append(errs, field.Forbidden(pp.Child("gpuType"), "needs perReplica.gpuCount greater than zero"))
	}
	if len(pr.GPUNodeSelector) > 0 && !gpus {
		errs = append(errs, field.Forbidden(pp.Child("gpuNodeSelector"), "needs perReplica.gpuCount greater than zero"))
	}
	if pr.GPUType != "" {
		for _, msg := range labelValueErrors(pr.GPUType) {
			errs = append(errs, field.Invalid(pp.Child("gpuType"), pr.GPUType, msg+" (it is matched against the node label "+gpu.LabelGPUModel+")"))
		}
	}
	errs = append(errs, labelMap(pr.GPUNodeSelector, pp.Child("gpuNodeSelector"))...)
	if model, ok := pr.GPUNodeSelector[gpu.LabelGPUModel]; ok && pr.GPUType != "" && model != pr.GPUType {
		errs = append(errs, field.Invalid(pp.Child("gpuNodeSelector").Key(gpu.LabelGPUModel), model,
			fmt.Sprintf("contradicts gpuType %q: no node can match both", pr.GPUType)))
	}
	if class != nil && pr.GPUVendor != "" {
		if cr := class.Spec.DefaultResources.PerReplica; cr != nil && cr.GPUVendor != "" && cr.GPUVendor != pr.GPUVendor {
			errs = append(errs, field.Invalid(pp.Child("gpuVendor"), pr.GPUVendor,
				fmt.Sprintf("WorkspaceClass %s is built for %s GPUs", class.Name, cr.GPUVendor)))
		}
	}
	return errs
}

// valuesFrom checks the kinds and names of the valuesFrom sources; a source is named once.
func valuesFrom(refs []workspacesv1.ValuesFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, ref := range refs {
		ip := p.Index(i)
		switch ref.Kind {
		case workspacesv1.ValuesSourceSecret, workspacesv1.ValuesSourceConfigMap:
		default:
			errs = append(errs, field.NotSupported(ip.Child("kind"), ref.Kind,
				[]workspacesv1.ValuesSourceKind{workspacesv1.ValuesSourceSecret, workspacesv1.ValuesSourceConfigMap}))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), "the Secret or ConfigMap holding values"))
		} else {
			errs = append(errs, dnsSubdomain(ref.Name, ip.Child("name"))...)
		}
		key := string(ref.Kind) + "/" + ref.Name
		if seen[key] {
			errs = append(errs, field.Duplicate(ip, key))
		}
		seen[key] = true
	}
	return errs
}

// ValuesFromToReview returns the indexes of the spec.valuesFrom sources of newRefs whose reading the
// requesting user must be allowed: every source on create (oldRefs nil), and on update each source
// (kind and name) that oldRefs did not name. Sources of another kind than Secret or ConfigMap are left
// out (the kind rule refuses them).
//
// An update that keeps a source is not checked again, on purpose. The check is about who names a
// source: the controller reads every named source on every pass, whoever edited the workspace last,
// so an edit that keeps the list (or removes, reorders, or marks a source optional) makes the operator
// read nothing it did not read before, and a workspace's other editors (a user who may not read a
// Secret a platform admin named) may still change its replicas or values. Checking every source on
// every edit would not revoke anything either: a user who lost the right to read a source already
// named is stopped only by removing the source, or the workspace.
func ValuesFromToReview(oldRefs, newRefs []workspacesv1.ValuesFromSource) []int {
	had := make(map[workspacesv1.ValuesFromSource]bool, len(oldRefs))
	for _, ref := range oldRefs {
		had[workspacesv1.ValuesFromSource{Kind: ref.Kind, Name: ref.Name}] = true
	}
	var out []int
	for i, ref := range newRefs {
		if ref.Kind != workspacesv1.ValuesSourceSecret && ref.Kind != workspacesv1.ValuesSourceConfigMap {
			continue
		}
		if !had[workspacesv1.ValuesFromSource{Kind: ref.Kind, Name: ref.Name}] {
			out = append(out, i)
		}
	}
	return out
}

// values checks the deployment's Helm values against the class's userFacingConfig: required paths are
// present, and types and options are respected. Writing to the operator's block is denied; writing to
// a resourceInjection path is allowed with a warning, since the operator overwrites it.
func values(wsd *workspacesv1.WorkspaceDeployment, class *workspacesv1.WorkspaceClass, p *field.Path) (field.ErrorList, []string) {
	var vals map[string]any
	if wsd.Spec.Values != nil {
		if err := valuepath.CheckSize(p.String(), len(wsd.Spec.Values.Raw)); err != nil {
			return field.ErrorList{limitError(p, err)}, nil
		}
		var err error
		if vals, err = decodeObject(wsd.Spec.Values.Raw); err != nil {
			return field.ErrorList{field.Invalid(p, field.OmitValueType{}, err.Error())}, nil
		}
		if err := valuepath.CheckShape(p.String(), vals); err != nil {
			return field.ErrorList{limitError(p, err)}, nil
		}
	}
	var errs field.ErrorList
	if _, ok := vals[workspacesv1.ExalsiusValuesKey]; ok {
		errs = append(errs, field.Forbidden(p.Child(workspacesv1.ExalsiusValuesKey), "is written by the operator; set resources in spec.resources"))
	}
	if class == nil {
		return errs, nil
	}
	errs = append(errs, undeclaredValues(vals, class, p)...)
	errs = append(errs, enforcedValues(vals, class, p)...)
	var warnings []string
	for i := range class.Spec.UserFacingConfig {
		pc, _ := parseConfig(&class.Spec.UserFacingConfig[i], field.NewPath("spec", "userFacingConfig").Index(i))
		if pc.segs == nil {
			continue
		}
		vp := ValuePath(p, pc.segs)
		v, ok := lookup(vals, pc.segs)
		if !ok || v == nil {
			// A required value may come from spec.valuesFrom, which is read when the workspace is
			// installed; the controller reports it missing there.
			if pc.cfg.Required && !pc.hasDef && len(wsd.Spec.ValuesFrom) == 0 {
				errs = append(errs, field.Required(vp, fmt.Sprintf("WorkspaceClass %s requires %q (%s)", class.Name, pc.cfg.DisplayName, pc.cfg.Type)))
			}
			continue
		}
		if s, ok := v.(string); ok && pc.cfg.Type == workspacesv1.UserFacingConfigPublicKey && len(pc.options) == 0 && publicKeyPlaceholder(s) {
			// A key line with a placeholder key (left in a manifest): the upstream operator admits it,
			// and a refusal would break manifests that worked there. Warn, naming the path.
			warnings = append(warnings, fmt.Sprintf("%s %s; it is admitted, but no SSH login will accept it", vp, checkPublicKey(s)))
			continue
		}
		errs = append(errs, checkUserValue(pc.cfg, pc.options, v, vp)...)
	}
	for _, ip := range classpaths.Injection(class.Spec.ResourceInjection, field.NewPath("spec")) {
		pc := workspacesv1.UserFacingConfig{HelmValuePath: ip.Raw}
		parsed, _ := parseConfig(&pc, p)
		if parsed.segs == nil {
			continue
		}
		if _, ok := lookup(vals, parsed.segs); ok {
			warnings = append(warnings, fmt.Sprintf("%s is overwritten with the resolved %s (resourceInjection of WorkspaceClass %s); set spec.resources instead",
				ValuePath(p, parsed.segs), ip.Kind, class.Name))
		}
	}
	return errs, warnings
}

// undeclaredValues refuses, under the class's valuesPolicy Declared, every value at a path its
// userFacingConfig does not declare (common/valuepath.Undeclared), naming the path, never the value.
func undeclaredValues(vals map[string]any, class *workspacesv1.WorkspaceClass, p *field.Path) field.ErrorList {
	if class.Spec.ValuesPolicy != workspacesv1.ValuesPolicyDeclared || len(vals) == 0 {
		return nil
	}
	declared := make([][]string, 0, len(class.Spec.UserFacingConfig))
	for i := range class.Spec.UserFacingConfig {
		if keys, err := valuepath.Parse(class.Spec.UserFacingConfig[i].HelmValuePath); err == nil {
			declared = append(declared, keys)
		}
	}
	paths, more := valuepath.Undeclared(vals, declared)
	var errs field.ErrorList
	detail := fmt.Sprintf("WorkspaceClass %s accepts only the values it declares in spec.userFacingConfig (its valuesPolicy is Declared)", class.Name)
	for _, path := range paths {
		segs, err := valuepath.Parse(path)
		if err != nil {
			continue
		}
		errs = append(errs, field.Forbidden(ValuePath(p, segs), detail))
	}
	if more {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("and more undeclared paths; %s", detail)))
	}
	return errs
}

// enforcedValues refuses values at the paths the class's spec.enforcedValues sets (or above them),
// naming each path, never the value: the class's values win, and a user value there would be lost.
func enforcedValues(vals map[string]any, class *workspacesv1.WorkspaceClass, p *field.Path) field.ErrorList {
	if class.Spec.EnforcedValues == nil || len(vals) == 0 {
		return nil
	}
	enforced, err := decodeObject(class.Spec.EnforcedValues.Raw)
	if err != nil {
		return nil // the class's own validation reports it
	}
	paths, more := valuepath.Overlapping(vals, valuepath.Leaves(enforced))
	detail := fmt.Sprintf("is set by WorkspaceClass %s (spec.enforcedValues) and cannot be changed", class.Name)
	var errs field.ErrorList
	for _, path := range paths {
		if segs, err := valuepath.Parse(path); err == nil {
			errs = append(errs, field.Forbidden(ValuePath(p, segs), detail))
		}
	}
	if more {
		errs = append(errs, field.Forbidden(p, "and more paths that "+detail))
	}
	return errs
}

// limitError is the field error of values over a limit of common/valuepath (the limits the
// workspace-controller applies to every document of values); it never quotes the values.
func limitError(p *field.Path, err error) *field.Error {
	var le *valuepath.LimitError
	if errors.As(err, &le) {
		return field.Invalid(p, field.OmitValueType{}, le.Reason())
	}
	return field.Invalid(p, field.OmitValueType{}, err.Error())
}

// WorkspaceDeploymentPreflight checks, on the raw object, what the API server would otherwise report
// without a field path or one error at a time: a name the CRD's CEL rule refuses at the object's root
// (`<nil>`), and quantities that do not parse (which stop a typed decode, so that every other error
// would be hidden). It names every such field in one list, with the sign of each quantity that does
// parse. It runs before the API server's schema validation (from the mutating webhook), so the client
// sees all of them at once. An object that is not JSON gives one error at the root.
func WorkspaceDeploymentPreflight(raw []byte) field.ErrorList {
	obj, err := decodeObject(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), field.OmitValueType{}, "the object is not valid JSON: "+err.Error())}
	}
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	if meta, ok := obj["metadata"].(map[string]any); ok {
		if n, ok := meta["name"].(string); ok && n != "" {
			if len(n) > MaxWorkspaceNameLength {
				errs = append(errs, field.TooLong(name, n, MaxWorkspaceNameLength))
			}
			errs = append(errs, dnsLabel(n, name)...)
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	res, _ := spec["resources"].(map[string]any)
	pr, _ := res["perReplica"].(map[string]any)
	p := field.NewPath("spec", "resources", "perReplica")
	for _, k := range []string{"cpu", "memory", "storage"} {
		v, ok := pr[k]
		if !ok || v == nil {
			continue
		}
		errs = append(errs, rawQuantity(v, p.Child(k))...)
	}
	return Sort(errs)
}

// rawQuantity checks a decoded JSON value that must be a positive quantity (a string or a number).
func rawQuantity(v any, p *field.Path) field.ErrorList {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return field.ErrorList{field.Invalid(p, v, "must be a quantity such as \"2\", \"500m\" or \"8Gi\", not "+jsonKind(v))}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return field.ErrorList{field.Invalid(p, s, "must be a quantity such as \"2\", \"500m\" or \"8Gi\"")}
	}
	return positiveQuantity(&q, p)
}
