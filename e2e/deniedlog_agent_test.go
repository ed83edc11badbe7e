package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// TestAgentLogDenied runs `nftguard run --log-denied` on three lab nodes
// against the real API server. Namespace x opts in with the annotation and
// isolates its pods for ingress; then single SYNs that the policy denies,
// from a pod on the same node and from one on another node, each appear
// exactly once as a `"msg":"denied"` JSON record in the output of the
// agent of the destination's node, naming pods, port, direction and
// policy, and the agent's metrics count them: records, and packets and
// bytes denied in namespace x, read from the kernel's counters, also the
// packets a rule counted between the last scrape and its deletion.
func TestAgentLogDenied(t *testing.T) {
	a := newAgentLabWith(t, agentLabOptions{args: []string{"--min-sync-interval", "50ms", "--max-sync-interval", "500ms",
		"--log-denied", "--log-group", "1610", "--log-rate", "1000", "--log-burst", "1000"}})
	ctx := context.Background()
	a.logDeniedIn(ctx, t, "x")
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-ingress"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	})
	want := a.expect(ctx)
	a.converge(t, "deny-ingress", "y/a", "x/a", agentPorts[0], false, want, 0)
	// The table logs x's pods once the annotation is compiled too: wait
	// for n1's shared chain before counting.
	a.waitTableHas(t, "n1", "goto np_denied_ingress", "log x/a")
	a.waitRecordsRead(t, "n1") // the records of the convergence probes

	n1 := a.agents["n1"]
	mark := n1.markDenied(t)
	before := mark.metrics
	n2Before := metricValue(a.agents["n2"].metrics(t), `nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"}`)
	// deny-ingress denies them all; y/a is on n1 with x/a, y/b on n2.
	sends := []synSend{{"y/a", 81, 4, false}, {"y/b", 80, 3, false}}
	total := sendSYNs(t, a.lab, "x/a", sends)

	// The records, from n1's output after the mark.
	recs, after := n1.deniedRecordsSince(t, mark, total)
	t.Logf("first record: %v", recs[0])
	if len(recs) != total {
		t.Errorf("%d denied records in n1's output for %d denied SYNs", len(recs), total)
	}
	got := map[string]int{}
	for _, r := range recs {
		if r["direction"] != "ingress" || r["dstPod"] != "x/a" || r["policies"] != "x/deny-ingress" || r["protocol"] != "tcp" ||
			r["node"] != "n1" || r["decision"] != "pod x/a isolated for ingress by policy deny-ingress; no rule allowed" {
			t.Errorf("record %v", r)
		}
		got[fmt.Sprintf("%v:%v", r["srcPod"], r["dstPort"])]++
	}
	for _, s := range sends {
		if k := fmt.Sprintf("%s:%d", s.from, s.port); got[k] != s.n {
			t.Errorf("%d records of %s, want %d (all: %v)", got[k], k, s.n, got)
		}
	}

	series := `{direction="ingress",kind="NetworkPolicy",namespace="x"}`
	delta := func(name string) float64 { return metricValue(after, name) - metricValue(before, name) }
	if d := delta("nftguard_denied_log_records_total"); d != float64(total) {
		t.Errorf("nftguard_denied_log_records_total grew by %v, want %d", d, total)
	}
	if d := delta("nftguard_denied_packets_total" + series); d != float64(total) {
		t.Errorf("denied packets of x grew by %v, want %d", d, total)
	}
	// A SYN of this kernel's TCP over IPv4 is 60 bytes (20 IP + 40 TCP
	// with options).
	if d := delta("nftguard_denied_bytes_total" + series); d != float64(60*total) {
		t.Errorf("denied bytes of x grew by %v, want %d", d, 60*total)
	}
	if v := metricValue(after, `nftguard_denied_log_suppressed_total{reason="rate_limit"}`); v != 0 {
		t.Errorf("rate-limited: %v, want 0 at rate 1000", v)
	}
	logDeniedMetrics(t, "n1", after, total)
	// n2's agent saw y/b's SYNs leave (y/b is not isolated): it counts
	// none of them, although its x/b is isolated too.
	if d := metricValue(a.agents["n2"].metrics(t), "nftguard_denied_packets_total"+series) - n2Before; d != 0 {
		t.Errorf("n2's denied packets of x grew by %v, want 0", d)
	}

	// More SYNs denied, no scrape of n1, then the policy goes and with it
	// x/a's chain and the final drop that counted them: the sync that
	// deletes the rule reports its final count, and the next scrape has
	// them (it had not before: the count went with the rule, and the
	// series with it).
	more := sendSYNs(t, a.lab, "x/a", []synSend{{"y/a", 80, 5, false}})
	a.deletePolicy(ctx, "x", "deny-ingress")
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(nftList(t, a.lab.Node("n1").NetNS), "np_ing_x_a") {
		if time.Now().After(deadline) {
			t.Fatalf("n1's table still isolates x/a 10 s after the policy was deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := n1.metrics(t)
	if d := metricValue(gone, "nftguard_denied_packets_total"+series) - metricValue(after, "nftguard_denied_packets_total"+series); d != float64(more) {
		t.Errorf("denied packets of x grew by %v across the deletion of x/a's chain, want %d", d, more)
	}
	if d := metricValue(gone, "nftguard_denied_bytes_total"+series) - metricValue(after, "nftguard_denied_bytes_total"+series); d != float64(60*more) {
		t.Errorf("denied bytes of x grew by %v across the deletion of x/a's chain, want %d", d, 60*more)
	}
}

// syn sends one TCP SYN from a lab pod: the dial gives up before the first
// retransmission. It reports whether the connection was made.
func syn(t *testing.T, lab *netlab.Lab, from string, to netip.AddrPort) bool {
	t.Helper()
	ok, err := lab.DialTCP(from, to, 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// logDeniedIn opts namespace ns in to denied logging with its annotation.
func (a *agentLab) logDeniedIn(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	obj, err := a.admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Annotations = map[string]string{"nftguard.io/log-denied": "true"}
	if _, err := a.admin.CoreV1().Namespaces().Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitTableHas waits up to 10s until node's table, listed by nft, holds
// text; what says what that text means, for the failure.
func (a *agentLab) waitTableHas(t *testing.T, node, text, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(nftList(t, a.lab.Node(node).NetNS), text) {
		if time.Now().After(deadline) {
			t.Fatalf("%s's table does not %s:\n%s", node, what, nftList(t, a.lab.Node(node).NetNS))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loggedRE finds the counter of the shared chains' log rules in nft's
// listing: the packets the kernel logged.
var loggedRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ log prefix "nftguard denied`)

// waitRecordsRead waits until node's agent has read every record its
// kernel logged so far (nftguard_denied_log_records_total equals the log
// rules' counters), so that a mark taken next counts only what follows.
func (a *agentLab) waitRecordsRead(t *testing.T, node string) {
	t.Helper()
	logged := func() float64 {
		sum := 0.0
		for _, m := range loggedRE.FindAllStringSubmatch(nftList(t, a.lab.Node(node).NetNS), -1) {
			n, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
		return sum
	}
	read := func() float64 {
		return metricValue(a.agents[node].metrics(t), "nftguard_denied_log_records_total")
	}
	deadline := time.Now().Add(time.Minute)
	for l, r := logged(), read(); r < l; l, r = logged(), read() {
		if time.Now().After(deadline) {
			t.Fatalf("%s's agent read %v of the %v records its kernel logged", node, r, l)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deniedMark is an agent's metrics text and output at one moment, to count
// denied records and metrics from.
type deniedMark struct {
	metrics string
	log     []byte
}

func (ag *agentProc) markDenied(t *testing.T) deniedMark {
	t.Helper()
	m := deniedMark{metrics: ag.metrics(t)}
	var err error
	if m.log, err = os.ReadFile(ag.logPath); err != nil {
		t.Fatal(err)
	}
	return m
}

// synSend is n single SYNs from a pod to a port, and whether each must
// connect.
type synSend struct {
	from    string
	port    int
	n       int
	allowed bool
}

// sendSYNs sends the SYNs of sends, in order, to the IPv4 address of the
// lab pod to, failing at the first that connects when it must not or the
// other way round; it returns how many SYNs were denied.
func sendSYNs(t *testing.T, lab *netlab.Lab, to string, sends []synSend) (denied int) {
	t.Helper()
	addr := lab.Endpoint(to).IPv4
	for _, s := range sends {
		for range s.n {
			if got := syn(t, lab, s.from, netip.AddrPortFrom(addr, uint16(s.port))); got != s.allowed {
				t.Fatalf("%s -> %s:%d: connected=%v, want %v", s.from, to, s.port, got, s.allowed)
			}
			if !s.allowed {
				denied++
			}
		}
	}
	return denied
}

// deniedRecordsSince reads the "denied" JSON records of ag's output after
// mark, and its metrics text: once there are n records and
// nftguard_denied_log_records_total grew by n since mark, or after 10s
// with what there is.
func (ag *agentProc) deniedRecordsSince(t *testing.T, mark deniedMark, n int) (recs []map[string]any, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all, err := os.ReadFile(ag.logPath)
		if err != nil {
			t.Fatal(err)
		}
		recs = recs[:0]
		for _, line := range strings.Split(string(all[len(mark.log):]), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "denied" {
				recs = append(recs, m)
			}
		}
		after = ag.metrics(t)
		grew := metricValue(after, "nftguard_denied_log_records_total") - metricValue(mark.metrics, "nftguard_denied_log_records_total")
		if (len(recs) >= n && grew >= float64(n)) || time.Now().After(deadline) {
			return recs, after
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logDeniedMetrics logs the nftguard_denied_ series of a node's metrics
// text, for the reader of a passing run.
func logDeniedMetrics(t *testing.T, node, metrics string, denied int) {
	t.Helper()
	var shown []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "nftguard_denied_") {
			shown = append(shown, line)
		}
	}
	t.Logf("%s's metrics after %d denied SYNs:\n%s", node, denied, strings.Join(shown, "\n"))
}
