package doctor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
)

func options(ns *testns.NS) Options {
	return Options{NetNS: ns.Path, Table: compose.Table(), Hooks: OwnHooks(), Probe: true}
}

var counters = regexp.MustCompile(`(?m)(counter pkts \d+ bytes \d+|counter packets \d+ bytes \d+|\[\d+:\d+\]|^# .*$)`)

// snapshot is the namespace's whole ruleset as bytecode and text, and its
// iptables-legacy rules, without counters and timestamps.
func snapshot(t *testing.T, ns *testns.NS) string {
	t.Helper()
	nft := ns.MustExec(t, "", "nft", "--debug=netlink", "list", "ruleset")
	legacy := ns.MustExec(t, "", "iptables-legacy-save")
	legacy6 := ns.MustExec(t, "", "ip6tables-legacy-save")
	return counters.ReplaceAllString(nft+"\n--legacy--\n"+legacy+legacy6, "")
}

func run(t *testing.T, o Options) *Report {
	t.Helper()
	ns := &testns.NS{Path: o.NetNS, Name: o.NetNS}
	mon := startMonitor(t, ns)
	before := snapshot(t, ns)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, ns)
	if events := mon.stop(t, ns); events != "" {
		t.Fatalf("nft monitor saw changes while doctor ran:\n%s", events)
	}
	if after != before {
		t.Fatalf("doctor changed the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, f := range rep.Findings {
		t.Log(f)
	}
	return rep
}

// monitor is `nft monitor` running in a namespace, so that even a change
// undone before the second snapshot is seen.
type monitor struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	start int // output before this offset is the liveness check's
}

func (m *monitor) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.Write(b)
}

func (m *monitor) text() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

// startMonitor starts the monitor and proves it listens: the test's own
// throw-away table must show up in its output before doctor runs.
func startMonitor(t *testing.T, ns *testns.NS) *monitor {
	t.Helper()
	m := &monitor{cmd: exec.Command("nsenter", "--net="+ns.Path, "--", "nft", "monitor")}
	m.cmd.Stdout, m.cmd.Stderr = m, m
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("nft monitor: %v", err)
	}
	t.Cleanup(func() { m.cmd.Process.Kill(); m.cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(m.text(), "delete table ip ngt_monitor_check") {
		if time.Now().After(deadline) {
			t.Fatalf("nft monitor does not report changes:\n%s", m.text())
		}
		ns.MustExec(t, "", "nft", "add table ip ngt_monitor_check; delete table ip ngt_monitor_check")
		time.Sleep(50 * time.Millisecond)
	}
	m.start = len(m.text())
	return m
}

// stop ends the monitor and returns what it printed after the check and
// before a last change of the test's own: the monitor prints events in
// order, so once it printed that one it printed every earlier one.
func (m *monitor) stop(t *testing.T, ns *testns.NS) string {
	t.Helper()
	ns.MustExec(t, "", "nft", "add table ip ngt_monitor_end; delete table ip ngt_monitor_end")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(m.text()[m.start:], "delete table ip ngt_monitor_end") {
		if time.Now().After(deadline) {
			t.Fatalf("nft monitor did not report the closing change:\n%s", m.text())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.cmd.Process.Signal(os.Interrupt)
	m.cmd.Wait()
	out := m.text()[m.start:]
	return strings.TrimSpace(out[:strings.Index(out, "add table ip ngt_monitor_end")])
}

// find returns the findings whose fields contain all the given strings.
func find(rep *Report, sev Severity, check string, subs ...string) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Severity != sev || f.Check != check {
			continue
		}
		all := f.Table + " " + f.Chain + " " + f.Rule + " " + f.Message + " " + strings.Join(f.Details, " ")
		ok := true
		for _, s := range subs {
			if !strings.Contains(all, s) {
				ok = false
			}
		}
		if ok {
			out = append(out, f)
		}
	}
	return out
}

func TestDoctorFindsForeignRules(t *testing.T) {
	ns := testns.New(t, "doctor")
	ns.MustExec(t, "", "iptables-nft", "-A", "FORWARD", "-m", "mark", "--mark", "0x8000/0x8000", "-j", "DROP")
	ns.MustExec(t, "", "iptables-nft", "-A", "FORWARD", "-m", "comment", "--comment", "kube-proxy firewall", "-j", "ACCEPT")
	ns.MustExec(t, "", "iptables-nft", "-A", "INPUT", "-m", "recent", "--name", "ssh", "--set")
	ns.MustExec(t, "", "iptables-legacy", "-A", "INPUT", "-s", "192.0.2.1", "-j", "DROP")
	ns.MustExec(t, "", "nft", "add", "set", "ip", "filter", "s", "{ type ipv4_addr; }")
	ns.MustExec(t, "", "nft", "add", "rule", "ip", "filter", "FORWARD", "ip", "saddr", "@s", "drop")
	ns.MustExec(t, `table inet foreign {
	chain early { type filter hook forward priority -10; policy drop; }
	chain late { type filter hook forward priority 10; policy accept; counter drop; }
	chain srcnat50 { type nat hook postrouting priority 50; policy accept; }
	chain fingerprint { osf name "Linux" accept; }
}
`, "nft", "-f", "-")

	rep := run(t, options(ns))
	for _, want := range []struct {
		sev   Severity
		check string
		subs  []string
	}{
		{Warning, "rendering", []string{"ip filter", "FORWARD", "meta mark & 0x8000 == 0x8000", "1.8.7", saveRestore}},
		{Warning, "rendering", []string{"ip filter", "FORWARD", `match "comment" revision 0`, saveRestore}},
		{Warning, "rendering", []string{"ip filter", "INPUT", `match "recent" revision 1`, saveRestore}},
		{Error, "rendering", []string{"ip filter", "FORWARD", `"lookup"`, "ip saddr @s drop", saveRestore}},
		{Warning, "iptables", []string{"iptables-legacy rules [ip filter", "iptables-nft rules [ip filter"}},
		{Error, "hooks", []string{"inet foreign", "early", "priority -10 (before ours at 0), policy drop"}},
		{Error, "hooks", []string{"inet foreign", "late", "unconditional drop", "counter", "drop"}},
		{Warning, "hooks", []string{"inet foreign", "srcnat50", "nat chain on hook postrouting, priority 50"}},
		{Info, "hooks", []string{"ip filter", "FORWARD", "2 conditional drop rule(s)"}},
		{Info, "features", []string{"verdict maps", "concatenated set keys", "interval sets", "source NAT", "conntrack"}},
		{Info, "nftguard", []string{"inet nftguard", "not present"}},
		{Warning, "rendering", []string{"inet foreign", "fingerprint", `expression "osf" is unknown`, "osf 0x4c696e7578", saveRestore}},
	} {
		if got := find(rep, want.sev, want.check, want.subs...); len(got) != 1 {
			t.Errorf("want one %v %s finding with %q, got %d", want.sev, want.check, want.subs, len(got))
		}
	}
	if n := len(find(rep, Error, "features")); n != 0 {
		t.Errorf("%d feature errors on this kernel", n)
	}
	for _, f := range find(rep, Warning, "rendering") {
		if f.Handle == 0 || f.Rule == "" {
			t.Errorf("rendering finding without rule handle or text: %+v", f)
		}
	}
	if rep.Worst() != Error {
		t.Errorf("worst = %v, want error", rep.Worst())
	}
}

func TestDoctorCleanNamespace(t *testing.T) {
	ns := testns.New(t, "doctor")
	rep := run(t, options(ns))
	for _, f := range rep.Findings {
		if f.Severity > Info {
			t.Errorf("finding above info in a clean namespace: %v", f)
		}
	}
	if len(find(rep, Info, "features", "supported")) != 1 {
		t.Errorf("no feature probe result")
	}
}

// allowB is the table of a node with pods x/a and x/b, a isolated for
// ingress by x/allow-b, which allows b.
func allowB() *engine.Desired {
	pod := func(name, ip string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName = "n1"
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		return p
	}
	in := compose.Input{NodeName: "n1",
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "x"}}},
		Pods:       podtest.Set([]*corev1.Pod{pod("a", "10.1.0.2"), pod("b", "10.1.0.3")}),
		NetworkPolicies: npset.New([]*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-b"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}}}}}}}),
	}
	return compose.Build(in).Desired
}

func TestDoctorOwnTableInSync(t *testing.T) {
	ns := testns.New(t, "doctor")
	desired := allowB()
	eng, err := engine.New(compose.Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Sync(context.Background(), desired); err != nil {
		t.Fatal(err)
	}
	o := options(ns)
	o.Desired = desired
	o.Probe = false
	rep := run(t, o)
	if len(find(rep, Info, "nftguard", "in sync")) != 1 || len(find(rep, Info, "nftguard", "present:")) != 1 {
		t.Errorf("want present and in sync")
	}
	if len(find(rep, Error, "rendering"))+len(find(rep, Warning, "rendering"))+len(find(rep, Error, "hooks")) != 0 {
		t.Errorf("our own table must not be reported as foreign")
	}

	// Drift: one more pod in the peer set, the ingress dispatch gone. Losing
	// the dispatch lifts the isolation of every local pod: an error. The
	// peer set is named for its selection (package podchain).
	peerSet := ""
	for _, s := range desired.Sets {
		if strings.HasPrefix(s.Name, "np_sel_") {
			peerSet = s.Name
		}
	}
	ns.MustExec(t, "", "nft", "add", "element", "inet", "nftguard", peerSet, "{ 10.1.0.9 }")
	ns.MustExec(t, "", "nft", "flush", "chain", "inet", "nftguard", "np_ingress")
	rep = run(t, o)
	got := find(rep, Error, "nftguard", "more open than the manifests", peerSet+": 0 elements missing, 1 extra", "chain np_ingress: rule 1 is missing")
	if len(got) != 1 {
		t.Errorf("want a more-open error naming the set and the chain")
	}
}

// TestDoctorOwnTableMoreOpen: our table holding more than the manifests
// produce is an error when it may let through what they stop (an inserted
// accept, an extra base chain), a warning when it can only stop more, and
// an inserted rule is one difference, not one for each rule after it.
func TestDoctorOwnTableMoreOpen(t *testing.T) {
	ns := testns.New(t, "doctor")
	desired := allowB()
	eng, err := engine.New(compose.Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	o := options(ns)
	o.Desired = desired
	o.Probe = false
	for _, tt := range []struct {
		name   string
		change []string // an nft command, the oracle of what is in the kernel
		sev    Severity
		subs   []string
	}{
		{"inserted accept", []string{"insert", "rule", "inet", "nftguard", "np_ing_x_a", "accept"},
			Error, []string{"more open than the manifests (1 of 1 differences", "chain np_ing_x_a: extra rule (handle", "): accept"}},
		{"extra base chain", []string{"add", "chain", "inet", "nftguard", "sneak", "{ type filter hook forward priority -5; policy accept; }"},
			Error, []string{"more open than the manifests (1 of 1 differences", "extra base chain sneak (filter hook forward priority -5 policy accept, 0 rules)"}},
		{"inserted drop", []string{"insert", "rule", "inet", "nftguard", "np_ing_x_a", "ip", "saddr", "192.0.2.1", "drop"},
			Warning, []string{"out of sync with the manifests (1 differences)", "chain np_ing_x_a: extra rule (handle", "ip saddr 192.0.2.1 drop"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A fresh table: the engine trusts its cache of the kernel
			// unless a monitor reports drift, and none runs here.
			if err := eng.Delete(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Sync(context.Background(), desired); err != nil {
				t.Fatal(err)
			}
			ns.MustExec(t, "", "nft", tt.change...)
			rep := run(t, o)
			got := find(rep, tt.sev, "nftguard", tt.subs...)
			if len(got) != 1 {
				t.Fatalf("want one %v nftguard finding with %q", tt.sev, tt.subs)
			}
			if len(got[0].Details) != 1 {
				t.Errorf("one change, %d differences: %q", len(got[0].Details), got[0].Details)
			}
			if worst := rep.Worst(); worst != tt.sev {
				t.Errorf("worst finding %v, want %v (the exit code follows it)", worst, tt.sev)
			}
		})
	}
}
