package podguard

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/nsgroup"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// Priority is the guard chains' place on the ingress hook: before any
// other ingress chain, so nothing another tool does at ingress sees a
// forged packet first.
const Priority = -500

// MaxLinkLocal bounds the link-local addresses honoured per interface: a
// pod with NET_ADMIN can add any number to its own interface, and each
// would cost a rule and a key in every dispatch map. Further ones are not
// the pod's (they are dropped as forged) and are reported.
const MaxLinkLocal = 8

// MaxStartingAddrs bounds the addresses of the pod ranges honoured on the
// interface of a pod not known yet: a network plugin gives a pod one or
// two; a pod with NET_ADMIN could add any number.
const MaxStartingAddrs = 4

// ForgedChain is the shared chain a guard chain sends forged packets to
// when the node logs denied packets: one rate limit for the node, then
// the log, then the drop.
const ForgedChain = "pg_forged"

// ForgedPrefix is the log prefix of forged packets (package flowlog reads
// it back).
const ForgedPrefix = "nftguard forged source"

// Log is how forged packets are logged; nil in Input leaves them counted
// and dropped only.
type Log struct {
	Group       uint16
	Rate, Burst uint32
}

// Input is what the guard chains are compiled from.
type Input struct {
	NodeName string
	Pods     *podset.Set
	// Interfaces are the node's pod-facing interfaces (learned by package
	// podif).
	Interfaces []Interface
	// PodCIDRs are the node's pod ranges (Node.spec.podCIDRs): an
	// interface whose peer holds an address in them but no known pod's
	// is a pod still starting, guarded by what its peer holds.
	PodCIDRs []netip.Prefix
	// Log, when set, logs forged packets (rate-limited, node-wide).
	Log *Log
}

// Output is the guard part of the desired table.
type Output struct {
	Chains []engine.Chain
	Sets   []engine.Set
	// LinkLocal are each guarded pod's own link-local addresses
	// (namespace/name → canonical text), those no other local pod's
	// interface holds: the tiers' dispatch maps key them like the pod's
	// IPs.
	LinkLocal map[string][]string
	// Guarded maps each local pod with an interface of its own to the
	// interface's name.
	Guarded map[string]string
	// Unattributed are the local pods without one, sorted.
	Unattributed []string
	Problems     []problem.Problem
}

// localPod is a local pod that owns its addresses, with them parsed.
type localPod struct {
	p     *podset.Pod
	key   string
	addrs []netip.Addr
}

// Compile binds local pods to their interfaces and makes their guard
// chains. It keeps nothing between calls; a Compiler does.
func Compile(in Input) Output { return new(Compiler).Compile(in) }

// Compiler compiles successive states of one node: the local pods of a
// namespace whose pod group is the same group as last time are not looked
// for again, so an event costs its namespace, not the cluster. The zero
// value is ready to use; it is not safe for concurrent use.
type Compiler struct {
	node  string
	local map[string]nsLocal // namespace → its local pods
}

type nsLocal struct {
	group *nsgroup.Group[*podset.Pod]
	pods  []localPod
}

// Compile is the package's Compile for the next state.
func (c *Compiler) Compile(in Input) Output {
	out := Output{Guarded: map[string]string{}, LinkLocal: map[string][]string{}}
	pods := c.localPods(in)
	// Which local pod each API address is, for the binding. An address
	// two local pods list (a stale status) is neither's: podchain
	// reports it, and no interface is bound through it.
	owner := map[netip.Addr]string{}
	shared := map[netip.Addr]bool{}
	for _, lp := range pods {
		for _, a := range lp.addrs {
			if o, ok := owner[a]; ok && o != lp.key {
				shared[a] = true
			}
			owner[a] = lp.key
		}
	}
	// claims: interface → the local pods whose addresses its peer holds.
	type ifState struct {
		ifc    *Interface
		claims []string
	}
	ifs := make([]ifState, 0, len(in.Interfaces))
	byPod := map[string][]int{}
	for i := range in.Interfaces {
		ifc := &in.Interfaces[i]
		if err := engine.CheckDevice(ifc.Name); err != nil {
			// No chain can name it (nft could not read it back): its
			// pod, if any, stays unattributed rather than fail the
			// whole sync.
			out.Problems = append(out.Problems, problem.Problem{
				Object: nodeObject(in.NodeName), Local: true,
				Reason: fmt.Sprintf("interface %q cannot be guarded: %v", ifc.Name, err),
			})
			continue
		}
		var claims []string
		for _, a := range ifc.Peer {
			if o, ok := owner[a.Unmap()]; ok && !shared[a.Unmap()] && !slices.Contains(claims, o) {
				claims = append(claims, o)
			}
		}
		sort.Strings(claims)
		ifs = append(ifs, ifState{ifc: ifc, claims: claims})
		for _, k := range claims {
			byPod[k] = append(byPod[k], len(ifs)-1)
		}
	}

	// Link-local addresses held by more than one interface are nobody's.
	llCount := map[netip.Addr]int{}
	for _, s := range ifs {
		for _, a := range linkLocal(s.ifc.Peer) {
			llCount[a]++
		}
	}

	var chains []engine.Chain
	conflict := map[string]bool{}
	for _, s := range ifs {
		if len(s.claims) > 1 {
			conflict[s.ifc.Name] = true
			chains = append(chains, conflictChain(s.ifc, s.claims))
			out.Problems = append(out.Problems, problem.Problem{
				Object: nodeObject(in.NodeName), Local: true,
				Reason: fmt.Sprintf("interface %s holds addresses of pods %s: every packet entering it is dropped", s.ifc.Name, strings.Join(s.claims, ", ")),
			})
		}
	}
	bound := map[string]bool{} // interfaces bound to a pod
	for _, lp := range pods {
		var clean []int
		for _, i := range byPod[lp.key] {
			if !conflict[ifs[i].ifc.Name] {
				clean = append(clean, i)
			}
		}
		if len(clean) != 1 {
			out.Unattributed = append(out.Unattributed, lp.key)
			continue
		}
		ifc := ifs[clean[0]].ifc
		bound[ifc.Name] = true
		out.Guarded[lp.key] = ifc.Name
		var own []netip.Addr
		for _, a := range linkLocal(ifc.Peer) {
			if llCount[a] > 1 {
				out.Problems = append(out.Problems, problem.Problem{
					Object: podObject(lp.p), Local: true,
					Reason: fmt.Sprintf("link-local address %s is held by another interface of this node too: neither pod may use it", a),
				})
				continue
			}
			if len(own) == MaxLinkLocal {
				out.Problems = append(out.Problems, problem.Problem{
					Object: podObject(lp.p), Local: true,
					Reason: fmt.Sprintf("interface %s holds more than %d link-local addresses: the others are dropped as forged", ifc.Name, MaxLinkLocal),
				})
				break
			}
			own = append(own, a)
		}
		if len(own) > 0 {
			txt := make([]string, len(own))
			for i, a := range own {
				txt[i] = a.String()
			}
			out.LinkLocal[lp.key] = txt
		}
		chains = append(chains, guardChain(chainName(lp.p.Namespace, lp.p.Name), ifc.Name,
			"pod "+lp.key, ForgedCommentPrefix+lp.key, slices.Concat(lp.addrs, own), in.Log != nil))
	}
	// An interface that holds a pod's address but is not that pod's
	// (another interface holds it too) is nobody's: it drops everything,
	// as does every candidate of the pod, which stays unattributed. Only
	// a pod with NET_ADMIN can copy another's address to its interface;
	// what it gets is no traffic at all, never the other pod's policy.
	for _, s := range ifs {
		if len(s.claims) == 1 && !bound[s.ifc.Name] {
			chains = append(chains, conflictChain(s.ifc, s.claims))
			out.Problems = append(out.Problems, problem.Problem{
				Object: nodeObject(in.NodeName), Local: true,
				Reason: fmt.Sprintf("interface %s holds pod %s's address, which another interface holds too: every packet entering it is dropped", s.ifc.Name, s.claims[0]),
			})
		}
	}
	// An interface no known pod claims whose peer holds an address of the
	// node's pod ranges is a pod still starting (the API does not know its
	// address yet): what its peer holds, and no local pod's address, may
	// leave it.
	for _, s := range ifs {
		ifc := s.ifc
		if len(s.claims) > 0 || bound[ifc.Name] || !inRanges(ifc.Peer, in.PodCIDRs) {
			continue
		}
		var own []netip.Addr
		nll := 0
		for _, a := range ifc.Peer {
			a = a.Unmap()
			if _, taken := owner[a]; taken || !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
				continue
			}
			if a.IsLinkLocalUnicast() {
				if llCount[a] > 1 || nll == MaxLinkLocal {
					continue
				}
				nll++
			} else if !inRanges([]netip.Addr{a}, in.PodCIDRs) || len(own)-nll == MaxStartingAddrs {
				continue
			}
			own = append(own, a)
		}
		chains = append(chains, guardChain(ifChainName(ifc.Name), ifc.Name,
			"interface "+ifc.Name+" (a pod not known yet)", "forged source: not an address of interface "+ifc.Name, own, in.Log != nil))
	}
	// Pods without an interface of their own are keyed by address only:
	// no packet entering the node may then carry an address of the node's
	// pod ranges that no local pod has (a forged or a starting pod's).
	if len(out.Unattributed) > 0 && len(in.PodCIDRs) > 0 {
		ch, sets := fallback(pods, in.PodCIDRs, in.Log != nil)
		chains = append(chains, ch)
		out.Sets = sets
	}
	if len(chains) > 0 && in.Log != nil {
		chains = append(chains, forgedChain(*in.Log))
	}
	sort.Slice(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	out.Chains = chains
	sort.Strings(out.Unattributed)
	return out
}

// localPods are the pods of the node that own their addresses (not on the
// host's network, not finished), sorted by key, with their valid
// addresses.
func (c *Compiler) localPods(in Input) []localPod {
	if c.local == nil || c.node != in.NodeName {
		c.node, c.local = in.NodeName, map[string]nsLocal{}
	}
	var out []localPod
	if in.Pods == nil {
		return nil
	}
	seen := make(map[string]bool, len(c.local))
	for _, g := range in.Pods.Groups() {
		seen[g.Namespace] = true
		l, ok := c.local[g.Namespace]
		if !ok || l.group != g {
			l = nsLocal{group: g, pods: scanGroup(g, in.NodeName)}
			c.local[g.Namespace] = l
		}
		out = append(out, l.pods...)
	}
	for ns := range c.local {
		if !seen[ns] {
			delete(c.local, ns)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func scanGroup(g *nsgroup.Group[*podset.Pod], node string) []localPod {
	var out []localPod
	for _, p := range g.Items {
		if p.NodeName != node || p.HostNetwork || p.Finished {
			continue
		}
		lp := localPod{p: p, key: p.Namespace + "/" + p.Name}
		for _, s := range p.IPs {
			if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
				lp.addrs = append(lp.addrs, a.Unmap())
			}
		}
		if len(lp.addrs) == 0 {
			continue // no address yet: nothing to bind it by
		}
		out = append(out, lp)
	}
	return out
}

// linkLocal are the link-local unicast addresses of addrs (fe80::/10,
// 169.254.0.0/16), unmapped, without zones, sorted, each once.
func linkLocal(addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if a.IsLinkLocalUnicast() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func inRanges(addrs []netip.Addr, ranges []netip.Prefix) bool {
	for _, a := range addrs {
		for _, r := range ranges {
			if r.Contains(a.Unmap()) {
				return true
			}
		}
	}
	return false
}

// chainName is a pod's guard chain: pg_NS_POD ("_" never occurs in
// Kubernetes names, so the parts split back one way only; a name no API
// server would accept becomes a hash, nftsafe.NamePart), cut to the
// kernel's limit by nftsafe.Name. It has two "_" at least, the fixed
// chains (ForgedChain, FallbackChain) one, and an interface's chain
// starts with "pgif_": no two meet.
func chainName(ns, name string) string {
	return nftsafe.Name("pg_" + nftsafe.NamePart(ns) + "_" + nftsafe.NamePart(name))
}

// ifChainName is the guard chain of an interface that is no one pod's.
func ifChainName(dev string) string { return nftsafe.Name("pgif_" + nftsafe.NamePart(dev)) }

// ForgedCommentPrefix starts the comment of a pod's guard's drop rule,
// followed by "NAMESPACE/NAME": the metrics read the namespace from it.
const ForgedCommentPrefix = "forged source: not an address of pod "

// guardChain lets own leave the interface, and the unspecified source
// where the link needs it before the pod has an address, and drops
// (and counts) everything else.
func guardChain(name, dev, whose, dropComment string, own []netip.Addr, logged bool) engine.Chain {
	var v4, v6 []string
	for _, a := range own {
		if a.Is4() {
			v4 = append(v4, a.String())
		} else {
			v6 = append(v6, a.String())
		}
	}
	slices.Sort(v4)
	v4 = slices.Compact(v4)
	slices.Sort(v6)
	v6 = slices.Compact(v6)
	var rules []engine.Rule
	if len(v4) > 0 {
		rules = append(rules, engine.Rule{Rule: "ip saddr " + setText(v4) + " accept"})
	}
	if len(v6) > 0 {
		rules = append(rules, engine.Rule{Rule: "ip6 saddr " + setText(v6) + " accept"})
	}
	// Duplicate address detection and the multicast listener reports
	// that precede it (RFC 4862 5.4, RFC 3810 5.2.13) come from the
	// unspecified address.
	for _, t := range []string{"nd-neighbor-solicit", "mld2-listener-report", "mld-listener-report"} {
		rules = append(rules, engine.Rule{Rule: "ip6 saddr :: icmpv6 type " + t + " accept"})
	}
	drop := "counter drop"
	if logged {
		drop = "counter goto " + ForgedChain
	}
	rules = append(rules, engine.Rule{Rule: drop, Comment: nftsafe.Comment(dropComment)})
	return engine.Chain{
		Name: name, Type: "filter", Hook: "ingress", Device: dev, Priority: Priority,
		Comment: nftsafe.Comment("guard of " + whose + ": only its own addresses leave it"),
		Rules:   rules,
	}
}

// conflictChain drops everything that enters an interface whose peer
// holds addresses of several local pods, or a pod's address that another
// interface holds too.
func conflictChain(ifc *Interface, claims []string) engine.Chain {
	return engine.Chain{
		Name: ifChainName(ifc.Name), Type: "filter", Hook: "ingress", Device: ifc.Name, Priority: Priority,
		Comment: nftsafe.Comment("guard of interface " + ifc.Name + ": it is no pod's alone"),
		Rules: []engine.Rule{{Rule: "counter drop",
			Comment: nftsafe.Comment("holds addresses of " + strings.Join(claims, ", "))}},
	}
}

// forgedChain logs forged packets at one node-wide rate, then drops them.
func forgedChain(l Log) engine.Chain {
	return engine.Chain{
		Name:    ForgedChain,
		Comment: "forged sources of guarded interfaces: rate-limited log, then drop",
		Rules: []engine.Rule{
			{Rule: fmt.Sprintf(`limit rate %d/second burst %d packets log prefix "%s" group %d`, l.Rate, l.Burst, ForgedPrefix, l.Group), Comment: "logged"},
			{Rule: "drop", Comment: "forged"},
		},
	}
}

func setText(elems []string) string {
	if len(elems) == 1 {
		return elems[0]
	}
	return "{ " + strings.Join(elems, ", ") + " }"
}

func podObject(p *podset.Pod) problem.Object {
	return problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: p.Namespace, Name: p.Name}
}

func nodeObject(name string) problem.Object {
	return problem.Object{APIVersion: problem.CoreV1, Kind: "Node", Name: name}
}

// The fallback's names.
const (
	FallbackChain = "pg_fallback"
	rangesSet     = "pg_ranges"
	podsSet       = "pg_pods"
)

// fallback drops, at prerouting, packets from the node's pod ranges whose
// source no local pod has, except on the loopback device (the node's own
// addresses in those ranges, a bridge's gateway, talk to the node through
// it).
func fallback(pods []localPod, ranges []netip.Prefix, logged bool) (engine.Chain, []engine.Set) {
	var sets []engine.Set
	var rules []engine.Rule
	drop := "counter drop"
	if logged {
		drop = "counter goto " + ForgedChain
	}
	for _, fam := range []struct {
		suffix, typ, sel string
		is4              bool
	}{{"4", "ipv4_addr", "ip saddr", true}, {"6", "ipv6_addr", "ip6 saddr", false}} {
		var rs, ps []engine.Element
		for _, r := range ranges {
			if r.Addr().Is4() == fam.is4 {
				rs = append(rs, engine.Element{Key: r.Masked().String()})
			}
		}
		if len(rs) == 0 {
			continue
		}
		seen := map[netip.Addr]bool{}
		for _, lp := range pods {
			for _, a := range lp.addrs {
				if a.Is4() == fam.is4 && !seen[a] {
					seen[a] = true
					ps = append(ps, engine.Element{Key: a.String()})
				}
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Key < ps[j].Key })
		sort.Slice(rs, func(i, j int) bool { return rs[i].Key < rs[j].Key })
		sets = append(sets,
			engine.Set{Name: rangesSet + fam.suffix, Type: fam.typ, Interval: true, Elements: rs, Comment: "the node's pod ranges"},
			engine.Set{Name: podsSet + fam.suffix, Type: fam.typ, Elements: ps, Comment: "the node's pods' addresses"})
		rules = append(rules, engine.Rule{
			Rule:    fmt.Sprintf(`iifname != "lo" %s @%s%s %s != @%s%s %s`, fam.sel, rangesSet, fam.suffix, fam.sel, podsSet, fam.suffix, drop),
			Comment: "a source of the pod ranges that no pod of the node has",
		})
	}
	return engine.Chain{
		Name: FallbackChain, Type: "filter", Hook: "prerouting", Priority: -300,
		Comment: "pods without an interface of their own: no unknown source of the node's pod ranges",
		Rules:   rules,
	}, sets
}
