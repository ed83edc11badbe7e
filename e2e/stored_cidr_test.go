package e2e

import (
	"net/netip"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// TestNetworkPolicyAsAnOlderAPIServerStoredIt: ipBlocks an API server
// before Kubernetes 1.36 accepted, and a newer one still serves, compiled
// in process as the agent compiles what it watches (manifests refuse them,
// as the API server does on create). They mean what Kubernetes components
// read: x/a's egress to y's /16 except y/a written as an IPv4-mapped
// address, and with host bits set in the cidr. The policy was dropped
// whole, so x/a lost its egress isolation and reached y/a; now x/a reaches
// the other pods (all in the /16) over IPv4 but not y/a, and nothing over
// IPv6.
func TestNetworkPolicyAsAnOlderAPIServerStoredIt(t *testing.T) {
	c := newCNPCluster(t, false)
	c.t = t
	c.reset()
	ya := c.lab.Endpoint("y/a").Addr(netlab.IPv4)
	unmasked := netip.PrefixFrom(ya, 16).String() // the address itself, with /16: host bits set
	mapped := netip.PrefixFrom(netip.AddrFrom16(ya.As16()), 128).String()
	c.addPolicy(np("x", "stored", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
		Egress: egress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: unmasked, Except: []string{mapped}}}})}))
	c.sync()
	c.checkCNP(netlab.IPv4, []netlab.Port{tcp80, udp81}, or(not(from("x/a")), not(to("y/a"))))
	c.checkCNP(netlab.IPv6, []netlab.Port{tcp80, udp81}, not(from("x/a")))
}
