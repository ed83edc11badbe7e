package clusterpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/selection"
)

// DNS is what domainNames rules need from the node: the cluster DNS
// addresses whose answers are trusted, and where the agent's forwarder
// (package dnsfwd) listens, per family. Queries of subject pods to the
// Servers (UDP and TCP port 53) are redirected there while the
// forwarder's heartbeat (SetAlive) is fresh.
type DNS struct {
	Servers            []netip.Addr
	Forward4, Forward6 netip.AddrPort
}

// The fixed objects of domainNames rules (see names.go).
const (
	// SetAlive holds "tcp" and "udp" while the forwarder runs: the
	// forwarder refreshes them (AliveTimeout) and the redirect looks
	// them up, so when the agent stops, its pods' DNS goes to the
	// cluster DNS directly again once they expire.
	SetAlive        = "cnp_dns_alive"
	setSubjects4    = "cnp_dns_subjects4"
	setSubjects6    = "cnp_dns_subjects6"
	setServers4     = "cnp_dns_servers4"
	setServers6     = "cnp_dns_servers6"
	chainDNSRedir   = "cnp_dns_redirect"
	dnsRedirectPrio = -110 // before kube-proxy's DNAT (dstnat, -100)
)

// domainSetBase names the timeout sets of a list of patterns: every rule
// with the same patterns has the same sets, which keeps their elements
// (the pods' answers) through edits of anything else in the policy, and
// rules of other policies with the same names share them. The elements
// ("POD . ADDR") mean the same in every such rule: an answer the pod
// received for a name that matches one of the patterns.
func domainSetBase(pats []fqdn.Pattern) string {
	names := make([]string, len(pats))
	for i, p := range pats {
		names[i] = p.String()
	}
	slices.Sort(names)
	names = slices.Compact(names)
	sum := sha256.Sum256([]byte(strings.Join(names, "\n")))
	return "cnp_dns_" + hex.EncodeToString(sum[:8])
}

// DomainSets are the timeout sets (IPv4, IPv6) of a domainNames peer's
// names: "POD . ADDR" for each answer a subject pod holds.
func DomainSets(pats []fqdn.Pattern) (set4, set6 string) {
	b := domainSetBase(pats)
	return b + "_4", b + "_6"
}

// domainMatches are a domain rule's peer matches: the local pod (source)
// and destination in the rule's timeout sets.
func domainMatches(pats []fqdn.Pattern) []string {
	b := domainSetBase(pats)
	return []string{"ip saddr . ip daddr @" + b + "_4", "ip6 saddr . ip6 daddr @" + b + "_6"}
}

// dnsOutput adds what domainNames rules need to out: their timeout sets,
// the forwarder's table of subject pods and, with in.DNS, the redirect of
// subject pods' DNS to the forwarder and the input accept of it. slotsOf
// gives each local pod's policies of a slot in evaluation order.
func (c *compiler) dnsOutput(out *Output, pols []ordered, local []*selection.Pod, slotsOf func(p *selection.Pod, si int) []*compiledPolicy) {
	sets := map[string]bool{}
	var domainSets []engine.Set
	rules := map[*compiledPolicy]map[int]*fqdn.Rule{}
	for _, o := range pols {
		cp := o.cp
		for idx, pats := range cp.domains {
			b := domainSetBase(pats)
			if !sets[b] {
				sets[b] = true
				comment := "domainNames answers (pod . address), e.g. " + pats[0].String()
				domainSets = append(domainSets,
					engine.Set{Name: b + "_4", Type: "ipv4_addr . ipv4_addr", Timeout: true, Comment: comment},
					engine.Set{Name: b + "_6", Type: "ipv6_addr . ipv6_addr", Timeout: true, Comment: comment})
			}
			if rules[cp] == nil {
				rules[cp] = map[int]*fqdn.Rule{}
			}
			rules[cp][idx] = &fqdn.Rule{Policy: cp.cnp.Name, Index: idx, Patterns: pats, Set4: b + "_4", Set6: b + "_6"}
		}
	}
	if len(sets) == 0 {
		return
	}
	// Sorted for a stable table.
	slices.SortFunc(domainSets, func(a, b engine.Set) int { return strings.Compare(a.Name, b.Name) })
	out.Sets = append(out.Sets, domainSets...)

	t := &fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{}}
	var subj4, subj6 []string
	for _, p := range local {
		var pr []*fqdn.Rule
		for _, si := range []int{slotIndex(true, true), slotIndex(false, true)} {
			for _, cp := range slotsOf(p, si) {
				m := rules[cp]
				if m == nil {
					continue
				}
				for idx := range cp.cnp.Spec.Egress {
					if r := m[idx]; r != nil {
						pr = append(pr, r)
					}
				}
			}
		}
		if len(pr) == 0 {
			continue
		}
		// Answers are keyed by the pod's first address of a family;
		// queries from any of its addresses find it.
		sub := &fqdn.Subject{Rules: pr}
		for i, a := range p.V4Text() {
			ip := netip.MustParseAddr(a)
			if i == 0 {
				sub.Addrs[0] = ip
			}
			t.Pods[ip] = sub
			subj4 = append(subj4, a)
		}
		for i, a := range p.V6Text() {
			ip := netip.MustParseAddr(a)
			if i == 0 {
				sub.Addrs[1] = ip
			}
			t.Pods[ip] = sub
			subj6 = append(subj6, a)
		}
	}
	out.DNS = t
	if c.in.DNS == nil {
		return
	}
	for _, a := range c.in.DNS.Servers {
		t.Servers = append(t.Servers, netip.AddrPortFrom(a, 53))
	}
	var srv4, srv6 []string
	for _, s := range c.in.DNS.Servers {
		if s.Is4() {
			srv4 = append(srv4, s.String())
		} else {
			srv6 = append(srv6, s.String())
		}
	}
	out.Sets = append(out.Sets,
		engine.Set{Name: SetAlive, Type: "inet_proto", Timeout: true, Comment: "the DNS forwarder's heartbeat"},
		engine.Set{Name: setSubjects4, Type: "ipv4_addr", Elements: podchain.Elements(subj4), Comment: "local subject pods of domainNames rules"},
		engine.Set{Name: setSubjects6, Type: "ipv6_addr", Elements: podchain.Elements(subj6), Comment: "local subject pods of domainNames rules"},
		engine.Set{Name: setServers4, Type: "ipv4_addr", Elements: podchain.Elements(srv4), Comment: "the cluster DNS"},
		engine.Set{Name: setServers6, Type: "ipv6_addr", Elements: podchain.Elements(srv6), Comment: "the cluster DNS"})
	redirect := engine.Chain{Name: chainDNSRedir, Type: "nat", Hook: "prerouting", Priority: dnsRedirectPrio, Policy: "accept",
		Comment: "domainNames: subject pods' DNS to the agent's forwarder while it runs"}
	const match = "meta l4proto { tcp, udp } th dport 53 "
	if f := c.in.DNS.Forward4; f.IsValid() {
		redirect.Rules = append(redirect.Rules, engine.Rule{Rule: match + "ip saddr @" + setSubjects4 + " ip daddr @" + setServers4 +
			" meta l4proto @" + SetAlive + " dnat ip to " + f.String()})
		out.Tiers.Input = append(out.Tiers.Input, engine.Rule{Rule: "meta l4proto { tcp, udp } ip saddr @" + setSubjects4 +
			" ip daddr " + f.Addr().String() + " th dport " + strconv.Itoa(int(f.Port())) + " accept",
			Comment: "DNS of domainNames subject pods, redirected to the forwarder"})
	}
	if f := c.in.DNS.Forward6; f.IsValid() {
		redirect.Rules = append(redirect.Rules, engine.Rule{Rule: match + "ip6 saddr @" + setSubjects6 + " ip6 daddr @" + setServers6 +
			" meta l4proto @" + SetAlive + " dnat ip6 to " + f.String()})
		out.Tiers.Input = append(out.Tiers.Input, engine.Rule{Rule: "meta l4proto { tcp, udp } ip6 saddr @" + setSubjects6 +
			" ip6 daddr " + f.Addr().String() + " th dport " + strconv.Itoa(int(f.Port())) + " accept",
			Comment: "DNS of domainNames subject pods, redirected to the forwarder"})
	}
	out.Chains = append(out.Chains, redirect)
}
