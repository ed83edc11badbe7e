package compose

import (
	"net/netip"

	"github.com/nftguard/nftguard/conntrack"
	"github.com/nftguard/nftguard/egress"
)

// ConntrackBindings converts egress bindings (Result.EgressBindings) to what
// conntrack.ClearStale judges entries against. The conversion lives here,
// where both packages meet, so that conntrack knows nothing of the egress
// compiler. A nil map stays nil.
func ConntrackBindings(b map[netip.Addr]egress.Binding) map[netip.Addr]conntrack.Binding {
	if b == nil {
		return nil
	}
	out := make(map[netip.Addr]conntrack.Binding, len(b))
	for a, eb := range b {
		out[a] = conntrack.Binding{To: eb.To, Restricted: eb.Restricted}
	}
	return out
}
