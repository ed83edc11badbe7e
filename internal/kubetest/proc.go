package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/nftguard/nftguard/internal/childproc"
)

// proc is a named child process that dies with the test process (see
// childproc), so a test binary killed by a timeout leaves no API server
// behind.
type proc struct {
	name string
	*childproc.Proc
}

// startProc starts cmd as such a child. cmd's output fields are used as
// set by the caller.
func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	p, err := childproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &proc{name: name, Proc: p}, nil
}

// stop kills the process by its PID and waits for it.
func (p *proc) stop() { p.Kill() }

func (p *proc) exited() bool { return p.Exited() }

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n bytes of a log file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// poll calls fn until it returns true, timeout passes or ctx ends.
func poll(ctx context.Context, timeout, every time.Duration, fn func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if fn() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(every):
		}
	}
}
