package explain

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/cnptest"
)

// answers is a node's live state for the test: set -> "pod . dst" -> name.
type answers map[string]map[string]string

func (a answers) Answer(set string, pod, dst netip.Addr) (string, time.Duration, bool) {
	name, ok := a[set][pod.String()+" . "+dst.String()]
	return name, 42 * time.Second, ok
}

// TestDomainNamesLive: with the node's answers, a domainNames rule allows
// exactly the addresses the pod itself resolved for its names, and says
// which name and how long the answer lasts; another pod's answer opens
// nothing.
func TestDomainNamesLive(t *testing.T) {
	in := cnpInput()
	in.ClusterNetworkPolicies = []*cnp.ClusterNetworkPolicy{egressCNP("dns", admin, 1, cnptest.NamespacesSubjectOf("ns", "x"),
		cnptest.R("stripe", accept, peerDomains("api.stripe.com", "*.s3.amazonaws.com")), cnptest.R("rest", deny, anyPeer))}
	c, probs := New(in)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	set4, _ := clusterpolicy.DomainSets([]fqdn.Pattern{{Domain: "api.stripe.com"}, {Domain: "s3.amazonaws.com", Wildcard: true}})
	xaAddr := c.pods["x/a"].addrs[0]
	c.SetDomainAnswers(answers{set4: {xaAddr.String() + " . 198.51.100.7": "api.stripe.com"}})
	for _, tc := range []struct {
		from, to string
		allowed  bool
		want     string
	}{
		{"x/a", "198.51.100.7", true, `rule egress[0] "stripe" (peer to[0] domainNames: x/a resolved api.stripe.com to 198.51.100.7 (answer expires in 42s)`},
		{"x/a", "198.51.100.8", false, `rule egress[1] "rest"`},
		{"x/b", "198.51.100.7", false, `rule egress[1] "rest"`}, // x/a's answer is not x/b's
	} {
		res, err := c.Explain(Flow{From: tc.from, To: tc.to, Protocol: tcp, Port: 443})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Egress.String()
		if res.Egress.Allowed != tc.allowed || !strings.Contains(text, tc.want) {
			t.Errorf("%s -> %s: allowed %v, want %v with %q:\n%s", tc.from, tc.to, res.Egress.Allowed, tc.allowed, tc.want, text)
		}
	}
}
