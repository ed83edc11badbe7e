package main

import (
	"bytes"
	"context"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// These tests run the CLI in-process with fake stdin, stdout and stderr.
// Nothing here may reach the kernel: render touches nothing, and every
// apply gets --netns of a path that does not exist, so one that got as far
// as opening the table would fail (exit 1) instead of touching this host.

const (
	tNS  = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"
	tPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: cart, namespace: shop}\nspec: {nodeName: w1}\nstatus: {podIPs: [{ip: 10.77.1.10}]}\n"
	tNP  = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: shop}\nspec: {podSelector: {}, policyTypes: [Ingress]}\n"
	// tBadCIDRs is a well-formed policy with two invalid fields: one
	// skipped object.
	tBadCIDRs = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: bad, namespace: shop}\n" +
		"spec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}, {ipBlock: {cidr: nope}}]}]}\n"
	tNode = "apiVersion: v1\nkind: Node\nmetadata: {name: w2}\n"
	// tCNP is an Admin ClusterNetworkPolicy (v1beta1); tCNPAlpha the
	// Baseline one in v1alpha2.
	tCNP = "apiVersion: policy.networking.k8s.io/v1beta1\nkind: ClusterNetworkPolicy\nmetadata: {name: admin-deny}\n" +
		"spec: {tier: Admin, priority: 5, subject: {namespaces: {}}, ingress: [{name: no-ops, action: Deny, from: [{namespaces: {matchLabels: {team: ops}}}]}]}\n"
	tCNPAlpha = "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: baseline-isolate}\n" +
		"spec: {tier: Baseline, priority: 0, subject: {namespaces: {}}, ingress: [{action: Deny, from: [{namespaces: {}}]}]}\n"
	noNetNS = "/nonexistent/nftguard-test-netns"
	// tDualPod is tPod with an IPv6 address too; tEgressSvc translates
	// it in both families.
	tDualPod   = "apiVersion: v1\nkind: Pod\nmetadata: {name: cart, namespace: shop, labels: {app: web}}\nspec: {nodeName: w1}\nstatus: {podIPs: [{ip: 10.77.1.10}, {ip: 'fd00:77:1::10'}]}\n"
	tEgressSvc = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop, annotations: {nftguard.io/egress: 'true', nftguard.io/egress-ipv6: 'true'}}\n" +
		"spec: {type: LoadBalancer, selector: {app: web}}\nstatus: {loadBalancer: {ingress: [{ip: 203.0.113.7}, {ip: '2001:db8::7'}]}}\n"
)

func docs(ds ...string) string { return strings.Join(ds, "---\n") }

func TestCLI(t *testing.T) {
	host, _ := os.Hostname()
	hostile := strings.Replace(tNP, "name: deny", `name: 'q"; }; }; flush ruleset; table inet nftguard { chain zz { #'`, 1)
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		// out and errOut must each contain all of their strings; an empty
		// list means the stream must be empty.
		out, errOut []string
		// notOut must not appear in stdout.
		notOut []string
	}{
		// Help and usage.
		{name: "no arguments", code: 2, errOut: []string{"usage: nftguard COMMAND"}},
		{name: "-h", args: []string{"-h"}, code: 0, out: []string{"usage: nftguard COMMAND", "version"}},
		{name: "--help", args: []string{"--help"}, code: 0, out: []string{"usage: nftguard COMMAND"}},
		{name: "help", args: []string{"help"}, code: 0, out: []string{"usage: nftguard COMMAND"}},
		{name: "help apply", args: []string{"help", "apply"}, code: 0, out: []string{"usage: nftguard apply", "-allow-empty", "-node-name", "-f value"}},
		{name: "help unknown command", args: []string{"help", "nope"}, code: 2, errOut: []string{`unknown command "nope"`}},
		{name: "help with two commands", args: []string{"help", "apply", "render"}, code: 2, errOut: []string{"want one command"}},
		{name: "unknown command", args: []string{"nope"}, code: 2, errOut: []string{`unknown command "nope"`, "usage: nftguard COMMAND"}},
		{name: "apply -h", args: []string{"apply", "-h"}, code: 0, out: []string{"usage: nftguard apply"}},
		{name: "render --help", args: []string{"render", "--help"}, code: 0, out: []string{"usage: nftguard render"}},
		{name: "cleanup -h lists only its flag", args: []string{"cleanup", "-h"}, code: 0, out: []string{"-netns"},
			notOut: []string{"node-name", "cluster-cidr", "-f "}},
		{name: "help run", args: []string{"help", "run"}, code: 0, out: []string{"usage: nftguard run", "-kubeconfig", "-crd-check-interval", "ClusterNetworkPolicies"}},
		{name: "unknown flag", args: []string{"apply", "--bogus"}, code: 2, errOut: []string{"nftguard apply: flag provided but not defined: -bogus", "usage: nftguard apply"}},
		{name: "positional argument", args: []string{"render", "-f", "-", "extra"}, code: 2, errOut: []string{`unexpected argument "extra"`, "usage: nftguard render"}},
		{name: "-f missing", args: []string{"render"}, code: 2, errOut: []string{"-f PATH is required"}},
		{name: "bad CIDR flag", args: []string{"render", "-f", "-", "--cluster-cidr", "x"}, code: 2, errOut: []string{`not a CIDR: "x"`}},
		{name: "render --log-denied", args: []string{"render", "-f", "-", "--node-name", "w1", "--log-denied", "--log-group", "7"},
			stdin: docs(strings.Replace(tNS, "metadata: {name: shop}", `metadata: {name: shop, annotations: {nftguard.io/log-denied: "true"}}`, 1), tPod, tNP),
			code:  0, out: []string{`log prefix "nftguard denied ingress" group 7`, "goto np_denied_ingress"}},
		{name: "render without --log-denied logs nothing", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(strings.Replace(tNS, "metadata: {name: shop}", `metadata: {name: shop, annotations: {nftguard.io/log-denied: "true"}}`, 1), tPod, tNP),
			code:  0, out: []string{"table inet nftguard"}, notOut: []string{"log prefix", "np_denied"}},
		{name: "--log-rate 0", args: []string{"render", "-f", "-", "--log-denied", "--log-rate", "0"}, code: 2, errOut: []string{"--log-denied: log rate"}},
		{name: "--log-group too large", args: []string{"render", "-f", "-", "--log-denied", "--log-group", "70000"}, code: 2, errOut: []string{"--log-group must be at most 65535"}},
		{name: "version", args: []string{"version"}, code: 0, out: []string{"nftguard "}},
		{name: "version takes no arguments", args: []string{"version", "x"}, code: 2, errOut: []string{"unexpected argument"}},

		// Unreadable input: exit 2, nothing rendered or applied.
		{name: "empty stdin", args: []string{"render", "-f", "-"}, code: 2, errOut: []string{"no objects in standard input", "--allow-empty"}},
		{name: "empty stdin, apply", args: []string{"apply", "-f", "-", "--netns", noNetNS}, code: 2, errOut: []string{"no objects in standard input"}},
		{name: "empty stdin allowed", args: []string{"render", "-f", "-", "--allow-empty"}, code: 0, out: []string{"table inet nftguard"}},
		{name: "only kinds nftguard does not read", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", code: 2, errOut: []string{"no objects in standard input"}},
		{name: "binary garbage", args: []string{"apply", "-f", "-", "--netns", noNetNS}, stdin: "\x00\x01\xfe\xff\x89PNG\r\n",
			code: 2, errOut: []string{"error: -:1: not valid YAML", "nothing changed"}},
		{name: "syntax error in the middle", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tNS, "kind: [\n", tPod, tNP),
			code: 2, errOut: []string{"error: -:2: not valid YAML", "1 problem(s) reading standard input; nothing changed"}},
		{name: "unknown field", args: []string{"apply", "-f", "-", "--node-name", "w1", "--netns", noNetNS},
			stdin: docs(tNS, tPod, strings.Replace(tNP, "policyTypes", "ingresss: [], policyTypes", 1)),
			code:  2, errOut: []string{"error: -:3: NetworkPolicy: spec.ingresss: unknown field"}},
		{name: "wrong apiVersion", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(tNS, tPod, strings.Replace(tNP, "networking.k8s.io/v1", "extensions/v1beta1", 1)),
			code:  2, errOut: []string{"nftguard reads NetworkPolicy only as networking.k8s.io/v1"}},
		{name: "missing file", args: []string{"render", "-f", "/nonexistent/x.yaml"}, code: 2, errOut: []string{"/nonexistent/x.yaml"}},

		// The node name.
		{name: "host name matches nothing", args: []string{"apply", "-f", "-", "--netns", noNetNS}, stdin: docs(tNS, tPod, tNP, tNode),
			code: 2, errOut: []string{`node "` + host + `" (the host name; set --node-name) has no pods`, "the input mentions w1, w2"}},
		{name: "explicit node name matches nothing", args: []string{"render", "-f", "-", "--node-name", "w3"}, stdin: docs(tNS, tPod),
			code: 2, errOut: []string{`node "w3" (--node-name) has no pods and no Node object`, "mentions w1"}},
		{name: "explicit node name of a Node object without pods", args: []string{"render", "-f", "-", "--node-name", "w2"}, stdin: docs(tNS, tPod, tNode),
			code: 0, out: []string{"table inet nftguard"}},
		{name: "host name of a Node object is not enough", args: []string{"render", "-f", "-"},
			stdin: docs(tNS, strings.Replace(tNode, "w2", host, 1)), code: 2, errOut: []string{"(the host name; set --node-name)"}},

		// Valid input, and skipped objects.
		{name: "render", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tNS, tPod, tNP),
			code: 0, out: []string{"table inet nftguard", "10.77.1.10"}},
		{name: "hostile name is skipped, the rest rendered", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tNS, tPod, hostile, tNP),
			code: 1, out: []string{"table inet nftguard", "10.77.1.10"}, notOut: []string{"flush ruleset", "zz"},
			errOut: []string{`skipped: -:3: NetworkPolicy shop/"q\"; }; }; flush ruleset; table inet nftguard { chain zz { #": metadata.name: a lowercase RFC 1123 subdomain`,
				"1 invalid object(s) skipped"}},
		{name: "compile problems carry file:document and count objects", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tNS, tPod, tBadCIDRs),
			code: 1, out: []string{"table inet nftguard"},
			errOut: []string{"skipped: -:3: NetworkPolicy shop/bad: spec.ingress[0].from[0].ipBlock.cidr", "skipped: -:3: NetworkPolicy shop/bad: spec.ingress[0].from[1].ipBlock.cidr",
				"nftguard render: 1 invalid object(s) skipped"}},
		{name: "ipBlocks the API server refuses on create are skipped", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(tNS, tPod, strings.Replace(strings.Replace(tBadCIDRs, "10.0.0.0/33", `"::ffff:10.77.1.0/120"`, 1), "nope", "10.77.1.10/16", 1)),
			code:  1, out: []string{"table inet nftguard"},
			errOut: []string{`skipped: -:3: NetworkPolicy shop/bad: spec.ingress[0].from[0].ipBlock.cidr="::ffff:10.77.1.0/120": must not have an IPv4-mapped IPv6 address`,
				`skipped: -:3: NetworkPolicy shop/bad: spec.ingress[0].from[1].ipBlock.cidr="10.77.1.10/16": must not have bits set beyond the prefix length`,
				"nftguard render: 1 invalid object(s) skipped"}},
		{name: "repeated object warns and the later one is used", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tNS, tPod, tBadCIDRs, tNP, strings.Replace(tBadCIDRs, "10.0.0.0/33", "10.0.0.0/8", 1)),
			code: 1, out: []string{"table inet nftguard"}, errOut: []string{"warning: -:5: NetworkPolicy shop/bad: given again: replaces the one read at -:3", "skipped: -:5: NetworkPolicy shop/bad: spec.ingress[0].from[1].ipBlock.cidr", "1 invalid object(s) skipped"}},
		// ClusterNetworkPolicy: both versions, read as strictly as the
		// other kinds.
		{name: "ClusterNetworkPolicy both versions", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tNS, tPod, tCNP, tCNPAlpha),
			code: 0, out: []string{"table inet nftguard"}},
		{name: "ClusterNetworkPolicies and pods only", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tCNP, tPod),
			code: 0, out: []string{"table inet nftguard"}},
		{name: "ClusterNetworkPolicies only: the node check still refuses", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: docs(tCNP, tCNPAlpha),
			code: 2, errOut: []string{`node "w1" (--node-name) has no pods and no Node object`}},
		{name: "ClusterNetworkPolicy unknown field", args: []string{"apply", "-f", "-", "--node-name", "w1", "--netns", noNetNS},
			stdin: docs(tNS, tPod, strings.Replace(tCNPAlpha, "tier:", "teir: x, tier:", 1)),
			code:  2, errOut: []string{"error: -:3: ClusterNetworkPolicy: spec.teir: unknown field", "nothing changed"}},
		{name: "ClusterNetworkPolicy unknown rule field", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(tNS, tPod, strings.Replace(tCNP, "action: Deny", "action: Deny, ports: [80]", 1)),
			code:  2, errOut: []string{"error: -:3: ClusterNetworkPolicy: spec.ingress[0].ports: unknown field"}},
		{name: "ClusterNetworkPolicy wrong apiVersion", args: []string{"apply", "-f", "-", "--node-name", "w1", "--netns", noNetNS},
			stdin: docs(tNS, tPod, strings.Replace(tCNP, "v1beta1", "v1alpha1", 1)),
			code:  2, errOut: []string{"nftguard reads ClusterNetworkPolicy only as policy.networking.k8s.io/v1beta1 or policy.networking.k8s.io/v1alpha2", "nothing changed"}},
		{name: "ClusterNetworkPolicy invalid name is skipped, the rest rendered", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(tNS, tPod, strings.Replace(tCNP, "admin-deny", `"Admin\nskipped: forged"`, 1), tNP),
			code:  1, out: []string{"table inet nftguard", "10.77.1.10"},
			errOut: []string{`skipped: -:3: ClusterNetworkPolicy "Admin\nskipped: forged": metadata.name: a lowercase RFC 1123 subdomain`, "1 invalid object(s) skipped"}},
		{name: "ClusterNetworkPolicy in both versions warns", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(tPod, tCNP, strings.Replace(tCNPAlpha, "baseline-isolate", "admin-deny", 1)),
			code:  0, errOut: []string{"warning: -:3: ClusterNetworkPolicy admin-deny: given again: replaces the one read at -:2"}, out: []string{"table inet nftguard"}},
		// Egress: a family with no known pod range is not translated
		// (its pod-to-pod traffic could not be told apart); a Node's
		// spec.podCIDRs make the range known.
		{name: "egress: no IPv6 pod range, IPv6 not translated", args: []string{"render", "-f", "-", "--node-name", "w1", "--cluster-cidr", "10.77.0.0/16"},
			stdin: docs(tNS, tDualPod, tEgressSvc), code: 0, out: []string{"10.77.1.10 : 203.0.113.7"}, notOut: []string{"2001:db8::7"},
			errOut: []string{"warning: -:3: Service shop/web: no IPv6 pod range of the cluster is known (--cluster-cidr, or Nodes' spec.podCIDRs), so IPv6 traffic is not translated"}},
		{name: "egress: the IPv6 pod range from a Node object", args: []string{"render", "-f", "-", "--node-name", "w1", "--cluster-cidr", "10.77.0.0/16"},
			stdin: docs(tNS, tDualPod, tEgressSvc, "apiVersion: v1\nkind: Node\nmetadata: {name: w1}\nspec: {podCIDR: 10.77.1.0/24, podCIDRs: [10.77.1.0/24, 'fd00:77:1::/64']}\n"),
			code:  0, out: []string{"10.77.1.10 : 203.0.113.7", "fd00:77:1::10 : 2001:db8::7", "fd00:77:1::/64"}},
		{name: "egress: no pod range of either family", args: []string{"render", "-f", "-", "--node-name", "w1"},
			stdin: docs(tNS, tDualPod, tEgressSvc), code: 1, out: []string{"table inet nftguard"}, notOut: []string{"203.0.113.7"},
			errOut: []string{"skipped: -:3: Service shop/web: egress needs the cluster's pod CIDRs"}},
		{name: "all objects invalid", args: []string{"render", "-f", "-", "--node-name", "w1"}, stdin: strings.Replace(tNS, "shop", "Shop", 1),
			code: 2, errOut: []string{"skipped: -:1: Namespace", "no valid objects in standard input"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			check := func(what string, got string, want []string) {
				if len(want) == 0 && got != "" {
					t.Errorf("%s should be empty:\n%s", what, got)
				}
				for _, w := range want {
					if !strings.Contains(got, w) {
						t.Errorf("%s does not contain %q:\n%s", what, w, got)
					}
				}
			}
			check("stdout", stdout.String(), tc.out)
			check("stderr", stderr.String(), tc.errOut)
			for _, n := range tc.notOut {
				if strings.Contains(stdout.String(), n) {
					t.Errorf("stdout contains %q:\n%s", n, stdout.String())
				}
			}
		})
	}
}

func TestVersionText(t *testing.T) {
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		st   stamp
		want string
	}{
		{nil, stamp{}, "nftguard (unknown version: no build information in the binary)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, stamp{}, "nftguard (devel) go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}, stamp{},
			"nftguard v1.2.3 revision 0123abc 2026-12-01T10:00:00Z (modified) go1.26.8"},
		{&debug.BuildInfo{Main: debug.Module{}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "false"}}}, stamp{},
			"nftguard (devel) revision 0123abc"},
		// The image build's stamp (-buildvcs=false: no VCS settings).
		{bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, st: stamp{version: "v0.1.0", revision: "fedcba9"},
			want: "nftguard v0.1.0 revision fedcba9 go1.26.8"},
		{bi: &debug.BuildInfo{GoVersion: "go1.26.8"}, st: stamp{version: "v0.1.0", revision: "fedcba9", modified: "true"},
			want: "nftguard v0.1.0 revision fedcba9 (modified) go1.26.8"},
		// The stamp wins over what the toolchain recorded.
		{bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v9.9.9"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}}}, st: stamp{version: "v0.1.0", revision: "fedcba9"},
			want: "nftguard v0.1.0 revision fedcba9 go1.26.8"},
		{st: stamp{version: "v0.1.0"}, want: "nftguard v0.1.0"},
	} {
		if got := versionText(tc.bi, tc.st); got != tc.want {
			t.Errorf("versionText = %q, want %q", got, tc.want)
		}
	}
}
