package k0rdentsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// apiextensionsJSON is the free-form JSON type of helmOptions.
type apiextensionsJSON = apiextensionsv1.JSON

// helmOptions is the subset of a service's helmOptions the simulator honours, with the defaults KCM
// v1.11.3 and later (v1.11.4, v1.12) apply: the release is atomic (which implies wait) unless atomic is false, whether
// or not other helmOptions are sent; the timeout defaults to Sveltos' five minutes.
type helmOptions struct {
	Wait    bool
	Atomic  bool
	Timeout time.Duration
}

// parseHelmOptions decodes a service's helmOptions. Errors name the field.
func parseHelmOptions(raw *apiextensionsv1.JSON) (helmOptions, error) {
	o := helmOptions{Atomic: true, Wait: true, Timeout: 5 * time.Minute}
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
		return o, nil
	}
	o.Wait = false
	var in struct {
		Wait    *bool  `json:"wait"`
		Atomic  *bool  `json:"atomic"`
		Timeout string `json:"timeout"`
	}
	if err := json.Unmarshal(raw.Raw, &in); err != nil {
		return o, fmt.Errorf("helmOptions: %w", err)
	}
	if in.Wait != nil {
		o.Wait = *in.Wait
	}
	if in.Atomic != nil {
		o.Atomic = *in.Atomic
	}
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("helmOptions.timeout: %q is not a positive duration", in.Timeout)
		}
		o.Timeout = d
	}
	o.Wait = o.Wait || o.Atomic
	return o, nil
}

// helmClient runs Helm SDK actions against one child cluster's kubeconfig file.
type helmClient struct {
	kubeconfig string
	log        logr.Logger
}

func (h helmClient) config(namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := h.kubeconfig, namespace
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := new(action.Configuration)
	logf := func(format string, v ...interface{}) { h.log.V(1).Info(fmt.Sprintf(format, v...)) }
	if err := cfg.Init(flags, namespace, "secret", logf); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// release returns the newest revision of a release, or nil when there is none.
func (h helmClient) release(namespace, name string) (*release.Release, error) {
	cfg, err := h.config(namespace)
	if err != nil {
		return nil, err
	}
	rel, err := cfg.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return rel, err
}

// upToDate reports whether rel is a deployed revision of chrt with exactly these values.
func upToDate(rel *release.Release, chrt *chart.Chart, vals map[string]interface{}) bool {
	if rel == nil || rel.Info == nil || rel.Info.Status != release.StatusDeployed || rel.Chart == nil || rel.Chart.Metadata == nil {
		return false
	}
	if rel.Chart.Metadata.Name != chrt.Metadata.Name || rel.Chart.Metadata.Version != chrt.Metadata.Version {
		return false
	}
	a, errA := json.Marshal(normalize(rel.Config))
	b, errB := json.Marshal(normalize(vals))
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// normalize treats a nil and an empty values map alike.
func normalize(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return map[string]interface{}{}
	}
	return m
}

// apply installs the release, or upgrades it when a deployed revision exists. A release left behind
// by a failed first install (non-atomic) is removed first, as `helm upgrade --install` cannot reuse it.
func (h helmClient) apply(namespace, name string, chrt *chart.Chart, vals map[string]interface{}, o helmOptions) (*release.Release, error) {
	cfg, err := h.config(namespace)
	if err != nil {
		return nil, err
	}
	last, err := h.release(namespace, name)
	if err != nil {
		return nil, err
	}
	if last != nil && last.Info != nil && last.Info.Status != release.StatusDeployed {
		hist, err := cfg.Releases.History(name)
		if err != nil {
			return nil, err
		}
		deployed := false
		for _, r := range hist {
			if r.Info != nil && (r.Info.Status == release.StatusDeployed || r.Info.Status == release.StatusSuperseded) {
				deployed = true
			}
		}
		if !deployed {
			if err := h.uninstall(namespace, name, o.Timeout); err != nil {
				return nil, err
			}
			last = nil
		}
	}
	if last == nil {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = name, namespace, true
		in.Wait, in.Atomic, in.Timeout = o.Wait, o.Atomic, o.Timeout
		return in.Run(chrt, vals)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	up.Wait, up.Atomic, up.Timeout = o.Wait, o.Atomic, o.Timeout
	up.MaxHistory = 10
	return up.Run(name, chrt, vals)
}

// uninstall removes a release; a missing release is not an error.
func (h helmClient) uninstall(namespace, name string, timeout time.Duration) error {
	cfg, err := h.config(namespace)
	if err != nil {
		return err
	}
	un := action.NewUninstall(cfg)
	un.IgnoreNotFound = true
	un.Wait = true
	un.Timeout = timeout
	_, err = un.Run(name)
	if err != nil && strings.Contains(err.Error(), "not found") {
		return nil
	}
	return err
}

// Release returns the newest revision of a Helm release on a child cluster, or nil when there is none.
// The e2e suites use it to look at what the simulator deployed.
func Release(kubeconfigPath, namespace, name string) (*release.Release, error) {
	return helmClient{kubeconfig: kubeconfigPath, log: logr.Discard()}.release(namespace, name)
}
