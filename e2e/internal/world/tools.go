package world

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KwokVersion is the sigs.k8s.io/kwok module version whose stage objects the child clusters use; it
// matches the kwok binary that hack/tools.sh builds.
const KwokVersion = "v0.8.0"

// toolDirs lists where the external tools may live, in order: the envtest assets, an explicit tools
// folder, the default cache of hack/tools.sh, then PATH.
func toolDirs() []string {
	var dirs []string
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("EXALSIUS_TOOLS_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		dirs = append(dirs, filepath.Join(cache, "exalsius-operator", "tools", "bin"))
	}
	return dirs
}

// FindTool returns the path of an external tool (kube-controller-manager, kube-scheduler, kubectl,
// kwok, helm), or an error that names `make tools`.
func FindTool(name string) (string, error) {
	for _, d := range toolDirs() {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found (looked in %s and PATH): run `make tools` and export KUBEBUILDER_ASSETS=$(hack/tools.sh assets)",
		name, strings.Join(toolDirs(), ", "))
}

// kwokStages are the stage objects kwok needs to move fake nodes and pods through their lives,
// relative to the module's kustomize/stage folder. Without them kwok exits with "no stages found".
var kwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat/node-heartbeat.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

// podReadyAgainStage is the local world's own stage: a running pod that is not Ready (the child's node
// lifecycle controller marks every pod of a node NotReady when the node stops reporting, as during an
// outage of the child's API server) is made Ready again, as a kubelet reports its pods' readiness once
// it reaches the API server again. kwok's pod-ready stage makes only Pending pods Ready, so without
// this such pods would stay NotReady for good.
const podReadyAgainStage = `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values:
      - 'False'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
`

// WriteKwokConfig copies kwok's stage objects from the sigs.k8s.io/kwok module (downloaded into the
// Go module cache on demand; nothing of kwok is committed here) into one multi-document file at path.
func WriteKwokConfig(path string) error {
	dir, err := moduleDir("sigs.k8s.io/kwok", KwokVersion)
	if err != nil {
		return err
	}
	var out []string
	for _, s := range kwokStages {
		b, err := os.ReadFile(filepath.Join(dir, "kustomize", "stage", s))
		if err != nil {
			return fmt.Errorf("kwok stage %s: %w", s, err)
		}
		out = append(out, strings.TrimSpace(string(b)))
	}
	out = append(out, strings.TrimSpace(podReadyAgainStage))
	return os.WriteFile(path, []byte(strings.Join(out, "\n---\n")+"\n"), 0o644)
}

// moduleDir returns the extracted folder of a module version in the Go module cache, downloading it
// through the module proxy when missing.
func moduleDir(path, version string) (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err == nil {
		d := filepath.Join(strings.TrimSpace(string(out)), path+"@"+version)
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
	}
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	cmd.Dir = os.TempDir()
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", path, version, m.Error)
	}
	return m.Dir, nil
}
