package policy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/tablelayout"
)

// ndInput is a node with one pod isolated both ways, dual-stack.
func ndInput() Input {
	return Input{NodeName: "n1",
		Pods: podtest.Set([]*corev1.Pod{
			apitest.Pod("x", "a", "10.0.0.1", apitest.IPs("10.0.0.1", "fd00::1")),
			apitest.Pod("x", "b", "10.0.0.2", apitest.IPs("10.0.0.2", "fd00::2")),
		}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "deny", *apitest.Selector("pod", "a"), func(s *networkingv1.NetworkPolicySpec) {
			s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		})}),
	}
}

// The two hook chains accept exactly neighbour solicitation and
// advertisement and router solicitation with hop limit 255, multicast
// listener messages with hop limit 1 and DHCPv6 to the link's servers,
// after established/related and before
// any dispatch to a pod's chain, with or without policies; the input chain
// (a pod's egress to its own node) is the forward chain without the
// ingress check.
func TestNeighbourDiscoveryBeforeDispatch(t *testing.T) {
	want := []string{
		"ct state established,related accept",
		"icmpv6 type nd-neighbor-solicit ip6 hoplimit 255 accept",
		"icmpv6 type nd-neighbor-advert ip6 hoplimit 255 accept",
		"icmpv6 type nd-router-solicit ip6 hoplimit 255 accept",
		"icmpv6 type mld-listener-report ip6 hoplimit 1 accept",
		"icmpv6 type mld-listener-done ip6 hoplimit 1 accept",
		"icmpv6 type mld2-listener-report ip6 hoplimit 1 accept",
		"ip6 daddr ff02::1:2 udp dport 547 accept",
		"ip saddr vmap @np_egress4",
		"ip6 saddr vmap @np_egress6",
		"goto np_ingress",
	}
	for _, in := range []Input{{NodeName: "n1"}, ndInput()} {
		out := compileChecked(t, in)
		eq(t, "forward", ruleTexts(chain(t, out, tablelayout.ChainForward)), want)
		eq(t, "input", ruleTexts(chain(t, out, tablelayout.ChainInput)), want[:len(want)-1])
		// Nothing else gets an ICMPv6 or hop-limit exception, and the
		// pod chains still end in drop.
		for _, c := range out.Chains {
			for i, r := range c.Rules {
				if c.Name != tablelayout.ChainForward && c.Name != tablelayout.ChainInput && (strings.Contains(r.Rule, "icmpv6") || strings.Contains(r.Rule, "hoplimit")) {
					t.Errorf("chain %s has a neighbour discovery rule: %s", c.Name, r.Rule)
				}
				if strings.HasPrefix(c.Name, "np_ing_") || strings.HasPrefix(c.Name, "np_egr_") {
					if i == len(c.Rules)-1 && r.Rule != "drop" {
						t.Errorf("chain %s ends in %q, want drop", c.Name, r.Rule)
					}
				}
			}
		}
	}
}

// The compiled table loads into the kernel, and nft lists the forward chain
// with the same rules (docs/design.md, principle 3: nft reads what we write).
func TestNeighbourDiscoveryLoadsInKernel(t *testing.T) {
	ns := testns.New(t, "nd")
	eng, err := engine.New(engine.Table{Name: "nftguard"}, engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	out := Compile(ndInput())
	if _, err := eng.Sync(context.Background(), &engine.Desired{Chains: out.Chains, Sets: out.Sets}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	for _, name := range []string{tablelayout.ChainForward, tablelayout.ChainInput} {
		listed := ns.MustExec(t, "", "nft", "list", "chain", "inet", "nftguard", name)
		for _, r := range tablelayout.LinkRules() {
			line := r.Rule + ` comment "` + r.Comment + `"`
			if !strings.Contains(listed, line) {
				t.Errorf("nft lists %s without %q:\n%s", name, line, listed)
			}
		}
	}
}
