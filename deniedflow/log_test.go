package deniedflow

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/syncbuf"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/rulecounter"
	"github.com/nftguard/nftguard/tablelayout"
)

// Run in a lab node: each denied datagram becomes one JSON slog
// record naming the pods and the policy from the informer listers, the
// records counter counts it, and a journal of 2 counts what it pushed out.
func TestDeniedLogRecordsAndMetrics(t *testing.T) {
	lab := netlab.New(t, netlab.Spec{Nodes: []netlab.NodeSpec{{Name: "n1", Pods: []string{"x/b", "y/a"}}}})
	xb, ya := lab.Endpoint("x/b"), lab.Endpoint("y/a")
	pod := func(ns, name string, e *netlab.Endpoint) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: e.IPv4.String()}, {IP: e.IPv6.String()}}
		return p
	}
	pods := []*corev1.Pod{pod("x", "b", xb), pod("y", "a", ya)}
	nps := []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "in-b"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}},
		// y does not opt in: its denied packets are counted, not logged.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "deny"}}}
	nss := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{tablelayout.AnnotationLogDenied: "true"}}}}
	l := tablelayout.LogDenied{Group: 1604, Rate: 100, Burst: 100}
	out := policy.Compile(policy.Input{NodeName: "n1", Namespaces: nss, Pods: podset.NewSet(podset.FromAPIList(pods)), Policies: npset.New(nps), LogDenied: &l})
	counts := rulecounter.New()
	eng, err := engine.New(engine.Table{Name: "nftguard"}, engine.WithNetNS(lab.Nodes[0].Path), engine.WithDeletedCounters(counts.Deleted))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Sync(context.Background(), &engine.Desired{Chains: out.Chains, Sets: out.Sets}); err != nil {
		t.Fatal(err)
	}

	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podAddrIndex: podAddrs})
	npIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		podIdx.Add(podset.FromAPI(p))
	}
	for _, np := range nps {
		npIdx.Add(np)
	}
	res := NewResolver(podIdx, netlisters.NewNetworkPolicyLister(npIdx))

	var logs syncbuf.Buffer
	reg := prometheus.NewRegistry()
	dm, err := NewMetrics(reg, counts)
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(counts.Collector(eng, 5*time.Second, func(err error) { t.Errorf("reading counters: %v", err) }))
	journal := flowlog.NewJournal(2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, l, lab.Nodes[0].Path, res, slog.New(slog.NewJSONHandler(&logs, nil)), dm, journal)
	}()
	// Run has bound the group once the kernel lists it in the node's
	// namespace: netfilter/nfnetlink_log of the thread's /proc net has one
	// line per bound group, its number first.
	bound := func() bool {
		var text []byte
		if err := lab.Run(lab.Nodes[0].Name, func() (err error) {
			text, err = os.ReadFile("/proc/thread-self/net/netfilter/nfnetlink_log")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(text), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == fmt.Sprint(l.Group) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(time.Minute); !bound(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("group %d never bound", l.Group)
		}
	}
	send := func(from string, to *netlab.Endpoint, n int) {
		for i := 0; i < n; i++ {
			if err := lab.Run(from, func() error {
				c, err := net.Dial("udp", fmt.Sprintf("%s:81", to.IPv4))
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
	}
	const sent, unlogged = 3, 2
	send("y/a", xb, sent)
	send("x/b", ya, unlogged)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(logs.String(), "\n") < sent && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != sent {
		t.Fatalf("%d log lines for %d denied datagrams:\n%s", len(lines), sent, logs.String())
	}
	t.Logf("first record: %s", lines[0])
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] != "denied" || m["direction"] != "ingress" || m["srcPod"] != "y/a" || m["dstPod"] != "x/b" ||
			m["policies"] != "x/in-b" || m["dstPort"] != float64(81) ||
			m["decision"] != "pod x/b isolated for ingress by policy in-b; no rule allowed" {
			t.Errorf("record %s", line)
		}
	}
	// Every denied packet is counted by the kernel, logged or not: 3
	// logged to x/b and 2 unlogged to y/a, each 29 bytes (IPv4 + UDP
	// headers + one byte).
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP nftguard_denied_bytes_total Bytes of the packets counted in nftguard_denied_packets_total (layer 3 and up).
# TYPE nftguard_denied_bytes_total counter
nftguard_denied_bytes_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 87
nftguard_denied_bytes_total{direction="ingress",kind="NetworkPolicy",namespace="y"} 58
# HELP nftguard_denied_log_records_total Denied packets logged by the kernel and read by the agent (rate-limited in the kernel per node and direction).
# TYPE nftguard_denied_log_records_total counter
nftguard_denied_log_records_total 3
# HELP nftguard_denied_log_suppressed_total Denied packets not logged or records not kept, by reason (rate_limit: over the kernel's log limit; ring_overflow: pushed out of the in-memory journal; socket_overrun: lost on a full socket).
# TYPE nftguard_denied_log_suppressed_total counter
nftguard_denied_log_suppressed_total{reason="rate_limit"} 0
nftguard_denied_log_suppressed_total{reason="ring_overflow"} 1
nftguard_denied_log_suppressed_total{reason="socket_overrun"} 0
`+deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 3
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="y"} 2
`)); err != nil {
		t.Error(err)
	}
	if got := len(journal.Recent()); got != 2 {
		t.Errorf("journal holds %d records, want 2", got)
	}
}
