package policy

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/golden"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/tablelayout"
)

func annotated(n *corev1.Namespace, value string) *corev1.Namespace {
	n.Annotations = map[string]string{tablelayout.AnnotationLogDenied: value}
	return n
}

// logInput: x opts in, y does not (a value other than "true"), z has no
// annotation; one pod of each isolated both ways, one dual-stack.
func logInput(l *tablelayout.LogDenied) Input {
	both := func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	}
	return Input{NodeName: "n1", LogDenied: l,
		Namespaces: []*corev1.Namespace{annotated(apitest.Namespace("x", "ns", "x"), "true"), annotated(apitest.Namespace("y", "ns", "y"), "True"), apitest.Namespace("z", "ns", "z")},
		Pods: podtest.Set([]*corev1.Pod{
			apitest.Pod("x", "a", "10.0.0.1", apitest.IPs("10.0.0.1", "fd00::1")),
			apitest.Pod("y", "a", "10.0.1.1"),
			apitest.Pod("z", "a", "10.0.2.1"),
		}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{
			netpol("x", "deny", metav1.LabelSelector{}, both),
			netpol("y", "deny", metav1.LabelSelector{}, both),
			netpol("z", "deny", metav1.LabelSelector{}, both),
		}),
	}
}

func lastRule(c engine.Chain) string { return c.Rules[len(c.Rules)-1].Rule }

func TestLogDeniedOnlyAnnotatedNamespaces(t *testing.T) {
	l := tablelayout.LogDenied{Group: 7, Rate: 10, Burst: 20}
	out := compileChecked(t, logInput(&l))
	for chainName, want := range map[string]string{
		"np_ing_x_a": "counter goto " + tablelayout.ChainDeniedIngress,
		"np_egr_x_a": "counter goto " + tablelayout.ChainDeniedEgress,
		"np_ing_y_a": "counter drop", // "True" is not "true": counted, not logged
		"np_egr_y_a": "counter drop",
		"np_ing_z_a": "counter drop",
	} {
		if got := lastRule(chain(t, out, chainName)); got != want {
			t.Errorf("%s ends in %q, want %q", chainName, got, want)
		}
	}
	eq(t, tablelayout.ChainDeniedIngress, ruleTexts(chain(t, out, tablelayout.ChainDeniedIngress)), []string{
		`limit rate 10/second burst 20 packets counter log prefix "nftguard denied ingress" group 7`,
		"counter drop",
	})
	eq(t, tablelayout.ChainDeniedEgress, ruleTexts(chain(t, out, tablelayout.ChainDeniedEgress)), []string{
		`limit rate 10/second burst 20 packets counter log prefix "nftguard denied egress" group 7`,
		"counter drop",
	})
	// nft lists a burst of 5 without "burst": so does the compiler.
	l5 := tablelayout.LogDenied{Group: 7, Rate: 3, Burst: 5}
	if got := chain(t, compileChecked(t, logInput(&l5)), tablelayout.ChainDeniedIngress).Rules[0].Rule; got != `limit rate 3/second counter log prefix "nftguard denied ingress" group 7` {
		t.Errorf("burst 5 rule: %q", got)
	}
}

// With logging off the table is what it was without the feature, whatever
// the annotations say; with logging on but no namespace opted in, the two
// shared chains are added and every pod chain's final drop counts, and
// nothing else changes.
func TestLogDeniedOffChangesNothing(t *testing.T) {
	off := logInput(nil)
	plain := logInput(nil)
	for _, n := range plain.Namespaces {
		n.Annotations = nil
	}
	if d := cmp.Diff(Compile(plain), compileChecked(t, off)); d != "" {
		t.Errorf("annotations changed the table with logging off:\n%s", d)
	}
	for _, c := range Compile(off).Chains {
		for _, r := range c.Rules {
			if strings.Contains(r.Rule, "log ") || strings.Contains(r.Rule, "counter") || strings.Contains(r.Rule, "np_denied") {
				t.Errorf("logging off, chain %s has %q", c.Name, r.Rule)
			}
		}
	}
	l := tablelayout.DefaultLogDenied()
	plain.LogDenied = &l
	on := compileChecked(t, plain)
	var extra []string
	for _, c := range on.Chains {
		if !hasChain(Compile(off), c.Name) {
			extra = append(extra, c.Name)
			continue
		}
		want := chain(t, Compile(off), c.Name)
		if _, _, isPod := DeniedChain(c.Name); isPod {
			want.Rules = slices.Clone(want.Rules)
			last := &want.Rules[len(want.Rules)-1]
			if last.Rule != "drop" {
				t.Fatalf("chain %s ends in %q with logging off", c.Name, last.Rule)
			}
			last.Rule = "counter drop"
		}
		if d := cmp.Diff(want, c); d != "" {
			t.Errorf("chain %s differs with logging on and no namespace opted in:\n%s", c.Name, d)
		}
	}
	eq(t, "added chains", extra, []string{tablelayout.ChainDeniedEgress, tablelayout.ChainDeniedIngress})
}

// The incremental Compiler follows the annotation and the node's setting
// as they come and go, and equals a fresh Compile at every step.
func TestLogDeniedIncremental(t *testing.T) {
	var m Compiler
	l := tablelayout.DefaultLogDenied()
	in := logInput(&l)
	steps := []func(){
		func() {},
		func() { in.Namespaces[2] = annotated(apitest.Namespace("z", "ns", "z"), "true") },      // z opts in
		func() { in.Namespaces[0] = apitest.Namespace("x", "ns", "x") },                         // x opts out
		func() { in.LogDenied = nil },                                                           // node stops logging
		func() { l2 := tablelayout.LogDenied{Group: 9, Rate: 1, Burst: 1}; in.LogDenied = &l2 }, // and starts again, otherwise
		func() { in.Namespaces[1] = annotated(apitest.Namespace("y", "ns", "y"), "true") },
	}
	for i, step := range steps {
		step()
		got, want := m.Compile(in), Compile(in)
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("step %d: incremental compile differs from Compile:\n%s", i, d)
		}
	}
	if got := lastRule(chain(t, Compile(in), "np_ing_z_a")); got != "counter goto "+tablelayout.ChainDeniedIngress {
		t.Errorf("z after opting in ends in %q", got)
	}
}

func TestDeniedChain(t *testing.T) {
	for _, tc := range []struct {
		chain, ns string
		egress    bool
		ok        bool
	}{
		{"np_ing_x_a", "x", false, true},
		{"np_egr_kube-system_coredns-5d78c9869d-abcde", "kube-system", true, true},
		{"np_ing_my.ns_p_q", "my.ns", false, true},
		{"np_ing_" + nftsafe.NamePart("Bad NS") + "_p", nftsafe.NamePart("Bad NS"), false, true},
		{tablelayout.ChainDeniedIngress, "", false, false},
		{tablelayout.ChainIngress, "", false, false},
		{"np_forward", "", false, false},
		{"np_ing_x", "", false, false},
		{"np_ing__a", "", false, false},
		{"eg_ing_x_a", "", false, false},
	} {
		ns, egress, ok := DeniedChain(tc.chain)
		if ns != tc.ns || egress != tc.egress || ok != tc.ok {
			t.Errorf("DeniedChain(%q) = %q, %v, %v; want %q, %v, %v", tc.chain, ns, egress, ok, tc.ns, tc.egress, tc.ok)
		}
	}
	// Every pod chain the compiler makes parses back to its namespace.
	l := tablelayout.DefaultLogDenied()
	for _, c := range compileChecked(t, logInput(&l)).Chains {
		if strings.HasPrefix(c.Name, "np_ing_") || strings.HasPrefix(c.Name, "np_egr_") {
			ns, egress, ok := DeniedChain(c.Name)
			if !ok || !strings.Contains(c.Comment, " of pod "+ns+"/") || egress != strings.HasPrefix(c.Comment, "egress") {
				t.Errorf("chain %s (%q): DeniedChain = %q, %v, %v", c.Name, c.Comment, ns, egress, ok)
			}
			last := c.Rules[len(c.Rules)-1]
			if want := map[bool]string{false: CommentIsolatedIngress, true: CommentIsolatedEgress}[egress]; last.Comment != want || !strings.HasPrefix(last.Rule, "counter ") {
				t.Errorf("chain %s ends in %q comment %q", c.Name, last.Rule, last.Comment)
			}
		}
	}
}

// Hostile names never reach the log prefix: it is one of two constants,
// so it stays short and quote-free whatever a tenant calls its objects.
func TestLogDeniedHostileNames(t *testing.T) {
	l := tablelayout.DefaultLogDenied()
	evil := `x" accept; log prefix "` + strings.Repeat("p", 200)
	in := Input{NodeName: "n1", LogDenied: &l,
		Namespaces: []*corev1.Namespace{annotated(apitest.Namespace(evil), "true")},
		Pods:       podtest.Set([]*corev1.Pod{apitest.Pod(evil, evil, "10.0.0.1")}),
		Policies:   npset.New([]*networkingv1.NetworkPolicy{netpol(evil, evil, metav1.LabelSelector{}, nil)}),
	}
	out := compileChecked(t, in)
	prefix := regexp.MustCompile(`prefix "([^"]*)"`)
	for _, c := range out.Chains {
		for _, r := range c.Rules {
			for _, m := range prefix.FindAllStringSubmatch(r.Rule, -1) {
				if m[1] != tablelayout.LogPrefixIngress && m[1] != tablelayout.LogPrefixEgress {
					t.Errorf("chain %s logs with prefix %q", c.Name, m[1])
				}
			}
		}
	}
}

func TestGoldenLogDenied(t *testing.T) {
	l := tablelayout.LogDenied{Group: 1600, Rate: 20, Burst: 50}
	in := logInput(&l)
	text := fmt.Sprintf("# log-denied group=%d rate=%d/second burst=%d; namespaces annotated %s: x=\"true\" y=\"True\"\n",
		l.Group, l.Rate, l.Burst, tablelayout.AnnotationLogDenied) + renderGolden(t, in, compileChecked(t, in))
	golden.Check(t, *update, filepath.Join("testdata", "log-denied.nft"), text)
}

// counters matches the values nft lists after "counter".
var counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// chainLines are the lines of each chain of an nft listing, trimmed; sets
// are left out (nft lays out elements otherwise than Render, and they are
// not what logging changes).
func chainLines(text string) map[string][]string {
	m := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "chain ") && strings.HasSuffix(line, "{"):
			cur = strings.Fields(line)[1]
		case line == "}":
			cur = ""
		case cur != "" && line != "":
			m[cur] = append(m[cur], line)
		}
	}
	return m
}

// The table with logging loads into the kernel, nft lists it as the
// engine renders it (counters aside, whose values nft prints), and nft -f
// of that listing in a fresh namespace gives a table a fresh engine finds
// nothing to change in: the log, limit and counter statements are nft's
// own bytecode (docs/design.md, principle 3).
func TestLogDeniedRoundTripsThroughNft(t *testing.T) {
	ctx := context.Background()
	for _, burst := range []uint32{50, 5} {
		t.Run(fmt.Sprintf("burst%d", burst), func(t *testing.T) {
			l := tablelayout.LogDenied{Group: 1600, Rate: 20, Burst: burst}
			out := Compile(logInput(&l))
			d := &engine.Desired{Chains: out.Chains, Sets: out.Sets}
			table := engine.Table{Name: "nftguard"}
			rendered, err := engine.Render(table, d)
			if err != nil {
				t.Fatal(err)
			}

			ns := testns.New(t, "logd")
			eng, err := engine.New(table, engine.WithNetNS(ns.Path))
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			if _, err := eng.Sync(ctx, d); err != nil {
				t.Fatalf("sync: %v", err)
			}
			listed := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
			// nft names priority 0 of a filter chain "filter" and prints
			// counter values; neither is what logging changes.
			norm := counters.ReplaceAllString(strings.ReplaceAll(listed, "priority filter;", "priority 0;"), "counter")
			if d := cmp.Diff(chainLines(rendered), chainLines(norm)); d != "" {
				t.Errorf("nft lists the chains otherwise than the engine renders them (-engine +nft):\n%s", d)
			}
			if !strings.Contains(listed, `log prefix "nftguard denied ingress" group 1600`) {
				t.Errorf("nft does not list the log statement:\n%s", listed)
			}

			ns2 := testns.New(t, "logd2")
			ns2.MustExec(t, listed, "nft", "-f", "-")
			eng2, err := engine.New(table, engine.WithNetNS(ns2.Path))
			if err != nil {
				t.Fatal(err)
			}
			defer eng2.Close()
			st, err := eng2.Sync(ctx, d)
			if err != nil {
				t.Fatalf("sync over nft's copy: %v", err)
			}
			if st.Messages != 0 {
				t.Errorf("nft -f of nft's listing is not the engine's table: a fresh engine sends %d messages\n%s",
					st.Messages, ns2.MustExec(t, "", "nft", "--debug=netlink", "list", "table", "inet", "nftguard"))
			}
			// And the engine's own table read back by a fresh engine.
			eng3, err := engine.New(table, engine.WithNetNS(ns.Path))
			if err != nil {
				t.Fatal(err)
			}
			defer eng3.Close()
			if st, err := eng3.Sync(ctx, d); err != nil || st.Messages != 0 {
				t.Errorf("a fresh engine over the engine's own table: %d messages, %v", st.Messages, err)
			}
		})
	}
}
