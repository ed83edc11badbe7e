package explain

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/fqdn"
)

// DomainAnswers is the node's live state of domainNames rules: the DNS
// answers its subject pods received that have not expired, as the
// kernel's timeout sets hold them (see clusterpolicy.DomainSets).
type DomainAnswers interface {
	// Answer returns the name whose answer put pod . dst into set, and
	// the time it has left; ok is false when set holds no such element.
	Answer(set string, pod, dst netip.Addr) (name string, left time.Duration, ok bool)
}

// SetDomainAnswers makes domainNames peers match what answers says; without
// it they match nothing and explain says why.
func (c *Cluster) SetDomainAnswers(answers DomainAnswers) { c.domains = answers }

// matchDomains reports whether a domainNames peer of an egress rule holds
// the flow from self to dst: whether self received, and still holds, an
// answer with dst for one of the peer's names. Without the node's live
// state it is a note and no match.
func (c *Cluster) matchDomains(peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer, self, dst Endpoint) (text string, ok, domains bool, note string) {
	var all []string
	for j, p := range peers {
		if len(p.DomainNames) == 0 {
			continue
		}
		var pats []fqdn.Pattern
		for _, d := range p.DomainNames {
			if pat, err := fqdn.ParsePattern(string(d)); err == nil {
				pats = append(pats, pat)
				all = append(all, pat.String())
			}
		}
		if c.domains == nil || self.pod == nil || len(pats) == 0 {
			continue
		}
		set4, set6 := clusterpolicy.DomainSets(pats)
		set := set4
		if dst.Addr.Is6() {
			set = set6
		}
		for _, src := range self.pod.addrs {
			if src.Is4() != dst.Addr.Is4() {
				continue
			}
			if name, left, found := c.domains.Answer(set, src, dst.Addr); found {
				return fmt.Sprintf("to[%d] domainNames: %s resolved %s to %s (answer expires in %s)", j, self.Pod, name, dst.Addr, left.Round(time.Second)), true, true, ""
			}
		}
	}
	if len(all) == 0 {
		return "", false, false, ""
	}
	if c.domains == nil {
		return "", false, true, fmt.Sprintf("matches addresses the pod resolved for %s while their DNS answers last; without the node's live state this explanation takes it to match nothing", strings.Join(all, ", "))
	}
	return "", false, true, fmt.Sprintf("matches addresses the pod resolved for %s: the pod holds no unexpired answer with %s", strings.Join(all, ", "), dst.Addr)
}
