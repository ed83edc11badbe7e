package policy

import (
	"github.com/nftguard/nftguard/internal/nftsafe"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	long := strings.Repeat("p", 253)
	cases := []struct {
		name, got, want string
	}{
		{"ingress chain", dirIngress.ChainName("x", "a"), "np_ing_x_a"},
		{"egress chain", dirEgress.ChainName("x", "a"), "np_egr_x_a"},
		{"set", setName([]string{"x", "p", dirIngress.setTag + "0", "pods4"}), "np_x_p_in0_pods4"},
		{"egress set", setName([]string{"x", "p", dirEgress.setTag + "3", "named6"}), "np_x_p_eg3_named6"},
		{"short names stay", nftsafe.Name("np_" + strings.Repeat("a", 197)), "np_" + strings.Repeat("a", 197)},
		{"long names are cut and hashed", nftsafe.Name("np_ing_x_" + long), "np_ing_x_" + long[:174] + "_928f50bc9418362d"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestShortenedNamesStayUniqueAndBounded(t *testing.T) {
	seen := map[string]string{}
	for _, ns := range []string{"x", strings.Repeat("n", 63)} {
		for _, last := range []string{"a", "b", "c"} {
			// Names alike in their first 200 bytes.
			name := strings.Repeat("q", 250) + last
			got := dirIngress.ChainName(ns, name)
			if len(got) != nftsafe.MaxName {
				t.Errorf("%d bytes: %q", len(got), got)
			}
			if other, ok := seen[got]; ok {
				t.Errorf("%s/%s and %s share %q", ns, name, other, got)
			}
			seen[got] = ns + "/" + name
		}
	}
}
