package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A child started with a log folder writes its kube-apiserver and etcd output there, and the
// servers' pids (their own, not their wrappers') into kube-apiserver.pid and etcd.pid while they run
// (`make run`'s run folder: a newcomer finds what runs, and what lingers after a forced exit).
func TestChildServerLogsInFolder(t *testing.T) {
	dir := t.TempDir()
	ch, err := StartChild("logged", WithChildLogDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"kube-apiserver", "etcd"} {
		b, err := os.ReadFile(filepath.Join(dir, server+".pid"))
		if err != nil {
			t.Errorf("%s.pid: %v", server, err)
			continue
		}
		pid := strings.TrimSpace(string(b))
		exe, err := os.Readlink(filepath.Join("/proc", pid, "exe"))
		if err != nil || filepath.Base(exe) != server {
			t.Errorf("%s.pid holds %q, whose executable is %q (%v), want the %s binary", server, pid, exe, err, server)
		}
	}
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kube-apiserver.pid", "etcd.pid"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s left after the child stopped: %v", name, err)
		}
	}
	for _, name := range []string{"kube-apiserver.log", "etcd.log"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}
}

func TestK0rdentCRDsFolder(t *testing.T) {
	t.Setenv(EnvK0rdentCRDs, "")
	if dir, err := K0rdentCRDs(); dir != "" || err != nil {
		t.Errorf("unset: %q %v, want the mirror", dir, err)
	}
	if RealK0rdentCRDs() {
		t.Error("RealK0rdentCRDs true while unset")
	}
	abs := t.TempDir()
	t.Setenv(EnvK0rdentCRDs, abs)
	if dir, err := K0rdentCRDs(); dir != abs || err != nil {
		t.Errorf("absolute: %q %v", dir, err)
	}
	// A relative folder is taken from the repository root.
	t.Setenv(EnvK0rdentCRDs, "common/config/crd/k0rdent")
	dir, err := K0rdentCRDs()
	if err != nil || !strings.HasSuffix(dir, filepath.Join("common", "config", "crd", "k0rdent")) || !filepath.IsAbs(dir) {
		t.Errorf("relative: %q %v", dir, err)
	}
	t.Setenv(EnvK0rdentCRDs, filepath.Join(abs, "missing"))
	if _, err := K0rdentCRDs(); err == nil || !strings.Contains(err.Error(), EnvK0rdentCRDs) {
		t.Errorf("a missing folder: %v, want an error naming %s", err, EnvK0rdentCRDs)
	}
	if _, err := crdDirs(); err == nil {
		t.Error("crdDirs accepted a missing K0RDENT_CRDS folder")
	}
}
