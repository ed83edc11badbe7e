package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/problem"
)

const (
	ns     = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"
	pod    = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: cart\n  namespace: shop\nspec:\n  nodeName: w1\n"
	policy = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: deny\n  namespace: shop\nspec:\n  podSelector: {}\n"
	// cnp is an Admin-tier ClusterNetworkPolicy in v1beta1; cnpAlpha the
	// same object in v1alpha2.
	cnp = "apiVersion: policy.networking.k8s.io/v1beta1\nkind: ClusterNetworkPolicy\nmetadata:\n  name: deny-metadata\nspec:\n" +
		"  tier: Admin\n  priority: 10\n  subject:\n    namespaces: {}\n  egress:\n  - name: no-imds\n    action: Deny\n" +
		"    to:\n    - networks: [169.254.169.254/32, \"fd00:ec2::254/128\"]\n    protocols:\n    - tcp: {destinationPort: {number: 80}}\n" +
		"    - udp: {destinationPort: {range: {start: 1000, end: 2000}}}\n  ingress:\n  - action: Pass\n    from:\n    - pods:\n" +
		"        namespaceSelector: {matchLabels: {team: ops}}\n        podSelector: {}\n"
	cnpAlpha = "apiVersion: policy.networking.k8s.io/v1alpha2\n" + "kind: ClusterNetworkPolicy\nmetadata:\n  name: deny-metadata\nspec:\n" +
		"  tier: Admin\n  priority: 10\n  subject:\n    namespaces: {}\n  egress:\n  - name: no-imds\n    action: Deny\n" +
		"    to:\n    - networks: [169.254.169.254/32, \"fd00:ec2::254/128\"]\n    protocols:\n    - tcp: {destinationPort: {number: 80}}\n" +
		"    - udp: {destinationPort: {range: {start: 1000, end: 2000}}}\n  ingress:\n  - action: Pass\n    from:\n    - pods:\n" +
		"        namespaceSelector: {matchLabels: {team: ops}}\n        podSelector: {}\n"
)

// counts is a compact view of what Load returned: one letter per object
// (N namespace, O node, P pod, X network policy, C cluster network policy,
// S service, E endpoint slice), in the order of the Objects fields.
func counts(o *Objects) string {
	var b strings.Builder
	for _, c := range []struct {
		n int
		s string
	}{{len(o.Namespaces), "N"}, {len(o.Nodes), "O"}, {len(o.Pods), "P"}, {len(o.NetworkPolicies), "X"}, {len(o.ClusterNetworkPolicies), "C"}, {len(o.Services), "S"}, {len(o.EndpointSlices), "E"}} {
		b.WriteString(strings.Repeat(c.s, c.n))
	}
	return b.String()
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // relative path -> content
		// want is counts() of the objects, or "" when Load must fail.
		want string
		// unreadable are substrings of the InputError's problems (each must
		// appear in one of them), skipped of the skipped problems, warn of
		// the warnings.
		unreadable, skipped, warn []string
	}{
		{name: "multi-document YAML", files: map[string]string{"a.yaml": ns + "---\n" + pod + "---\n" + policy}, want: "NPX"},
		{name: "empty documents and comments", files: map[string]string{"a.yaml": "---\n# nothing\n---\n" + ns + "---\n---\n"}, want: "N"},
		{name: "directory with YAML and JSON", files: map[string]string{
			"a/x.yml":     ns,
			"a/b/y.json":  `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"shop"}} {"apiVersion":"v1","kind":"Node","metadata":{"name":"w1"}}`,
			"a/notes.txt": "not read",
		}, want: "NOP"},
		{name: "v1 List and typed list", files: map[string]string{
			"l.json": `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}},{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"y"}}]}`,
			"m.yaml": "apiVersion: v1\nkind: PodList\nmetadata: {}\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, namespace: x}\n",
		}, want: "NNP"},
		{name: "kinds nftguard does not read", files: map[string]string{"a.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {whatever: 1}\n---\n" +
			"apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: s}\nspec: {template: {}}\n---\n" + ns}, want: "N"},
		{name: "empty file", files: map[string]string{"a.yaml": ""}, want: "-"},

		// ClusterNetworkPolicy: both served versions, cluster-scoped.
		{name: "ClusterNetworkPolicy v1beta1", files: map[string]string{"a.yaml": ns + "---\n" + cnp}, want: "NC"},
		{name: "ClusterNetworkPolicy v1alpha2", files: map[string]string{"a.yaml": cnpAlpha}, want: "C"},
		{name: "ClusterNetworkPolicy in JSON and in a typed list of either version", files: map[string]string{
			"a.json": `{"apiVersion":"policy.networking.k8s.io/v1alpha2","kind":"ClusterNetworkPolicy","metadata":{"name":"j"},"spec":{"tier":"Baseline","priority":0,"subject":{"namespaces":{}}}}`,
			"l.yaml": "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicyList\nmetadata: {}\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(cnpAlpha, "\n"), "\n", "\n  ") + "\n",
			"m.yaml": "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(strings.Replace(cnp, "deny-metadata", "other", 1), "\n"), "\n", "\n  ") + "\n",
		}, want: "CCC"},
		{name: "ClusterNetworkPolicy in both versions is one object", files: map[string]string{"a.yaml": cnpAlpha + "---\n" + cnp},
			want: "C", warn: []string{"a.yaml:2: ClusterNetworkPolicy deny-metadata: given again: replaces the one read at a.yaml:1"}},
		{name: "ClusterNetworkPolicy of another group is not read", files: map[string]string{"a.yaml": strings.Replace(cnp, "policy.networking.k8s.io/v1beta1", "policy.example.com/v1", 1)},
			want: "-"},
		{name: "ClusterNetworkPolicy namespace is dropped (cluster-scoped)", files: map[string]string{"a.yaml": strings.Replace(cnp, "  name: deny-metadata\n", "  name: deny-metadata\n  namespace: shop\n", 1) + "---\n" + cnpAlpha},
			want: "C", warn: []string{"ClusterNetworkPolicy deny-metadata: given again"}},
		{name: "ClusterNetworkPolicy v1alpha1 is not read", files: map[string]string{"a.yaml": ns + "---\n" + strings.Replace(cnp, "v1beta1", "v1alpha1", 1)},
			unreadable: []string{`a.yaml:2: ClusterNetworkPolicy: apiVersion="policy.networking.k8s.io/v1alpha1": nftguard reads ClusterNetworkPolicy only as policy.networking.k8s.io/v1beta1 or policy.networking.k8s.io/v1alpha2`}},
		{name: "ClusterNetworkPolicy v1 is not read", files: map[string]string{"a.yaml": strings.Replace(cnp, "v1beta1", "v1", 1)},
			unreadable: []string{`nftguard reads ClusterNetworkPolicy only as`}},
		{name: "ClusterNetworkPolicyList v1alpha1 is not read either", files: map[string]string{"a.yaml": "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: ClusterNetworkPolicyList\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(strings.Replace(cnp, "v1beta1", "v1alpha1", 1), "\n"), "\n", "\n  ") + "\n"},
			unreadable: []string{`a.yaml:1: ClusterNetworkPolicyList: apiVersion="policy.networking.k8s.io/v1alpha1": nftguard reads ClusterNetworkPolicy only as`}},
		{name: "NetworkPolicyList of an old version is refused like its items", files: map[string]string{"a.yaml": "apiVersion: extensions/v1beta1\nkind: NetworkPolicyList\nitems: []\n"},
			unreadable: []string{`nftguard reads NetworkPolicy only as networking.k8s.io/v1`}},
		{name: "a List of another group's kind of the same name is not read", files: map[string]string{"a.yaml": "apiVersion: serving.knative.dev/v1\nkind: ServiceList\nitems: [{}]\n---\n" + ns},
			want: "N"},
		{name: "ClusterNetworkPolicy unknown field, v1beta1", files: map[string]string{"a.yaml": strings.Replace(cnp, "  tier: Admin\n", "  tier: Admin\n  teir: Admin\n", 1)},
			unreadable: []string{`a.yaml:1: ClusterNetworkPolicy: spec.teir: unknown field`}},
		{name: "ClusterNetworkPolicy unknown field, v1alpha2", files: map[string]string{"a.yaml": strings.Replace(cnpAlpha, "action: Deny", "action: Deny\n    ports: [80]", 1)},
			unreadable: []string{`a.yaml:1: ClusterNetworkPolicy: spec.egress[0].ports: unknown field`}},
		{name: "ClusterNetworkPolicy field names are case-sensitive", files: map[string]string{"a.yaml": strings.Replace(cnpAlpha, "priority:", "Priority:", 1)},
			unreadable: []string{`spec.Priority: unknown field`}},
		{name: "ClusterNetworkPolicy wrong type", files: map[string]string{"a.yaml": strings.Replace(cnp, "priority: 10", "priority: high", 1)},
			unreadable: []string{`a.yaml:1: ClusterNetworkPolicy: `}},
		{name: "ClusterNetworkPolicy duplicate field", files: map[string]string{"a.yaml": strings.Replace(cnpAlpha, "  priority: 10\n", "  priority: 10\n  priority: 20\n", 1)},
			unreadable: []string{`a.yaml:1: spec.priority: duplicate field`}},
		{name: "ClusterNetworkPolicy hostile name", files: map[string]string{"a.yaml": ns + "---\n" + strings.Replace(cnp, "name: deny-metadata", `name: "x\"; }; flush ruleset; #\nskipped: y"`, 1)},
			want: "N", skipped: []string{`a.yaml:2: ClusterNetworkPolicy "x\"; }; flush ruleset; #\nskipped: y": metadata.name: a lowercase RFC 1123 subdomain`}},
		{name: "ClusterNetworkPolicy names are DNS subdomains, not labels", files: map[string]string{"a.yaml": strings.Replace(cnpAlpha, "deny-metadata", "admin.deny-metadata", 1) + "---\n" +
			strings.Replace(cnp, "deny-metadata", "Deny", 1) + "---\n" + strings.Replace(cnp, "deny-metadata", strings.Repeat("a", 254), 1)},
			want: "C", skipped: []string{`ClusterNetworkPolicy "Deny": metadata.name: a lowercase RFC 1123 subdomain`, "must be no more than 253 characters"}},

		// ipBlocks the API server refuses on create since Kubernetes 1.36
		// (and served from before): reported, each value named, and the
		// policy kept in its fail-closed form (no rules); what cannot be
		// read at all is the compiler's to report.
		{name: "NetworkPolicy ipBlocks the API server refuses on create", files: map[string]string{"a.yaml": ns + "---\n" +
			strings.Replace(policy, "  podSelector: {}\n", "  podSelector: {}\n  ingress:\n  - from:\n    - ipBlock: {cidr: \"::ffff:10.77.1.0/120\"}\n"+
				"  egress:\n  - to:\n    - ipBlock: {cidr: 10.77.1.10/16, except: [010.77.1.0/24, 10.77.2.0/24, nope]}\n", 1) + "---\n" +
			strings.Replace(policy, "name: deny", "name: fine", 1) + "---\n" +
			strings.Replace(strings.Replace(policy, "name: deny", "name: unreadable", 1), "  podSelector: {}\n", "  podSelector: {}\n  egress:\n  - to:\n    - ipBlock: {cidr: nope}\n", 1)},
			want: "NXXX", skipped: []string{
				`a.yaml:2: NetworkPolicy shop/deny: spec.ingress[0].from[0].ipBlock.cidr="::ffff:10.77.1.0/120": must not have an IPv4-mapped IPv6 address (the API server refuses it when a policy is created)`,
				`a.yaml:2: NetworkPolicy shop/deny: spec.egress[0].to[0].ipBlock.cidr="10.77.1.10/16": must not have bits set beyond the prefix length`,
				`a.yaml:2: NetworkPolicy shop/deny: spec.egress[0].to[0].ipBlock.except[0]="010.77.1.0/24": must not have leading 0s`}},

		// Label selectors with values the API server refuses on create
		// since Kubernetes 1.27 (and serves from before): a NetworkPolicy
		// is reported, each value named, and kept fail-closed; a ClusterNetworkPolicy, whose schema
		// never checks them, is read (the value selects no pod).
		{name: "NetworkPolicy selector values the API server refuses on create", files: map[string]string{"a.yaml": ns + "---\n" +
			strings.Replace(policy, "  podSelector: {}\n", "  podSelector: {matchExpressions: [{key: app, operator: In, values: [web, \"no value!\"]}]}\n  ingress:\n  - from:\n"+
				"    - namespaceSelector: {matchExpressions: [{key: team, operator: NotIn, values: [\"a b\"]}]}\n", 1) + "---\n" +
			strings.Replace(cnp, "    namespaces: {}\n", "    namespaces: {matchExpressions: [{key: team, operator: In, values: [ops, \"no value!\"]}]}\n", 1)},
			want: "NXC", skipped: []string{
				`a.yaml:2: NetworkPolicy shop/deny: spec.podSelector.matchExpressions[0].values[1]="no value!": a valid label must be`,
				`a.yaml:2: NetworkPolicy shop/deny: spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values[0]="a b": a valid label must be`}},

		// Unreadable input: nothing is returned.
		{name: "YAML syntax error in the middle", files: map[string]string{"a.yaml": ns + "---\nkind: Pod\n  bad: [\n---\n" + policy + "---\nkind: [\n"},
			unreadable: []string{"a.yaml:2: not valid YAML", "a.yaml:4: not valid YAML"}},
		{name: "binary garbage", files: map[string]string{"a.yaml": "\x00\x01\xff\xfe\x89PNG\r\n\x1a\n"}, unreadable: []string{"a.yaml:1: not valid YAML"}},
		{name: "plain text", files: map[string]string{"a.yaml": "hello world\n"}, unreadable: []string{"a.yaml:1: not a Kubernetes object"}},
		{name: "a sequence", files: map[string]string{"a.yaml": "- a\n- b\n"}, unreadable: []string{"not a Kubernetes object"}},
		{name: "JSON syntax error", files: map[string]string{"a.json": `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}} {"apiVersion":`}, unreadable: []string{"a.json:2: not valid JSON"}},
		{name: "kind missing", files: map[string]string{"a.yaml": "apiVersion: v1\nmetadata: {name: x}\n"}, unreadable: []string{"apiVersion and kind are required"}},
		{name: "kind is case-sensitive", files: map[string]string{"a.yaml": "apiVersion: v1\nKind: Namespace\nmetadata: {name: x}\n"}, unreadable: []string{"apiVersion and kind are required"}},
		{name: "unknown field", files: map[string]string{"a.yaml": strings.Replace(policy, "podSelector: {}", "podSelector: {}\n  ingresss: []", 1)},
			unreadable: []string{`a.yaml:1: NetworkPolicy: spec.ingresss: unknown field`}},
		{name: "unknown field in a List item", files: map[string]string{"a.json": `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x","lables":{}}}]}`},
			unreadable: []string{`a.json:1[0]: Namespace: metadata.lables: unknown field`}},
		{name: "duplicate field in YAML", files: map[string]string{"a.yaml": strings.Replace(policy, "  name: deny\n", "  name: deny\n  name: allow\n", 1)},
			unreadable: []string{"a.yaml:1: metadata.name: duplicate field"}},
		{name: "duplicate field nested in YAML", files: map[string]string{"a.yaml": policy + "  ingress:\n  - from:\n    - podSelector: {}\n      podSelector: {}\n"},
			unreadable: []string{"spec.ingress[0].from[0].podSelector: duplicate field"}},
		{name: "duplicate field in JSON", files: map[string]string{"a.json": `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x","name":"y"}}`},
			unreadable: []string{"Namespace: metadata.name: duplicate field"}},
		{name: "wrong type", files: map[string]string{"a.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: [a]}\n"},
			unreadable: []string{"a.yaml:1: Pod: "}},
		{name: "known kind in an API version nftguard does not read", files: map[string]string{"a.yaml": strings.Replace(policy, "networking.k8s.io/v1", "extensions/v1beta1", 1)},
			unreadable: []string{`NetworkPolicy: apiVersion="extensions/v1beta1": nftguard reads NetworkPolicy only as networking.k8s.io/v1`}},
		{name: "known kind in a k8s.io group it does not belong to", files: map[string]string{"a.yaml": strings.Replace(ns, "v1", "networking.k8s.io/v1", 1)},
			unreadable: []string{"nftguard reads Namespace only as v1"}},
		{name: "bad document separator", files: map[string]string{"a.yaml": ns + "--- x\n" + pod}, unreadable: []string{"not valid YAML"}},
		{name: "one bad file spoils all", files: map[string]string{"a.yaml": ns, "b.yaml": "kind: [\n"}, unreadable: []string{"b.yaml:1"}},

		// Metadata the API server refuses: the object is skipped, the rest is read.
		{name: "hostile policy name", files: map[string]string{"a.yaml": ns + "---\n" +
			strings.Replace(policy, "name: deny", `name: 'q"; }; }; flush ruleset; table inet nftguard { chain zz { #'`, 1)},
			want: "NX", skipped: []string{`a.yaml:2: NetworkPolicy shop/"q\"; }; }; flush ruleset; table inet nftguard { chain zz { #": metadata.name: a lowercase RFC 1123 subdomain`}},
		{name: "name with a newline cannot forge a line", files: map[string]string{"a.yaml": "apiVersion: v1\nkind: Node\nmetadata: {name: \"a\\nskipped: b\"}\n"},
			want: "-", skipped: []string{`Node "a\nskipped: b": metadata.name`}},
		{name: "Namespace names are DNS labels", files: map[string]string{"a.yaml": strings.Replace(ns, "shop", "a.b", 1)},
			want: "-", skipped: []string{"Namespace a.b: metadata.name: must not contain dots"}},
		{name: "namespaces are DNS labels", files: map[string]string{"a.yaml": strings.Replace(pod, "namespace: shop", "namespace: a.b", 1)},
			want: "-", skipped: []string{"Pod a.b/cart: metadata.namespace"}},
		{name: "Service names are DNS-1035 labels, Pod names subdomains", files: map[string]string{"a.yaml": strings.Replace(pod, "cart", "1.cart", 1) + "---\n" +
			"apiVersion: v1\nkind: Service\nmetadata: {name: 1cart, namespace: shop}\n"},
			want: "P", skipped: []string{"Service shop/1cart: metadata.name: a DNS-1035 label"}},
		{name: "name too long", files: map[string]string{"a.yaml": strings.Replace(policy, "deny", strings.Repeat("a", 254), 1)},
			want: "X", skipped: []string{"metadata.name: must be no more than 253 characters"}},
		{name: "bad label key and value", files: map[string]string{"a.yaml": strings.Replace(pod, "  namespace: shop\n", "  namespace: shop\n  labels: {\"a b\": x, c: \"d e\"}\n", 1)},
			want: "-", skipped: []string{`metadata.labels="a b": name part must consist of`, `metadata.labels="d e": a valid label must be`}},
		{name: "bad annotation key", files: map[string]string{"a.yaml": strings.Replace(pod, "  namespace: shop\n", "  namespace: shop\n  annotations: {\"-x\": v}\n", 1)},
			want: "-", skipped: []string{`metadata.annotations="-x"`}},
		{name: "name missing", files: map[string]string{"a.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {}\n"},
			want: "-", skipped: []string{"metadata.name: name or generateName is required"}},

		// Repeated objects: the later one replaces the earlier one.
		{name: "repeated object", files: map[string]string{"a.yaml": policy + "---\n" + ns + "---\n" + strings.Replace(policy, "{}", "{matchLabels: {a: b}}", 1)},
			want: "NX", warn: []string{"a.yaml:3: NetworkPolicy shop/deny: given again: replaces the one read at a.yaml:1"}},
		{name: "default namespace is the same object", files: map[string]string{"a.yaml": strings.Replace(pod, "shop", "default", 1) + "---\n" + strings.Replace(pod, "  namespace: shop\n", "", 1)},
			want: "P", warn: []string{"replaces the one read at a.yaml:1"}},
		{name: "same name, different kinds or namespaces", files: map[string]string{"a.yaml": pod + "---\n" + strings.Replace(pod, "shop", "pay", 1) + "---\n" +
			"apiVersion: v1\nkind: Service\nmetadata: {name: cart, namespace: shop}\n"}, want: "PPS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(dir)
			objs, skipped, err := Load(nil, ".")
			if tc.want == "" {
				var ie *InputError
				if !errors.As(err, &ie) {
					t.Fatalf("Load = %v, %v; want an *InputError", err, objs)
				}
				if objs != nil || skipped != nil {
					t.Errorf("Load returned objects with an InputError")
				}
				expectAll(t, "unreadable", ie.Problems, tc.unreadable)
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got := counts(objs)
			if got == "" {
				got = "-"
			}
			if got != tc.want {
				t.Errorf("objects %q, want %q", got, tc.want)
			}
			expectAll(t, "skipped", skipped, tc.skipped)
			expectAll(t, "warnings", objs.Warnings, tc.warn)
		})
	}
}

// expectAll checks that each of want is a substring of one of the problems,
// and that there are problems exactly when want has entries.
func expectAll(t *testing.T, what string, got []problem.Problem, want []string) {
	t.Helper()
	var lines []string
	for _, p := range got {
		lines = append(lines, p.Error())
	}
	all := strings.Join(lines, "\n")
	if len(want) == 0 && len(got) > 0 {
		t.Errorf("unexpected %s:\n%s", what, all)
	}
	if len(want) > 0 && len(got) == 0 {
		t.Errorf("no %s, want %q", what, want)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("%s do not mention %q:\n%s", what, w, all)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "\n") {
			t.Errorf("%s: a message spans lines: %q", what, l)
		}
	}
}

func TestLoadStdinAndSources(t *testing.T) {
	objs, skipped, err := Load(strings.NewReader(ns+"---\n"+pod), "-")
	if err != nil || len(skipped) > 0 {
		t.Fatalf("Load: %v %v", err, skipped)
	}
	if got := objs.Source(problem.Object{Kind: "Pod", Namespace: "shop", Name: "cart"}); got != "-:2" {
		t.Errorf("Source(pod) = %q, want -:2", got)
	}
	if got := objs.Source(problem.Object{Kind: "Pod", Namespace: "shop", Name: "other"}); got != "" {
		t.Errorf("Source(unknown) = %q", got)
	}
	if objs.Len() != 2 {
		t.Errorf("Len = %d", objs.Len())
	}
}

func TestLoadUnreadablePath(t *testing.T) {
	_, _, err := Load(nil, filepath.Join(t.TempDir(), "missing.yaml"))
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("Load of a missing file = %v, want an InputError naming it", err)
	}
}

// FuzzLoad: any input is either refused as a whole (an *InputError, no
// objects) or read; never a panic, and every message is one line.
// `go test ./manifest -fuzz FuzzLoad` explores beyond the seeds.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{"", ns, docs3, "kind: [\n", "\x00\xff", `{"apiVersion":"v1","kind":"List","items":[` + `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}]}`,
		strings.Replace(policy, "name: deny", "name: 'a\"\\n b'", 1), cnp, cnpAlpha, strings.Replace(cnp, "v1beta1", "v1alpha1", 1),
		`{"apiVersion":"policy.networking.k8s.io/v1alpha2","kind":"ClusterNetworkPolicyList","items":[{"apiVersion":"policy.networking.k8s.io/v1alpha2","kind":"ClusterNetworkPolicy","metadata":{"name":"x"},"spec":{"tier":"Admin","priority":1,"subject":{"namespaces":{}},"ingress":[{"action":"Deny","from":[{}]}]}}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, skipped, err := Load(bytes.NewReader(data), "-")
		var ie *InputError
		switch {
		case errors.As(err, &ie):
			if objs != nil || len(ie.Problems) == 0 {
				t.Fatalf("InputError with objects or without problems")
			}
			skipped = ie.Problems
		case err != nil:
			t.Fatalf("Load: %v", err)
		}
		for _, p := range skipped {
			if strings.ContainsAny(p.Error(), "\n\r") {
				t.Fatalf("message spans lines: %q", p.Error())
			}
		}
	})
}

const docs3 = ns + "---\n" + pod + "---\n" + policy

// TestCNPVersionsConvert: a v1alpha2 document reads as the same v1beta1
// object as its v1beta1 twin, every field kept.
func TestCNPVersionsConvert(t *testing.T) {
	read := func(doc string) *Objects {
		t.Helper()
		objs, skipped, err := Load(strings.NewReader(doc), "-")
		if err != nil || len(skipped) > 0 || len(objs.ClusterNetworkPolicies) != 1 {
			t.Fatalf("Load: %v %v %v", err, skipped, objs)
		}
		return objs
	}
	beta, alpha := read(cnp).ClusterNetworkPolicies[0], read(cnpAlpha).ClusterNetworkPolicies[0]
	if alpha.APIVersion != CNPV1beta1 || alpha.Kind != "ClusterNetworkPolicy" {
		t.Errorf("converted TypeMeta = %v, want %s ClusterNetworkPolicy", alpha.TypeMeta, CNPV1beta1)
	}
	if !reflect.DeepEqual(alpha, beta) {
		t.Errorf("v1alpha2 read as\n%+v\nwant\n%+v", alpha, beta)
	}
	// The fields the fixture sets really arrived (not a pair of empty
	// objects that compare equal).
	eg := alpha.Spec.Egress
	if alpha.Spec.Tier != "Admin" || alpha.Spec.Priority != 10 || len(eg) != 1 || eg[0].Name != "no-imds" || len(eg[0].To) != 1 ||
		len(eg[0].To[0].Networks) != 2 || eg[0].Protocols[1].UDP.DestinationPort.Range.End != 2000 ||
		alpha.Spec.Ingress[0].From[0].Pods.NamespaceSelector.MatchLabels["team"] != "ops" || alpha.Spec.Subject.Namespaces == nil {
		t.Errorf("fields lost in conversion: %+v", alpha.Spec)
	}
	if src := read(cnpAlpha).Source(problem.Object{Kind: "ClusterNetworkPolicy", Name: "deny-metadata"}); src != "-:1" {
		t.Errorf("Source = %q, want -:1", src)
	}
}

// TestCNPSchemasIdentical guards the JSON conversion of cnp.go: it holds
// only while v1alpha2 and v1beta1 have the same fields (JSON names, types,
// nesting). A module upgrade that changes either fails here.
func TestCNPSchemasIdentical(t *testing.T) {
	a := jsonShape(reflect.TypeOf(cnpv1alpha2.ClusterNetworkPolicy{}), map[reflect.Type]bool{})
	b := jsonShape(reflect.TypeOf(cnpv1beta1.ClusterNetworkPolicy{}), map[reflect.Type]bool{})
	if a != b {
		t.Fatalf("ClusterNetworkPolicy v1alpha2 and v1beta1 differ; cnp.go needs a real conversion:\nv1alpha2: %s\nv1beta1:  %s", a, b)
	}
	if !strings.Contains(a, "destinationNamedPort") || !strings.Contains(a, "domainNames") {
		t.Fatalf("shape misses known fields: %s", a)
	}
}

// jsonShape describes a type as JSON sees it: field names and kinds,
// recursively, without Go type names (they differ between the versions).
func jsonShape(t reflect.Type, seen map[reflect.Type]bool) string {
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + jsonShape(t.Elem(), seen)
	case reflect.Slice:
		return "[]" + jsonShape(t.Elem(), seen)
	case reflect.Map:
		return "map[" + jsonShape(t.Key(), seen) + "]" + jsonShape(t.Elem(), seen)
	case reflect.Struct:
		if !strings.HasPrefix(t.PkgPath(), "sigs.k8s.io/network-policy-api/") {
			return t.String() // shared types (metav1), same in both
		}
		if seen[t] {
			return "<" + t.Name() + ">"
		}
		seen[t] = true
		var b strings.Builder
		b.WriteString("{")
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(&b, "%s:%s,", f.Tag.Get("json"), jsonShape(f.Type, seen))
		}
		b.WriteString("}")
		delete(seen, t)
		return b.String()
	}
	return t.Kind().String()
}

// A NetworkPolicy left out for what the API server refuses is kept in its
// fail-closed form: the same name and directions, no rules; a podSelector
// the API server refuses selects the whole namespace; a policy whose
// namespace is not a valid name is left out (no pod can be in it).
func TestLoadKeepsRefusedPoliciesFailClosed(t *testing.T) {
	const np = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: %s, namespace: %s}\nspec:\n  podSelector: %s\n  policyTypes: [Egress]\n" +
		"  egress:\n  - to:\n    - ipBlock: {cidr: %s}\n"
	in := fmt.Sprintf(np, "mapped", "shop", "{matchLabels: {app: web}}", "\"::ffff:10.77.1.0/120\"") + "---\n" +
		fmt.Sprintf(np, "badsel", "shop", "{matchExpressions: [{key: app, operator: In, values: [\"no value!\"]}]}", "10.0.0.0/8") + "---\n" +
		fmt.Sprintf(np, "badns", "a.b", "{}", "010.0.0.0/8") + "---\n" +
		fmt.Sprintf(np, "Bad_Name", "shop", "{matchLabels: {app: db}}", "10.0.0.0/8")
	objs, skipped, err := Load(strings.NewReader(in), "-")
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 4 {
		t.Errorf("skipped %v, want 4 problems", skipped)
	}
	got := map[string]string{}
	for _, p := range objs.NetworkPolicies {
		if len(p.Spec.Ingress)+len(p.Spec.Egress) != 0 || len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != "Egress" {
			t.Errorf("%s/%s kept as %+v, want its fail-closed form", p.Namespace, p.Name, p.Spec)
		}
		got[p.Namespace+"/"+p.Name] = metav1.FormatLabelSelector(&p.Spec.PodSelector)
	}
	want := map[string]string{"shop/mapped": "app=web", "shop/badsel": "<none>", "shop/Bad_Name": "app=db"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	for _, p := range skipped {
		if StaysIsolated(p) != (p.Object.Name != "badns") {
			t.Errorf("StaysIsolated(%v) = %v", p, StaysIsolated(p))
		}
	}
}
