package e2e

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/netlab"
)

// shopOffPay is an Admin ClusterNetworkPolicy in apiVersion version: pods
// of namespaces labelled team=pay accept nothing from namespaces labelled
// team=shop, whatever pay's NetworkPolicies allow.
func shopOffPay(version, name string) string {
	return "apiVersion: policy.networking.k8s.io/" + version + "\nkind: ClusterNetworkPolicy\nmetadata:\n  name: " + name + "\n" +
		"spec:\n  tier: Admin\n  priority: 5\n  subject:\n    namespaces: {matchLabels: {team: pay}}\n" +
		"  ingress:\n  - name: no-shop\n    action: Deny\n    from:\n    - namespaces: {matchLabels: {team: shop}}\n"
}

// TestApplyClusterNetworkPolicy runs `nftguard apply` on a lab node with
// ClusterNetworkPolicy manifests: unreadable ones (an unknown field, an
// apiVersion nftguard does not read, a duplicate field) change nothing in
// the kernel, handles included; an invalid name is skipped with its
// FILE:DOCUMENT and the rest applied; both versions are applied. With the
// ClusterNetworkPolicy compiler in the tree the packets must show the
// Admin Deny overriding pay/ledger-from-shop's allow, and its removal.
func TestApplyClusterNetworkPolicy(t *testing.T) {
	l := newInputLab(t)
	node := l.lab.Node("w1").Path
	base := append(l.objects(), ledgerPolicy("{matchLabels: {team: shop}}", 80))
	apply := func(name string, docs []string, wantCode int, wantErr ...string) {
		t.Helper()
		out, errOut, code := nftguardRun(t, "", "apply", "-f", l.write(name, strings.Join(docs, "---\n")), "--netns", node, "--node-name", "w1")
		if code != wantCode {
			t.Fatalf("apply %s: exit %d, want %d\n%s\n%s", name, code, wantCode, out, errOut)
		}
		for _, w := range wantErr {
			if !strings.Contains(errOut, w) {
				t.Errorf("apply %s: stderr does not say %q:\n%s", name, w, errOut)
			}
		}
	}
	apply("base.yaml", base, 0)
	onlyShopOn80 := func(from string, p netlab.Port) bool { return nsOf(from) == "shop" && p == tcp80 }
	l.check(onlyShopOn80)
	before := l.ruleset()

	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", strings.Replace(shopOffPay("v1alpha2", "shop-off-pay"), "  tier: Admin\n", "  tier: Admin\n  teir: Baseline\n", 1),
			"ClusterNetworkPolicy: spec.teir: unknown field"},
		{"unread apiVersion", shopOffPay("v1alpha1", "shop-off-pay"),
			"nftguard reads ClusterNetworkPolicy only as policy.networking.k8s.io/v1beta1 or policy.networking.k8s.io/v1alpha2"},
		{"duplicate field", strings.Replace(shopOffPay("v1beta1", "shop-off-pay"), "  priority: 5\n", "  priority: 5\n  priority: 6\n", 1),
			"spec.priority: duplicate field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apply(strings.ReplaceAll(tc.name, " ", "-")+".yaml", append(append([]string{}, base...), tc.doc), 2, tc.want, "nothing changed")
			if after := l.ruleset(); after != before {
				t.Errorf("the ruleset changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			l.check(onlyShopOn80)
		})
	}

	// The Admin Deny comes before NetworkPolicy: shop loses port 80.
	denied := func(string, netlab.Port) bool { return false }

	t.Run("invalid name skipped, the rest applied", func(t *testing.T) {
		docs := append(append([]string{}, base...), shopOffPay("v1alpha2", "shop-off-pay"), shopOffPay("v1beta1", `"Shop_Off\nskipped: forged"`))
		apply("invalid-name.yaml", docs, 1,
			`skipped: `+l.dir+`/invalid-name.yaml:`, `ClusterNetworkPolicy "Shop_Off\nskipped: forged": metadata.name: a lowercase RFC 1123 subdomain`,
			"1 invalid object(s) skipped")
		l.check(denied)
	})
	t.Run("v1beta1", func(t *testing.T) {
		apply("v1beta1.yaml", append(append([]string{}, base...), shopOffPay("v1beta1", "shop-off-pay")), 0)
		l.check(denied)
	})
	t.Run("removed", func(t *testing.T) {
		apply("base.yaml", base, 0)
		l.check(onlyShopOn80)
	})
}
