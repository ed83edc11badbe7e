package conntrack

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestNamespace checks that addresses and conntrack are read inside the
// namespace given, not the caller's, and that the calling thread stays
// where it was.
func TestNamespace(t *testing.T) {
	ns := testns.New(t, "ct")
	ns.MustExec(t, "", "ip", "link", "set", "lo", "up")
	ns.MustExec(t, "", "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ns.MustExec(t, "", "ip", "link", "set", "d0", "up")
	ns.MustExec(t, "", "ip", "addr", "add", "192.0.2.1/24", "dev", "d0")
	ns.MustExec(t, "", "ip", "addr", "add", "2001:db8:1::1/64", "dev", "d0", "nodad")
	ns.MustExec(t, "", "ip", "addr", "add", "198.51.100.1", "peer", "198.51.100.2", "dev", "d0")

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := func() string {
		l, err := os.Readlink("/proc/thread-self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	before := self()

	var rt *netlink.Conn
	err := nfnl.InNetNS(ns.Path, func() error {
		var err error
		rt, err = netlink.Dial(unix.NETLINK_ROUTE, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	got, err := localAddrs(rt)
	if err != nil {
		t.Fatalf("localAddrs: %v", err)
	}
	want := []string{"127.0.0.1", "::1", "192.0.2.1", "2001:db8:1::1", "198.51.100.1"}
	for _, w := range want {
		if !got[netip.MustParseAddr(w)] {
			t.Errorf("local addresses %v lack %s", got, w)
		}
	}
	if got[netip.MustParseAddr("198.51.100.2")] {
		t.Errorf("the point-to-point peer counts as a local address: %v", got)
	}
	// Only the namespace's addresses (and IPv6 link-local ones) are there.
	for a := range got {
		if !a.IsLinkLocalUnicast() && !strings.Contains(strings.Join(want, " "), a.String()) {
			t.Errorf("unexpected local address %s: read outside the namespace?", a)
		}
	}

	st, err := ClearStale(context.Background(), ns.Path, nil)
	if err != nil {
		t.Fatalf("ClearStale: %v", err)
	}
	if st != (Stats{}) {
		t.Errorf("a fresh namespace has conntrack entries: %+v", st)
	}
	if after := self(); after != before {
		t.Errorf("the calling thread moved from %s to %s", before, after)
	}
}

func TestErrors(t *testing.T) {
	kerneltest.Require(t) // opens netlink sockets in the host's namespace
	_, err := ClearStale(context.Background(), "/nonexistent/netns", nil)
	if err == nil || !strings.Contains(err.Error(), "open network namespace") || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Errorf("missing namespace: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ClearStale(ctx, "", nil); err == nil {
		t.Error("a cancelled context is not reported")
	}
}
