package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Main runs a package's tests against one shared management server: it starts the server with opts,
// calls setup (store the *Management in a package variable there, start controllers, ...), runs the
// tests, stops the server and exits with the tests' exit code.
//
// Unless TestMain already gave controller-runtime a logger (ctrl.SetLogger before Main), Main sets one
// so that its "log.SetLogger(...) was never called" warning stays away: one that discards
// everything, or with TESTENV_VERBOSE=1 one that prints to stderr.
//
// A missing KUBEBUILDER_ASSETS, a server that does not start or a failing setup make every test of
// the package fail loudly (exit code 1 with the reason on stderr); nothing is skipped.
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, func(mg *testenv.Management) error { mgmt = mg; return nil })
//	}
func Main(m *testing.M, setup func(*Management) error, opts ...Option) {
	os.Exit(run(m, setup, opts...))
}

func run(m *testing.M, setup func(*Management) error, opts ...Option) int {
	// An unset controller-runtime logger reports itself disabled; keep any logger set before Main.
	if !ctrllog.Log.Enabled() {
		ctrllog.SetLogger(defaultLogger())
	}
	ctrllog.Log.WithName("testenv").Info("starting the management API server")
	mgmt, err := StartManagement(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer func() {
		if err := mgmt.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the management API server: %v\n", err)
		}
	}()
	if setup != nil {
		if err := setup(mgmt); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: setup: %v\n", err)
			return 1
		}
	}
	return m.Run()
}

// defaultLogger discards, or prints to stderr when TESTENV_VERBOSE is set.
func defaultLogger() logr.Logger {
	if !verbose() {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{LogTimestamp: true, Verbosity: 1})
}
