package tablelayout

import (
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
)

// The neighbour discovery rules cannot accept an IPv4 packet: nft puts
// meta nfproto ipv6 and meta l4proto ipv6-icmp in front of them, which
// keeps IPv4 behaviour exactly what it was.
func TestNeighbourDiscoveryRulesAreIPv6Only(t *testing.T) {
	for _, r := range linkRules {
		c, err := nftsyntax.CompileRule(nftsyntax.Family(unix.NFPROTO_INET), r.Rule, nil)
		if err != nil {
			t.Fatalf("%s: %v", r.Rule, err)
		}
		if len(c.Exprs) < 4 {
			t.Fatalf("%s: %d expressions", r.Rule, len(c.Exprs))
		}
		m0, ok0 := c.Exprs[0].(*expr.Meta)
		c1, ok1 := c.Exprs[1].(*expr.Cmp)
		if !ok0 || !ok1 || m0.Key != expr.MetaKeyNFPROTO || c1.Data[0] != unix.NFPROTO_IPV6 {
			t.Errorf("%s does not start with meta nfproto ipv6: %v", r.Rule, c.Exprs)
		}
		if !strings.HasPrefix(r.Rule, "icmpv6 type ") {
			continue
		}
		m2, ok2 := c.Exprs[2].(*expr.Meta)
		c3, ok3 := c.Exprs[3].(*expr.Cmp)
		if !ok2 || !ok3 || m2.Key != expr.MetaKeyL4PROTO || c3.Data[0] != unix.IPPROTO_ICMPV6 {
			t.Errorf("%s does not go on with meta l4proto ipv6-icmp: %v", r.Rule, c.Exprs)
		}
	}
}
