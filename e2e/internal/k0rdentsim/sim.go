// Package k0rdentsim is a k0rdent simulator: TEST TOOLING for the local world and the e2e suites, never
// shipped. It stands in for k0rdent's KCM, Cluster API and Sveltos on a management API server that
// has the project's typed k0rdent mirror CRDs, doing just what the operator relies on:
//
//   - ServiceTemplates are valid when their chart exists under the charts directory (examples/charts);
//     ClusterTemplates are valid; Credentials with an identityRef are ready.
//   - Each ClusterDeployment gets a child cluster (a separate API server with kwok nodes built from
//     spec.config, see world.ClusterConfig), the Secret `<cd>-kubeconfig` (key value, type
//     cluster.x-k8s.io/secret), the finalizer k0rdent.mirantis.com/cluster-deployment and KCM's
//     conditions (TemplateReady, CredentialReady, HelmReleaseReady, CAPIClusterSummary,
//     ServicesInReadyState, Ready), and, when made from a ClusterTemplate on the management cluster,
//     the Cluster API Cluster of its name with Cluster API's conditions (capicluster.go). Deleting it
//     deletes the ServiceSets whose ownerReferences name it, waits for them, then the Cluster API
//     Cluster, and tears the child down.
//   - Each ServiceSet labelled ksm.k0rdent.mirantis.com/adapter=kcm-controller-manager is deployed
//     with the Helm SDK on its child (release name and namespace from the service, namespace created,
//     wait, timeout and atomic from helmOptions) and its status is written as KCM writes it: as KCM
//     v1.11, or as KCM v1.12 (Deployed only once the release's resources on the child are healthy,
//     with lastDeployedHash) when the management cluster serves v1.12's CRDs (Options.KCM, kcm.go).
//   - A ClusterDeployment labelled k0rdent.mirantis.com/kof-cluster-role=regional becomes a regional
//     cluster with the tenant Gateway, and the simulator plays its Gateway controller (gateway.go).
//
// What it does not simulate is listed in docs/LOCAL_WORLD.md.
package k0rdentsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Options configure the simulator.
type Options struct {
	// Config reaches the management API server.
	Config *rest.Config
	// World starts and stops child clusters.
	World *world.World
	// ChartsDir holds one folder per chart (examples/charts).
	ChartsDir string
	// Log receives the simulator's logs.
	Log io.Writer
	// StatusInterval is how often service states reach ServiceSet status (KCM collects them from
	// Sveltos every 10 s: KCMStatusInterval). Zero writes each change at once. A namespace annotated
	// with StatusIntervalAnnotation uses its own interval.
	StatusInterval time.Duration
	// NoAdmission leaves KCM's ClusterDeployment admission webhook out.
	NoAdmission bool
	// KCM is the KCM release whose ServiceSet status the simulator writes (KCMv111 or KCMv112). Empty
	// means the release of the CRDs the management cluster serves (KCMOfCRDs). KCMv112 needs a
	// ServiceSet CRD that keeps lastDeployedHash (the project's mirror does).
	KCM KCMRelease
}

// KCMStatusInterval is KCM's default interval for collecting service states from Sveltos.
const KCMStatusInterval = 10 * time.Second

// Simulator is a running k0rdent simulator.
type Simulator struct {
	mgr       ctrl.Manager
	cancel    context.CancelFunc
	done      chan error
	admission *admission
}

// Scheme returns the scheme the simulator uses: common/scheme (with the k0rdent mirror).
func Scheme() *runtime.Scheme {
	return scheme.New()
}

// Start runs the simulator's controllers in this process until Stop.
func Start(ctx context.Context, o Options) (*Simulator, error) {
	if o.Config == nil || o.World == nil || o.ChartsDir == "" {
		return nil, fmt.Errorf("k0rdentsim: Config, World and ChartsDir are required")
	}
	logOut := o.Log
	if logOut == nil {
		logOut = io.Discard
	}
	logger := zap.New(zap.WriteTo(logOut), zap.UseDevMode(true))
	// client-go and controller-runtime internals log through klog and the global logger: keep them
	// in the simulator's log rather than on the terminal of `make run` or the test output.
	klog.SetLogger(logger)
	ctrl.SetLogger(logger)
	if err := EnsureKindCRDs(ctx, o.Config); err != nil {
		return nil, fmt.Errorf("k0rdentsim: %w", err)
	}
	kcm := o.KCM
	if kcm == "" {
		var err error
		if kcm, err = KCMOfCRDs(ctx, o.Config); err != nil {
			return nil, fmt.Errorf("k0rdentsim: %w", err)
		}
	}
	if err := kcmFits(ctx, o.Config, kcm); err != nil {
		return nil, fmt.Errorf("k0rdentsim: %w", err)
	}
	logger.Info("playing KCM", "release", kcm)
	mgr, err := ctrl.NewManager(o.Config, ctrl.Options{
		Scheme:                 Scheme(),
		Logger:                 logger.WithName("k0rdent-sim"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("k0rdentsim: %w", err)
	}
	c := mgr.GetClient()
	if err := (&templateReconciler{client: c, chartsDir: o.ChartsDir}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&clusterDeploymentReconciler{client: c, world: o.World}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&serviceSetReconciler{client: c, reader: mgr.GetAPIReader(), world: o.World, chartsDir: o.ChartsDir, statusInterval: o.StatusInterval, kcm: kcm}).setup(mgr); err != nil {
		return nil, err
	}
	if err := mgr.Add(&gatewaySimulator{client: c, world: o.World}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Simulator{mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("k0rdentsim: caches did not sync: %v", <-s.done)
	}
	if !o.NoAdmission {
		if s.admission, err = startAdmission(ctx, c, mgr.GetAPIReader()); err != nil {
			cancel()
			if mgrErr := <-s.done; mgrErr != nil {
				err = errors.Join(err, fmt.Errorf("k0rdentsim: manager: %w", mgrErr))
			}
			return nil, err
		}
	}
	return s, nil
}

// Stop ends the simulator's controllers. Child clusters keep running until the world stops.
func (s *Simulator) Stop() error {
	s.admission.stop()
	s.cancel()
	return <-s.done
}
