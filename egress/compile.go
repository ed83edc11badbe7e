package egress

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/cidrs"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// Annotation names, without their prefix. Each is read with the
// "nftguard.io/" prefix first and kube-vip's "kube-vip.io/" second, so
// Services written for kube-vip work unchanged.
const (
	AnnEgress      = "egress"
	AnnIPv6        = "egress-ipv6"
	AnnDstPorts    = "egress-destination-ports"
	AnnSrcPorts    = "egress-source-ports"
	AnnAllowedNets = "egress-allowed-networks"
	AnnDeniedNets  = "egress-denied-networks"
	// AnnNodeMasquerade "true" lets the selected pods leave with the
	// node's address where the Service's address cannot be used (not on
	// this node, none yet, invalid) instead of being held.
	AnnNodeMasquerade = "egress-node-masquerade"
	PrefixNftguard    = "nftguard.io/"
	PrefixKubeVIP     = "kube-vip.io/"
	ChainPostroute    = "eg_postrouting"
	SetInternal4      = "eg_internal4"
	SetInternal6      = "eg_internal6"
	MapSNAT4          = "eg_snat4"
	MapSNAT6          = "eg_snat6"
	MapDispatch4      = "eg_dispatch4"
	MapDispatch6      = "eg_dispatch6"
	ChainHold         = "eg_hold"
	SetHold4          = "eg_hold4"
	SetHold6          = "eg_hold6"
	SetGuard4         = "eg_guard4"
	SetGuard6         = "eg_guard6"
	SetKnown4         = "eg_known4"
	SetKnown6         = "eg_known6"
	MapCount4         = "eg_count4"
	MapCount6         = "eg_count6"
	// CountChainPrefix starts the name of each Service's counting chain,
	// whose rules count its translated traffic (rule comment: the
	// Service's namespace/name).
	CountChainPrefix = "eg_cnt_"
	// ChainPriority puts eg_postrouting before ordinary source NAT
	// (srcnat, 100): the first NAT binding of a connection is ours.
	ChainPriority = 90
	// Comments of eg_hold's dropping rules, which name what their counters
	// count.
	CommentHeld  = "Service address not usable here"
	CommentGuard = "pod address not known yet"
	// HoldPriority puts eg_hold before eg_postrouting: a held packet is
	// dropped with its own source, before any NAT could bind it.
	HoldPriority = 80
)

// HoldReason is why a pod address is held (Held.Reason); its value is the
// reason label of the agent's held-address metric.
type HoldReason string

// Reasons a pod address is held.
const (
	HoldInvalid   HoldReason = "invalid"    // the Service's annotations or address are invalid
	HoldNoAddress HoldReason = "no_address" // the Service has no load-balancer address of the family yet
	HoldNotLocal  HoldReason = "not_local"  // the address is not on this node
)

// LocalAddrs are the addresses this node holds (its local routing table:
// its interfaces' addresses and local routes), as prefixes.
type LocalAddrs struct {
	Prefixes []netip.Prefix
}

// Contains says whether a is local to the node.
func (l *LocalAddrs) Contains(a netip.Addr) bool {
	for _, p := range l.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Input is the cluster state the egress part is compiled from.
type Input struct {
	NodeName     string
	Pods         *podset.Set
	Services     []*corev1.Service
	Nodes        []*corev1.Node
	ClusterCIDRs []netip.Prefix
	ServiceCIDRs []netip.Prefix
	// NodeIPs are addresses of nodes in addition to those in Nodes (for
	// one-shot use without Node objects).
	NodeIPs []netip.Addr
	// Local, when set, are the addresses this node holds: a Service whose
	// load-balancer address is not among them does not translate here
	// (the replies would go to the node that holds it). Nil means not
	// checked (the one-shot commands): every address is taken as local.
	Local *LocalAddrs
	// GuardAlways keeps the pod-start guard on for every family a
	// Service claims (without node masquerade), not only while a claimed
	// pod of this node has no address: then a pod's first packet is held
	// even if it comes before the agent has learned of the pod object,
	// and every new pod of the node waits for its address to be known.
	GuardAlways bool
}

// serviceObject names a Service in a problem.
func serviceObject(svc *corev1.Service) problem.Object {
	return problem.Object{APIVersion: problem.CoreV1, Kind: "Service", Namespace: svc.Namespace, Name: svc.Name}
}

// annotationField is the field path of an annotation, as problems name it.
func annotationField(name string) string {
	return "metadata.annotations[" + name + "]"
}

// Binding is the egress address a local pod address is translated to.
// Restricted bindings apply only to some destinations or ports (the Service
// has port or network annotations), so traffic of that pod may also leave
// untranslated.
type Binding struct {
	To         netip.Addr
	Restricted bool
	Service    string // namespace/name of the Service that translates
}

// Output is the egress part of the desired table. Bindings lists every pod
// address that is translated and to what, so that conntrack entries which
// carry an older translation can be cleared.
type Output struct {
	Chains   []engine.Chain
	Sets     []engine.Set
	Bindings map[netip.Addr]Binding
	// Problems are Services left out because they are invalid.
	Problems []problem.Problem
	// Warnings are valid Services that do not (yet) translate everything
	// they select: no load-balancer address yet, or a pod that an older
	// Service already translates.
	Warnings []problem.Problem
	// Held are the local pod addresses whose traffic that leaves the
	// cluster is dropped, because their Service's address cannot be used
	// here and the Service did not opt into node masquerade.
	Held []Held
	// Pending are the local pods (namespace/name) a Service claims that
	// have no address yet: while there is one, traffic that leaves the
	// cluster from this node's pod addresses no pod has is dropped.
	Pending []string
}

// Held is one held pod address.
type Held struct {
	Addr    netip.Addr
	Service string // namespace/name
	Reason  HoldReason
}

// portMatch is one protocol with a port or a port range.
type portMatch struct {
	proto  string
	lo, hi uint16
}

// egressService is an annotated Service with its annotations parsed.
type egressService struct {
	svc      *corev1.Service
	key      string
	selector labels.Selector
	lb4, lb6 netip.Addr
	dst, src []portMatch
	allowed  []netip.Prefix
	denied   []netip.Prefix
	// claim4 and claim6 are the families whose traffic leaving the
	// cluster the Service claims: translated, or held when it cannot be.
	claim4, claim6 bool
	nodeMasq       bool
	invalid        bool
	// remote4 and remote6 are load-balancer addresses this node does
	// not hold (then lb4 and lb6 are unset).
	remote4, remote6 netip.Addr
}

// holdReason says why s cannot translate a family (is4) here.
func (s *egressService) holdReason(is4 bool) HoldReason {
	switch {
	case s.invalid:
		return HoldInvalid
	case is4 && s.remote4.IsValid(), !is4 && s.remote6.IsValid():
		return HoldNotLocal
	}
	return HoldNoAddress
}

func (s *egressService) restricted() bool {
	return len(s.dst) > 0 || len(s.src) > 0 || len(s.allowed) > 0 || len(s.denied) > 0
}

// Compile builds the egress chains and sets for in.NodeName.
func Compile(in Input) Output {
	out := Output{Bindings: map[netip.Addr]Binding{}}
	var services []*egressService
	seen := make(map[string]bool, len(in.Services))
	for _, svc := range in.Services {
		if k := svc.Namespace + "/" + svc.Name; seen[k] {
			// Only possible from manifests: one chain name each.
			out.Problems = append(out.Problems, problem.Problem{Object: serviceObject(svc),
				Reason: "another Service of the same namespace and name comes first"})
			continue
		} else {
			seen[k] = true
		}
		es, probs, warns := parseService(svc)
		out.Problems = append(out.Problems, probs...)
		out.Warnings = append(out.Warnings, warns...)
		if es != nil {
			services = append(services, es)
		}
	}
	// The older Service wins a pod both select; ties break by name so the
	// result never depends on input order.
	sort.SliceStable(services, func(i, j int) bool {
		a, b := services[i].svc.CreationTimestamp, services[j].svc.CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return services[i].key < services[j].key
	})
	if len(services) == 0 {
		return out // no egress asked for (and the Nodes are not read)
	}
	// Translating a family without knowing the cluster's pod addresses of
	// that family would translate pod-to-pod traffic too: a family with no
	// known pod range is not translated at all.
	ranges := PodRanges(in.ClusterCIDRs, in.Nodes)
	has4, has6 := anyFamily(ranges, true), anyFamily(ranges, false)
	if len(services) > 0 && !has4 && !has6 {
		for _, s := range services {
			out.Problems = append(out.Problems, problem.Problem{Object: serviceObject(s.svc),
				Reason: "egress needs the cluster's pod CIDRs (--cluster-cidr) to tell traffic that leaves the cluster"})
		}
		services = nil
	}
	kept := services[:0]
	for _, s := range services {
		// A family without known pod ranges can be neither translated
		// nor held: what leaves the cluster cannot be told.
		s.claim4, s.claim6 = s.claim4 && has4, s.claim6 && has6
		var missing []string
		if s.lb4.IsValid() && !has4 {
			s.lb4, missing = netip.Addr{}, append(missing, "IPv4")
		}
		if s.lb6.IsValid() && !has6 {
			s.lb6, missing = netip.Addr{}, append(missing, "IPv6")
		}
		if len(missing) == 0 {
			kept = append(kept, s)
			continue
		}
		fam := strings.Join(missing, " and ")
		p := problem.Problem{Object: serviceObject(s.svc),
			Reason: fmt.Sprintf("no %s pod range of the cluster is known (--cluster-cidr, or Nodes' spec.podCIDRs), so %s traffic is not translated: it could not be told from pod-to-pod traffic", fam, fam)}
		if !s.lb4.IsValid() && !s.lb6.IsValid() {
			out.Problems = append(out.Problems, p) // nothing left to translate
			continue
		}
		out.Warnings = append(out.Warnings, p)
		kept = append(kept, s)
	}
	services = kept
	if len(services) == 0 {
		// No egress asked for: no NAT chain on the node at all.
		return out
	}
	// Only the node that holds an address can translate to it: the
	// replies come back to that node.
	if in.Local != nil {
		for _, s := range services {
			if s.lb4.IsValid() && !in.Local.Contains(s.lb4) {
				s.remote4, s.lb4 = s.lb4, netip.Addr{}
			}
			if s.lb6.IsValid() && !in.Local.Contains(s.lb6) {
				s.remote6, s.lb6 = s.lb6, netip.Addr{}
			}
		}
	}

	snat4 := engine.Set{Name: MapSNAT4, Type: "ipv4_addr", Map: "ipv4_addr", Comment: "pod -> egress address"}
	snat6 := engine.Set{Name: MapSNAT6, Type: "ipv6_addr", Map: "ipv6_addr", Comment: "pod -> egress address"}
	disp4 := engine.Set{Name: MapDispatch4, Type: "ipv4_addr", Map: "verdict", Comment: "pod -> restricted egress Service"}
	disp6 := engine.Set{Name: MapDispatch6, Type: "ipv6_addr", Map: "verdict", Comment: "pod -> restricted egress Service"}
	hold4 := engine.Set{Name: SetHold4, Type: "ipv4_addr", Comment: "pods whose egress address cannot be used here"}
	hold6 := engine.Set{Name: SetHold6, Type: "ipv6_addr", Comment: "pods whose egress address cannot be used here"}
	count4 := engine.Set{Name: MapCount4, Type: "ipv4_addr", Map: "verdict", Comment: "pod -> counting chain of its egress Service"}
	count6 := engine.Set{Name: MapCount6, Type: "ipv6_addr", Map: "verdict", Comment: "pod -> counting chain of its egress Service"}
	var svcChains []engine.Chain
	var svcSets []engine.Set
	owner := map[string]string{}     // pod key → winning Service key
	bound := map[netip.Addr]string{} // pod address → pod key translated to it
	held := map[netip.Addr]bool{}
	var guard4, guard6 bool // a pending pod's Service claims the family

	// The pods that can be translated (on this node, own address, not
	// terminated) by namespace, in input order: each Service only looks at
	// its own namespace's.
	local := map[string][]*podset.Pod{}
	for _, g := range in.Pods.Groups() {
		for _, p := range podset.LocalTo(g, in.NodeName) {
			if !p.HostNetwork && !p.Finished {
				local[p.Namespace] = append(local[p.Namespace], p)
			}
		}
	}

	for _, s := range services {
		var v4, v6 []netip.Addr
		selected := false
		for _, p := range local[s.svc.Namespace] {
			if !s.selector.Matches(labels.Set(p.Labels)) {
				continue
			}
			pk := p.Namespace + "/" + p.Name
			if w, taken := owner[pk]; taken {
				out.Warnings = append(out.Warnings, problem.Problem{Object: serviceObject(s.svc), Local: true,
					Reason: fmt.Sprintf("pod %s is already translated by the older Service %s; this Service does not translate it", pk, w)})
				continue
			}
			selected = true
			a4, a6 := podAddrs(p)
			if len(a4) == 0 && len(a6) == 0 {
				// No address yet: the pod object comes before its
				// address, its first packets may not.
				owner[pk] = s.key
				if !s.nodeMasq && (s.claim4 || s.claim6) {
					out.Pending = append(out.Pending, pk)
					guard4, guard6 = guard4 || s.claim4, guard6 || s.claim6
				}
				continue
			}
			// A pod outside every known pod range shows the ranges
			// are incomplete: its peers may be outside them too.
			if s.claim4 {
				a4 = inRanges(a4, ranges, pk, s, &out)
			}
			if s.claim6 {
				a6 = inRanges(a6, ranges, pk, s, &out)
			}
			if len(a4) == 0 && len(a6) == 0 {
				continue // nothing of a claimed family to translate
			}
			owner[pk] = s.key
			// An address is a map key: a second pod claiming one
			// already bound (a stale or hand-written status) would
			// make the kernel refuse the whole batch.
			for _, f := range []struct {
				addrs  []netip.Addr
				lb     netip.Addr
				claim  bool
				is4    bool
				bindTo *[]netip.Addr
			}{{a4, s.lb4, s.claim4, true, &v4}, {a6, s.lb6, s.claim6, false, &v6}} {
				switch {
				case f.lb.IsValid():
					*f.bindTo = append(*f.bindTo, claim(bound, f.addrs, pk, s, &out)...)
				case f.claim && !s.nodeMasq:
					for _, a := range f.addrs {
						if !held[a] {
							held[a] = true
							out.Held = append(out.Held, Held{Addr: a, Service: s.key, Reason: s.holdReason(f.is4)})
						}
					}
				}
			}
		}
		if selected {
			out.Warnings = append(out.Warnings, s.remoteWarnings()...)
		}
		for _, a := range v4 {
			out.Bindings[a] = Binding{To: s.lb4, Restricted: s.restricted(), Service: s.key}
		}
		for _, a := range v6 {
			out.Bindings[a] = Binding{To: s.lb6, Restricted: s.restricted(), Service: s.key}
		}
		var rules []engine.Rule
		if s.restricted() && len(v4)+len(v6) > 0 {
			ch, sets := s.chain(v4, v6)
			svcChains = append(svcChains, ch)
			svcSets = append(svcSets, sets...)
			for _, a := range v4 {
				disp4.Elements = append(disp4.Elements, engine.Element{Key: a.String(), Value: "jump " + ch.Name})
			}
			for _, a := range v6 {
				disp6.Elements = append(disp6.Elements, engine.Element{Key: a.String(), Value: "jump " + ch.Name})
			}
			rules = ch.Rules
		}
		if len(v4)+len(v6) > 0 {
			cc := s.countChain(v4, v6, rules)
			svcChains = append(svcChains, cc)
			for _, a := range v4 {
				count4.Elements = append(count4.Elements, engine.Element{Key: a.String(), Value: "jump " + cc.Name})
			}
			for _, a := range v6 {
				count6.Elements = append(count6.Elements, engine.Element{Key: a.String(), Value: "jump " + cc.Name})
			}
		}
		if !s.restricted() {
			for _, a := range v4 {
				snat4.Elements = append(snat4.Elements, engine.Element{Key: a.String(), Value: s.lb4.String()})
			}
			for _, a := range v6 {
				snat6.Elements = append(snat6.Elements, engine.Element{Key: a.String(), Value: s.lb6.String()})
			}
		}
	}
	if in.GuardAlways {
		// Any claimed pod may start on this node, before its object
		// reaches the agent.
		for _, s := range services {
			if !s.nodeMasq {
				guard4, guard6 = guard4 || s.claim4, guard6 || s.claim6
			}
		}
	}
	for _, h := range out.Held {
		if h.Addr.Is4() {
			hold4.Elements = append(hold4.Elements, engine.Element{Key: h.Addr.String()})
		} else {
			hold6.Elements = append(hold6.Elements, engine.Element{Key: h.Addr.String()})
		}
	}
	gd4, gd6, known4, known6 := guardSets(in, ranges, guard4, guard6)

	internal4 := engine.Set{Name: SetInternal4, Type: "ipv4_addr", Interval: true, Comment: "cluster, service and node addresses: never translated"}
	internal6 := engine.Set{Name: SetInternal6, Type: "ipv6_addr", Interval: true, Comment: "cluster, service and node addresses: never translated"}
	pre := append([]netip.Prefix(nil), ranges...)
	pre = append(pre, in.ServiceCIDRs...)
	for _, a := range nodeAddrs(in) {
		pre = append(pre, netip.PrefixFrom(a, a.BitLen()))
	}
	for _, p := range cidrs.Fold(pre) {
		if p.Addr().Is4() {
			internal4.Elements = append(internal4.Elements, engine.Element{Key: p.String()})
		} else {
			internal6.Elements = append(internal6.Elements, engine.Element{Key: p.String()})
		}
	}

	out.Chains = append(out.Chains, engine.Chain{
		Name: ChainHold, Type: "filter", Hook: "postrouting", Priority: HoldPriority, Policy: "accept",
		Comment: "egress held: claimed pods that cannot leave with their Service's address",
		Rules: []engine.Rule{
			{Rule: "ip saddr @" + SetHold4 + " ip daddr != @" + SetInternal4 + " counter drop", Comment: CommentHeld},
			{Rule: "ip6 saddr @" + SetHold6 + " ip6 daddr != @" + SetInternal6 + " counter drop", Comment: CommentHeld},
			{Rule: "ip saddr @" + SetGuard4 + " ip saddr != @" + SetKnown4 + " ip daddr != @" + SetInternal4 + " counter drop", Comment: CommentGuard},
			{Rule: "ip6 saddr @" + SetGuard6 + " ip6 saddr != @" + SetKnown6 + " ip6 daddr != @" + SetInternal6 + " counter drop", Comment: CommentGuard},
			{Rule: "ip saddr vmap @" + MapCount4},
			{Rule: "ip6 saddr vmap @" + MapCount6},
		},
	}, engine.Chain{
		Name: ChainPostroute, Type: "nat", Hook: "postrouting", Priority: ChainPriority, Policy: "accept",
		Comment: "egress SNAT: pods behind an annotated LoadBalancer Service",
		Rules: []engine.Rule{
			{Rule: "ip daddr @" + SetInternal4 + " return"},
			{Rule: "ip6 daddr @" + SetInternal6 + " return"},
			{Rule: "ip saddr vmap @" + MapDispatch4},
			{Rule: "ip6 saddr vmap @" + MapDispatch6},
			{Rule: "snat ip to ip saddr map @" + MapSNAT4},
			{Rule: "snat ip6 to ip6 saddr map @" + MapSNAT6},
		},
	})
	sort.Slice(svcChains, func(i, j int) bool { return svcChains[i].Name < svcChains[j].Name })
	out.Chains = append(out.Chains, svcChains...)
	for _, s := range []*engine.Set{&internal4, &internal6, &snat4, &snat6, &disp4, &disp6, &hold4, &hold6, &gd4, &gd6, &known4, &known6, &count4, &count6} {
		sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Key < s.Elements[j].Key })
		out.Sets = append(out.Sets, *s)
	}
	out.Sets = append(out.Sets, svcSets...)
	return out
}

// countChain counts the traffic s translates for its pods v4 and v6, before
// it is translated (the hold chain jumps here, every packet, not only a
// connection's first as in the NAT chain): what leaves the cluster, and for
// a restricted Service only what its own chain's rules (restricted) would
// translate, the same matches with a counter instead of the translation.
func (s *egressService) countChain(v4, v6 []netip.Addr, restricted []engine.Rule) engine.Chain {
	name := nftsafe.Name(CountChainPrefix + nftsafe.NamePart(s.svc.Namespace) + "_" + nftsafe.NamePart(s.svc.Name))
	ch := engine.Chain{Name: name, Comment: nftsafe.Comment("translated traffic of Service " + s.key)}
	comment := nftsafe.Comment(s.key)
	if len(v4) > 0 {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip daddr @" + SetInternal4 + " return"})
	}
	if len(v6) > 0 {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip6 daddr @" + SetInternal6 + " return"})
	}
	if restricted == nil {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "counter", Comment: comment})
		return ch
	}
	for _, r := range restricted {
		match, _, translates := strings.Cut(r.Rule, " snat ")
		if !translates {
			ch.Rules = append(ch.Rules, r) // the denied networks' return
			continue
		}
		ch.Rules = append(ch.Rules, engine.Rule{Rule: match + " counter", Comment: comment})
	}
	return ch
}

// remoteWarnings name the load-balancer addresses of s this node does not
// hold, and what becomes of the selected pods here.
func (s *egressService) remoteWarnings() []problem.Problem {
	var out []problem.Problem
	for _, a := range []netip.Addr{s.remote4, s.remote6} {
		if !a.IsValid() {
			continue
		}
		what := "held: their traffic that leaves the cluster is dropped (annotate " + AnnNodeMasquerade + ": \"true\" to let them leave with the node's address)"
		if s.nodeMasq {
			what = "left to the node's masquerade (" + AnnNodeMasquerade + ")"
		}
		out = append(out, problem.Problem{Object: serviceObject(s.svc), Local: true,
			Reason: fmt.Sprintf("load-balancer address %s is not on this node (another node announces it), so the selected pods here are %s", a, what)})
	}
	return out
}

// guardSets are the pod-start guard's sets. The guarded ranges of a family
// are the node's own pod ranges (its Node's spec.podCIDRs), or the
// cluster's when the Node names none of the family; eg_known4/6 hold every
// address a running pod has in them, kept whether the guard is on or not,
// so that a pod's event costs one element and turning the guard on or off
// (on4, on6: a pending pod's Service claims the family) changes only the
// few ranges of eg_guard4/6, never the whole known set. While the guard is
// off its range sets are empty and cost every packet one lookup in an
// empty set.
func guardSets(in Input, ranges []netip.Prefix, on4, on6 bool) (g4, g6, k4, k6 engine.Set) {
	g4 = engine.Set{Name: SetGuard4, Type: "ipv4_addr", Interval: true, Comment: "this node's pod ranges, while a claimed pod has no address"}
	g6 = engine.Set{Name: SetGuard6, Type: "ipv6_addr", Interval: true, Comment: "this node's pod ranges, while a claimed pod has no address"}
	k4 = engine.Set{Name: SetKnown4, Type: "ipv4_addr", Comment: "pod addresses in this node's pod ranges"}
	k6 = engine.Set{Name: SetKnown6, Type: "ipv6_addr", Comment: "pod addresses in this node's pod ranges"}
	own := PodRanges(nil, nodeNamed(in.Nodes, in.NodeName))
	onlyLocal := true // the node's own ranges hold only its own pods
	var gr []netip.Prefix
	for _, fam := range []struct {
		on, is4 bool
	}{{on4, true}, {on6, false}} {
		src := own
		if !anyFamily(own, fam.is4) {
			src = ranges
			// Other nodes' pods matter only where a range is guarded.
			onlyLocal = onlyLocal && !anyFamily(ranges, fam.is4)
		}
		for _, p := range src {
			if p.Addr().Is4() != fam.is4 {
				continue
			}
			gr = append(gr, p)
			if !fam.on {
				continue
			}
			if fam.is4 {
				g4.Elements = append(g4.Elements, engine.Element{Key: p.String()})
			} else {
				g6.Elements = append(g6.Elements, engine.Element{Key: p.String()})
			}
		}
	}
	seen := map[netip.Addr]bool{}
	for _, g := range in.Pods.Groups() {
		pods := g.Items
		if onlyLocal {
			pods = podset.LocalTo(g, in.NodeName)
		}
		for _, p := range pods {
			if p.HostNetwork || p.Finished {
				continue
			}
			a4, a6 := podAddrs(p)
			for _, a := range append(a4, a6...) {
				if seen[a] || !inAny(a, gr) {
					continue
				}
				seen[a] = true
				if a.Is4() {
					k4.Elements = append(k4.Elements, engine.Element{Key: a.String()})
				} else {
					k6.Elements = append(k6.Elements, engine.Element{Key: a.String()})
				}
			}
		}
	}
	return g4, g6, k4, k6
}

func nodeNamed(nodes []*corev1.Node, name string) []*corev1.Node {
	for _, n := range nodes {
		if n.Name == name {
			return []*corev1.Node{n}
		}
	}
	return nil
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// chain builds the chain of a restricted Service: the denied networks return
// untranslated, then each protocol's rule checks the allowed networks and the
// port lists and translates.
func (s *egressService) chain(v4, v6 []netip.Addr) (engine.Chain, []engine.Set) {
	name := nftsafe.Name("eg_svc_" + nftsafe.NamePart(s.svc.Namespace) + "_" + nftsafe.NamePart(s.svc.Name))
	ch := engine.Chain{Name: name, Comment: nftsafe.Comment("egress of Service " + s.key)}
	var sets []engine.Set
	netSet := func(kind string, is4 bool, nets []netip.Prefix) string {
		typ, fam := "ipv6_addr", "6"
		if is4 {
			typ, fam = "ipv4_addr", "4"
		}
		set := engine.Set{Name: name + "_" + kind + fam, Type: typ, Interval: true, Comment: nftsafe.Comment(s.key + " " + kind + " networks")}
		for _, p := range cidrs.Fold(nets) {
			if p.Addr().Is4() == is4 {
				set.Elements = append(set.Elements, engine.Element{Key: p.String()})
			}
		}
		sets = append(sets, set)
		return set.Name
	}
	// Which protocols can match: every present port list must name it.
	protos := []string{""}
	if len(s.dst) > 0 || len(s.src) > 0 {
		protos = nil
		for _, p := range []string{"tcp", "udp", "sctp"} {
			if (len(s.dst) == 0 || hasProto(s.dst, p)) && (len(s.src) == 0 || hasProto(s.src, p)) {
				protos = append(protos, p)
			}
		}
	}
	for _, fam := range []struct {
		is4   bool
		addrs []netip.Addr
		lb    netip.Addr
		kw    string
		proto string
	}{{true, v4, s.lb4, "ip", "ipv4"}, {false, v6, s.lb6, "ip6", "ipv6"}} {
		if len(fam.addrs) == 0 {
			continue
		}
		if len(s.denied) > 0 && anyFamily(s.denied, fam.is4) {
			ch.Rules = append(ch.Rules, engine.Rule{Rule: fmt.Sprintf("%s daddr @%s return", fam.kw, netSet("denied", fam.is4, s.denied)), Comment: "denied networks"})
		}
		var allowed string
		if len(s.allowed) > 0 {
			if !anyFamily(s.allowed, fam.is4) {
				continue // only other-family networks are allowed: nothing of this family is translated
			}
			allowed = fmt.Sprintf("%s daddr @%s ", fam.kw, netSet("allowed", fam.is4, s.allowed))
		}
		for _, p := range protos {
			var m strings.Builder
			if allowed == "" {
				// Both families' pods jump here: keep each translation to
				// its own family.
				m.WriteString("meta nfproto " + fam.proto + " ")
			}
			m.WriteString(allowed)
			if p != "" {
				m.WriteString("meta l4proto " + p + " ")
				if l := portsOf(s.dst, p); l != "" {
					m.WriteString("th dport " + l + " ")
				}
				if l := portsOf(s.src, p); l != "" {
					m.WriteString("th sport " + l + " ")
				}
			}
			m.WriteString("snat " + fam.kw + " to " + fam.lb.String())
			ch.Rules = append(ch.Rules, engine.Rule{Rule: m.String(), Comment: nftsafe.Comment(s.key)})
		}
	}
	// A packet that matched no rule returns to eg_postrouting, where the
	// snat maps do not hold this pod: it leaves untranslated.
	return ch, sets
}

// claim returns the addresses of pod pk that no other pod has claimed yet,
// claiming them, with a warning on s for each taken one.
func claim(bound map[netip.Addr]string, as []netip.Addr, pk string, s *egressService, out *Output) []netip.Addr {
	kept := as[:0]
	for _, a := range as {
		if other, taken := bound[a]; taken {
			if other != pk {
				out.Warnings = append(out.Warnings, problem.Problem{Object: serviceObject(s.svc), Local: true,
					Reason: fmt.Sprintf("pod %s has address %s, which pod %s already has; it is translated for %s only", pk, a, other, other)})
			}
			continue
		}
		bound[a] = pk
		kept = append(kept, a)
	}
	return kept
}

// PodRanges are the cluster's pod address ranges as far as they are known:
// the configured ones (--cluster-cidr) and every Node's spec.podCIDRs (the
// ranges the node IPAM gave out), merged.
func PodRanges(cluster []netip.Prefix, nodes []*corev1.Node) []netip.Prefix {
	ps := append([]netip.Prefix(nil), cluster...)
	for _, n := range nodes {
		podCIDRs := n.Spec.PodCIDRs
		if len(podCIDRs) == 0 && n.Spec.PodCIDR != "" {
			podCIDRs = []string{n.Spec.PodCIDR}
		}
		for _, c := range podCIDRs {
			// The API server validates podCIDRs; one that does not
			// parse (or is IPv4-mapped) adds nothing: its family stays
			// unknown, which translates less, never more.
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Zone() == "" && !p.Addr().Is4In6() {
				ps = append(ps, p)
			}
		}
	}
	return cidrs.Fold(ps)
}

// inRanges returns the addresses of pod pk that lie in one of the known pod
// ranges (merged, so sorted and disjoint), with a warning on s for each
// other one: the pod's own address proves the ranges of its family
// incomplete, and translating it could translate traffic to its peers.
func inRanges(as []netip.Addr, ranges []netip.Prefix, pk string, s *egressService, out *Output) []netip.Addr {
	kept := as[:0]
	for _, a := range as {
		// The last range starting at or before a is the only one that
		// can hold it.
		i := sort.Search(len(ranges), func(i int) bool { return a.Less(ranges[i].Addr()) })
		if i > 0 && ranges[i-1].Contains(a) {
			kept = append(kept, a)
			continue
		}
		out.Warnings = append(out.Warnings, problem.Problem{Object: serviceObject(s.svc), Local: true,
			Reason: fmt.Sprintf("pod %s has address %s, outside the cluster's known pod ranges (--cluster-cidr, Nodes' spec.podCIDRs): it is not translated", pk, a)})
	}
	return kept
}

func hasProto(ms []portMatch, p string) bool {
	for _, m := range ms {
		if m.proto == p {
			return true
		}
	}
	return false
}

// portsOf renders the ports of one protocol as an nft value or anonymous set.
func portsOf(ms []portMatch, p string) string {
	var vals []string
	for _, m := range ms {
		if m.proto != p {
			continue
		}
		if m.lo == m.hi {
			vals = append(vals, strconv.Itoa(int(m.lo)))
		} else {
			vals = append(vals, fmt.Sprintf("%d-%d", m.lo, m.hi))
		}
	}
	switch len(vals) {
	case 0:
		return ""
	case 1:
		return vals[0]
	}
	return "{ " + strings.Join(vals, ", ") + " }"
}

func anyFamily(ps []netip.Prefix, is4 bool) bool {
	for _, p := range ps {
		if p.Addr().Is4() == is4 {
			return true
		}
	}
	return false
}

func podAddrs(p *podset.Pod) (v4, v6 []netip.Addr) {
	for _, ip := range p.IPs {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			continue // the policy compiler reports bad pod addresses
		}
		a = a.Unmap()
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	return v4, v6
}

func nodeAddrs(in Input) []netip.Addr {
	out := append([]netip.Addr(nil), in.NodeIPs...)
	for _, n := range in.Nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
