package cidrs

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestLast(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"10.0.0.0/8", "10.255.255.255"},
		{"10.1.2.3/24", "10.1.2.255"}, // host bits do not matter
		{"10.1.2.3/32", "10.1.2.3"},
		{"0.0.0.0/0", "255.255.255.255"},
		{"10.0.0.0/31", "10.0.0.1"},
		{"fd00::/64", "fd00::ffff:ffff:ffff:ffff"},
		{"fd00::1/128", "fd00::1"},
		{"::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		{"2001:db8::/33", "2001:db8:7fff:ffff:ffff:ffff:ffff:ffff"},
	} {
		if got := Last(netip.MustParsePrefix(c.in)); got != netip.MustParseAddr(c.want) {
			t.Errorf("Last(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestFold(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"none", "", ""},
		{"one", "10.0.0.0/8", "10.0.0.0/8"},
		{"sorted by address", "10.2.0.0/16 10.1.0.0/16", "10.1.0.0/16 10.2.0.0/16"},
		{"repeat dropped", "10.1.0.0/16 10.1.0.0/16", "10.1.0.0/16"},
		{"nested dropped, either order", "10.1.2.0/24 10.0.0.0/8 10.3.0.0/16", "10.0.0.0/8"},
		{"same address, the shorter kept", "10.0.0.0/24 10.0.0.0/16", "10.0.0.0/16"},
		{"adjacent kept apart", "10.0.0.0/25 10.0.0.128/25", "10.0.0.0/25 10.0.0.128/25"},
		{"host bits masked", "10.1.2.3/16", "10.1.0.0/16"},
		// Unmasked, 10.0.0.5/24 sorts after 10.0.0.3/32: a fold that
		// does not mask first keeps the /32 and drops the /24 that
		// contains it.
		{"unmasked container after what it holds", "10.0.0.3/32 10.0.0.5/24", "10.0.0.0/24"},
		{"families apart, IPv4 first", "fd00::/64 10.0.0.0/8 fd00::1/128", "10.0.0.0/8 fd00::/64"},
		{"everything", "0.0.0.0/0 10.0.0.0/8 192.168.0.1/32", "0.0.0.0/0"},
	} {
		in := prefixes(c.in)
		orig := slices.Clone(in)
		got := Fold(in)
		var texts []string
		for _, p := range got {
			texts = append(texts, p.String())
		}
		if g := strings.Join(texts, " "); g != c.want {
			t.Errorf("%s: Fold(%s) = %q, want %q", c.name, c.in, g, c.want)
		}
		if !slices.Equal(in, orig) {
			t.Errorf("%s: Fold changed its argument to %v", c.name, in)
		}
	}
}

func prefixes(s string) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range strings.Fields(s) {
		out = append(out, netip.MustParsePrefix(f))
	}
	return out
}
