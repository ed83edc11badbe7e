package deniedflow

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/rulecounter"
	"github.com/nftguard/nftguard/tablelayout"
)

// In a lab node: y/a sends N datagrams that x/b's isolation drops, and no
// scrape happens before a sync deletes x/b's pod chain (the pod is gone).
// The scrape after reads N denied packets of namespace x, from the final
// count the deletion echoed (before, the series was missing: the count
// went with the rule), and the scrape after that drops the series.
func TestDeniedCountOfADeletedChain(t *testing.T) {
	lab := netlab.New(t, netlab.Spec{Nodes: []netlab.NodeSpec{{Name: "n1", Pods: []string{"x/b", "y/a"}}}})
	xb, ya := lab.Endpoint("x/b"), lab.Endpoint("y/a")
	pod := func(ns, name string, e *netlab.Endpoint) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: e.IPv4.String()}, {IP: e.IPv6.String()}}
		return p
	}
	nps := npset.New([]*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "in-b"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}}})
	l := tablelayout.LogDenied{Group: 1605, Rate: 100, Burst: 100}
	compile := func(pods ...*corev1.Pod) *engine.Desired {
		out := policy.Compile(policy.Input{NodeName: "n1", Pods: podset.NewSet(podset.FromAPIList(pods)), Policies: nps, LogDenied: &l})
		return &engine.Desired{Chains: out.Chains, Sets: out.Sets}
	}
	counts := rulecounter.New()
	eng, err := engine.New(engine.Table{Name: "nftguard"}, engine.WithNetNS(lab.Nodes[0].Path), engine.WithDeletedCounters(counts.Deleted))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	if _, err := eng.Sync(ctx, compile(pod("x", "b", xb), pod("y", "a", ya))); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if _, err := NewMetrics(reg, counts); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(counts.Collector(eng, 5*time.Second, func(err error) { t.Errorf("reading counters: %v", err) }))

	const sent = 4
	for range sent {
		if err := lab.Run("y/a", func() error {
			c, err := net.Dial("udp", fmt.Sprintf("%s:81", xb.IPv4))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// x/b is gone: its chain, and the final drop that counted, with it.
	if _, err := eng.Sync(ctx, compile(pod("y", "a", ya))); err != nil {
		t.Fatal(err)
	}
	if rcs, err := eng.Counters(ctx, func(c string) bool { _, _, ok := policy.DeniedChain(c); return ok }); err != nil || len(rcs) != 0 {
		t.Fatalf("x/b's chain still counts: %v, %v", rcs, err)
	}
	expect := func(step, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nftguard_denied_packets_total", "nftguard_denied_bytes_total"); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	// Each datagram is 29 bytes: IPv4 and UDP headers and one byte.
	expect("scrape after the deletion", `
# HELP nftguard_denied_bytes_total Bytes of the packets counted in nftguard_denied_packets_total (layer 3 and up).
# TYPE nftguard_denied_bytes_total counter
nftguard_denied_bytes_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 116
`+deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 4
`)
	expect("the scrape after", "")
}
