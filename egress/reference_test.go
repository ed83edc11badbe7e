package egress

// Compile as it was before the per-namespace pod index: the reference the
// optimised Compile must equal on randomised clusters.

import (
	"fmt"
	"math/rand"
	"net/netip"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/problem"
)

// refCompile is Compile as it was before the per-namespace pod index; it the egress chains and sets for in.NodeName.
func refCompile(in Input) Output {
	out := Output{Bindings: map[netip.Addr]Binding{}}
	var services []*egressService
	seen := map[string]bool{}
	for _, svc := range in.Services {
		if k := svc.Namespace + "/" + svc.Name; seen[k] {
			out.Problems = append(out.Problems, problem.Problem{Object: serviceObject(svc),
				Reason: "another Service of the same namespace and name comes first"})
			continue
		}
		seen[svc.Namespace+"/"+svc.Name] = true
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
	if len(services) > 0 && len(in.ClusterCIDRs) == 0 {
		for _, s := range services {
			out.Problems = append(out.Problems, problem.Problem{Object: serviceObject(s.svc),
				Reason: "egress needs the cluster's pod CIDRs (--cluster-cidr) to tell traffic that leaves the cluster"})
		}
		services = nil
	}
	if len(services) == 0 {
		// No egress asked for: no NAT chain on the node at all.
		return out
	}

	snat4 := engine.Set{Name: MapSNAT4, Type: "ipv4_addr", Map: "ipv4_addr", Comment: "pod -> egress address"}
	snat6 := engine.Set{Name: MapSNAT6, Type: "ipv6_addr", Map: "ipv6_addr", Comment: "pod -> egress address"}
	disp4 := engine.Set{Name: MapDispatch4, Type: "ipv4_addr", Map: "verdict", Comment: "pod -> restricted egress Service"}
	disp6 := engine.Set{Name: MapDispatch6, Type: "ipv6_addr", Map: "verdict", Comment: "pod -> restricted egress Service"}
	var svcChains []engine.Chain
	var svcSets []engine.Set
	owner := map[string]string{} // pod key → winning Service key
	bound := map[netip.Addr]string{}

	for _, s := range services {
		var v4, v6 []netip.Addr
		for _, p := range in.Pods {
			if p.Namespace != s.svc.Namespace || p.Spec.NodeName != in.NodeName || p.Spec.HostNetwork ||
				p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
				!s.selector.Matches(labels.Set(p.Labels)) {
				continue
			}
			pk := p.Namespace + "/" + p.Name
			if w, taken := owner[pk]; taken {
				out.Warnings = append(out.Warnings, problem.Problem{Object: serviceObject(s.svc),
					Reason: fmt.Sprintf("pod %s is already translated by the older Service %s; this Service does not translate it", pk, w)})
				continue
			}
			a4, a6 := podAddrs(p)
			if len(a4) == 0 && len(a6) == 0 {
				continue // no address yet: nothing to translate
			}
			owner[pk] = s.key
			if s.lb4.IsValid() {
				a4 = claim(bound, a4, pk, s, &out)
			}
			if s.lb6.IsValid() {
				a6 = claim(bound, a6, pk, s, &out)
			}
			v4 = append(v4, a4...)
			v6 = append(v6, a6...)
		}
		if !s.lb4.IsValid() {
			v4 = nil
		}
		if !s.lb6.IsValid() {
			v6 = nil
		}
		for _, a := range v4 {
			out.Bindings[a] = Binding{To: s.lb4, Restricted: s.restricted()}
		}
		for _, a := range v6 {
			out.Bindings[a] = Binding{To: s.lb6, Restricted: s.restricted()}
		}
		if !s.restricted() {
			for _, a := range v4 {
				snat4.Elements = append(snat4.Elements, engine.Element{Key: a.String(), Value: s.lb4.String()})
			}
			for _, a := range v6 {
				snat6.Elements = append(snat6.Elements, engine.Element{Key: a.String(), Value: s.lb6.String()})
			}
			continue
		}
		if len(v4) == 0 && len(v6) == 0 {
			continue
		}
		ch, sets := s.chain(v4, v6)
		svcChains = append(svcChains, ch)
		svcSets = append(svcSets, sets...)
		for _, a := range v4 {
			disp4.Elements = append(disp4.Elements, engine.Element{Key: a.String(), Value: "jump " + ch.Name})
		}
		for _, a := range v6 {
			disp6.Elements = append(disp6.Elements, engine.Element{Key: a.String(), Value: "jump " + ch.Name})
		}
	}

	internal4 := engine.Set{Name: SetInternal4, Type: "ipv4_addr", Interval: true, Comment: "cluster, service and node addresses: never translated"}
	internal6 := engine.Set{Name: SetInternal6, Type: "ipv6_addr", Interval: true, Comment: "cluster, service and node addresses: never translated"}
	var pre []netip.Prefix
	pre = append(pre, in.ClusterCIDRs...)
	pre = append(pre, in.ServiceCIDRs...)
	for _, a := range nodeAddrs(in) {
		pre = append(pre, netip.PrefixFrom(a, a.BitLen()))
	}
	for _, p := range mergePrefixes(pre) {
		if p.Addr().Is4() {
			internal4.Elements = append(internal4.Elements, engine.Element{Key: p.String()})
		} else {
			internal6.Elements = append(internal6.Elements, engine.Element{Key: p.String()})
		}
	}

	out.Chains = append(out.Chains, engine.Chain{
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
	for _, s := range []*engine.Set{&internal4, &internal6, &snat4, &snat6, &disp4, &disp6} {
		sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Key < s.Elements[j].Key })
		out.Sets = append(out.Sets, *s)
	}
	out.Sets = append(out.Sets, svcSets...)
	return out
}

func TestCompileEqualsReferenceOnRandomClusters(t *testing.T) {
	var nChains, nBindings, nWarnings int
	defer func() { t.Logf("chains %d, bindings %d, warnings %d", nChains, nBindings, nWarnings) }()
	for seed := int64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewSource(seed))
		pick := func(vals ...string) string { return vals[r.Intn(len(vals))] }
		in := baseInput()
		if r.Intn(20) == 0 {
			in.ClusterCIDRs = nil
		}
		for i := r.Intn(30); i > 0; i-- {
			var ips []string
			switch r.Intn(5) {
			case 0:
			case 1:
				ips = []string{fmt.Sprintf("fd00:244::%x", r.Intn(30))}
			case 2:
				ips = []string{fmt.Sprintf("10.244.0.%d", r.Intn(30)), fmt.Sprintf("fd00:244::%x", r.Intn(30))}
			default:
				ips = []string{fmt.Sprintf("10.244.0.%d", r.Intn(30))}
			}
			p := pod(pick("a", "b", "c"), fmt.Sprintf("p%d", r.Intn(20)), pick("web", "db", "api"), pick("n1", "n1", "n2"), ips...)
			p.Spec.HostNetwork = r.Intn(10) == 0
			p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodFailed, corev1.PodSucceeded}[r.Intn(5)]
			if r.Intn(5) == 0 {
				p.Status.PodIP, p.Status.PodIPs = fmt.Sprintf("10.244.1.%d", r.Intn(30)), nil
			}
			in.Pods = append(in.Pods, p)
		}
		for i := r.Intn(8); i > 0; i-- {
			ann := map[string]string{PrefixNftguard + AnnEgress: pick("true", "true", "true", "false", "yes")}
			if r.Intn(2) == 0 {
				ann[PrefixKubeVIP+AnnIPv6] = "true"
			}
			if r.Intn(3) == 0 {
				ann[PrefixNftguard+AnnDstPorts] = pick("tcp:443", "udp:53,tcp:80-90", "sctp:9000", "bogus")
			}
			if r.Intn(4) == 0 {
				ann[PrefixNftguard+AnnSrcPorts] = pick("tcp:1000-2000", "udp:53")
			}
			if r.Intn(4) == 0 {
				ann[PrefixNftguard+AnnAllowedNets] = pick("0.0.0.0/0", "8.8.8.0/24,2001:db8::/32", "2001:db8::/32")
			}
			if r.Intn(4) == 0 {
				ann[PrefixNftguard+AnnDeniedNets] = pick("1.1.1.0/24", "2001:db8:1::/48,9.9.9.9/32")
			}
			var lb []string
			switch r.Intn(4) {
			case 0:
			case 1:
				lb = []string{"192.0.2.1", "2001:db8::1"}
			default:
				lb = []string{fmt.Sprintf("192.0.2.%d", 1+r.Intn(5))}
			}
			s := svc(pick("a", "b", "c"), pick("web", "db", "api"), t0.Add(time.Duration(r.Intn(3))*time.Hour), ann, lb...)
			if r.Intn(10) == 0 {
				s.Spec.Selector = nil
			}
			in.Services = append(in.Services, s)
		}
		got, want := Compile(in), refCompile(in)
		if errs := nftsafe.Check(&engine.Desired{Chains: got.Chains, Sets: got.Sets}); len(errs) > 0 {
			t.Fatalf("seed %d: the kernel would refuse the compiled table: %v", seed, errs)
		}
		nChains += len(got.Chains)
		nBindings += len(got.Bindings)
		nWarnings += len(got.Warnings)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: Compile differs from the reference\ngot:  %+v\nwant: %+v", seed, got, want)
		}
	}
}

// TestReferenceEqualsGoldens shows that the goldens recorded from Compile
// are also what the reference makes of the same clusters.
func TestReferenceEqualsGoldens(t *testing.T) {
	checkRandomGoldens(t, refCompile)
}
