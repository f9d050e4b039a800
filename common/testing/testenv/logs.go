package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// serverLogs sends the output of an environment's kube-apiserver and etcd into kube-apiserver.log
// and etcd.log under dir (appended to across restarts). It returns a function closing the files.
func serverLogs(env *envtest.Environment, dir string) (func() error, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log folder: %w", err)
	}
	open := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	api, err := open("kube-apiserver.log")
	if err != nil {
		return nil, err
	}
	etcd, err := open("etcd.log")
	if err != nil {
		_ = api.Close()
		return nil, err
	}
	s := env.ControlPlane.GetAPIServer()
	s.Out, s.Err = api, api
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = etcd, etcd
	return func() error { return errors.Join(api.Close(), etcd.Close()) }, nil
}

// WithLogDir writes the management server's kube-apiserver and etcd output into
// dir/kube-apiserver.log and dir/etcd.log.
func WithLogDir(dir string) Option {
	return func(opts *options) { opts.logDir = dir }
}

// ChildOption configures StartChild.
type ChildOption func(*childOptions)

type childOptions struct {
	logDir string
}

// WithChildLogDir writes the child's kube-apiserver and etcd output into dir/kube-apiserver.log and
// dir/etcd.log.
func WithChildLogDir(dir string) ChildOption {
	return func(o *childOptions) { o.logDir = dir }
}
