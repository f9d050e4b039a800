package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// startWebhook registers the webhook's configurations (webhook/config/webhook) by URL on a loopback
// port and runs the webhook binary there with its own CA, as the local world does; it returns once
// the CA is injected, with the webhook's metrics address.
func startWebhook(ctx context.Context, cl client.Client, e envelopeConfig, kubeconfig, dir string) (*world.Process, string, error) {
	progress("envelope: starting the webhook")
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNamespace}}); err != nil {
		return nil, "", err
	}
	port, err := world.FreePort()
	if err != nil {
		return nil, "", err
	}
	objs, err := stack.WebhookConfigurations(e.repoRoot, webhookConfigName, port)
	if err != nil {
		return nil, "", err
	}
	if err := stack.Apply(ctx, cl, objs); err != nil {
		return nil, "", err
	}
	metricsAddr, err := world.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	healthAddr, err := world.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	certDir := filepath.Join(dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, "", err
	}
	bin, err := filepath.Abs(e.webhookBin)
	if err != nil {
		return nil, "", err
	}
	proc := &world.Process{Name: "webhook", Path: bin, LogPath: filepath.Join(dir, "webhook.log"), Args: []string{
		"--kubeconfig=" + kubeconfig, "--metrics-secure=false", "--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + healthAddr, "--log-level=error",
		"--host=127.0.0.1", fmt.Sprintf("--port=%d", port), "--cert-mode=self", "--cert-dir=" + certDir,
		"--service-namespace=" + webhookNamespace, "--cert-ip-addresses=127.0.0.1", "--cert-extra-dns-names=localhost",
		"--webhook-config-name=" + webhookConfigName, "--ca-bundle-file=" + filepath.Join(certDir, "ca-bundle.crt")}}
	if err := proc.Start(); err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		injected := true
		for _, o := range objs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GroupVersionKind())
			if err := cl.Get(ctx, client.ObjectKey{Name: o.GetName()}, u); err != nil {
				injected = false
				break
			}
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				hm, _ := h.(map[string]interface{})
				if b, _, _ := unstructured.NestedString(hm, "clientConfig", "caBundle"); b == "" {
					injected = false
				}
			}
		}
		if injected {
			return proc, metricsAddr, nil
		}
		if time.Now().After(deadline) {
			_ = proc.Stop(world.StopGrace)
			return nil, "", errors.New("the webhook did not inject its CA within 2 minutes; log:\n" + proc.Tail(20))
		}
		select {
		case <-proc.Exited():
			return nil, "", fmt.Errorf("the webhook exited: %v; log:\n%s", proc.ExitError(), proc.Tail(20))
		case <-ctx.Done():
			_ = proc.Stop(world.StopGrace)
			return nil, "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// webhookLatency times creates one at a time at the envelope's size: WorkspaceDeployments (through
// the webhook) and, for reference, ConfigMaps on the same server; and reads the webhook's own
// latency histogram over the WorkspaceDeployment creates.
func webhookLatency(ctx context.Context, cl client.Client, e envelopeConfig, class string, cds []string, metricsAddr string, res *envelopeResult) error {
	progress("envelope: timing %d creates through the webhook", e.webhookCreates)
	before, err := webhookHistogram(ctx, metricsAddr)
	if err != nil {
		return err
	}
	var ws, cm []time.Duration
	for i := range e.webhookCreates {
		w := &workspacesv1.WorkspaceDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("webhook-%04d", i)},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cds[i%len(cds)]}},
		}
		t := time.Now()
		if err := cl.Create(ctx, w); err != nil {
			return fmt.Errorf("create through the webhook: %w", err)
		}
		ws = append(ws, time.Since(t))
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-reference", Name: fmt.Sprintf("latency-%04d", i)}}
		t = time.Now()
		if err := cl.Create(ctx, c); err != nil {
			return err
		}
		cm = append(cm, time.Since(t))
	}
	after, err := webhookHistogram(ctx, metricsAddr)
	if err != nil {
		return err
	}
	ws, cm = sortedCopy(ws), sortedCopy(cm)
	res.webhookP50, res.webhookP99 = pct(ws, 50), pct(ws, 99)
	res.refCreateP50, res.refCreateP99 = pct(cm, 50), pct(cm, 99)
	if n := after.count - before.count; n > 0 {
		res.webhookServerMean = time.Duration((after.sum - before.sum) / n * float64(time.Second))
		res.webhookServerP99 = -1
		for _, le := range after.les {
			if (after.buckets[le]-before.buckets[le])/n >= 0.99 {
				res.webhookServerP99 = le
				break
			}
		}
	}
	return nil
}

// histogram is controller_runtime_webhook_latency_seconds summed over the webhook's paths.
type histogram struct {
	sum, count float64
	buckets    map[float64]float64
	les        []float64 // sorted
}

func webhookHistogram(ctx context.Context, addr string) (histogram, error) {
	h := histogram{buckets: map[float64]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return h, err
	}
	const name = "controller_runtime_webhook_latency_seconds"
	for _, line := range strings.Split(string(body), "\n") {
		switch {
		case strings.HasPrefix(line, name+"_bucket{"):
			labels, v, ok := parseSample(line)
			if le, err := strconv.ParseFloat(labels["le"], 64); ok && err == nil {
				h.buckets[le] += v
			}
		case strings.HasPrefix(line, name+"_sum"):
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				h.sum += v
			}
		case strings.HasPrefix(line, name+"_count"):
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				h.count += v
			}
		}
	}
	for le := range h.buckets {
		h.les = append(h.les, le)
	}
	sort.Float64s(h.les)
	return h, nil
}
