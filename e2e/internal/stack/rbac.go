package stack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// ChartRelease is the release name the chart is rendered with.
	ChartRelease = "exalsius-operator"
	// chartKubeVersion is the Kubernetes version the chart is rendered for.
	chartKubeVersion = "v1.37.2"
	// componentLabel names the component a chart object belongs to.
	componentLabel = "app.kubernetes.io/component"
)

// rbacKinds are the chart objects the local world applies: the components' identities and their
// permissions. The chart's only Secret is the webhook's empty TLS Secret, which the webhook may read
// and update but not create.
var rbacKinds = map[string]bool{
	"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"Role": true, "RoleBinding": true, "Secret": true,
}

// chartRBAC is what the local world takes from the rendered chart.
type chartRBAC struct {
	// ServiceAccounts maps a component to its ServiceAccount.
	ServiceAccounts map[string]types.NamespacedName
	// WebhookSecret is the webhook's TLS Secret, when the chart renders one.
	WebhookSecret string
	// LeaderElect maps a component to the --leader-elect value of its chart Deployment.
	LeaderElect map[string]string
}

// helmBinary is $HELM, or helm in the tools directory `make tools` fills.
func (s *Stack) helmBinary() (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	out, err := exec.Command(filepath.Join(s.RepoRoot, "hack", "tools.sh"), "bindir").Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools.sh bindir: %w", err)
	}
	h := filepath.Join(strings.TrimSpace(string(out)), "helm")
	if _, err := os.Stat(h); err != nil {
		return "", fmt.Errorf("helm not found at %s: run `make tools` (or set HELM)", h)
	}
	return h, nil
}

// applyChartRBAC renders charts/exalsius-operator into SystemNamespace with its default values,
// applies the namespace and the chart's ServiceAccounts, RBAC and webhook Secret to the management
// API server, and returns each component's ServiceAccount.
func (s *Stack) applyChartRBAC(ctx context.Context) (*chartRBAC, error) {
	helm, err := s.helmBinary()
	if err != nil {
		return nil, err
	}
	chart := filepath.Join(s.RepoRoot, "charts", "exalsius-operator")
	args := []string{"template", ChartRelease, chart, "--namespace", SystemNamespace, "--kube-version", chartKubeVersion}
	cmd := exec.CommandContext(ctx, helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	dir, err := os.MkdirTemp(s.RunDir, "chart-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), stdout.Bytes(), 0o600); err != nil {
		return nil, err
	}
	objs, err := ReadManifests(dir)
	if err != nil {
		return nil, fmt.Errorf("rendered chart: %w", err)
	}
	out := &chartRBAC{ServiceAccounts: map[string]types.NamespacedName{}, LeaderElect: map[string]string{}}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			if v, ok := deploymentFlag(o, "leader-elect"); ok {
				out.LeaderElect[o.GetLabels()[componentLabel]] = v
			}
			continue
		}
		if !rbacKinds[o.GetKind()] {
			continue
		}
		if o.GetNamespace() != "" && o.GetNamespace() != SystemNamespace {
			return nil, fmt.Errorf("chart %s %s is in namespace %q, not the release namespace %s", o.GetKind(), o.GetName(), o.GetNamespace(), SystemNamespace)
		}
		switch o.GetKind() {
		case "ServiceAccount":
			c := o.GetLabels()[componentLabel]
			if c == "" {
				return nil, fmt.Errorf("chart ServiceAccount %s has no %s label", o.GetName(), componentLabel)
			}
			out.ServiceAccounts[c] = types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		case "Secret":
			if o.GetLabels()[componentLabel] != "webhook" {
				continue
			}
			out.WebhookSecret = o.GetName()
		}
		apply = append(apply, o)
	}
	if err := Apply(ctx, s.Client, apply); err != nil {
		return nil, fmt.Errorf("applying the chart's RBAC: %w", err)
	}
	s.progress("chart RBAC applied (%d objects); components run as their ServiceAccounts", len(apply))
	return out, nil
}

// deploymentFlag returns the value of --<flag>=<value> in the args of a Deployment's containers.
func deploymentFlag(d *unstructured.Unstructured, flag string) (string, bool) {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		cm, _ := c.(map[string]interface{})
		args, _, _ := unstructured.NestedStringSlice(cm, "args")
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(sa types.NamespacedName) string {
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// impersonate rewrites a kubeconfig so that every request it makes impersonates the ServiceAccount,
// with the groups the API server gives a ServiceAccount token: the requests are then authorized by
// the ServiceAccount's RBAC only.
func impersonate(kubeconfig []byte, sa types.NamespacedName) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	if len(cfg.AuthInfos) == 0 {
		return nil, fmt.Errorf("kubeconfig has no users")
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = ServiceAccountUser(sa)
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}
	}
	return clientcmd.Write(*cfg)
}

// Denials returns, per component, the lines of its log where the API server refused its
// ServiceAccount something: each is a rule the chart's RBAC lacks.
func (s *Stack) Denials() (map[string][]string, error) {
	out := map[string][]string{}
	for name, c := range s.Components {
		b, err := os.ReadFile(c.Process.LogPath)
		if err != nil {
			return nil, err
		}
		marker := "forbidden: User \\\"" + ServiceAccountUser(c.ServiceAccount) + "\\\""
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, marker) || strings.Contains(l, strings.ReplaceAll(marker, "\\", "")) {
				out[name] = append(out[name], l)
			}
		}
	}
	return out, nil
}
