package nfnl_test

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/testns"
)

// inode identifies a namespace by its nsfs inode.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func ownNS(t *testing.T) uint64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return inode(t, "/proc/thread-self/ns/net")
}

// TestInNetNS: fn runs inside the namespace; a socket it creates stays
// there after InNetNS returns (the kernel reports the socket's namespace,
// SIOCGSKNS); the caller's threads never leave their own namespace, also
// with many calls at once; a missing namespace is an error and "" is the
// caller's own.
func TestInNetNS(t *testing.T) {
	ns := testns.New(t, "nfnl")
	host := ownNS(t)
	want := inode(t, ns.Path)
	if want == host {
		t.Fatal("test namespace is the host's")
	}

	var fd int
	err := nfnl.InNetNS(ns.Path, func() error {
		if got := inode(t, "/proc/thread-self/ns/net"); got != want {
			t.Errorf("fn ran in namespace %d, want %d", got, want)
		}
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	err = unix.Fstat(nsfd, &st)
	unix.Close(nsfd)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ino != want {
		t.Errorf("socket is in namespace %d, want %d", st.Ino, want)
	}

	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			err := nfnl.InNetNS(ns.Path, func() error {
				if got := inode(t, "/proc/thread-self/ns/net"); got != want {
					t.Errorf("fn ran in namespace %d, want %d", got, want)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if got := ownNS(t); got != host {
				t.Errorf("a caller's thread is in namespace %d after InNetNS, want the host's %d", got, host)
			}
		})
	}
	wg.Wait()

	if err := nfnl.InNetNS(ns.Path+"-missing", func() error {
		t.Error("fn ran for a missing namespace")
		return nil
	}); err == nil {
		t.Error("a missing namespace is not an error")
	}
	err = nfnl.InNetNS("", func() error {
		if got := inode(t, "/proc/thread-self/ns/net"); got != host {
			t.Errorf(`"" ran fn in namespace %d, want the caller's %d`, got, host)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNetNSRun: OpenNetNS's Run runs fn in the namespace, many at once,
// and the callers' threads stay in their own; "" is the caller's own.
func TestNetNSRun(t *testing.T) {
	ns := testns.New(t, "nfnlrun")
	host := ownNS(t)
	want := inode(t, ns.Path)
	n, err := nfnl.OpenNetNS(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			err := n.Run(func() error {
				if got := inode(t, "/proc/thread-self/ns/net"); got != want {
					t.Errorf("fn ran in namespace %d, want %d", got, want)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if got := ownNS(t); got != host {
				t.Errorf("a caller's thread is in namespace %d after Run, want the host's %d", got, host)
			}
		})
	}
	wg.Wait()
	own, err := nfnl.OpenNetNS("")
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Run(func() error {
		if got := ownNS(t); got != host {
			t.Errorf(`"" ran fn in namespace %d, want the caller's %d`, got, host)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
