package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
)

var (
	manifestCases = flag.Int("manifest.cases", 200, "TestManifestCorruption: number of random corrupted manifests (a long run: 5000, with -timeout 0)")
	manifestSeed  = flag.Uint64("manifest.seed", 0, "TestManifestCorruption: random seed (0: from the clock; the seed is logged)")
)

// inputLab is the manifest-input tests' setting: node w1 with pods
// shop/cart, pay/ledger and web/front, and the policy pay/ledger-from-shop.
type inputLab struct {
	t   *testing.T
	lab *netlab.Lab
	dir string
}

func newInputLab(t *testing.T) *inputLab {
	lab := netlab.New(t, netlab.Spec{
		Nodes: []netlab.NodeSpec{{Name: "w1", Pods: []string{"shop/cart", "pay/ledger", "web/front"}}},
		Ports: []netlab.Port{tcp80, tcp81},
	})
	return &inputLab{t: t, lab: lab, dir: t.TempDir()}
}

// objects are the lab's namespaces and pods as YAML documents.
func (l *inputLab) objects() []string {
	var docs []string
	for _, ns := range []string{"shop", "pay", "web"} {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {team: %s}\n", ns, ns))
	}
	for _, p := range l.lab.Pods {
		ns, name, _ := strings.Cut(p.Name, "/")
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {app: %s}\n"+
			"spec:\n  nodeName: w1\n  containers: [{name: c, image: i}]\nstatus:\n  phase: Running\n  podIPs: [{ip: %s}, {ip: %s}]\n",
			name, ns, name, p.IPv4, p.IPv6))
	}
	return docs
}

// ledgerPolicy is pay/ledger-from-shop: ingress to ledger only from the
// namespaces namespaceSelector selects, on TCP port.
func ledgerPolicy(namespaceSelector string, port int) string {
	return fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: ledger-from-shop\n  namespace: pay\n"+
		"spec:\n  podSelector: {matchLabels: {app: ledger}}\n  policyTypes: [Ingress]\n"+
		"  ingress:\n  - from: [{namespaceSelector: %s}]\n    ports: [{protocol: TCP, port: %d}]\n", namespaceSelector, port)
}

func (l *inputLab) write(name, content string) string {
	l.t.Helper()
	p := filepath.Join(l.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return p
}

// nftguard runs the built binary and returns its exit code.
func nftguardRun(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(nftguardBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run nftguard %v: %v", args, err)
	}
	if strings.Contains(errb.String(), "panic:") || strings.Contains(errb.String(), "goroutine ") {
		t.Fatalf("nftguard %v panicked:\n%s", args, errb.String())
	}
	return out.String(), errb.String(), code
}

// ruleset is everything nft sees in the node's namespace, with handles: a
// table, chain, rule, set or element rewritten with equal content still
// shows up as a new handle.
func (l *inputLab) ruleset() string {
	l.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", l.lab.Node("w1").NetNS, "nft", "-a", "list", "ruleset").CombinedOutput()
	if err != nil {
		l.t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	return string(out)
}

// check probes the matrix: every flow passes except those into pay/ledger,
// which pass only where intoLedger says so.
func (l *inputLab) check(intoLedger func(from string, p netlab.Port) bool) {
	l.t.Helper()
	ports := []netlab.Port{tcp80, tcp81}
	exp := l.lab.NewExpected(netlab.IPv4, true, ports...)
	for _, from := range exp.From {
		for _, p := range ports {
			exp.Expect(from, "pay/ledger", from == "pay/ledger" || intoLedger(from, p), p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := l.lab.Reachability(ctx, netlab.IPv4, ports...)
	if err != nil {
		l.t.Fatalf("probe: %v", err)
	}
	if diff := netlab.Compare(exp, got); diff != "" {
		l.t.Fatalf("connectivity differs from the expectation:\n%s", diff)
	}
}

// TestApplyUnreadableInputChangesNothing: input that cannot be read
// completely, input without objects and a node name that matches nothing exit 2, and the
// node's ruleset stays byte-identical, handles included; the policy stays
// enforced.
func TestApplyUnreadableInputChangesNothing(t *testing.T) {
	l := newInputLab(t)
	node := l.lab.Node("w1").Path
	base := strings.Join(append(l.objects(), ledgerPolicy("{matchLabels: {team: shop}}", 80)), "---\n")
	if out, errOut, code := nftguardRun(t, "", "apply", "-f", l.write("base.yaml", base), "--netns", node, "--node-name", "w1"); code != 0 {
		t.Fatalf("apply of the base manifest: exit %d\n%s\n%s", code, out, errOut)
	}
	onlyShopOn80 := func(from string, p netlab.Port) bool { return nsOf(from) == "shop" && p == tcp80 }
	l.check(onlyShopOn80)
	before := l.ruleset()
	if !strings.Contains(before, "table inet nftguard") {
		t.Fatalf("no table after the base apply:\n%s", before)
	}

	// A later document that would open ledger, behind the broken part.
	opener := ledgerPolicy("{}", 81)
	for _, tc := range []struct {
		name    string
		content string // written to a file, or given on stdin with stdin
		stdin   bool
		args    []string
		want    string // in stderr
	}{
		{name: "binary garbage", content: "\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\x00\x00garbage\x00\x01", want: "not valid YAML"},
		{name: "empty file", content: "", want: "no objects in"},
		{name: "empty stdin", stdin: true, want: "no objects in standard input"},
		{name: "comments only", content: "# nothing here\n---\n", want: "no objects in"},
		{name: "YAML syntax error in the middle", content: strings.Join(append(l.objects()[:2], "kind: Pod\n  metadata: [\n", opener), "---\n"),
			want: "not valid YAML"},
		{name: "JSON cut short", content: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}`, want: "not valid JSON"},
		{name: "unknown field", content: strings.Join(append(l.objects(), strings.Replace(opener, "  ingress:", "  ingresss:", 1)), "---\n"),
			want: "spec.ingresss: unknown field"},
		{name: "duplicate field", content: strings.Join(append(l.objects(), strings.Replace(opener, "  namespace: pay\n", "  namespace: pay\n  namespace: shop\n", 1)), "---\n"),
			want: "metadata.namespace: duplicate field"},
		{name: "NetworkPolicy in an old apiVersion", content: strings.Join(append(l.objects(), strings.Replace(opener, "networking.k8s.io/v1", "extensions/v1beta1", 1)), "---\n"),
			want: "nftguard reads NetworkPolicy only as networking.k8s.io/v1"},
		{name: "wrong --node-name", content: strings.Join(append(l.objects(), opener), "---\n"), args: []string{"--node-name", "w1.example.com"},
			want: `node "w1.example.com" (--node-name) has no pods and no Node object in the input; the input mentions w1`},
		{name: "host name as the default node name", content: strings.Join(append(l.objects(), opener), "---\n"), args: []string{},
			want: "(the host name; set --node-name) has no pods in the input; the input mentions w1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"apply", "--netns", node}
			if tc.args == nil {
				args = append(args, "--node-name", "w1")
			}
			args = append(args, tc.args...)
			stdin := ""
			if tc.stdin {
				args = append(args, "-f", "-")
				stdin = tc.content
			} else {
				args = append(args, "-f", l.write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.content))
			}
			out, errOut, code := nftguardRun(t, stdin, args...)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s\n%s", code, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, errOut)
			}
			if after := l.ruleset(); after != before {
				t.Errorf("the ruleset changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	l.check(onlyShopOn80)
}

// TestApplyReadableRestIsEnforced, with a hostile name: a policy given
// twice is the later version only (not a merge of both), a policy whose name the API server would refuse is
// skipped by name (kept fail-closed: it selects no pod here, and its name
// reaches no rule), and the rest is programmed, equal to render of the same
// input and enforced with real packets.
func TestApplyReadableRestIsEnforced(t *testing.T) {
	l := newInputLab(t)
	node := l.lab.Node("w1").Path
	hostile := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n" +
		"  name: 'q\"; }; }; flush ruleset; table inet nftguard { chain zz { #'\n  namespace: shop\n" +
		"spec: {podSelector: {matchLabels: {app: nobody}}, policyTypes: [Ingress]}\n"
	docs := append(l.objects(), ledgerPolicy("{matchLabels: {team: shop}}", 80), hostile, ledgerPolicy("{}", 81))
	path := l.write("cluster.yaml", strings.Join(docs, "---\n"))
	first, hostileDoc, second := len(docs)-2, len(docs)-1, len(docs)

	out, errOut, code := nftguardRun(t, "", "apply", "-f", path, "--netns", node, "--node-name", "w1")
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1 (one object skipped)\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		fmt.Sprintf("warning: %s:%d: NetworkPolicy pay/ledger-from-shop: given again: replaces the one read at %s:%d", path, second, path, first),
		fmt.Sprintf(`skipped: %s:%d: NetworkPolicy shop/"q\"; }; }; flush ruleset; table inet nftguard { chain zz { #": metadata.name:`, path, hostileDoc),
		"1 invalid object(s) skipped",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	rendered, errOut, code := nftguardRun(t, "", "render", "-f", path, "--node-name", "w1")
	if code != 1 {
		t.Fatalf("render: exit %d, want 1\n%s", code, errOut)
	}
	if strings.Contains(rendered, "flush ruleset") || strings.Contains(rendered, "zz") {
		t.Fatalf("render carries the hostile name:\n%s", rendered)
	}
	scratch := testns.New(t, "minput")
	loadRendered(t, scratch, rendered)
	// apply also guards each pod on its interface, which render, reading
	// no interface, cannot: doctor -f compiles the input as apply does
	// there and compares kernel objects exactly.
	out, errOut, code = nftguardRun(t, "", "doctor", "-f", path, "--netns", node, "--node-name", "w1", "--probe=false")
	if code != 0 || !strings.Contains(out, "in sync with the manifests") {
		t.Fatalf("the table differs from a compile of the same input: doctor exit %d\n%s\n%s", code, out, errOut)
	}
	// Only the later version: port 81 from every namespace, port 80 from none.
	l.check(func(_ string, p netlab.Port) bool { return p == tcp81 })
}

// loadRendered loads render output into the scratch namespace (replacing
// what the previous call loaded) and lists it back, so that both sides of
// a comparison are printed by the same nft.
func loadRendered(t *testing.T, scratch *testns.NS, rendered string) string {
	t.Helper()
	if _, err := scratch.Exec("flush ruleset\n"+rendered, "nft", "-f", "-"); err != nil {
		t.Fatalf("nft -f of render output: %v\n%s", err, rendered)
	}
	return normalizeNft(scratch.MustExec(t, "", "nft", "list", "table", "inet", "nftguard"))
}

var handleComment = regexp.MustCompile(` # handle \d+`)

// TestManifestCorruption applies random manifests with random corruptions
// (truncation, a duplicated document, flipped bytes, a lost line) to one
// node, one after another. Each apply either exits 2 and leaves the ruleset
// byte-identical, or programs exactly what render prints for the same
// input (exit 0 or 1, the same as render's): never a panic, never a partial
// table.
func TestManifestCorruption(t *testing.T) {
	seed := *manifestSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -manifest.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	node := testns.New(t, "mcorrupt")
	scratch := testns.New(t, "mrender")
	dir := t.TempDir()
	// The ruleset with handles, listed once per case: after an apply that
	// changed it, it is the next case's "before".
	listRuleset := func() string { return node.MustExec(t, "", "nft", "-a", "list", "ruleset") }
	before := listRuleset()
	codes := map[int]int{}
	deadline, hasDeadline := t.Deadline()
	ran := 0
	for i := range *manifestCases {
		if hasDeadline && time.Until(deadline) < 30*time.Second {
			t.Logf("stopping after %d cases: the test's deadline is near", ran)
			break
		}
		ran++
		docs, json := randomManifest(rng)
		content, how := corrupt(rng, docs, json)
		path := filepath.Join(dir, fmt.Sprintf("case-%d.yaml", i))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		flags := []string{"-f", path, "--node-name", "w1", "--cluster-cidr", "10.77.0.0/16"}
		rendered, renderErr, renderCode := nftguardRun(t, "", append([]string{"render"}, flags...)...)
		_, applyErr, code := nftguardRun(t, "", append([]string{"apply", "--netns", node.Path}, flags...)...)
		codes[code]++
		fail := func(format string, args ...any) {
			t.Fatalf("case %d (%s): %s\napply stderr:\n%s\nrender stderr:\n%s\ninput:\n%s", i, how, fmt.Sprintf(format, args...), applyErr, renderErr, content)
		}
		if code != renderCode {
			fail("apply exit %d, render exit %d", code, renderCode)
		}
		after := listRuleset()
		switch code {
		case 2:
			if after != before {
				fail("exit 2 changed the ruleset:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		case 0, 1:
			// The namespace holds only our table: its listing without
			// handles is the table's.
			if got, want := normalizeNft(handleComment.ReplaceAllString(after, "")), loadRendered(t, scratch, rendered); got != want {
				fail("the table differs from render:\ngot:\n%s\nwant:\n%s", got, want)
			}
		default:
			fail("exit %d", code)
		}
		before = after
	}
	t.Logf("%d cases: exit codes %v", ran, codes)
	if codes[2] == 0 || codes[0]+codes[1] == 0 {
		t.Errorf("the corruptions should give both refused and applied cases: %v", codes)
	}
}

// randomManifest makes a valid cluster: namespaces, pods on w1 and w2, and
// NetworkPolicies, as YAML documents or JSON objects (one per entry).
func randomManifest(rng *rand.Rand) (docs []string, json bool) {
	json = rng.IntN(4) == 0
	nss := []string{"a", "b", "c"}[:1+rng.IntN(3)]
	obj := func(yaml, js string) {
		if json {
			docs = append(docs, js+"\n")
		} else {
			docs = append(docs, yaml)
		}
	}
	for _, ns := range nss {
		obj(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {team: %s}\n", ns, ns),
			fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q,"labels":{"team":%q}}}`, ns, ns))
	}
	pods := 1 + rng.IntN(6)
	for i := range pods {
		ns, node, app := nss[rng.IntN(len(nss))], "w1", []string{"web", "db"}[rng.IntN(2)]
		if i > 0 && rng.IntN(3) == 0 {
			node = "w2"
		}
		ip := fmt.Sprintf("10.77.%d.%d", rng.IntN(4), 2+i)
		obj(fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p%d\n  namespace: %s\n  labels: {app: %s}\n"+
			"spec:\n  nodeName: %s\n  containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]\nstatus:\n  podIPs: [{ip: %s}]\n", i, ns, app, node, ip),
			fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p%d","namespace":%q,"labels":{"app":%q}},"spec":{"nodeName":%q,"containers":[{"name":"c","image":"i","ports":[{"name":"http","containerPort":8080}]}]},"status":{"podIPs":[{"ip":%q}]}}`,
				i, ns, app, node, ip))
	}
	for i := range rng.IntN(5) {
		ns := nss[rng.IntN(len(nss))]
		app := []string{"web", "db"}[rng.IntN(2)]
		var port string
		switch rng.IntN(3) {
		case 0:
			port = fmt.Sprintf("%d", 1+rng.IntN(1000))
		case 1:
			port = "http"
		}
		peer := []string{
			fmt.Sprintf(`{"namespaceSelector":{"matchLabels":{"team":%q}}}`, nss[rng.IntN(len(nss))]),
			`{"podSelector":{"matchLabels":{"app":"web"}}}`,
			fmt.Sprintf(`{"ipBlock":{"cidr":"10.%d.0.0/16","except":["10.%d.1.0/24"]}}`, 70+rng.IntN(10), 70+rng.IntN(10)),
		}[rng.IntN(3)]
		rule := `{"from":[` + peer + `]`
		if port != "" {
			if port == "http" {
				port = `"http"`
			}
			rule += `,"ports":[{"protocol":"TCP","port":` + port + `}]`
		}
		rule += "}"
		spec := fmt.Sprintf(`{"podSelector":{"matchLabels":{"app":%q}},"policyTypes":["Ingress"],"ingress":[%s]}`, app, rule)
		// JSON is YAML: the spec is written as a flow mapping in both.
		obj(fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: np%d\n  namespace: %s\nspec: %s\n", i, ns, spec),
			fmt.Sprintf(`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"np%d","namespace":%q},"spec":%s}`, i, ns, spec))
	}
	return docs, json
}

// corrupt joins the documents and damages the result in one random way.
func corrupt(rng *rand.Rand, docs []string, json bool) (string, string) {
	sep := "---\n"
	if json {
		sep = ""
	}
	switch rng.IntN(6) {
	case 0:
		return strings.Join(docs, sep), "intact"
	case 1:
		i := rng.IntN(len(docs))
		at := rng.IntN(len(docs) + 1)
		dup := append(append(append([]string{}, docs[:at]...), docs[i]), docs[at:]...)
		return strings.Join(dup, sep), fmt.Sprintf("document %d repeated at %d", i+1, at+1)
	case 2:
		s := strings.Join(docs, sep)
		n := rng.IntN(len(s))
		return s[:n], fmt.Sprintf("truncated to %d of %d bytes", n, len(s))
	case 3:
		b := []byte(strings.Join(docs, sep))
		var at []int
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b))
			b[i] ^= byte(1 + rng.IntN(255))
			at = append(at, i)
		}
		return string(b), fmt.Sprintf("bytes flipped at %v", at)
	case 4:
		lines := strings.SplitAfter(strings.Join(docs, sep), "\n")
		i := rng.IntN(len(lines))
		return strings.Join(append(lines[:i:i], lines[i+1:]...), ""), fmt.Sprintf("line %d lost", i+1)
	default:
		b := []byte(strings.Join(docs, sep))
		i := rng.IntN(len(b))
		b[i] = "\x00:[{\"'-#\n"[rng.IntN(9)]
		return string(b), fmt.Sprintf("syntax character at %d", i)
	}
}
