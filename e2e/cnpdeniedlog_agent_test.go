package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
)

// TestAgentLogDeniedClusterNetworkPolicy: with --log-denied, an Admin Deny
// that overrides a NetworkPolicy allow (x allows ingress from y; the
// Admin rule "no-y" denies y to x on TCP 81) logs one record per denied SYN
// on the destination's agent, naming the ClusterNetworkPolicy, tier,
// priority and rule; allowed SYNs (port 80) log nothing; and the agent's
// nftguard_denied_packets_total{kind="ClusterNetworkPolicy"} grows by the
// denied SYNs while kind NetworkPolicy does not grow.
func TestAgentLogDeniedClusterNetworkPolicy(t *testing.T) {
	a := newAgentLabWith(t, agentLabOptions{args: []string{"--min-sync-interval", "50ms", "--max-sync-interval", "500ms",
		"--crd-check-interval", "1s", "--log-denied", "--log-group", "1611", "--log-rate", "1000", "--log-burst", "1000"}})
	ctx := context.Background()
	adminCfg := a.srv.Config(kubetest.Admin)
	if err := kubetest.InstallCNPCRD(ctx, adminCfg, "standard"); err != nil {
		t.Fatal(err)
	}
	a.waitMetric(t, "nftguard_cluster_network_policy_crd_served", 1, 30*time.Second)
	a.logDeniedIn(ctx, t, "x")
	a.createPolicy(ctx, allowFromY())
	base := a.expect(ctx)
	deny81 := agentPorts[1]
	if _, err := cnpclient.NewForConfigOrDie(adminCfg).PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, denyYToX(
		cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Number: int32(deny81.Num)}}},
	), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitMetric(t, "nftguard_cluster_network_policies", 1, 30*time.Second)
	want := func(from, to string, p netlab.Port) bool {
		if nsOf(from) == "y" && nsOf(to) == "x" && p == deny81 {
			return false
		}
		return base(from, to, p)
	}
	a.converge(t, "Admin Deny y -> x:81", "y/a", "x/a", deny81, false, want, 0)
	// Wait for n1's Admin chain of x/a to log, then for the records of
	// the convergence probes.
	a.waitTableHas(t, "n1", "goto np_denied_ingress comment \"cnp deny-y-to-x ingress[0] Deny no-y\"", "log the Deny rule")
	a.waitRecordsRead(t, "n1")

	n1 := a.agents["n1"]
	mark := n1.markDenied(t)
	before := mark.metrics
	sends := []synSend{{"y/a", 81, 4, false}, {"y/b", 81, 3, false}, {"y/a", 80, 2, true}, {"y/b", 80, 2, true}} // y/a is on n1 with x/a, y/b on n2
	total := sendSYNs(t, a.lab, "x/a", sends)

	recs, after := n1.deniedRecordsSince(t, mark, total)
	if len(recs) > 0 {
		t.Logf("first record: %v", recs[0])
	}
	if len(recs) != total {
		t.Errorf("%d denied records in n1's output for %d denied SYNs", len(recs), total)
	}
	const decision = `pod x/a: denied by ClusterNetworkPolicy deny-y-to-x (Admin, priority 10) rule ingress[0] "no-y"`
	got := map[string]int{}
	for _, r := range recs {
		c, _ := r["clusterNetworkPolicy"].(map[string]any)
		if r["direction"] != "ingress" || r["dstPod"] != "x/a" || r["decision"] != decision || r["policies"] != nil ||
			c["name"] != "deny-y-to-x" || c["tier"] != "Admin" || c["priority"] != float64(10) || c["rule"] != "ingress[0]" || c["ruleName"] != "no-y" {
			t.Errorf("record %v", r)
		}
		got[fmt.Sprintf("%v:%v", r["srcPod"], r["dstPort"])]++
	}
	for _, s := range sends {
		k := fmt.Sprintf("%s:%d", s.from, s.port)
		if n := map[bool]int{false: s.n}[s.allowed]; got[k] != n {
			t.Errorf("%d records of %s, want %d (all: %v)", got[k], k, n, got)
		}
	}
	delta := func(name string) float64 { return metricValue(after, name) - metricValue(before, name) }
	if d := delta(`nftguard_denied_packets_total{direction="ingress",kind="ClusterNetworkPolicy",namespace="x"}`); d != float64(total) {
		t.Errorf("ClusterNetworkPolicy denied packets of x grew by %v, want %d", d, total)
	}
	if d := delta(`nftguard_denied_bytes_total{direction="ingress",kind="ClusterNetworkPolicy",namespace="x"}`); d != float64(60*total) {
		t.Errorf("ClusterNetworkPolicy denied bytes of x grew by %v, want %d", d, 60*total)
	}
	if d := delta(`nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"}`); d != 0 {
		t.Errorf("NetworkPolicy denied packets of x grew by %v, want 0 (the Admin tier decided)", d)
	}
	logDeniedMetrics(t, "n1", after, total)
}
