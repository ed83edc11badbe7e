package egress

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/podtest"
)

// Only the node that holds a Service's address translates to it; elsewhere
// its pods are held, or left to the node's masquerade when the Service opts
// in, and one Local warning per Service says which.
func TestOnlyWhereTheAddressLives(t *testing.T) {
	local := &LocalAddrs{Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("2001:db8::7/128")}}
	cases := []struct {
		name      string
		lb        []string
		ann       map[string]string
		local     *LocalAddrs
		wantSNAT4 string
		wantSNAT6 string
		wantHeld  string
		wantWarn  string
	}{
		{"local", []string{"203.0.113.7"}, nil, local, "10.244.1.5 : 203.0.113.7", "", "", ""},
		{"not checked", []string{"203.0.113.9"}, nil, nil, "10.244.1.5 : 203.0.113.9", "", "", ""},
		{"elsewhere", []string{"203.0.113.9"}, nil, local, "", "", "10.244.1.5 not_local", "203.0.113.9 is not on this node"},
		{"elsewhere, node masquerade", []string{"203.0.113.9"}, map[string]string{"nftguard.io/egress-node-masquerade": "true"}, local, "", "", "", "left to the node's masquerade"},
		{"bad opt-out holds", []string{"203.0.113.9"}, map[string]string{"nftguard.io/egress-node-masquerade": "si"}, local, "", "", "10.244.1.5 invalid", ""},
		{"v6 local, v4 elsewhere", []string{"203.0.113.9", "2001:db8::7"}, map[string]string{"nftguard.io/egress-ipv6": "true"}, local, "", "fd00:244::5 : 2001:db8::7", "10.244.1.5 not_local", "203.0.113.9 is not on this node"},
		{"v6 asked, none yet", []string{"203.0.113.7"}, map[string]string{"nftguard.io/egress-ipv6": "true"}, local, "10.244.1.5 : 203.0.113.7", "", "fd00:244::5 no_address", ""},
		{"mapped address refused", []string{"::ffff:203.0.113.7"}, nil, local, "", "", "10.244.1.5 invalid", ""},
		{"leading zero refused", []string{"203.0.113.07"}, nil, local, "", "", "10.244.1.5 invalid", ""},
		{"zone refused", []string{"fe80::1%eth0", "203.0.113.7"}, nil, local, "", "", "10.244.1.5 invalid", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			in.Local = tc.local
			ann := map[string]string{"nftguard.io/egress": "true"}
			for k, v := range tc.ann {
				ann[k] = v
			}
			in.Services = []*corev1.Service{svc("x", "web", t0, ann, tc.lb...)}
			in.Pods = podtest.Set([]*corev1.Pod{pod("x", "web-1", "web", "n1", "10.244.1.5", "fd00:244::5")})
			out := compileChecked(t, in)
			if got := elems(findSet(t, out, MapSNAT4)); got != tc.wantSNAT4 {
				t.Errorf("snat4 %q, want %q", got, tc.wantSNAT4)
			}
			if got := elems(findSet(t, out, MapSNAT6)); got != tc.wantSNAT6 {
				t.Errorf("snat6 %q, want %q", got, tc.wantSNAT6)
			}
			var held []string
			for _, h := range out.Held {
				held = append(held, h.Addr.String()+" "+string(h.Reason))
			}
			if got := strings.Join(held, ", "); got != tc.wantHeld {
				t.Errorf("held %q, want %q", got, tc.wantHeld)
			}
			if tc.wantWarn != "" && (len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0].Reason, tc.wantWarn) || !out.Warnings[0].Local) {
				t.Errorf("warnings %v, want one Local warning with %q", out.Warnings, tc.wantWarn)
			}
			if strings.HasSuffix(tc.wantHeld, "invalid") && (len(out.Problems) == 0 || !strings.Contains(out.Problems[0].Field, "egress") && !strings.Contains(out.Problems[0].Field, "status.loadBalancer.ingress[0].ip")) {
				t.Errorf("problems %v: want the field named", out.Problems)
			}
		})
	}
}

// A Service whose address is elsewhere says so only on nodes where it
// selects a pod: the Event is the node's own.
func TestNotLocalWarnsOnlyWithLocalPods(t *testing.T) {
	in := baseInput()
	in.Local = &LocalAddrs{}
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.9")}
	in.Pods = podtest.Set([]*corev1.Pod{pod("x", "web-1", "web", "n2", "10.244.2.5")})
	if out := compileChecked(t, in); len(out.Warnings) != 0 || len(out.Held) != 0 {
		t.Errorf("warnings %v, held %v: want none on a node without selected pods", out.Warnings, out.Held)
	}
}

// While a claimed pod of this node has no address, traffic leaving the
// cluster from this node's pod range is held unless a pod has the address;
// the guard is off (empty range sets) otherwise, and never on for a Service
// that opts into node masquerade.
func TestPodStartGuard(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:244:0:1::/64"}}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.2.0/24"}}}
	base := func() Input {
		in := baseInput()
		in.Nodes = []*corev1.Node{node, other}
		return in
	}
	running := []*corev1.Pod{pod("x", "web-1", "web", "n1", "10.244.1.5"), pod("y", "db", "db", "n1", "10.244.1.6"), pod("y", "far", "db", "n2", "10.244.2.6")}

	in := base()
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7")}
	in.Pods = podtest.Set(running)
	out := compileChecked(t, in)
	// The known addresses are kept while the guard is off, so that
	// turning it on changes only the ranges.
	if g, k := elems(findSet(t, out, SetGuard4)), elems(findSet(t, out, SetKnown4)); g != "" || k != "10.244.1.5, 10.244.1.6" || len(out.Pending) != 0 {
		t.Errorf("no pending pod: guard %q known %q pending %v, want the guard off and this node's pods known", g, k, out.Pending)
	}

	in.Pods = podtest.Set(append(running, pod("x", "web-2", "web", "n1")))
	out = compileChecked(t, in)
	if g, k := elems(findSet(t, out, SetGuard4)), elems(findSet(t, out, SetKnown4)); g != "10.244.1.0/24" || k != "10.244.1.5, 10.244.1.6" {
		t.Errorf("pending pod: guard %q known %q, want this node's range and its pods' addresses", g, k)
	}
	if g := elems(findSet(t, out, SetGuard6)); g != "" {
		t.Errorf("guard6 %q: the Service does not claim IPv6", g)
	}
	if len(out.Pending) != 1 || out.Pending[0] != "x/web-2" {
		t.Errorf("pending %v", out.Pending)
	}

	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-node-masquerade": "true"}, "203.0.113.7")}
	out = compileChecked(t, in)
	if g := elems(findSet(t, out, SetGuard4)); g != "" || len(out.Pending) != 0 {
		t.Errorf("node masquerade: guard %q pending %v, want off", g, out.Pending)
	}

	// Without a range of its own, the node guards the cluster's ranges.
	in = base()
	in.Nodes = []*corev1.Node{other}
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7")}
	in.Pods = podtest.Set(append(running, pod("x", "web-2", "web", "n1")))
	out = compileChecked(t, in)
	if g, k := elems(findSet(t, out, SetGuard4)), elems(findSet(t, out, SetKnown4)); g != "10.244.0.0/16" || k != "10.244.1.5, 10.244.1.6, 10.244.2.6" {
		t.Errorf("no own range: guard %q known %q", g, k)
	}
}

// Each Service that translates has a counting chain its pods' addresses
// jump to from the hold chain: a counter for an unrestricted Service, its
// own matches with a counter for a restricted one.
func TestCountChains(t *testing.T) {
	in := baseInput()
	in.Services = []*corev1.Service{
		svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7"),
		svc("x", "db", t0, map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-destination-ports": "tcp:443"}, "203.0.113.8"),
	}
	in.Pods = podtest.Set([]*corev1.Pod{pod("x", "w", "web", "n1", "10.244.1.5"), pod("x", "d", "db", "n1", "10.244.1.6")})
	out := compileChecked(t, in)
	if got := elems(findSet(t, out, MapCount4)); got != "10.244.1.5 : jump eg_cnt_x_web, 10.244.1.6 : jump eg_cnt_x_db" {
		t.Errorf("count map %s", got)
	}
	web, _ := findChain(out, "eg_cnt_x_web")
	db, _ := findChain(out, "eg_cnt_x_db")
	if got := rules(web); got != "ip daddr @eg_internal4 return\ncounter" {
		t.Errorf("web counting chain:\n%s", got)
	}
	if got := rules(db); got != "ip daddr @eg_internal4 return\nmeta nfproto ipv4 meta l4proto tcp th dport 443 counter" {
		t.Errorf("db counting chain:\n%s", got)
	}
	if web.Rules[1].Comment != "x/web" {
		t.Errorf("the counter's comment %q does not name the Service", web.Rules[1].Comment)
	}
}

// With GuardAlways the guard is on while any Service claims pods, for the
// families it claims, with no pending pod and even with no selected pod on
// this node; a node-masquerade Service never turns it on.
func TestPodStartGuardAlways(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:244:0:1::/64"}}}
	in := baseInput()
	in.GuardAlways = true
	in.Nodes = []*corev1.Node{node}
	in.Pods = podtest.Set([]*corev1.Pod{pod("y", "db", "db", "n1", "10.244.1.6")})
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7")}
	out := compileChecked(t, in)
	if g, g6, k := elems(findSet(t, out, SetGuard4)), elems(findSet(t, out, SetGuard6)), elems(findSet(t, out, SetKnown4)); g != "10.244.1.0/24" || g6 != "" || k != "10.244.1.6" {
		t.Errorf("guard4 %q guard6 %q known %q: want this node's IPv4 range guarded, its pod known", g, g6, k)
	}
	in.Services[0].Annotations["nftguard.io/egress-node-masquerade"] = "true"
	if g := elems(findSet(t, compileChecked(t, in), SetGuard4)); g != "" {
		t.Errorf("node masquerade: guard %q, want off", g)
	}
}
