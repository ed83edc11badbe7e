package compose

import (
	"flag"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftcheck"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
)

var (
	renderCases = flag.Int("render.cases", 100, "random clusters TestRenderHostileInputLoadsAsOneTable renders and loads")
	renderTime  = flag.Duration("render.fuzztime", 0, "run TestRenderHostileInputLoadsAsOneTable for this long instead of -render.cases cases (also env FUZZTIME)")
	renderSeed  = flag.Int64("render.seed", 13, "first seed of TestRenderHostileInputLoadsAsOneTable")
)

// hostileString draws a string a tenant (or a hand-written manifest) could
// put into a name, a label or an annotation: valid names, nft's syntax
// characters, control bytes, any Unicode, invalid UTF-8, long runs.
func hostileString(r *rand.Rand) string {
	switch r.Intn(6) {
	case 0:
		return []string{"a", "web", "x.y-z", "0", "np_x", "ns1"}[r.Intn(6)]
	case 1:
		return `q"; }; }; flush ruleset; table inet nftguard { chain zz { #`
	case 2:
		return strings.Repeat("a", 200+r.Intn(200))
	}
	var b strings.Builder
	for n := 1 + r.Intn(24); n > 0; n-- {
		switch r.Intn(5) {
		case 0:
			const syntax = "\"{};#\n\r\t\\'$@ ,:/-_.*<>|&`"
			b.WriteByte(syntax[r.Intn(len(syntax))])
		case 1:
			b.WriteByte(byte(r.Intn(256))) // possibly invalid UTF-8
		case 2:
			b.WriteRune(rune(r.Intn(utf8.MaxRune + 1)))
		default:
			b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[r.Intn(36)])
		}
	}
	return b.String()
}

// hostileCluster is a random cluster of one node whose every free-form
// string may be hostile.
func hostileCluster(r *rand.Rand) Input {
	in := Input{NodeName: "n1",
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/64")}}
	str := func() string { return hostileString(r) }
	var nsNames []string
	for i := r.Intn(4) + 1; i > 0; i-- {
		n := str()
		nsNames = append(nsNames, n)
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{str(): str(), "team": str()}}})
	}
	pickNS := func() string { return nsNames[r.Intn(len(nsNames))] }
	for i := r.Intn(12); i > 0; i-- {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pickNS(), Name: str(), Labels: map[string]string{"app": []string{"a", "b", str()}[r.Intn(3)], str(): str()}}}
		p.Spec.NodeName = []string{"n1", "n1", "n2", str()}[r.Intn(4)]
		p.Status.Phase = corev1.PodRunning
		ips := []string{fmt.Sprintf("10.0.0.%d", r.Intn(20)), fmt.Sprintf("fd00::%x", r.Intn(20))}
		if r.Intn(8) == 0 {
			ips = append(ips, str())
		}
		for _, ip := range ips[:1+r.Intn(len(ips))] {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		p.Spec.Containers = []corev1.Container{{Name: str(), Ports: []corev1.ContainerPort{{Name: []string{"http", str()}[r.Intn(2)], ContainerPort: int32(1 + r.Intn(65535))}}}}
		in.Pods = podtest.Append(in.Pods, p)
	}
	for i := r.Intn(5); i > 0; i-- {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: pickNS(), Name: str()}}
		np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": []string{"a", "b", str()}[r.Intn(3)]}}
		if r.Intn(3) == 0 {
			np.Spec.PodSelector = metav1.LabelSelector{}
		}
		var peers []networkingv1.NetworkPolicyPeer
		for j := r.Intn(4); j > 0; j-- {
			switch r.Intn(4) {
			case 0:
				peers = append(peers, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{str(): str()}}})
			case 1:
				peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}})
			default:
				peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16",
					Except: []string{fmt.Sprintf("10.0.%d.0/24", r.Intn(4)), fmt.Sprintf("10.0.%d.0/24", r.Intn(4)), "10.0.0.0/20"}}})
			}
		}
		var ports []networkingv1.NetworkPolicyPort
		for j := r.Intn(3); j > 0; j-- {
			pt := intstr.FromInt32(int32(1 + r.Intn(65535)))
			if r.Intn(2) == 0 {
				pt = intstr.FromString([]string{"http", str()}[r.Intn(2)])
			}
			ports = append(ports, networkingv1.NetworkPolicyPort{Port: &pt})
		}
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		in.NetworkPolicies = npset.New(append(in.NetworkPolicies.All(), np))
	}
	annValues := func(valid ...string) string {
		if r.Intn(3) == 0 {
			return str()
		}
		return valid[r.Intn(len(valid))]
	}
	for i := r.Intn(4); i > 0; i-- {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: pickNS(), Name: str(), Annotations: map[string]string{
			"nftguard.io/egress":                   annValues("true"),
			"nftguard.io/egress-ipv6":              annValues("true", "false"),
			"nftguard.io/egress-destination-ports": annValues("tcp:1-100,tcp:50-200", "udp:53,udp:53", "tcp:443,sctp:9000-9010"),
			"nftguard.io/egress-denied-networks":   annValues("1.1.1.0/24,1.1.1.1,1.0.0.0/8", "2001:db8::/32,2001:db8::1"),
			str():                                  str(),
		}}}
		if r.Intn(2) == 0 {
			delete(s.Annotations, "nftguard.io/egress-denied-networks")
		}
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.Selector = map[string]string{"app": []string{"a", "b", str()}[r.Intn(3)]}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: []string{"192.0.2.1", "2001:db8::9", str()}[r.Intn(3)]}, {IP: "2001:db8::1"}}
		in.Services = append(in.Services, s)
	}
	return in
}

// checkScript reads a rendered script the way nft's scanner does (quoted
// strings have no escapes, '#' outside them comments out the rest of the
// line) and checks it is exactly one `table inet nftguard { ... }` whose
// chains, sets and rules are the ones d declares: nothing in a string can
// end the table, add a statement or another table.
func checkScript(script string, d *engine.Desired) error {
	const head = "table inet nftguard {\n"
	if !strings.HasPrefix(script, head) {
		return fmt.Errorf("does not start with %q", head)
	}
	depth, lines, decls, rules := 0, 0, 0, 0
	line := []byte{}
	inChain := false
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '"':
			j := strings.IndexByte(script[i+1:], '"')
			if j < 0 {
				return fmt.Errorf("unterminated string at byte %d", i)
			}
			if k := strings.IndexByte(script[i+1:i+1+j], '\n'); k >= 0 {
				return fmt.Errorf("string across lines at byte %d", i)
			}
			line = append(line, "STR"...)
			i += j + 1
			continue
		case c == '#':
			return fmt.Errorf("'#' outside a string at byte %d", i)
		case c == ';':
			if !strings.HasPrefix(strings.TrimSpace(string(line)), "type ") {
				return fmt.Errorf("';' outside a hook line at byte %d: %q", i, line)
			}
		case c == '{':
			depth++
			if depth == 2 {
				f := strings.Fields(string(line))
				if len(f) != 2 || (f[0] != "chain" && f[0] != "set" && f[0] != "map") {
					return fmt.Errorf("unexpected declaration %q", line)
				}
				decls++
				inChain = f[0] == "chain"
			}
		case c == '}':
			depth--
			if depth < 0 {
				return fmt.Errorf("unbalanced '}' at byte %d", i)
			}
			if depth == 0 && strings.TrimSpace(script[i+1:]) != "" {
				return fmt.Errorf("text after the table: %q", script[i+1:])
			}
		case c == '\n':
			l := strings.TrimSpace(string(line))
			if depth == 2 && inChain && l != "" && !strings.HasPrefix(l, "comment STR") && !strings.HasPrefix(l, "type ") && !strings.HasPrefix(l, "chain ") {
				rules++
			}
			lines++
			line = line[:0]
			continue
		}
		line = append(line, c)
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced braces")
	}
	wantRules := 0
	for _, c := range d.Chains {
		wantRules += len(c.Rules)
	}
	if decls != len(d.Chains)+len(d.Sets) || rules != wantRules {
		return fmt.Errorf("%d declarations and %d rules, the table has %d and %d", decls, rules, len(d.Chains)+len(d.Sets), wantRules)
	}
	return nil
}

// TestRenderHostileInputLoadsAsOneTable compiles random clusters whose
// names, labels and annotations are drawn from all of Unicode and nft's
// syntax, renders each with engine.Render, and checks the script reads as
// exactly our one table (checkScript) and loads with nft in a throw-away
// namespace, next to a foreign table that must stay as it was.
func TestRenderHostileInputLoadsAsOneTable(t *testing.T) {
	deadline := time.Time{}
	if d := *renderTime; d > 0 {
		deadline = time.Now().Add(d)
	} else if d, err := time.ParseDuration(os.Getenv("FUZZTIME")); err == nil && d > 0 {
		deadline = time.Now().Add(d)
	}
	ns := testns.New(t, "render")
	const foreign = "table ip foreign {\n\tchain keep {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tip saddr 192.0.2.1 counter packets 0 bytes 0 accept comment \"not ours\"\n\t}\n}\n"
	ns.MustExec(t, foreign, "nft", "-f", "-")
	foreignBefore := ns.MustExec(t, "", "nft", "list", "ruleset")

	type rendered struct {
		seed   int64
		script string
	}
	var batch []rendered
	load := func() {
		t.Helper()
		if len(batch) == 0 {
			return
		}
		// One nft run loads every script of the batch, each followed by
		// deleting the table: a script nft refuses fails the whole run,
		// and is then found by checking them one by one.
		var b strings.Builder
		for _, r := range batch {
			b.WriteString(r.script)
			b.WriteString("delete table inet nftguard\n")
		}
		if _, err := ns.Exec(b.String(), "nft", "-f", "-"); err != nil {
			for _, r := range batch {
				if _, err := ns.Exec(r.script, "nft", "-c", "-f", "-"); err != nil {
					t.Fatalf("seed %d: nft refuses the rendered table: %v\n%s", r.seed, err, r.script)
				}
			}
			t.Fatalf("nft refuses a batch of %d rendered tables, each alone loads: %v", len(batch), err)
		}
		if got := ns.MustExec(t, "", "nft", "list", "ruleset"); got != foreignBefore {
			t.Fatalf("seeds %d..%d: the ruleset changed beyond our table:\nbefore:\n%s\nafter:\n%s", batch[0].seed, batch[len(batch)-1].seed, foreignBefore, got)
		}
		batch = batch[:0]
	}
	n := 0
	for seed := *renderSeed; ; seed++ {
		if deadline.IsZero() && n >= *renderCases || !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		n++
		in := hostileCluster(rand.New(rand.NewSource(seed)))
		res := Build(in)
		for _, err := range nftcheck.Check(res.Desired) {
			t.Errorf("seed %d: %v", seed, err)
		}
		script, err := engine.Render(Table(), res.Desired)
		if err != nil {
			t.Fatalf("seed %d: render: %v", seed, err)
		}
		if err := checkScript(script, res.Desired); err != nil {
			t.Fatalf("seed %d: rendered script: %v\n%s", seed, err, script)
		}
		batch = append(batch, rendered{seed, script})
		if len(batch) == 50 {
			load()
		}
	}
	load()
	t.Logf("%d random clusters rendered and loaded", n)
}
