package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftguard/nftguard/podset"
)

// SourceVerdict is what becomes of a pod's packet towards a destination
// (Source.Verdict); explain-egress prints its value.
type SourceVerdict string

// What becomes of a pod's packet towards a destination.
const (
	SourceTranslated SourceVerdict = "translated" // leaves with the Service's address
	SourceHeld       SourceVerdict = "held"       // dropped: the Service's address cannot be used here
	SourcePending    SourceVerdict = "pending"    // the pod has no address yet: held while the guard is on
	SourceInternal   SourceVerdict = "internal"   // the destination is inside the cluster: never translated
	SourceUntouched  SourceVerdict = "untouched"  // not translated by nftguard: the pod's own address, or the node's masquerade
)

// Source says what source address a pod's traffic towards one destination
// leaves with, and why.
type Source struct {
	Verdict SourceVerdict
	// From is the pod's address of the destination's family (invalid
	// when it has none).
	From netip.Addr
	// To is the address it is translated to (SourceTranslated).
	To      netip.Addr
	Service string // the Service that translates or holds it
	Why     string
}

// SourceOf answers for traffic from pod (namespace/name) to dst, with
// protocol proto ("tcp", "udp", "sctp"; "" for any) and the ports (0 for
// any), by compiling in for the pod's own node: the same decisions the
// table makes, since it is the compiler's output that is read. With
// in.Local nil, the node is assumed to hold every address, and Why says
// where the answer holds.
func SourceOf(in Input, pod string, dst netip.Addr, proto string, dport, sport uint16) (Source, error) {
	dst = dst.Unmap()
	ns, name, _ := strings.Cut(pod, "/")
	var p *podset.Pod
	for _, g := range in.Pods.Groups() {
		if g.Namespace != ns {
			continue
		}
		for _, q := range g.Items {
			if q.Name == name {
				p = q
			}
		}
	}
	if p == nil {
		return Source{}, fmt.Errorf("pod %s not found", pod)
	}
	if p.HostNetwork {
		return Source{Verdict: SourceUntouched, Why: "a host-network pod uses its node's addresses; egress never translates it"}, nil
	}
	in.NodeName = p.NodeName
	out := Compile(in)
	a4, a6 := podAddrs(p)
	addrs := a6
	if dst.Is4() {
		addrs = a4
	}
	if len(addrs) == 0 {
		if slices.Contains(out.Pending, pod) {
			return Source{Verdict: SourcePending, Why: fmt.Sprintf("the pod has no address yet and an egress Service claims it: until its address reaches the agent, traffic that leaves the cluster from addresses of node %s no pod has is dropped", p.NodeName)}, nil
		}
		return Source{Verdict: SourceUntouched, Why: "the pod has no address of the destination's family"}, nil
	}
	src := Source{From: addrs[0]}
	internal := append(PodRanges(in.ClusterCIDRs, in.Nodes), in.ServiceCIDRs...)
	for _, a := range nodeAddrs(in) {
		internal = append(internal, netip.PrefixFrom(a, a.BitLen()))
	}
	if inAny(dst, internal) {
		src.Verdict, src.Why = SourceInternal, fmt.Sprintf("%s is inside the cluster (a pod or Service range, or a node): egress never translates it", dst)
		return src, nil
	}
	for _, h := range out.Held {
		if h.Addr == src.From {
			src.Verdict, src.Service = SourceHeld, h.Service
			src.Why = fmt.Sprintf("Service %s claims the pod but cannot be translated to here (%s): traffic that leaves the cluster is dropped; annotate %s \"true\" to leave with the node's address instead", h.Service, heldWhy(h.Reason), AnnNodeMasquerade)
			return src, nil
		}
	}
	b, bound := out.Bindings[src.From]
	if !bound {
		src.Verdict, src.Why = SourceUntouched, "no egress Service translates this pod's traffic here: it leaves with its own address, or with the node's where the node masquerades"
		for _, w := range out.Warnings {
			if strings.Contains(w.Reason, "pod "+pod+" ") {
				src.Why += " (" + w.Error() + ")"
			}
		}
		return src, nil
	}
	src.Service = b.Service
	if b.Restricted {
		if why, ok := restrictionAllows(in, b.Service, dst, proto, dport, sport); !ok {
			src.Verdict, src.Why = SourceUntouched, fmt.Sprintf("Service %s translates this pod, but not this traffic: %s; it leaves with its own address, or with the node's where the node masquerades", b.Service, why)
			return src, nil
		}
	}
	src.Verdict, src.To = SourceTranslated, b.To
	src.Why = fmt.Sprintf("Service %s translates the pod's traffic that leaves the cluster to its load-balancer address", b.Service)
	if in.Local == nil {
		src.Why += fmt.Sprintf(", on node %s when it holds %s (on a node that does not, the agent holds the traffic, unless the Service has %s \"true\")", p.NodeName, b.To, AnnNodeMasquerade)
	}
	return src, nil
}

func heldWhy(reason HoldReason) string {
	switch reason {
	case HoldNotLocal:
		return "its load-balancer address is not on this node"
	case HoldInvalid:
		return "its annotations or load-balancer address are invalid"
	}
	return "it has no load-balancer address of this family yet"
}

// restrictionAllows checks a restricted Service's annotations for one
// flow, in the order its chain does: denied networks, then allowed
// networks and the port lists of the flow's protocol.
func restrictionAllows(in Input, key string, dst netip.Addr, proto string, dport, sport uint16) (string, bool) {
	for _, svc := range in.Services {
		if svc.Namespace+"/"+svc.Name != key {
			continue
		}
		es, _, _ := parseService(svc)
		if es == nil {
			return "its annotations cannot be read", false
		}
		if inAny(dst, es.denied) {
			return dst.String() + " is in " + AnnDeniedNets, false
		}
		if len(es.allowed) > 0 && !inAny(dst, es.allowed) {
			return dst.String() + " is not in " + AnnAllowedNets, false
		}
		for _, l := range []struct {
			ms   []portMatch
			port uint16
			ann  string
		}{{es.dst, dport, AnnDstPorts}, {es.src, sport, AnnSrcPorts}} {
			if len(l.ms) == 0 {
				continue
			}
			if proto == "" || l.port == 0 {
				return "it depends on the protocol and ports (" + l.ann + "); give them", false
			}
			ok := false
			for _, m := range l.ms {
				ok = ok || (m.proto == proto && m.lo <= l.port && l.port <= m.hi)
			}
			if !ok {
				return fmt.Sprintf("%s/%d is not in %s", proto, l.port, l.ann), false
			}
		}
		return "", true
	}
	return "the Service is gone", false
}
