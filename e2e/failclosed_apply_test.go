package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/netlab"
)

// TestApplyInvalidPolicyStaysIsolated: `nftguard apply` of NetworkPolicies
// the API server refuses on create, through the real binary, with real
// packets over IPv4 and IPv6. pay's policy allows every source except an
// IPv4-mapped except (refused since Kubernetes 1.36); web's policy has a
// podSelector value no label can have, and isolates egress. Both were left
// out before, and every flow passed (fail open). Now each is enforced in
// its fail-closed form: pay/ledger is isolated for ingress (its selector
// was readable: only it) and every pod of web for egress (its selector
// was not: the whole namespace), with no rule allowing anything. apply
// and render exit 1 and say the pods stay isolated.
func TestApplyInvalidPolicyStaysIsolated(t *testing.T) {
	l := newInputLab(t)
	node := l.lab.Node("w1").Path
	ledger := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: mapped, namespace: pay}\n" +
		"spec:\n  podSelector: {matchLabels: {app: ledger}}\n  policyTypes: [Ingress]\n" +
		"  ingress:\n  - from:\n    - ipBlock: {cidr: 0.0.0.0/0, except: [\"::ffff:10.0.0.0/104\"]}\n    - ipBlock: {cidr: \"::/0\"}\n"
	web := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: badsel, namespace: web}\n" +
		"spec:\n  podSelector: {matchExpressions: [{key: app, operator: In, values: [front, \"no value!\"]}]}\n  policyTypes: [Egress]\n" +
		"  egress: [{}]\n"
	path := l.write("cluster.yaml", strings.Join(append(l.objects(), ledger, web), "---\n"))

	for _, cmd := range [][]string{{"render", "-f", path, "--node-name", "w1"}, {"apply", "-f", path, "--netns", node, "--node-name", "w1"}} {
		out, errOut, code := nftguardRun(t, "", cmd...)
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1\n%s\n%s", cmd[0], code, out, errOut)
		}
		for _, want := range []string{
			`NetworkPolicy pay/mapped: spec.ingress[0].from[0].ipBlock.except[0]="::ffff:10.0.0.0/104": must not have an IPv4-mapped IPv6 address`,
			`NetworkPolicy web/badsel: spec.podSelector.matchExpressions[0].values[1]="no value!"`,
			"(the pods it selects stay isolated: enforced with no rules)",
			"2 invalid object(s) skipped",
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr does not say %q:\n%s", cmd[0], want, errOut)
			}
		}
	}
	for _, fam := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		ports := []netlab.Port{tcp80, tcp81}
		exp := l.lab.NewExpected(fam, true, ports...)
		for _, from := range exp.From {
			for _, to := range exp.From {
				if from == to {
					continue // a pod always reaches itself
				}
				if to == "pay/ledger" || from == "web/front" {
					for _, p := range ports {
						exp.Expect(from, to, false, p)
					}
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		got, err := l.lab.Reachability(ctx, fam, ports...)
		cancel()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		if diff := netlab.Compare(exp, got); diff != "" {
			t.Errorf("%s: connectivity differs from the fail-closed expectation:\n%s", fmt.Sprint(fam), diff)
		}
	}
}
