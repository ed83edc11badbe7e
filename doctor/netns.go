package doctor

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on a locked OS thread inside the network namespace at path
// (the caller's own when path is ""). Sockets fn creates stay in that
// namespace for their whole life, and /proc/thread-self/net shows it.
func inNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if path == "" {
			err := fn()
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		origin, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own namespace: %w", err)
			return
		}
		defer origin.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open namespace %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", path, err)
			return
		}
		// The files must stay open until the thread is back: a descriptor
		// closed by a finalizer could be reused under setns.
		runtime.KeepAlive(target)
		ferr := fn()
		if err := unix.Setns(int(origin.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine rather
			// than run other goroutines in the wrong namespace.
			errc <- fmt.Errorf("return from namespace %s: %w", path, err)
			return
		}
		runtime.KeepAlive(origin)
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// inPrivateNetNS runs fn on a locked thread inside a new, empty network
// namespace. The thread is never unlocked, so it exits with its goroutine and
// the namespace disappears with it (and with the sockets fn opened, once
// closed): nothing fn writes can reach any other namespace.
func inPrivateNetNS(fn func(nsPath string) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("create a private network namespace: %w", err)
			return
		}
		// Others (the engine's dialer) enter it through this thread's path.
		errc <- fn(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	}()
	return <-errc
}
