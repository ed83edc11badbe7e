package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/nftguard/nftguard/internal/testns"
)

// InNetNS runs fn on a locked OS thread inside the network namespace at
// path, then returns the thread to the namespace it came from. Sockets that
// fn creates stay in that namespace after fn returns. It refuses the
// namespace the process started in and the caller's own namespace, so a bad
// path can never make a test reconfigure the host.
func InNetNS(path string, fn func() error) error {
	return runIn(path, netns.None(), fn)
}

// runIn is InNetNS that also refuses origin (when open).
func runIn(path string, origin netns.NsHandle, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	return onLockedThread(func(here netns.NsHandle) error {
		if err := refuseOrigin(target, here, origin); err != nil {
			return fmt.Errorf("enter %s: %w", path, err)
		}
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("enter network namespace %s: %w", path, err)
		}
		return fn()
	})
}

// processNS is the namespace the process started in, opened during package
// initialisation, while the runtime keeps the main goroutine locked to the
// main thread. It cannot be looked up later: /proc/self/ns/net follows the main
// thread, which the Go scheduler may lend to a goroutine that is inside a
// lab namespace at that moment. Set once, never changed.
var processNS, _ = netns.Get()

// errOrigin is returned for any attempt to enter the namespace a lab or the
// process started in.
var errOrigin = errors.New("refusing to operate on the origin network namespace")

// refuseOrigin fails if target is the calling thread's namespace, the
// process's namespace, or origin.
func refuseOrigin(target, here, origin netns.NsHandle) error {
	if target.Equal(here) || (origin.IsOpen() && target.Equal(origin)) {
		return errOrigin
	}
	if !processNS.IsOpen() {
		return errors.New("the process's own network namespace is unknown, so no other may be entered")
	}
	if target.Equal(processNS) {
		return errOrigin
	}
	return nil
}

// onLockedThread runs fn on a fresh goroutine locked to its OS thread and
// restores the thread's network namespace afterwards. A fresh goroutine is
// used because the caller's own may already be locked, and because if the
// namespace cannot be restored the goroutine exits still locked, which makes
// the runtime kill the thread instead of reusing it in a foreign namespace.
func onLockedThread(fn func(here netns.NsHandle) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		here, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("read current network namespace: %w", err)
			return
		}
		defer here.Close()
		ferr := fn(here)
		if err := netns.Set(here); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("return to original network namespace (thread abandoned): %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// createNamed makes a new named namespace, leaving the calling thread where
// it was.
func createNamed(name string) error {
	return onLockedThread(func(netns.NsHandle) error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return fmt.Errorf("create network namespace %s: %w", name, err)
		}
		return h.Close()
	})
}

func deleteNamed(name string) error {
	if err := netns.DeleteNamed(name); err != nil {
		return fmt.Errorf("delete network namespace %s: %w", name, err)
	}
	return nil
}

// writeSysctl writes a /proc/sys key such as "net/ipv4/ip_forward". /proc/sys/net
// shows the namespace of the thread that opens it, so call it inside the
// target namespace.
func writeSysctl(key, value string) error {
	f, err := os.OpenFile(filepath.Join("/proc/sys", key), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("sysctl %s: %w", key, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// newLabID returns "<owner>-<tag><random>": the owner part (testns.Owner)
// lets CleanupStale tell a live lab from a crashed one, the random part
// keeps concurrent labs of one process apart.
func newLabID(tag string) (string, error) {
	owner, err := testns.Owner()
	if err != nil {
		return "", err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return owner + "-" + tag + hex.EncodeToString(b[:]), nil
}

// Leftovers lists the names of namespaces under NetNSDir that start with
// Prefix, whether their lab is alive or not.
func Leftovers() ([]string, error) {
	ents, err := os.ReadDir(NetNSDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", NetNSDir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// CleanupStale removes every namespace under NetNSDir whose name starts with
// Prefix and whose creating process is gone (a crashed or killed run).
// Namespaces of labs in live processes are kept: tests of other packages may
// be running right now. New and Create call it automatically.
func CleanupStale() error {
	return testns.SweepStale(Prefix)
}
