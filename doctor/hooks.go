package doctor

import (
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/egress"
)

// OwnHooks returns the base chains of nftguard's table: those the compilers
// emit for an empty cluster, plus the egress SNAT chain.
func OwnHooks() []Hook {
	var out []Hook
	nat := false
	for _, c := range compose.Build(compose.Input{}).Desired.Chains {
		if c.Hook == "" {
			continue
		}
		out = append(out, Hook{Hook: c.Hook, Type: c.Type, Priority: c.Priority})
		nat = nat || (c.Hook == "postrouting" && c.Type == "nat")
	}
	if !nat {
		// The egress chain exists only while a Service asks for SNAT;
		// check its hook all the same.
		out = append(out, Hook{Hook: "postrouting", Type: "nat", Priority: egress.ChainPriority})
	}
	return out
}
