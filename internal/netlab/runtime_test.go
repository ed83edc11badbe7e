package netlab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/testns"
)

// TestRuntime attaches pods and host-network servers at run time and checks
// Connect's agnhost-style verdicts with real packets: success, REFUSED for an
// unserved port, TIMEOUT for traffic dropped by a rule written by hand in
// the lab node, and the pod's namespace gone after RemovePod.
func TestRuntime(t *testing.T) {
	l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1"}, {Name: "n2"}}})
	r, err := NewRuntime(l)
	if err != nil {
		t.Fatal(err)
	}
	ports := []Port{{TCP, 80}, {UDP, 53}, {SCTP, 9003}}
	a, err := r.AddPod("n1", "x/a", ports)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.AddPod("n2", "y/b", ports)
	if err != nil {
		t.Fatal(err)
	}
	hostPorts := []Port{{TCP, 34345}, {UDP, 34347}, {SCTP, 34351}}
	h, err := r.ServeNode("n2", hostPorts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ServeNode("n2", hostPorts); err == nil {
		t.Error("a second ServeNode on n2 succeeded")
	}
	if b.IPv4 == a.IPv4 || !b.IPv4.IsValid() || h.IPv4 != l.Node("n2").IPv4 {
		t.Fatalf("addresses: a=%v b=%v h=%v", a.IPv4, b.IPv4, h.IPv4)
	}

	ctx := context.Background()
	connect := func(from, to *Endpoint, p Port) ConnectResult {
		t.Helper()
		res, err := r.Connect(ctx, from, to, p.Proto, netip.AddrPortFrom(to.IPv4, uint16(p.Num)), 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(what string, from, to *Endpoint, p Port, wantPrefix string) {
		t.Helper()
		res := connect(from, to, p)
		switch {
		case wantPrefix == "" && !res.OK():
			t.Errorf("%s: %s -> %s %v: want success, got exit %d %q", what, from.Name, to.Name, p, res.Exit, res.Stderr)
		case wantPrefix != "" && (res.OK() || !strings.HasPrefix(res.Stderr, wantPrefix)):
			t.Errorf("%s: %s -> %s %v: want %s, got exit %d %q", what, from.Name, to.Name, p, wantPrefix, res.Exit, res.Stderr)
		}
	}

	for _, p := range ports {
		check("open", a, b, p, "")
		check("open", b, a, p, "")
	}
	for _, p := range hostPorts {
		check("open host-network", a, h, p, "")
	}
	check("unserved", a, b, Port{TCP, 81}, "REFUSED\n")
	check("unserved", a, b, Port{UDP, 54}, "REFUSED: ")
	check("unserved host-network", a, h, Port{TCP, 34346}, "REFUSED\n")
	// Without kernel SCTP nothing can answer an unserved port.
	check("unserved", a, b, Port{SCTP, 9005}, "TIMEOUT\n")

	// Drop by hand in n2: forwarded traffic to b, and local traffic to the
	// host-network ports.
	n2 := &testns.NS{Name: l.Node("n2").NetNS, Path: l.Node("n2").Path}
	rules := fmt.Sprintf(`table inet conntest {
	chain blockfwd { type filter hook forward priority 0; ip daddr %s drop; }
	chain blockin { type filter hook input priority 0; ip saddr %s th dport { 34345, 34347, 34351 } drop; }
}
`, b.IPv4, a.IPv4)
	n2.MustExec(t, rules, "nft", "-f", "-")
	check("dropped", a, b, Port{TCP, 80}, "TIMEOUT\n")
	check("dropped", a, b, Port{UDP, 53}, "TIMEOUT: ")
	check("dropped", a, b, Port{SCTP, 9003}, "TIMEOUT\n")
	for _, p := range hostPorts {
		prefix := "TIMEOUT\n"
		if p.Proto == UDP {
			prefix = "TIMEOUT: "
		}
		check("dropped host-network", a, h, p, prefix)
	}
	n2.MustExec(t, "", "nft", "delete", "table", "inet", "conntest")
	check("no longer dropped", a, b, Port{TCP, 80}, "")

	if err := r.RemovePod(b); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(NetNSDir, b.NetNS)); !os.IsNotExist(err) {
		t.Errorf("namespace of removed pod: stat err %v, want not exist", err)
	}
	if res := connect(a, b, Port{TCP, 80}); res.OK() {
		t.Error("a removed pod still answers")
	}
	// A new pod never takes a removed pod's address.
	c, err := r.AddPod("n2", "y/c", ports)
	if err != nil {
		t.Fatal(err)
	}
	if c.IPv4 == b.IPv4 {
		t.Errorf("new pod reuses the removed pod's address %v", c.IPv4)
	}
	check("new pod", a, c, Port{TCP, 80}, "")
	r.StopNode(h)
	check("stopped host-network", a, h, Port{TCP, 34345}, "REFUSED\n")
}

// A bridged lab's runtime serves on nodes and connects, but adds no pods:
// its allocator does not track the bridge's shared subnet.
func TestRuntimeRefusesBridgedPods(t *testing.T) {
	l := &Lab{spec: Spec{Bridged: true, Nodes: []NodeSpec{{Name: "n1"}}}, Nodes: []*Node{{Name: "n1"}}}
	r, err := NewRuntime(l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddPod("n1", "x/a", DefaultPorts); err == nil || !strings.Contains(err.Error(), "routed lab") {
		t.Fatalf("AddPod in a bridged lab: %v, want a refusal naming the routed lab", err)
	}
}
