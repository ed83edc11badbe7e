package compose

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/nftguard/nftguard/conntrack"
	"github.com/nftguard/nftguard/egress"
)

func TestConntrackBindings(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		in   map[netip.Addr]egress.Binding
		want map[netip.Addr]conntrack.Binding
	}{
		{"nil", nil, nil},
		{"empty", map[netip.Addr]egress.Binding{}, map[netip.Addr]conntrack.Binding{}},
		{"fields kept, service dropped", map[netip.Addr]egress.Binding{
			a("10.244.1.5"):       {To: a("203.0.113.7"), Service: "x/web"},
			a("fd00:10:244:1::5"): {To: a("2001:db8::7"), Restricted: true, Service: "x/web"},
		}, map[netip.Addr]conntrack.Binding{
			a("10.244.1.5"):       {To: a("203.0.113.7")},
			a("fd00:10:244:1::5"): {To: a("2001:db8::7"), Restricted: true},
		}},
	} {
		got := ConntrackBindings(tc.in)
		if (got == nil) != (tc.want == nil) || !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
