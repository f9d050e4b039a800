package node

// The node's network: the bridge the pods are plugged into (its address is the node's IP) and the
// CNI configuration containerd gives them.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func setupBridge() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := net.InterfaceByName(Bridge); err != nil {
		if err := run(ctx, "ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if out, _ := exec.CommandContext(ctx, "ip", "-4", "addr", "show", "dev", Bridge).Output(); !strings.Contains(string(out), IP+"/") {
		if err := run(ctx, "ip", "addr", "add", IP+"/16", "dev", Bridge); err != nil {
			return err
		}
	}
	if err := run(ctx, "ip", "link", "set", Bridge, "up"); err != nil {
		return err
	}
	// Forwarding between the bridge and the host (pods to the API servers, the API server to the
	// webhook pod), and bridged traffic through iptables so kube-proxy's DNAT is undone for replies
	// between pods on the bridge.
	for path, v := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables": "1",
	} {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return fmt.Errorf("setting %s=%s: %w", path, v, err)
		}
	}
	return nil
}

func writeCNIConfig(dir string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "exalsius-node",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": IP}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(runRoot, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-exalsius-node.conflist"), b, 0o644)
}
