package nfnl

import "testing"

func TestProtocolName(t *testing.T) {
	for _, c := range []struct {
		p    uint8
		want string
		ok   bool
	}{
		{6, "tcp", true}, {17, "udp", true}, {132, "sctp", true}, {1, "icmp", true},
		{58, "icmpv6", true}, {136, "udplite", true}, {33, "dccp", true},
		{0, "", false}, {47, "", false}, {255, "", false},
	} {
		if got, ok := ProtocolName(c.p); got != c.want || ok != c.ok {
			t.Errorf("ProtocolName(%d) = %q, %v; want %q, %v", c.p, got, ok, c.want, c.ok)
		}
	}
}
