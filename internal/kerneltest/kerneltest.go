// Package kerneltest is the one switch in front of every test that needs
// the real kernel or another real dependency (network namespaces, nft,
// iptables, a kube-apiserver): testns.New, netlab.New and kubetest.Start
// call Require, so a test reaches such a dependency only through it.
//
// Without the switch (`go test ./policy/...` on a laptop) those tests skip
// and the pure tests run; `make test` (through hack/gotest) sets it, and
// there a skip fails the run. With the switch set, a missing root is a
// failure, never a skip: a run that asked for kernel tests gets them.
package kerneltest

import (
	"os"
	"testing"
)

// Env is the switch: kernel tests run when it is "1".
const Env = "NFTGUARD_KERNEL_TESTS"

// skipMsg is what a skipped kernel test says.
const skipMsg = "kernel test: needs root and " + Env + "=1; make test sets it"

// Enabled reports whether the switch is on.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Problem says why kernel tests cannot run although the switch is on ("" if
// they can), for callers without a testing.TB (TestMain).
func Problem() string {
	if os.Geteuid() != 0 {
		return Env + "=1 is set but the tests do not run as root: kernel tests create network namespaces and need root"
	}
	return ""
}

// Require skips t unless the switch is on, and fails it when the switch is
// on but the process cannot run kernel tests.
func Require(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skip(skipMsg)
	}
	if p := Problem(); p != "" {
		t.Fatal(p)
	}
}
