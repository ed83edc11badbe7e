package flowlog

import (
	"context"
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/tablelayout"
)

// cnpCluster is a node with pods x/a, x/b, y/a, namespaces x and y logged,
// and
//
//	x/allow-all           NetworkPolicy: isolates x/b for ingress and allows
//	                      everything from every namespace
//	deny-y-to-b           Admin, priority 10, subject x/b: ingress[0]
//	                      "from-y" denies namespace y on TCP, UDP, SCTP 80,
//	                      overriding the NetworkPolicy allow
//	no-egress-81          Admin, priority 5, subject namespace y:
//	                      egress[0] "to-x-81" denies namespace x on port 81
func cnpCluster(t *testing.T) (*labCluster, []*cnp.ClusterNetworkPolicy) {
	c := newLabPods(t, "x/a", "x/b", "y/a")
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	c.policies = []*networkingv1.NetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-all"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "b"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}},
	}}
	c.nss = loggedNamespaces("x", "y")
	ports := func(n int32) []cnp.ClusterNetworkPolicyProtocol {
		p := &cnp.Port{Number: n}
		return []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: p}},
			{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: p}}, {SCTP: &cnp.ClusterNetworkPolicyProtocolSCTP{DestinationPort: p}}}
	}
	cnps := []*cnp.ClusterNetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "deny-y-to-b"}, Spec: cnp.ClusterNetworkPolicySpec{
			Tier: cnp.AdminTier, Priority: 10,
			Subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("pod", "b")}},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{{Name: "from-y", Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("ns", "y")}}, Protocols: ports(80)}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "no-egress-81"}, Spec: cnp.ClusterNetworkPolicySpec{
			Tier: cnp.AdminTier, Priority: 5,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Name: "to-x-81", Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Namespaces: sel("ns", "x")}}, Protocols: ports(81)}},
		}},
	}
	return c, cnps
}

// cnpDenial is what cnpCluster's policies say of one flow: nil when it is
// allowed, else the rule that denies it and the pod whose chain does.
func cnpDenial(from, to string, port int) (*ClusterRule, string) {
	switch {
	case from == to:
		return nil, ""
	case strings.HasPrefix(from, "y/") && strings.HasPrefix(to, "x/") && port == 81:
		return &ClusterRule{Policy: "no-egress-81", Tier: "Admin", Priority: 5, Direction: "egress", Index: 0, Name: "to-x-81"}, from
	case strings.HasPrefix(from, "y/") && to == "x/b" && port == 80:
		return &ClusterRule{Policy: "deny-y-to-b", Tier: "Admin", Priority: 10, Direction: "ingress", Index: 0, Name: "from-y"}, to
	}
	return nil, ""
}

// An Admin Deny that overrides a NetworkPolicy allow, with logging on,
// over TCP, UDP and SCTP and IPv4 and IPv6: one packet per flow gives
// exactly one record per denied flow, naming the ClusterNetworkPolicy,
// tier, priority and rule; none per allowed flow; and the Deny rules'
// counters in the tier chains grew by exactly the denied packets, while
// the NetworkPolicy chains' drops did not grow at all.
func TestClusterDenyRecordsAndCounters(t *testing.T) {
	kerneltest.Require(t)
	c, cnps := cnpCluster(t)
	l := tablelayout.LogDenied{Group: 1607, Rate: 1000, Burst: 1000}
	in := compose.Input{NodeName: "n1", Namespaces: c.nss, Pods: podtest.Set(c.pods), NetworkPolicies: npset.New(c.policies), ClusterNetworkPolicies: cnps, LogDenied: &l}
	res := compose.Build(in)
	if len(res.Problems)+len(res.Warnings) > 0 {
		t.Fatalf("problems %v, warnings %v", res.Problems, res.Warnings)
	}
	eng, err := engine.New(compose.Table(), engine.WithNetNS(c.node.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	if _, err := eng.Sync(ctx, res.Desired); err != nil {
		t.Fatalf("sync: %v", err)
	}
	cl, probs := explain.New(explain.Input{NodeName: "n1", Namespaces: c.nss, Pods: podset.FromAPIList(c.pods), NetworkPolicies: c.policies, ClusterNetworkPolicies: cnps})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	r, err := Open(Config{Group: l.Group, NetNS: c.node.Path})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	col := collect(t, r, NewObjects(c.pods, c.policies).WithCluster(cl), c.node.Path)

	// Packets denied per kind of chain: the tier chains' counted rules
	// (by chain), the NetworkPolicy chains' final drops (by chain).
	drops := func() (cnpDrops, npDrops map[string]uint64) {
		rcs, err := eng.Counters(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		cnpDrops, npDrops = map[string]uint64{}, map[string]uint64{}
		for _, rc := range rcs {
			if _, _, _, ok := clusterpolicy.DeniedChain(rc.Chain); ok {
				cnpDrops[rc.Chain] += rc.Counters[0].Packets
			} else if _, _, ok := policy.DeniedChain(rc.Chain); ok {
				npDrops[rc.Chain] += rc.Counters[0].Packets
			}
		}
		return cnpDrops, npDrops
	}
	cnpBefore, npBefore := drops()

	type flow struct {
		*labFlow
		rule *ClusterRule
		pod  string
	}
	var flows []flow
	sent := labFlows(c.lab, netlab.DefaultPorts)
	for _, lf := range sent {
		rule, pod := cnpDenial(lf.from.Name, lf.to.Name, lf.port.Num)
		flows = append(flows, flow{labFlow: lf, rule: rule, pod: pod})
	}
	sendOnePacketEach(t, c.lab, sent)
	recs := waitRecords(t, col)
	cnpAfter, npAfter := drops()

	want := map[string]uint64{}
	nDenied := 0
	for _, fl := range flows {
		name := fl.String()
		if fl.port.Proto != netlab.SCTP && fl.allowed != (fl.rule == nil) {
			t.Errorf("%s: one packet allowed=%v, the policies say denied by %v", name, fl.allowed, fl.rule)
		}
		mine := fl.records(recs)
		if fl.rule == nil {
			if len(mine) != 0 {
				t.Errorf("%s is allowed, yet recorded: %s", name, recText(mine[0]))
			}
			continue
		}
		nDenied++
		ns, pod, _ := strings.Cut(fl.pod, "/")
		chain := "cnp_ai_" + ns + "_" + pod
		if fl.rule.Direction == "egress" {
			chain = "cnp_ae_" + ns + "_" + pod
		}
		want[chain]++
		if len(mine) != 1 {
			t.Errorf("%s is denied by %s: %d records, want 1", name, fl.rule, len(mine))
			continue
		}
		rec := mine[0]
		wantDecision := "pod " + fl.pod + ": " + fl.rule.String()
		if rec.ClusterRule == nil || !reflect.DeepEqual(rec.ClusterRule, fl.rule) || rec.Decision != wantDecision || string(rec.Direction) != fl.rule.Direction ||
			rec.Pod != fl.pod || len(rec.Policies) != 0 || rec.SrcPod != fl.from.Name || rec.DstPod != fl.to.Name {
			t.Errorf("%s: record %s %+v; want %q", name, recText(rec), rec.ClusterRule, wantDecision)
		}
	}
	if len(recs) != nDenied {
		t.Errorf("%d records for %d denied packets", len(recs), nDenied)
	}
	for ch := range merge(want, cnpAfter) {
		if got := cnpAfter[ch] - cnpBefore[ch]; got != want[ch] {
			t.Errorf("tier chain %s: Deny counters grew by %d, want %d (denied packets sent)", ch, got, want[ch])
		}
	}
	for ch := range npAfter {
		if got := npAfter[ch] - npBefore[ch]; got != 0 {
			t.Errorf("NetworkPolicy chain %s: drops grew by %d, want 0 (the tier decided)", ch, got)
		}
	}
	if len(want) != 2 || nDenied == 0 {
		t.Errorf("the test denied too little: %v", want)
	}
	t.Logf("%d flows, %d denied, %d records; Deny counters %v -> %v", len(flows), nDenied, len(recs), cnpBefore, cnpAfter)
	for _, rec := range recs[:min(2, len(recs))] {
		t.Logf("e.g. %s", recText(rec))
	}
}

func merge(a, b map[string]uint64) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}
