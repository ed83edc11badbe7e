// Package nfnl is what every netfilter-netlink user in this module (the
// engine, doctor, conntrack, the test helpers) shares: entering a network
// namespace for as long as a socket is created in it (InNetNS, Dial), the
// nfnetlink message codec (Encoder, ParseMsgs, WalkAttrs and the attribute
// readers), requests and dumps that report NLM_F_DUMP_INTR and restart
// (Request, Restart), and the framing of batches (BeginBatch, EndBatch,
// AckAt, BatchIndex).
//
// Namespaces are entered in one way, InNetNS, with one argument for its
// safety (below). Two places create a namespace instead, and so cannot use
// it: testns.Create makes a named one (unshare, then a bind mount under
// /var/run/netns, through netns.NewNamed) on a thread of its own that then
// returns to the caller's namespace exactly as InNetNS does; doctor's
// inPrivateNetNS makes an unnamed one by unshare on a thread it never
// unlocks, so the thread dies with its goroutine and the namespace with its
// last socket, and no descriptor or name is ever held. Both keep the rule
// InNetNS keeps: no goroutine other than the one that asked ever runs on a
// thread that is in another namespace.
package nfnl

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrDumpInterrupted means the kernel flagged a dump NLM_F_DUMP_INTR: the
// ruleset changed while it was read, so the result mixes two generations
// and the read must start over.
var ErrDumpInterrupted = errors.New("dump interrupted by a concurrent change")

// InNetNS runs fn on a locked OS thread inside the network namespace at
// path (the caller's own when path is ""), then returns the thread to its
// own namespace. Sockets fn creates belong to that namespace for their
// whole life: a socket holds a reference to its namespace, so no file
// descriptor has to outlive this call.
//
// Why the descriptors are safe: both namespace files are opened here, on
// the locked thread, and closed by defers that run only after the thread
// has returned to its own namespace; the defers also keep the *os.File
// values reachable, so no finalizer can close a descriptor (and let it be
// reused for another file) while setns still refers to it. If the thread
// cannot return, it stays locked and exits with its goroutine, so it never
// runs other goroutines in the wrong namespace.
func InNetNS(path string, fn func() error) error {
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
			errc <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer origin.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open network namespace %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(origin.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("return from network namespace %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// NetNS is a network namespace held open for running many short functions
// in it (a DNS forwarder makes a socket there per query), where InNetNS
// would open both namespace files every time.
type NetNS struct {
	path           string
	target, origin *os.File
}

// OpenNetNS opens the namespace at path and the caller's own (the one the
// threads return to); path "" is the caller's own, and Run then only runs
// fn.
func OpenNetNS(path string) (*NetNS, error) {
	n := &NetNS{path: path}
	if path == "" {
		return n, nil
	}
	var err error
	if n.origin, err = os.Open("/proc/thread-self/ns/net"); err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", err)
	}
	if n.target, err = os.Open(path); err != nil {
		n.origin.Close()
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	return n, nil
}

// Run runs fn on a locked OS thread inside the namespace, then returns
// the thread to the caller's namespace, as InNetNS does (and, like it, on
// a goroutine of its own: if the thread cannot return, that goroutine
// exits with it locked, so the runtime discards the thread).
func (n *NetNS) Run(fn func() error) error {
	if n.path == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(n.target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", n.path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(n.origin.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("return from network namespace %s: %w", n.path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Close closes the namespace files.
func (n *NetNS) Close() error {
	if n.path == "" {
		return nil
	}
	n.target.Close()
	return n.origin.Close()
}
