// Package childproc starts the child processes of a test (an API server,
// etcd, an agent) so that they die with the test process: Pdeathsig is
// delivered when the *thread* that started the child exits, so the child
// is started and waited for on a goroutine locked to its own thread,
// which lives exactly as long as the child. A test binary killed by a
// timeout therefore leaves no process behind.
package childproc

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// Proc is a started child process.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // exit status, valid after done
}

// Start starts cmd as a child that is killed (SIGKILL) if the test
// process dies first. cmd's other fields (output, environment) are used
// as the caller set them.
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, after the
		// child is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the exit status (as exec.Cmd.Wait gives it) once the process
// has exited; nil before.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process by its PID.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process (SIGKILL) unless it has exited, and waits for it.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}
