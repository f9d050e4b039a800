package k0rdentsim

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// KCMRelease is the KCM release whose ServiceSet status the simulator writes.
type KCMRelease string

const (
	// KCMv111 plays KCM v1.11 (v1.11.4 is the newest general release): a Helm service is Deployed once
	// Sveltos's Helm install or upgrade returned, and no lastDeployedHash is written.
	KCMv111 KCMRelease = "v1.11"
	// KCMv112 plays KCM v1.12 (v1.12.0-rc2): a Helm service is Deployed only once its resources on the
	// child pass KCM's default health rules (health.go), and the service's lastDeployedHash, the
	// fingerprint of what was deployed, moves when a new configuration is confirmed so.
	KCMv112 KCMRelease = "v1.12"
)

// serviceSetCRD is the name of KCM's ServiceSet CRD.
const serviceSetCRD = "servicesets.k0rdent.mirantis.com"

// KCMOfCRDs returns the KCM release whose CRDs the management cluster serves. The project's own
// mirror (common/config/crd/k0rdent, installed unless K0RDENT_CRDS names KCM's CRDs) declares every
// field of KCM v1.3 to v1.12, so its schema says nothing of a release: it gets v1.11, the newest
// general release. KCM's own CRDs are v1.12's when the ServiceSet CRD keeps
// status.services[].lastDeployedHash, else v1.11's.
func KCMOfCRDs(ctx context.Context, cfg *rest.Config) (KCMRelease, error) {
	if !testenv.RealK0rdentCRDs() {
		return KCMv111, nil
	}
	has, err := servesLastDeployedHash(ctx, cfg)
	if err != nil {
		return "", err
	}
	if has {
		return KCMv112, nil
	}
	return KCMv111, nil
}

// servesLastDeployedHash reports whether the served ServiceSet CRD keeps
// status.services[].lastDeployedHash (KCM v1.12 and the project's mirror).
func servesLastDeployedHash(ctx context.Context, cfg *rest.Config) (bool, error) {
	sch := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(sch); err != nil {
		return false, err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return false, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: serviceSetCRD}, &crd); err != nil {
		return false, fmt.Errorf("reading the ServiceSet CRD: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		p, ok := v.Schema.OpenAPIV3Schema.Properties["status"]
		if !ok {
			continue
		}
		if p, ok = p.Properties["services"]; !ok || p.Items == nil || p.Items.Schema == nil {
			continue
		}
		if _, ok := p.Items.Schema.Properties["lastDeployedHash"]; ok {
			return true, nil
		}
	}
	return false, nil
}

// kcmFits checks that a KCM release fits the served CRDs: v1.12 needs a ServiceSet CRD that
// keeps lastDeployedHash.
func kcmFits(ctx context.Context, cfg *rest.Config, kcm KCMRelease) error {
	switch kcm {
	case KCMv111:
		return nil
	case KCMv112:
		has, err := servesLastDeployedHash(ctx, cfg)
		if err != nil {
			return err
		}
		if !has {
			return fmt.Errorf("KCM %s: the served ServiceSet CRD has no status.services[].lastDeployedHash (KCM's CRDs before v1.12)", kcm)
		}
		return nil
	}
	return fmt.Errorf("KCM %q: want %s or %s", kcm, KCMv111, KCMv112)
}
