package kerneltest

import (
	"os"
	"testing"
)

// fakeTB records what Require does to a test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

type stop struct{}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Skip(args ...any)  { f.skipped = args[0].(string); panic(stop{}) }
func (f *fakeTB) Fatal(args ...any) { f.failed = args[0].(string); panic(stop{}) }
func run(f *fakeTB) (ret *fakeTB) {
	defer func() {
		if r := recover(); r != nil && r != (stop{}) {
			panic(r)
		}
		ret = f
	}()
	Require(f)
	return f
}

// TestRequire: without the switch a kernel test skips with the message that
// names the switch; with it, it runs as root and fails as another user.
func TestRequire(t *testing.T) {
	t.Setenv(Env, "")
	if f := run(&fakeTB{}); f.skipped != skipMsg || f.failed != "" {
		t.Errorf("switch off: skipped %q failed %q, want a skip with %q", f.skipped, f.failed, skipMsg)
	}
	t.Setenv(Env, "1")
	f := run(&fakeTB{})
	if os.Geteuid() == 0 {
		if f.skipped != "" || f.failed != "" {
			t.Errorf("switch on as root: skipped %q failed %q, want the test to run", f.skipped, f.failed)
		}
	} else if f.failed == "" || f.skipped != "" {
		t.Errorf("switch on, not root: skipped %q failed %q, want a failure", f.skipped, f.failed)
	}
}
