package node

// kubelet and kube-proxy: their credentials, configurations and the wait for the Node to be Ready.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

func writeUserKubeconfig(u *envtest.AuthenticatedUser, path string) (string, error) {
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, kc, 0o600)
}

func (n *Node) startKubelet() error {
	bin, err := world.FindTool("kubelet")
	if err != nil {
		return err
	}
	port, err := world.FreePort()
	if err != nil {
		return err
	}
	healthz, err := world.FreePort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(runRoot, "kubelet.yaml")
	body := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host mounts cgroup v1: kubelet refuses it since v1.35 unless told not to.
failCgroupV1: %t
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
  nodefs.inodesFree: 2%%
maxPods: 60
podPidsLimit: 1024
`, !CgroupV1(), n.socket, IP, port, healthz)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	return n.startProc("node/kubelet", bin, []string{
		"--config=" + cfg,
		"--kubeconfig=" + n.Kubeconfig,
		"--hostname-override=" + Name,
		"--node-ip=" + IP,
		"--root-dir=" + filepath.Join(stateRoot, "kubelet"),
		"--cert-dir=" + filepath.Join(runRoot, "kubelet-pki"),
		"--v=1",
	})
}

func (n *Node) startKubeProxy(kubeconfig string) error {
	bin, err := world.FindTool("kube-proxy")
	if err != nil {
		return err
	}
	metrics, err := world.FreePort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(runRoot, "kube-proxy.yaml")
	body := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: ""
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["%s/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 30s
  minSyncPeriod: 1s
`, kubeconfig, Name, PodCIDR, IP, metrics, IP)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	return n.startProc("node/kube-proxy", bin, []string{"--config=" + cfg, "--v=1"})
}

func waitNodeReady(ctx context.Context, c client.Client, timeout time.Duration) error {
	last := "not registered"
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: Name}, &node); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", cond.Status, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w", Name, last, err)
	}
	return nil
}
