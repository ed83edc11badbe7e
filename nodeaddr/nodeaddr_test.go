package nodeaddr

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/testns"
)

func has(ps []netip.Prefix, s string) bool {
	return slices.Contains(ps, netip.MustParsePrefix(s))
}

// List reads the namespace it is given: its interfaces' addresses, as the
// local routes the kernel made for them, and a local route of its own
// (AnyIP); not the caller's, and no other table's routes.
func TestList(t *testing.T) {
	ns := testns.New(t, "na")
	ns.MustExec(t, "", "ip", "link", "set", "lo", "up")
	ns.MustExec(t, "", "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ns.MustExec(t, "", "ip", "link", "set", "d0", "up")
	ns.MustExec(t, "", "ip", "addr", "add", "192.0.2.1/24", "dev", "d0")
	ns.MustExec(t, "", "ip", "addr", "add", "2001:db8:1::1/64", "dev", "d0", "nodad")
	ns.MustExec(t, "", "ip", "route", "add", "local", "198.51.100.0/28", "dev", "lo", "table", "local")
	ns.MustExec(t, "", "ip", "route", "add", "203.0.113.0/24", "dev", "d0", "table", "100")
	got, err := List(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"127.0.0.1/32", "127.0.0.0/8", "::1/128", "192.0.2.1/32", "2001:db8:1::1/128", "198.51.100.0/28"} {
		if !has(got, w) {
			t.Errorf("local prefixes %v lack %s", got, w)
		}
	}
	for _, n := range []string{"192.0.2.0/24", "203.0.113.0/24", "2001:db8:1::/64"} {
		if has(got, n) {
			t.Errorf("local prefixes %v include %s, which is not local", got, n)
		}
	}
}

// Watch reports an address added (kube-vip taking the lead) and removed
// (losing it) within milliseconds, and not a route of another table.
func TestWatch(t *testing.T) {
	ns := testns.New(t, "na")
	ns.MustExec(t, "", "ip", "link", "set", "lo", "up")
	ns.MustExec(t, "", "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ns.MustExec(t, "", "ip", "link", "set", "d0", "up")
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan []netip.Prefix, 16)
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, ns.Path, func(ps []netip.Prefix) { changes <- ps }) }()
	next := func(what string) ([]netip.Prefix, time.Duration) {
		t.Helper()
		start := time.Now()
		select {
		case ps := <-changes:
			return ps, time.Since(start)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no change reported within 5s", what)
		}
		return nil, 0
	}
	if ps, _ := next("start"); has(ps, "192.0.2.10/32") {
		t.Fatalf("initial %v", ps)
	}
	start := time.Now()
	ns.MustExec(t, "", "ip", "addr", "add", "192.0.2.10/32", "dev", "d0")
	ps, _ := next("address added")
	t.Logf("address added: reported %v after the command started", time.Since(start).Round(time.Microsecond))
	if !has(ps, "192.0.2.10/32") {
		t.Errorf("after add: %v", ps)
	}
	ns.MustExec(t, "", "ip", "addr", "add", "2001:db8::10/128", "dev", "d0", "nodad")
	if ps, _ := next("IPv6 address added"); !has(ps, "2001:db8::10/128") {
		t.Errorf("after IPv6 add: %v", ps)
	}
	ns.MustExec(t, "", "ip", "route", "add", "203.0.113.0/24", "dev", "d0", "table", "100")
	start = time.Now()
	ns.MustExec(t, "", "ip", "addr", "del", "192.0.2.10/32", "dev", "d0")
	ps, _ = next("address removed")
	t.Logf("address removed: reported %v after the command started", time.Since(start).Round(time.Microsecond))
	if has(ps, "192.0.2.10/32") || has(ps, "203.0.113.0/24") {
		t.Errorf("after delete: %v", ps)
	}
	select {
	case ps := <-changes:
		t.Errorf("unexpected change %v", ps)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after its context was done")
	}
}
