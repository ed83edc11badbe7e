package policy

import (
	"math/rand"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// costC is the constant of the cost property: a policy's own part of the
// table (its chains' rules, its port and ipBlock sets' elements) is at
// most costC times its size, counted as 1 for the policy, and per rule 1
// plus its peers, ports and excepts. Per rule the chain holds at most 4
// peer matches (pods and ipBlocks, each per family) × 3 port matches (one
// per protocol) + 2 named-port matches = 14 rules, and the sets one
// element per port and at most one range per ipBlock and except.
const costC = 14

// For random clusters, the table is linear in what was written: the
// policies' part is at most costC × their size, and everything else is
// one of the terms the selection relation itself costs, each counted
// here from the input: per local pod and direction its hairpin accepts,
// dispatch-map keys, invalid-drop and final drop, and a jump per policy
// of its namespace (plus, per rule with ingress named ports, 4 peer
// matches × the pod's ports); per selector peer its selected pods'
// addresses once (shared sets); per egress named port its peers'
// address × port tuples.
func TestCostIsLinearInTheInput(t *testing.T) {
	worst := 0.0
	defer func() { t.Logf("largest own part / policy size: %.2f (bound %d)", worst, costC) }()
	for seed := int64(0); seed < 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := randomCluster(r)
		if seed%3 == 0 {
			widenPorts(r, &in) // some rules with hundreds of ports
		}
		out := Compile(in)

		polSize, selPeers, egressNamed, ingressNamedRules := 0, 0, 0, map[string]int{}
		policiesOf := map[string]int{}
		for _, g := range in.Policies.Groups() {
			for _, np := range g.Items {
				policiesOf[np.Namespace]++
				polSize++
				add := func(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, egress bool) {
					polSize += 1 + len(peers) + len(ports)
					named := 0
					for _, p := range peers {
						if p.IPBlock != nil {
							polSize += len(p.IPBlock.Except)
						} else {
							selPeers++
						}
					}
					for _, pp := range ports {
						if pp.Port != nil && pp.Port.Type == intstr.String {
							named++
						}
					}
					if egress {
						egressNamed += named
					} else if named > 0 {
						ingressNamedRules[np.Namespace]++
					}
				}
				for _, ir := range np.Spec.Ingress {
					add(ir.From, ir.Ports, false)
				}
				for _, er := range np.Spec.Egress {
					add(er.To, er.Ports, true)
				}
			}
		}
		addrs, maxPorts, podTerm := 0, 0, 0
		for _, p := range podtest.List(in.Pods) {
			n := len(p.Status.PodIPs) + 1 // PodIP alone, or PodIPs
			ports := 0
			for _, c := range append(p.Spec.Containers, p.Spec.InitContainers...) {
				ports += len(c.Ports)
			}
			addrs += n
			maxPorts = max(maxPorts, ports)
			if p.Spec.NodeName == "n1" {
				podTerm += 2 * (2 + 2*n + policiesOf[p.Namespace] + 4*ports*ingressNamedRules[p.Namespace])
			}
		}

		own, shared, named, podPart := 0, 0, 0, 0
		for _, c := range out.Chains {
			switch {
			case strings.HasPrefix(c.Name, "np_pi_"), strings.HasPrefix(c.Name, "np_pe_"):
				own += len(c.Rules)
			case strings.HasPrefix(c.Name, "np_ing_"), strings.HasPrefix(c.Name, "np_egr_"):
				podPart += len(c.Rules)
			}
		}
		for _, s := range out.Sets {
			switch {
			case strings.HasPrefix(s.Name, "np_sel_"):
				shared += len(s.Elements)
			case strings.HasPrefix(s.Name, "np_named_"), strings.HasSuffix(s.Name, "_named4"), strings.HasSuffix(s.Name, "_named6"):
				named += len(s.Elements)
			case s.Map != "":
				podPart += len(s.Elements)
			default:
				own += len(s.Elements)
			}
		}
		if polSize > 0 {
			worst = max(worst, float64(own)/float64(polSize))
		}
		if own > costC*polSize {
			t.Errorf("seed %d: the policies' own part is %d rules and elements, over %d × %d", seed, own, costC, polSize)
		}
		if podPart > podTerm {
			t.Errorf("seed %d: pod chains and dispatch maps cost %d, over the selection relation's %d", seed, podPart, podTerm)
		}
		if shared > selPeers*addrs {
			t.Errorf("seed %d: shared peer sets hold %d elements, over %d selector peers × %d addresses", seed, shared, selPeers, addrs)
		}
		if named > egressNamed*addrs*max(1, maxPorts) {
			t.Errorf("seed %d: egress named-port sets hold %d elements, over %d names × %d addresses × %d ports", seed, named, egressNamed, addrs, maxPorts)
		}
	}
}

// widenPorts gives some rules hundreds of numbered ports, so that the
// property is tried where ports × peers × pods used to grow.
func widenPorts(r *rand.Rand, in *Input) {
	var nps []*networkingv1.NetworkPolicy
	for _, g := range in.Policies.Groups() {
		for _, np := range g.Items {
			np = np.DeepCopy()
			for i := range np.Spec.Ingress {
				if r.Intn(2) == 0 {
					for k := 0; k < 100+r.Intn(400); k++ {
						np.Spec.Ingress[i].Ports = append(np.Spec.Ingress[i].Ports, tcp(1+r.Intn(65535)))
					}
				}
			}
			nps = append(nps, np)
		}
	}
	in.Policies = npset.New(nps)
}
