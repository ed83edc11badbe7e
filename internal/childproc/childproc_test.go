package childproc

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		name, script string
		code         int // -1: no error
	}{{"success", "exit 0", -1}, {"failure", "exit 3", 3}} {
		p, err := Start(exec.Command("sh", "-c", c.script))
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		var ee *exec.ExitError
		switch {
		case !p.Exited():
			t.Errorf("%s: Exited is false after Done", c.name)
		case c.code < 0 && p.Err() != nil:
			t.Errorf("%s: Err %v, want nil", c.name, p.Err())
		case c.code >= 0 && (!errors.As(p.Err(), &ee) || ee.ExitCode() != c.code):
			t.Errorf("%s: Err %v, want exit status %d", c.name, p.Err(), c.code)
		}
	}
}

// TestKillAndPdeathsig: a running child is not exited and has no status;
// it was started with Pdeathsig SIGKILL; Kill ends and reaps it, and a
// second Kill is a no-op.
func TestKillAndPdeathsig(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	p, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if p.Exited() || p.Err() != nil || p.Pid() <= 0 {
		t.Fatalf("running child: exited=%v err=%v pid=%d", p.Exited(), p.Err(), p.Pid())
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("Pdeathsig %v, want SIGKILL", cmd.SysProcAttr.Pdeathsig)
	}
	p.Kill()
	// "killed": the child ended by the signal, not by finishing its
	// sleep.
	if !p.Exited() || p.Err() == nil || !strings.Contains(p.Err().Error(), "killed") {
		t.Errorf("after Kill: exited=%v err=%v", p.Exited(), p.Err())
	}
	p.Kill()
}

func TestSignal(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not end sleep")
	}
	if p.Err() == nil || !strings.Contains(p.Err().Error(), "terminated") {
		t.Errorf("after SIGTERM: %v", p.Err())
	}
}

func TestStartFailure(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/binary")); err == nil || !strings.Contains(err.Error(), "/nonexistent/binary") {
		t.Errorf("start of a missing binary: %v", err)
	}
}
