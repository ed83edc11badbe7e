package netlab

import (
	"fmt"
	"testing"
)

// TestFlip installs drop rules in the node namespace and checks that exactly
// the expected cells flip, for TCP and for SCTP, routed and bridged. The
// "ct state invalid drop" rule also proves the hand-made SCTP INITs carry a
// checksum conntrack accepts.
func TestFlip(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		t.Run(topology(bridged), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1", Pods: xyz}}, Bridged: bridged})
			b := l.Endpoint("x/b")
			nftIn(t, l, "n1", fmt.Sprintf(`
table inet flip {
	chain forward {
		type filter hook forward priority filter; policy accept;
		ct state invalid drop
		ip daddr %s tcp dport 80 drop
		ip6 daddr %s tcp dport 80 drop
		sctp dport 81 drop
	}
}
`, b.IPv4, b.IPv6))
			tcp80, sctp81 := Port{TCP, 80}, Port{SCTP, 81}
			for _, f := range []Family{IPv4, IPv6} {
				want := l.NewExpected(f, true).
					ExpectTo("x/b", false, tcp80).
					ExpectAll(false, sctp81)
				// A pod's traffic to itself never crosses the node.
				for _, p := range l.Pods {
					want.Expect(p.Name, p.Name, true)
				}
				if diff := Compare(want, reach(t, l, f)); diff != "" {
					t.Fatal(diff)
				}
			}
		})
	}
}
