package doctor

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inPrivateNetNS runs fn on a locked thread inside a new, empty network
// namespace. The thread is never unlocked, so it exits with its goroutine and
// the namespace disappears with it (and with the sockets fn opened, once
// closed): nothing fn writes can reach any other namespace. It creates
// rather than enters a namespace, so it is not nfnl.InNetNS (see the nfnl
// package documentation for how the two keep the same rule).
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
