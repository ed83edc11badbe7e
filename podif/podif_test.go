package podif

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/podguard"
)

// ipAddrs is the oracle: the addresses `ip -j addr show dev DEV` lists in
// the namespace, sorted.
func ipAddrs(t *testing.T, ns *testns.NS, dev string) []netip.Addr {
	t.Helper()
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(ns.MustExec(t, "", "ip", "-j", "addr", "show", "dev", dev)), &links); err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			out = append(out, netip.MustParseAddr(a.Local))
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// pod makes a pod's namespace joined to node by a veth pair: hostName on
// the node, podName in the pod, both up.
func pod(t *testing.T, node *testns.NS, hostName, podName string) *testns.NS {
	t.Helper()
	p := testns.New(t, "pif")
	attach(t, node, p, hostName, podName)
	return p
}

func attach(t *testing.T, node, p *testns.NS, hostName, podName string) {
	t.Helper()
	node.MustExec(t, "", "ip", "link", "add", hostName, "type", "veth", "peer", "name", podName, "netns", p.Name)
	node.MustExec(t, "", "ip", "link", "set", hostName, "up")
	p.MustExec(t, "", "ip", "link", "set", podName, "up")
}

func find(ifs []podguard.Interface, name string) (podguard.Interface, bool) {
	i := slices.IndexFunc(ifs, func(x podguard.Interface) bool { return x.Name == name })
	if i < 0 {
		return podguard.Interface{}, false
	}
	return ifs[i], true
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// hasAll says whether got holds every address of want.
func hasAll(got, want []netip.Addr) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// Read finds a routed pod's veth and a bridged pod's port (with its
// bridge), each with exactly the addresses its peer holds as `ip` lists
// them: IPv4 and IPv6, the link-local address the kernel gave the pod's
// interface (tentative while DAD runs) and an IPv4 point-to-point address
// as the pod sees it; a pod with two interfaces gets both, from one
// namespace. A veth whose both ends are on the node, and the bridge
// itself are not pods' interfaces.
func TestRead(t *testing.T) {
	node := testns.New(t, "pif")
	node.MustExec(t, "", "ip", "link", "set", "lo", "up")

	// Routed, dual-stack, two IPv4 and two IPv6 addresses; the IPv4 /32
	// route points at the node side.
	routed := pod(t, node, "vroute", "eth0")
	routed.MustExec(t, "", "ip", "addr", "add", "10.1.0.2/32", "dev", "eth0")
	routed.MustExec(t, "", "ip", "addr", "add", "10.1.0.12/32", "dev", "eth0")
	routed.MustExec(t, "", "ip", "addr", "add", "fd00:1::2/128", "dev", "eth0", "nodad")
	routed.MustExec(t, "", "ip", "addr", "add", "fd00:1::12/128", "dev", "eth0")
	node.MustExec(t, "", "ip", "route", "add", "10.1.0.2/32", "dev", "vroute")

	// Bridged, IPv4 only (it still has a link-local IPv6 address).
	node.MustExec(t, "", "ip", "link", "add", "br0", "type", "bridge")
	node.MustExec(t, "", "ip", "link", "set", "br0", "up")
	bridged := pod(t, node, "vbridge", "eth0")
	node.MustExec(t, "", "ip", "link", "set", "vbridge", "master", "br0")
	bridged.MustExec(t, "", "ip", "addr", "add", "10.1.0.3/24", "dev", "eth0")

	// IPv4 point-to-point: IFA_LOCAL is the pod's, IFA_ADDRESS the far end.
	ptp := pod(t, node, "vptp", "eth0")
	ptp.MustExec(t, "", "ip", "addr", "add", "10.1.0.4", "peer", "169.254.1.1", "dev", "eth0")

	// Two interfaces into one pod namespace.
	multi := pod(t, node, "vmulti0", "eth0")
	attach(t, node, multi, "vmulti1", "net1")
	multi.MustExec(t, "", "ip", "addr", "add", "10.1.0.5/32", "dev", "eth0")
	multi.MustExec(t, "", "ip", "addr", "add", "10.2.0.5/32", "dev", "net1")

	// A pod namespace whose interface is down: no link-local address,
	// and its IPv4 address is still listed.
	down := testns.New(t, "pif")
	node.MustExec(t, "", "ip", "link", "add", "vdown", "type", "veth", "peer", "name", "eth0", "netns", down.Name)
	down.MustExec(t, "", "ip", "addr", "add", "10.1.0.6/32", "dev", "eth0")

	// The node's own: a veth pair within the namespace.
	node.MustExec(t, "", "ip", "link", "add", "vself0", "type", "veth", "peer", "name", "vself1")
	node.MustExec(t, "", "ip", "link", "set", "vself0", "up")
	node.MustExec(t, "", "ip", "link", "set", "vself1", "up")
	node.MustExec(t, "", "ip", "addr", "add", "10.9.0.1/32", "dev", "vself1")

	got, err := Read(node.Path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ifc := range got {
		names = append(names, ifc.Name)
	}
	if want := []string{"vbridge", "vdown", "vmulti0", "vmulti1", "vptp", "vroute"}; !slices.Equal(names, want) {
		t.Fatalf("interfaces %v, want %v", names, want)
	}
	for _, c := range []struct {
		name, bridge string
		peer         *testns.NS
		dev          string
		must         []netip.Addr
		linkLocal    bool
	}{
		{"vroute", "", routed, "eth0", addrs("10.1.0.2", "10.1.0.12", "fd00:1::2", "fd00:1::12"), true},
		{"vbridge", "br0", bridged, "eth0", addrs("10.1.0.3"), true},
		{"vptp", "", ptp, "eth0", addrs("10.1.0.4"), true},
		{"vmulti0", "", multi, "eth0", addrs("10.1.0.5"), true},
		{"vmulti1", "", multi, "net1", addrs("10.2.0.5"), true},
		{"vdown", "", down, "eth0", addrs("10.1.0.6"), false},
	} {
		ifc, _ := find(got, c.name)
		if ifc.Bridge != c.bridge {
			t.Errorf("%s: bridge %q, want %q", c.name, ifc.Bridge, c.bridge)
		}
		// The oracle is read after Read: a link-local address appears
		// once, when the interface comes up, and stays.
		if want := ipAddrs(t, c.peer, c.dev); !slices.Equal(ifc.Peer, want) {
			t.Errorf("%s: peer addresses %v, `ip addr` in the pod lists %v", c.name, ifc.Peer, want)
		}
		if !hasAll(ifc.Peer, c.must) {
			t.Errorf("%s: peer addresses %v lack %v", c.name, ifc.Peer, c.must)
		}
		ll := slices.ContainsFunc(ifc.Peer, netip.Addr.IsLinkLocalUnicast)
		if ll != c.linkLocal {
			t.Errorf("%s: peer addresses %v: link-local %v, want %v", c.name, ifc.Peer, ll, c.linkLocal)
		}
		if slices.Contains(ifc.Peer, netip.MustParseAddr("169.254.1.1")) {
			t.Errorf("%s: the far end of a point-to-point address is listed as the pod's: %v", c.name, ifc.Peer)
		}
	}
	again, err := Read(node.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(got, again) {
		t.Errorf("two reads of the same state differ:\n%v\n%v", got, again)
	}
}

// A node without pods reads as none, not as an error.
func TestReadEmpty(t *testing.T) {
	node := testns.New(t, "pif")
	got, err := Read(node.Path)
	if err != nil || len(got) != 0 {
		t.Fatalf("Read = %v, %v; want none", got, err)
	}
}

// Pods come and go (veths created and deleted, pod namespaces deleted
// with them) while Read runs: every read succeeds and has the pods that
// stay, with their addresses.
func TestReadWhileLinksChange(t *testing.T) {
	node := testns.New(t, "pif")
	stay := pod(t, node, "vstay", "eth0")
	stay.MustExec(t, "", "ip", "addr", "add", "10.1.0.2/32", "dev", "eth0")

	const rounds = 30
	done := make(chan error, 1)
	go func() {
		for i := range rounds {
			p, err := testns.Create("pif")
			if err != nil {
				done <- err
				return
			}
			host := fmt.Sprintf("vchurn%d", i)
			steps := [][]string{
				{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.Name},
				{"ip", "link", "set", host, "up"},
			}
			for _, s := range steps {
				if _, err := node.Exec("", s[0], s[1:]...); err != nil {
					p.Delete()
					done <- err
					return
				}
			}
			if _, err := p.Exec("", "ip", "addr", "add", "10.1.1.2/32", "dev", "eth0"); err != nil {
				p.Delete()
				done <- err
				return
			}
			// Half of them go with their namespace (the pod
			// deleted), half by deleting the veth.
			if i%2 == 0 {
				_, err = node.Exec("", "ip", "link", "del", host)
			}
			if derr := p.Delete(); err == nil {
				err = derr
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d reads during %d pod starts and deletions", reads, rounds)
			if reads == 0 {
				t.Fatal("no read ran while the links changed")
			}
			return
		default:
		}
		got, err := Read(node.Path)
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		reads++
		ifc, ok := find(got, "vstay")
		if !ok || !slices.Contains(ifc.Peer, netip.MustParseAddr("10.1.0.2")) {
			t.Fatalf("read %d: %v lacks vstay with 10.1.0.2", reads, got)
		}
		for _, x := range got {
			if strings.HasPrefix(x.Name, "vchurn") && slices.Contains(x.Peer, netip.MustParseAddr("10.1.0.2")) {
				t.Fatalf("read %d: %s has another pod's address: %v", reads, x.Name, got)
			}
		}
	}
}

// Watch reports a pod's veth created and deleted, a port joining a
// bridge, and an address added inside the pod's namespace, which the
// node's namespace hears of only through NETLINK_LISTEN_ALL_NSID.
func TestWatch(t *testing.T) {
	node := testns.New(t, "pif")
	node.MustExec(t, "", "ip", "link", "add", "br0", "type", "bridge")
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan struct{}, 64)
	done := make(chan error, 1)
	// What the caller read before differs from the kernel by a link
	// that is not there: the first read after subscribing reports it.
	stale := []podguard.Interface{{Name: "vgone"}}
	go func() { done <- Watch(ctx, node.Path, stale, func() { changes <- struct{}{} }, nil) }()
	var mu sync.Mutex
	// next waits for a change after which Read says ok.
	next := func(what string, ok func([]podguard.Interface) bool) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-changes:
			case <-deadline:
				got, err := Read(node.Path)
				t.Fatalf("%s: no change reported within 10s (Read: %v, %v)", what, got, err)
			}
			got, err := Read(node.Path)
			if err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return
			}
		}
	}
	next("the caller's read is stale", func(ifs []podguard.Interface) bool { return len(ifs) == 0 })

	// The pod's side stays down: no carrier change, no link-local
	// address, so the address added next is the only notification, and
	// it comes from the pod's namespace.
	p := testns.New(t, "pif")
	node.MustExec(t, "", "ip", "link", "add", "vw", "type", "veth", "peer", "name", "eth0", "netns", p.Name)
	next("veth created", func(ifs []podguard.Interface) bool { _, ok := find(ifs, "vw"); return ok })

	p.MustExec(t, "", "ip", "addr", "add", "10.1.0.7/32", "dev", "eth0")
	next("address added in the pod", func(ifs []podguard.Interface) bool {
		ifc, _ := find(ifs, "vw")
		return slices.Contains(ifc.Peer, netip.MustParseAddr("10.1.0.7"))
	})
	p.MustExec(t, "", "ip", "addr", "add", "fd00:1::7/128", "dev", "eth0", "nodad")
	next("IPv6 address added in the pod", func(ifs []podguard.Interface) bool {
		ifc, _ := find(ifs, "vw")
		return slices.Contains(ifc.Peer, netip.MustParseAddr("fd00:1::7"))
	})

	node.MustExec(t, "", "ip", "link", "set", "vw", "master", "br0")
	next("port joined the bridge", func(ifs []podguard.Interface) bool {
		ifc, _ := find(ifs, "vw")
		return ifc.Bridge == "br0"
	})

	node.MustExec(t, "", "ip", "link", "del", "vw")
	next("veth deleted", func(ifs []podguard.Interface) bool { _, ok := find(ifs, "vw"); return !ok })

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context was done")
	}
}

// BenchmarkRead reads a node of 100 routed pods, each dual-stack with a
// link-local address: one link dump and 100 address dumps.
func BenchmarkRead(b *testing.B) {
	node := testns.New(b, "pif")
	const pods = 100
	for i := range pods {
		p := testns.New(b, "pif")
		host := fmt.Sprintf("vb%d", i)
		node.MustExec(b, "", "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.Name)
		node.MustExec(b, "", "ip", "link", "set", host, "up")
		p.MustExec(b, "", "ip", "link", "set", "eth0", "up")
		p.MustExec(b, "", "ip", "addr", "add", fmt.Sprintf("10.1.%d.%d/32", i/250, i%250+2), "dev", "eth0")
		p.MustExec(b, "", "ip", "addr", "add", fmt.Sprintf("fd00:1::%x/128", i+2), "dev", "eth0", "nodad")
	}
	got, err := Read(node.Path)
	if err != nil || len(got) != pods {
		b.Fatalf("Read: %d interfaces, %v", len(got), err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Read(node.Path); err != nil {
			b.Fatal(err)
		}
	}
}
