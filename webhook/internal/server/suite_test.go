package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/webhook/internal/server"
)

// The suite runs the real webhook, in self-managed certificate mode, against a real API server:
// envtest installs config/webhook/manifests.yaml rewritten to a local URL, and the webhook's rotator
// replaces envtest's CA bundle with its own, as in the local world.

const (
	operatorNamespace = "exalsius-system"
	testMaxReplicas   = 8
)

var (
	mgmt     *testenv.Management
	wh       *server.Webhook
	warnings = &warningRecorder{}
	// wclient records the API server's warnings in warnings.
	wclient client.Client
	// cfgCABundleFile is where the webhook writes its CA bundle.
	cfgCABundleFile = filepath.Join(os.TempDir(), "exalsius-webhook-test-"+strconv.Itoa(os.Getpid()), "ca.crt")
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the API server and the webhook, runs the tests, and stops the webhook before the API
// server so that no admission call is left hanging.
func run(m *testing.M) int {
	mg, err := testenv.StartManagement(testenv.WithWebhook(envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "webhook")},
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := mg.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := setup(ctx, mg)
	defer func() {
		cancel()
		<-done
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	return m.Run()
}

func setup(ctx context.Context, mg *testenv.Management) (<-chan struct{}, error) {
	done := make(chan struct{})
	started := false
	defer func() {
		if !started {
			close(done)
		}
	}()
	mgmt = mg
	if err := mg.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return done, err
	}
	wo := mg.Env.WebhookInstallOptions
	cfg := server.DefaultOptions()
	cfg.Host = wo.LocalServingHost
	cfg.Port = wo.LocalServingPort
	cfg.ServiceNamespace = operatorNamespace
	cfg.IPAddresses = wo.LocalServingHost
	cfg.CertCheckInterval = 500 * time.Millisecond
	cfg.MaxReplicas = testMaxReplicas
	cfg.WorkspaceControllerUser = testControllerUser
	cfg.CABundleFile = cfgCABundleFile
	opts := bootstrap.NewOptions(server.Component)
	opts.RestConfig = mg.Config
	opts.LeaderElect = false
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	if os.Getenv(testenv.EnvVerbose) == "" {
		opts.LogWriter = io.Discard
	}
	mgr, err := bootstrap.NewManager(opts, mg.Scheme)
	if err != nil {
		return done, err
	}
	// The component's own Setup, as main.go does, with a short certificate check interval.
	if wh, err = server.Setup(ctx, mgr, cfg); err != nil {
		return done, err
	}
	started = true
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "webhook manager:", err)
		}
	}()
	wcfg := rest.CopyConfig(mg.Config)
	wcfg.WarningHandler = warnings
	if wclient, err = client.New(wcfg, client.Options{Scheme: mg.Scheme}); err != nil {
		return done, err
	}
	return done, waitServing(ctx, mg.Client)
}

// waitServing waits until the webhook serves a certificate the readiness check accepts and both
// configurations carry the rotator's CA bundle.
func waitServing(ctx context.Context, c client.Client) error {
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		last = servingErr(ctx, c)
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the webhook did not become ready: %w", last)
}

func servingErr(ctx context.Context, c client.Client) error {
	if err := wh.Checker().Check(nil); err != nil {
		return err
	}
	bundle := wh.Rotator.CABundle()
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: server.DefaultWebhookConfigName}, vwc); err != nil {
		return err
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: server.DefaultWebhookConfigName}, mwc); err != nil {
		return err
	}
	for _, w := range vwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			return errors.New("validating configuration lacks the bundle")
		}
	}
	for _, w := range mwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			return errors.New("mutating configuration lacks the bundle")
		}
	}
	return nil
}

// warningRecorder keeps the API server's warnings.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns and forgets the warnings seen so far.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}
