package conntrack

import (
	"net/netip"
	"testing"
)

func TestDecide(t *testing.T) {
	a := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	var (
		pod      = a("10.244.1.5")
		pod6     = a("fd00:10:244:1::5")
		other    = a("10.244.1.6") // a pod with no binding
		remote   = a("10.244.2.9") // a pod on another node
		node     = a("192.0.2.1")  // the node's own address
		node6    = a("2001:db8:1::1")
		lb       = a("203.0.113.7")
		lbNew    = a("203.0.113.8")
		lb6      = a("2001:db8::7")
		ext      = a("198.51.100.10")
		ext6     = a("2001:db8:100::10")
		svcIP    = a("10.96.0.10")
		outsider = a("172.16.0.4") // outside the cluster CIDRs
	)
	base := env{
		bindings: map[netip.Addr]Binding{
			pod:             {To: lbNew},
			pod6:            {To: lb6},
			a("10.244.1.7"): {To: lbNew, Restricted: true},
		},
		local: map[netip.Addr]bool{node: true, node6: true, a("127.0.0.1"): true},
	}
	scoped := base
	// lb is still on the node (kube-vip announces it here) but other's
	// Service no longer translates it.
	withPrev := base
	withPrev.local = map[netip.Addr]bool{node: true, lb: true, lbNew: true}
	withPrev.previous = map[netip.Addr][]netip.Addr{other: {lb}, pod: {lbNew}}
	// other was bound to lb at the last cleaning and to lbNew at a sync
	// whose cleaning did not run; neither is its translation now.
	withSkipped := withPrev
	WithPrevious(map[netip.Addr]Binding{other: {To: lb}}, map[netip.Addr]Binding{other: {To: lbNew}, pod: {To: lbNew}})(&withSkipped)
	scoped.cluster = []netip.Prefix{pfx("10.244.0.0/16"), pfx("fd00:10:244::/48")}
	scoped.internal = []netip.Prefix{pfx("10.244.0.0/16"), pfx("fd00:10:244::/48"), pfx("10.96.0.0/16")}

	for _, tc := range []struct {
		name string
		e    entry
		v    env
		want verdict
	}{
		{"node address that was our translation", entry{other, ext, lb}, withPrev, deleteWasOurs},
		{"node address, bound to it before and now", entry{pod, ext, lbNew}, withPrev, keepCurrent},
		{"node address, another one before", entry{other, ext, node}, withPrev, keepNodeAddress},
		{"node address of the last cleaning", entry{other, ext, lb}, withSkipped, deleteWasOurs},
		{"node address of a sync not cleaned for", entry{other, ext, lbNew}, withSkipped, deleteWasOurs},
		{"node address never ours", entry{other, ext, node}, withSkipped, keepNodeAddress},
		{"bound to it now, and at a sync not cleaned for", entry{pod, ext, lbNew}, withSkipped, keepCurrent},
		{"no source NAT", entry{pod, ext, pod}, base, keepNoSNAT},
		{"no source NAT, mapped form", entry{netip.AddrFrom16(pod.As16()), ext, pod}, base, keepNoSNAT},
		{"invalid entry", entry{}, base, keepNoSNAT},
		{"bound to T now", entry{pod, ext, lbNew}, base, keepCurrent},
		{"bound to T now, IPv6", entry{pod6, ext6, lb6}, base, keepCurrent},
		{"load-balancer IP changed", entry{pod, ext, lb}, base, deleteStale},
		{"annotation removed, Service deleted", entry{other, ext, lb}, base, deleteStale},
		{"pod moved to another Service", entry{pod6, ext6, a("2001:db8::9")}, base, deleteStale},
		{"masqueraded, now unrestricted", entry{pod, ext, node}, base, deleteMove},
		{"masqueraded, now unrestricted, IPv6", entry{pod6, ext6, node6}, base, deleteMove},
		{"masqueraded, no binding", entry{other, ext, node}, base, keepNodeAddress},
		{"masqueraded, restricted binding", entry{a("10.244.1.7"), ext, node}, base, keepNodeAddress},
		{"stale, restricted binding now", entry{a("10.244.1.7"), ext, lb}, base, deleteStale},
		{"node's own traffic SNATed", entry{node, ext, a("192.0.2.2")}, base, keepNotPod},
		{"destination is a node address", entry{pod, node, a("192.0.2.9")}, base, keepInternal},
		{"masqueraded to a pod (hairpin), unscoped", entry{pod, remote, node}, base, deleteMove},
		{"masqueraded to a pod (hairpin)", entry{pod, remote, node}, scoped, keepInternal},
		{"masqueraded to a Service backend", entry{pod, pod, node}, scoped, keepInternal},
		{"service CIDR destination", entry{pod, svcIP, lb}, scoped, keepInternal},
		{"source outside the cluster CIDRs", entry{outsider, ext, lb}, scoped, keepNotPod},
		{"source outside the cluster CIDRs, unscoped", entry{outsider, ext, lb}, base, deleteStale},
		{"scoped, stale", entry{pod, ext, lb}, scoped, deleteStale},
		{"scoped, move", entry{pod, ext, node}, scoped, deleteMove},
		{"scoped, current", entry{pod, ext, lbNew}, scoped, keepCurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.e, tc.v); got != tc.want {
				t.Errorf("decide(src %s, dst %s, nat %s) = %q, want %q", tc.e.Src, tc.e.Dst, tc.e.NAT, got, tc.want)
			}
		})
	}
}

func TestVerdictRemove(t *testing.T) {
	for v := keepNoSNAT; v <= deleteStale; v++ {
		want := v == deleteMove || v == deleteStale || v == deleteWasOurs
		if v.remove() != want {
			t.Errorf("%q.remove() = %v, want %v", v, v.remove(), want)
		}
	}
}
