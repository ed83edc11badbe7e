//go:build nftguard_testhooks

package agent

import (
	"crypto/sha256"
	"fmt"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
)

// TestRefuseLabel, in binaries built with -tags nftguard_testhooks (the
// e2e tests' only), makes the compiled table of an object with this label
// carry a chain the kernel refuses: a jump to a chain that does not exist.
// The compilers and the engine's compile accept it, so only the kernel's
// refusal and the agent's search can deal with it. On a NetworkPolicy, a
// ClusterNetworkPolicy or a Service it proves the quarantine; on a Namespace (never a suspect) it
// makes every sync fail, for /readyz. No flag reaches it, and production
// builds do not contain it.
const TestRefuseLabel = "test.nftguard.io/kernel-refuse"

func testInjector() func(compose.Input, *compose.Result) {
	return func(in compose.Input, res *compose.Result) {
		var marked []string
		for _, np := range in.NetworkPolicies.All() {
			if np.Labels[TestRefuseLabel] != "" {
				marked = append(marked, "NetworkPolicy/"+np.Namespace+"/"+np.Name)
			}
		}
		for _, p := range in.ClusterNetworkPolicies {
			if p.Labels[TestRefuseLabel] != "" {
				marked = append(marked, "ClusterNetworkPolicy/"+p.Name)
			}
		}
		for _, s := range in.Services {
			if s.Labels[TestRefuseLabel] != "" {
				marked = append(marked, "Service/"+s.Namespace+"/"+s.Name)
			}
		}
		for _, ns := range in.Namespaces {
			if ns.Labels[TestRefuseLabel] != "" {
				marked = append(marked, "Namespace/"+ns.Name)
			}
		}
		if len(marked) == 0 {
			return
		}
		d := *res.Desired
		d.Chains = append([]engine.Chain(nil), d.Chains...)
		for _, m := range marked {
			d.Chains = append(d.Chains, engine.Chain{
				Name:  fmt.Sprintf("test-refused-%x", sha256.Sum256([]byte(m)))[:29],
				Rules: []engine.Rule{{Rule: "jump test-no-such-chain", Comment: m}},
			})
		}
		res.Desired = &d
	}
}
