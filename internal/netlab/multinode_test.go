package netlab

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMultiNode joins two nodes through a switch, with an external host
// behind the first node, and checks every pod reaches every pod and the
// external host, including across nodes.
func TestMultiNode(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		t.Run(topology(bridged), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, Spec{
				Nodes: []NodeSpec{
					{Name: "n1", Pods: []string{"x/a", "x/b"}},
					{Name: "n2", Pods: []string{"y/a", "y/b"}},
				},
				External: []string{"ext1"},
				Bridged:  bridged,
				Ports:    []Port{{TCP, 80}, {UDP, 80}, {SCTP, 80}},
			})
			if l.Switch == "" || !l.Nodes[1].IPv4.IsValid() {
				t.Fatalf("multi-node lab without switch or node addresses: %+v", l)
			}
			for _, f := range []Family{IPv4, IPv6} {
				m := reach(t, l, f)
				if diff := Compare(l.NewExpected(f, true), m); diff != "" {
					t.Fatal(diff)
				}
				// Spelled out, as the reason this test exists.
				for _, to := range []string{"y/b", "ext1"} {
					ok, err := l.Probe(context.Background(), "x/a", to, Port{TCP, 80}, f)
					if err != nil || !ok {
						t.Errorf("x/a -> %s %v: allowed=%v err=%v", to, f, ok, err)
					}
				}
			}
		})
	}
}

// TestRun checks Run enters lab namespaces (the node forwards, the pod
// doesn't) and that nothing enters the namespace the process started in.
func TestRun(t *testing.T) {
	t.Parallel()
	l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1", Pods: []string{"x/a"}}}, External: []string{"ext1"}})
	forwarding := func(name string) string {
		t.Helper()
		var v []byte
		err := l.Run(name, func() (err error) {
			v, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(v))
	}
	if got := forwarding("n1"); got != "1" {
		t.Errorf("node ip_forward = %s, want 1", got)
	}
	if got := forwarding("x/a"); got != "0" {
		t.Errorf("pod ip_forward = %s, want 0", got)
	}
	if err := l.Run("nope", func() error { return nil }); err == nil {
		t.Error("Run of an unknown namespace succeeded")
	}
	if l.Nodes[0].Path != NetNSDir+"/"+l.Nodes[0].NetNS || !strings.HasPrefix(l.Nodes[0].NetNS, Prefix+l.ID) {
		t.Errorf("node path %s, name %s", l.Nodes[0].Path, l.Nodes[0].NetNS)
	}
}

func TestRefuseOrigin(t *testing.T) {
	t.Parallel()
	// Not /proc/self/ns/net: it follows the main thread, which the
	// scheduler may lend to a parallel test's goroutine inside a lab
	// namespace (see processNS). The descriptor opened at start always
	// names the process's namespace; an unlocked goroutine's own thread
	// is always in it.
	origin := fmt.Sprintf("/proc/self/fd/%d", int(processNS))
	for _, path := range []string{origin, "/proc/thread-self/ns/net"} {
		called := false
		err := InNetNS(path, func() error { called = true; return nil })
		if err == nil || called {
			t.Errorf("InNetNS(%s) ran fn (called=%v, err=%v)", path, called, err)
		}
	}
	l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1"}}})
	called := false
	err := runIn(origin, l.origin, func() error { called = true; return nil })
	if err == nil || called {
		t.Errorf("lab entered its origin namespace (called=%v, err=%v)", called, err)
	}
}

// TestSysctlsOfAForwardingHost: on a host that forwards (Docker, podman,
// a kubelet: net.ipv4.ip_forward=1), every new namespace starts with the
// host's IPv4 settings, and the lab must still be what it says: nodes
// forward, pods, external hosts and the switch do not. The host's own
// sysctls are not touched: on this kernel a namespace copies init_net's
// IPv4 settings whatever namespace creates it (devconf_inherit_init_net
// exists only in init_net), so no parent namespace can stand in for such
// a host. Instead each namespace is given, the moment it exists, what
// such a host would have passed on (IPv6 too, as
// devconf_inherit_init_net=1 does, and a strict reverse-path filter).
func TestSysctlsOfAForwardingHost(t *testing.T) {
	t.Parallel()
	forwardingHost := [][2]string{
		{"net/ipv4/ip_forward", "1"},
		{"net/ipv6/conf/all/forwarding", "1"},
		{"net/ipv6/conf/default/forwarding", "1"},
		{"net/ipv4/conf/all/rp_filter", "1"},
		{"net/ipv4/conf/default/rp_filter", "1"},
	}
	for _, bridged := range []bool{false, true} {
		t.Run(topology(bridged), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1", Pods: []string{"x/a", "x/b"}}, {Name: "n2", Pods: []string{"y/a"}}},
				External: []string{"ext1"}, Bridged: bridged, inherited: forwardingHost})
			read := func(name, key string) string {
				t.Helper()
				var v []byte
				err := l.Run(name, func() (err error) {
					v, err = os.ReadFile("/proc/sys/" + key)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(string(v))
			}
			for _, ns := range []struct{ name, forwards string }{
				{"n1", "1"}, {"n2", "1"}, {"x/a", "0"}, {"x/b", "0"}, {"y/a", "0"}, {"ext1", "0"}, {"switch", "0"},
			} {
				for _, k := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv6/conf/default/forwarding"} {
					if got := read(ns.name, k); got != ns.forwards {
						t.Errorf("%s: %s = %s, want %s", ns.name, k, got, ns.forwards)
					}
				}
				for _, k := range []string{"net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter"} {
					if got := read(ns.name, k); got != "0" {
						t.Errorf("%s: %s = %s, want 0", ns.name, k, got)
					}
				}
			}
			for _, f := range []Family{IPv4, IPv6} {
				if diff := Compare(l.NewExpected(f, true), reach(t, l, f)); diff != "" {
					t.Fatalf("%v: %s", f, diff)
				}
			}
		})
	}
}
