package k0rdentsim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// providerConfig is the part of a ServiceSet's spec.provider.config the simulator honours.
type providerConfig struct {
	ContinueOnError        bool   `json:"continueOnError"`
	MaxConsecutiveFailures *int64 `json:"maxConsecutiveFailures"`
}

func parseProviderConfig(ss *k0rdentv1beta1.ServiceSet) (providerConfig, error) {
	var pc providerConfig
	if ss.Spec.Provider.Config == nil || len(ss.Spec.Provider.Config.Raw) == 0 {
		return pc, nil
	}
	if err := json.Unmarshal(ss.Spec.Provider.Config.Raw, &pc); err != nil {
		return pc, fmt.Errorf("spec.provider.config: %w", err)
	}
	return pc, nil
}

// plan is what one service needs.
type plan struct {
	svc         k0rdentv1beta1.ServiceWithValues
	state       k0rdentv1beta1.ServiceDeploymentState
	message     string
	fingerprint string
	// hash is the fingerprint of the release's configuration as KCM v1.12 stamps it in
	// lastDeployedHash (deployedHash); empty for an uninstall.
	hash string
	// uninstall is set when work removes the release (the state meanwhile is Deleting).
	uninstall bool
	work      func() error
}

// plan decides, per service, whether Helm must act and what state to report meanwhile.
func (r *serviceSetReconciler) plan(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, h helmClient, childName string, pc providerConfig) ([]plan, error) {
	var buildErr error
	plans := make([]plan, 0, len(ss.Spec.Services))
	for _, svc := range ss.Spec.Services {
		p := plan{svc: svc}
		plans = append(plans, p)
		pp := &plans[len(plans)-1]
		var tmpl k0rdentv1beta1.ServiceTemplate
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: svc.Template}, &tmpl); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			buildErr = fmt.Errorf("ServiceTemplate %s/%s not found", ss.Namespace, svc.Template)
			pp.state, pp.message = k0rdentv1beta1.ServiceStateProvisioning, buildErr.Error()
			continue
		}
		if !tmpl.Status.Valid {
			buildErr = fmt.Errorf("ServiceTemplate %s/%s is not valid: %s", ss.Namespace, svc.Template, tmpl.Status.ValidationError)
			pp.state, pp.message = k0rdentv1beta1.ServiceStateProvisioning, buildErr.Error()
			continue
		}
		opts, err := parseHelmOptions(mergeHelmOptions(tmpl.Spec.HelmOptions, svc.HelmOptions))
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		if svc.HelmAction != nil && *svc.HelmAction == k0rdentv1beta1.HelmActionUninstall {
			rel, err := h.release(svc.Namespace, svc.Name)
			if err != nil {
				pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
				continue
			}
			pp.state = k0rdentv1beta1.ServiceStateDeleted
			if rel != nil {
				pp.uninstall = true
				pp.fingerprint = "uninstall"
				pp.work = func() error { return h.uninstall(svc.Namespace, svc.Name, opts.Timeout) }
				r.gate(failureKey(childName, ss, svc), pp, pc)
			}
			continue
		}
		chrt, err := loadChart(r.chartsDir, &tmpl)
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		vals, err := serviceValues(ctx, r.reader, ss.Namespace, ss.Spec.Cluster, svc)
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		rel, err := h.release(svc.Namespace, svc.Name)
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		pp.hash = deployedHash(chrt, svc.Namespace, svc.Name, vals)
		if upToDate(rel, chrt, vals) {
			pp.state = k0rdentv1beta1.ServiceStateDeployed
			continue
		}
		fp, _ := json.Marshal([]interface{}{chrt.Metadata.Name, chrt.Metadata.Version, vals, opts})
		pp.fingerprint = string(fp)
		pp.work = func() error {
			_, err := h.apply(svc.Namespace, svc.Name, chrt, vals, opts)
			return err
		}
		r.gate(failureKey(childName, ss, svc), pp, pc)
	}
	return plans, buildErr
}

// gate holds back the work of a release that failed before with the same inputs: until its backoff
// has passed, or for good once maxConsecutiveFailures attempts in a row failed (Sveltos's
// FailedNonRetriable). Changed inputs retry at once.
func (r *serviceSetReconciler) gate(key string, pp *plan, pc providerConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failed[key]
	if !ok || f.fingerprint != pp.fingerprint {
		return
	}
	if pc.MaxConsecutiveFailures != nil && int64(f.count) >= *pc.MaxConsecutiveFailures {
		pp.state, pp.message, pp.work = k0rdentv1beta1.ServiceStateFailed, fmt.Sprintf("%s (not retried after %d consecutive failures)", f.message, f.count), nil
		return
	}
	if time.Now().Before(f.next) {
		pp.state, pp.message, pp.work = k0rdentv1beta1.ServiceStateFailed, f.message, nil
	}
}

// mergeHelmOptions lays a service's helmOptions over its template's, key by key.
func mergeHelmOptions(tmpl, svc *apiextensionsJSON) *apiextensionsJSON {
	if tmpl == nil || len(tmpl.Raw) == 0 {
		return svc
	}
	if svc == nil || len(svc.Raw) == 0 {
		return tmpl
	}
	var a, b map[string]interface{}
	if json.Unmarshal(tmpl.Raw, &a) != nil || json.Unmarshal(svc.Raw, &b) != nil {
		return svc
	}
	for k, v := range b {
		a[k] = v
	}
	raw, _ := json.Marshal(a)
	return &apiextensionsJSON{Raw: raw}
}
