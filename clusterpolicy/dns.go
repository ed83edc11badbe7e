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
	setKnown4       = "cnp_dns_known4"
	setKnown6       = "cnp_dns_known6"
	setPending4     = "cnp_dns_ranges4"
	setPending6     = "cnp_dns_ranges6"
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
	s4, s6 := DomainSets(pats)
	return []string{"ip saddr . ip daddr @" + s4, "ip6 saddr . ip6 daddr @" + s6}
}

// dnsOutput adds what domainNames rules need to out: their timeout sets,
// the forwarder's table of subject pods and, with in.DNS, the redirect of
// subject pods' DNS to the forwarder and the input accept of it. slotsOf
// gives each local pod's policies of a slot in evaluation order.
func (c *compiler) dnsOutput(out *Output, pols []ordered, local []*selection.Member, slotsOf func(p *selection.Member, si int) []*compiledPolicy) {
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
	for _, s := range domainSets {
		t.Sets = append(t.Sets, s.Name)
	}
	var subj [2][]string // IPv4, IPv6 (as fqdn.Subject.Addrs)
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
		ns, _, _ := strings.Cut(p.Key, "/")
		sub := &fqdn.Subject{Namespace: ns, Rules: pr}
		for f, addrs := range [2][]string{p.V4Text(), p.V6Text()} {
			for i, a := range addrs {
				ip := netip.MustParseAddr(a)
				if i == 0 {
					sub.Addrs[f] = ip
				}
				t.Pods[ip] = sub
				subj[f] = append(subj[f], a)
			}
		}
	}
	// Every local pod with an address, subject or not: what is not in
	// it, in the node's pod ranges, is a pod starting whose address the
	// agent does not know yet (see pendingRanges).
	var known4, known6 []string
	t.Known = map[netip.Addr]bool{}
	for _, p := range local {
		known4 = append(known4, p.V4Text()...)
		known6 = append(known6, p.V6Text()...)
		for _, addrs := range [2][]string{p.V4Text(), p.V6Text()} {
			for _, a := range addrs {
				t.Known[netip.MustParseAddr(a)] = true
			}
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
	t.Ranges = c.pendingRanges()
	var pend4, pend6 []netip.Prefix
	for _, r := range t.Ranges {
		if r.Addr().Is4() {
			pend4 = append(pend4, r)
		} else {
			pend6 = append(pend6, r)
		}
	}
	out.Sets = append(out.Sets,
		engine.Set{Name: SetAlive, Type: "inet_proto", Timeout: true, Comment: "the DNS forwarder's heartbeat"},
		engine.Set{Name: setSubjects4, Type: "ipv4_addr", Elements: podchain.Elements(subj[0]), Comment: "local subject pods of domainNames rules"},
		engine.Set{Name: setSubjects6, Type: "ipv6_addr", Elements: podchain.Elements(subj[1]), Comment: "local subject pods of domainNames rules"},
		engine.Set{Name: setKnown4, Type: "ipv4_addr", Elements: podchain.Elements(known4), Comment: "local pods with a known address"},
		engine.Set{Name: setKnown6, Type: "ipv6_addr", Elements: podchain.Elements(known6), Comment: "local pods with a known address"},
		engine.Set{Name: setPending4, Type: "ipv4_addr", Interval: true, Elements: podchain.Elements(prefixTexts(pend4)), Comment: "this node's pod ranges"},
		engine.Set{Name: setPending6, Type: "ipv6_addr", Interval: true, Elements: podchain.Elements(prefixTexts(pend6)), Comment: "this node's pod ranges"},
		engine.Set{Name: setServers4, Type: "ipv4_addr", Elements: podchain.Elements(srv4), Comment: "the cluster DNS"},
		engine.Set{Name: setServers6, Type: "ipv6_addr", Elements: podchain.Elements(srv6), Comment: "the cluster DNS"})
	redirect := engine.Chain{Name: chainDNSRedir, Type: "nat", Hook: "prerouting", Priority: dnsRedirectPrio, Policy: "accept",
		Comment: "domainNames: subject pods' DNS to the agent's forwarder while it runs"}
	// Two sources are redirected: subject pods, and addresses of this
	// node's pod ranges no pod has yet (a pod starting that may be a
	// subject: the forwarder waits for its address to reach the table).
	for _, f := range []struct {
		fwd                     netip.AddrPort
		ip, subj, known, ranges string
		servers, dnat           string
	}{
		{c.in.DNS.Forward4, "ip", setSubjects4, setKnown4, setPending4, setServers4, "dnat ip to "},
		{c.in.DNS.Forward6, "ip6", setSubjects6, setKnown6, setPending6, setServers6, "dnat ip6 to "},
	} {
		if !f.fwd.IsValid() {
			continue
		}
		sources := []string{f.ip + " saddr @" + f.subj}
		if len(t.Ranges) > 0 {
			sources = append(sources, f.ip+" saddr @"+f.ranges+" "+f.ip+" saddr != @"+f.known)
		}
		for _, src := range sources {
			redirect.Rules = append(redirect.Rules, engine.Rule{Rule: "meta l4proto { tcp, udp } th dport 53 " + src + " " + f.ip + " daddr @" + f.servers +
				" meta l4proto @" + SetAlive + " " + f.dnat + f.fwd.String()})
			out.Tiers.Input = append(out.Tiers.Input, engine.Rule{Rule: "meta l4proto { tcp, udp } " + src + " " + f.ip + " daddr " + f.fwd.Addr().String() +
				" th dport " + strconv.Itoa(int(f.fwd.Port())) + " accept", Comment: "DNS of domainNames subject pods, redirected to the forwarder"})
		}
	}
	out.Chains = append(out.Chains, redirect)
}

// pendingRanges are this node's pod ranges (its Node's spec.podCIDRs).
func (c *compiler) pendingRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range c.in.Nodes {
		if n.Name != c.in.NodeName {
			continue
		}
		for _, s := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out
}
