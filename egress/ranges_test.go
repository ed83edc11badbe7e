package egress

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/podtest"
)

func node(name string, podCIDRs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.PodCIDRs = podCIDRs
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
	}
	return n
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// TestClusterRangesFromNodes: a family is translated only when a pod range
// of that family is known, from --cluster-cidr or from Nodes'
// spec.podCIDRs; a family without one is named and left untranslated (so
// pod-to-pod traffic of that family is never translated), and a pod outside
// every known range of its family is not translated either.
func TestClusterRangesFromNodes(t *testing.T) {
	dual := map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}
	for _, tc := range []struct {
		name     string
		cluster  []netip.Prefix
		nodes    []*corev1.Node
		podIPs   []string
		want4    string // eg_snat4 elements
		want6    string // eg_snat6 elements
		internal string // eg_internal6 elements
		problem  string // in the one problem, if any
		warning  string // in the one warning, if any
	}{{
		name: "both families from the flags", cluster: prefixes("10.244.0.0/16", "fd00:244::/56"),
		podIPs: []string{"10.244.1.5", "fd00:244::5"}, want4: "10.244.1.5 : 203.0.113.7", want6: "fd00:244::5 : 2001:db8::7",
		internal: "fd00:244::/56",
	}, {
		name: "flags lack IPv6: IPv6 not translated", cluster: prefixes("10.244.0.0/16"),
		podIPs: []string{"10.244.1.5", "fd00:244::5"}, want4: "10.244.1.5 : 203.0.113.7",
		warning: "no IPv6 pod range of the cluster is known",
	}, {
		name: "IPv6 from Nodes' podCIDRs", cluster: prefixes("10.244.0.0/16"),
		nodes:  []*corev1.Node{node("n1", "10.244.1.0/24", "fd00:244:0:1::/64"), node("n2", "10.244.2.0/24", "fd00:244:0:2::/64")},
		podIPs: []string{"10.244.1.5", "fd00:244:0:1::5"}, want4: "10.244.1.5 : 203.0.113.7", want6: "fd00:244:0:1::5 : 2001:db8::7",
		internal: "fd00:244:0:1::/64, fd00:244:0:2::/64",
	}, {
		name: "no flags, Nodes give both", nodes: []*corev1.Node{node("n1", "10.244.1.0/24", "fd00:244:0:1::/64")},
		podIPs: []string{"10.244.1.5", "fd00:244:0:1::5"}, want4: "10.244.1.5 : 203.0.113.7", want6: "fd00:244:0:1::5 : 2001:db8::7",
		internal: "fd00:244:0:1::/64",
	}, {
		name: "only spec.podCIDR (older writers)", cluster: prefixes("10.244.0.0/16"),
		nodes:  []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDR: "fd00:244:0:1::/64"}}},
		podIPs: []string{"10.244.1.5", "fd00:244:0:1::5"}, want4: "10.244.1.5 : 203.0.113.7", want6: "fd00:244:0:1::5 : 2001:db8::7",
		internal: "fd00:244:0:1::/64",
	}, {
		name: "an unreadable podCIDR adds nothing", cluster: prefixes("10.244.0.0/16"),
		nodes:  []*corev1.Node{node("n1", "10.244.1.0/24", "fd00:244::1::/64"), node("n2", "::ffff:10.0.0.0/104")},
		podIPs: []string{"10.244.1.5", "fd00:244::5"}, want4: "10.244.1.5 : 203.0.113.7",
		warning: "no IPv6 pod range",
	}, {
		name: "no range of either family", podIPs: []string{"10.244.1.5", "fd00:244::5"},
		problem: "--cluster-cidr",
	}, {
		name: "IPv4 only known, Service would translate IPv6 only", cluster: prefixes("10.244.0.0/16"),
		podIPs:  []string{"fd00:244::5"}, // and the Service has only an IPv6 address below
		problem: "no IPv6 pod range of the cluster is known",
	}, {
		name: "pod outside the known ranges", cluster: prefixes("10.244.0.0/16", "fd00:244::/56"),
		podIPs: []string{"10.99.0.5", "fd00:244::5"}, want6: "fd00:244::5 : 2001:db8::7", internal: "fd00:244::/56",
		warning: "10.99.0.5, outside the cluster's known pod ranges",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			in.ClusterCIDRs, in.Nodes = tc.cluster, tc.nodes
			lbs := []string{"203.0.113.7", "2001:db8::7"}
			if strings.HasPrefix(tc.name, "IPv4 only known") {
				lbs = lbs[1:]
			}
			in.Services = []*corev1.Service{svc("x", "web", t0, dual, lbs...)}
			in.Pods = podtest.Set([]*corev1.Pod{pod("x", "web-1", "web", "n1", tc.podIPs...)})
			out := compileChecked(t, in)
			check := func(what string, ps []string, want string) {
				t.Helper()
				switch {
				case want == "" && len(ps) > 0:
					t.Errorf("%s %v, want none", what, ps)
				case want != "" && (len(ps) != 1 || !strings.Contains(ps[0], want) || !strings.Contains(ps[0], "Service x/web")):
					t.Errorf("%s %v, want one naming Service x/web and %q", what, ps, want)
				}
			}
			var probs, warns []string
			for _, p := range out.Problems {
				probs = append(probs, p.Error())
			}
			for _, p := range out.Warnings {
				warns = append(warns, p.Error())
			}
			check("problems", probs, tc.problem)
			check("warnings", warns, tc.warning)
			if tc.problem != "" {
				if len(out.Chains)+len(out.Sets) != 0 || len(out.Bindings) != 0 {
					t.Errorf("a Service left out still has %d chains, %d sets, %d bindings", len(out.Chains), len(out.Sets), len(out.Bindings))
				}
				return
			}
			if got := elems(findSet(t, out, MapSNAT4)); got != tc.want4 {
				t.Errorf("eg_snat4 = %q, want %q", got, tc.want4)
			}
			if got := elems(findSet(t, out, MapSNAT6)); got != tc.want6 {
				t.Errorf("eg_snat6 = %q, want %q", got, tc.want6)
			}
			if got := elems(findSet(t, out, SetInternal6)); got != tc.internal {
				t.Errorf("eg_internal6 = %q, want %q", got, tc.internal)
			}
			for a, b := range out.Bindings {
				if (a.Is4() && tc.want4 == "") || (a.Is6() && tc.want6 == "") {
					t.Errorf("binding %v -> %v in a family that is not translated", a, b.To)
				}
			}
		})
	}
}

func TestPodRanges(t *testing.T) {
	got := PodRanges(prefixes("10.244.0.0/16"), []*corev1.Node{
		node("n1", "10.244.1.0/24", "fd00:1::/64"), node("n2", "10.245.0.0/24"), node("n3"), node("n4", "fd00:1::/64", "bogus"),
	})
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	if want := "10.244.0.0/16 10.245.0.0/24 fd00:1::/64"; strings.Join(s, " ") != want {
		t.Errorf("PodRanges = %v, want %s", s, want)
	}
}
