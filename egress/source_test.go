package egress

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/internal/podtest"
)

func TestSourceOf(t *testing.T) {
	in := baseInput()
	in.Local = &LocalAddrs{Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("203.0.113.8/32")}}
	in.Services = []*corev1.Service{
		svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7"),
		svc("x", "db", t0, map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-destination-ports": "tcp:443"}, "203.0.113.8"),
		svc("x", "far", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.9"),
	}
	in.Pods = podtest.Set([]*corev1.Pod{
		pod("x", "w", "web", "n1", "10.244.1.5"), pod("x", "d", "db", "n1", "10.244.1.6"),
		pod("x", "f", "far", "n1", "10.244.1.7"), pod("x", "new", "web", "n1"), pod("x", "other", "none", "n1", "10.244.1.8"),
	})
	ext := netip.MustParseAddr("198.51.100.1")
	for _, tc := range []struct {
		pod, dst, proto string
		port            uint16
		verdict         SourceVerdict
		to, why         string
	}{
		{"x/w", "198.51.100.1", "tcp", 80, SourceTranslated, "203.0.113.7", "Service x/web translates"},
		{"x/w", "10.244.2.9", "tcp", 80, SourceInternal, "", "inside the cluster"},
		{"x/d", "198.51.100.1", "tcp", 443, SourceTranslated, "203.0.113.8", "Service x/db"},
		{"x/d", "198.51.100.1", "tcp", 80, SourceUntouched, "", "tcp/80 is not in egress-destination-ports"},
		{"x/d", "198.51.100.1", "", 0, SourceUntouched, "", "give them"},
		{"x/f", "198.51.100.1", "tcp", 80, SourceHeld, "", "not on this node"},
		{"x/new", "198.51.100.1", "tcp", 80, SourcePending, "", "no address yet"},
		{"x/other", "198.51.100.1", "tcp", 80, SourceUntouched, "", "no egress Service"},
	} {
		dst := netip.MustParseAddr(tc.dst)
		got, err := SourceOf(in, tc.pod, dst, tc.proto, tc.port, 0)
		if err != nil {
			t.Fatalf("%s -> %s: %v", tc.pod, tc.dst, err)
		}
		to := ""
		if got.To.IsValid() {
			to = got.To.String()
		}
		if got.Verdict != tc.verdict || to != tc.to || !strings.Contains(got.Why, tc.why) {
			t.Errorf("%s -> %s %s/%d: %+v, want %s %q with %q", tc.pod, tc.dst, tc.proto, tc.port, got, tc.verdict, tc.to, tc.why)
		}
	}
	if _, err := SourceOf(in, "x/nope", ext, "", 0, 0); err == nil {
		t.Error("no error for a pod that does not exist")
	}
}
