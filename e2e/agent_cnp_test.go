package e2e

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
)

// TestAgentClusterNetworkPolicy follows the ClusterNetworkPolicy CRD
// through the life of a cluster, with three agents under deploy/'s RBAC
// (a missing permission fails the test: the agents' caches never fill):
// started without the CRD (NetworkPolicy enforced, the log says once that
// CNPs are not watched), the CRD installed later (a CNP is picked up
// without a restart: an Admin Deny overrides a NetworkPolicy allow), a
// CNP the kernel refuses (quarantined, Warning Event in "default"), and
// the CRD removed (CNPs leave the table; NetworkPolicy keeps syncing).
func TestAgentClusterNetworkPolicy(t *testing.T) {
	bin := buildTestHooks(t)
	a := newAgentLabWith(t, agentLabOptions{bin: bin, args: []string{
		"--min-sync-interval", "50ms", "--max-sync-interval", "500ms", "--crd-check-interval", "1s"}})
	ctx := context.Background()
	adminCfg := a.srv.Config(kubetest.Admin)
	cnps := cnpclient.NewForConfigOrDie(adminCfg)

	t.Run("without the CRD", func(t *testing.T) {
		a.createPolicy(ctx, allowFromY())
		a.converge(t, "allow-from-y", "x/b", "x/a", agentPorts[0], false, a.expect(ctx), 0)
		// Several discovery checks (1s apart) have run by now: the log
		// says it once.
		time.Sleep(3 * time.Second)
		for _, n := range agentTopology {
			ag := a.agents[n.Name]
			if c := strings.Count(ag.log(t), "ClusterNetworkPolicy CRD not served: enforcing NetworkPolicy only"); c != 1 {
				t.Errorf("agent %s said %d times that ClusterNetworkPolicies are not watched, want once:\n%s", n.Name, c, ag.logTail())
			}
			if v := metricValue(ag.metrics(t), "nftguard_cluster_network_policy_crd_served"); v != 0 {
				t.Errorf("agent %s: nftguard_cluster_network_policy_crd_served = %v, want 0", n.Name, v)
			}
		}
	})

	t.Run("CRD installed later", func(t *testing.T) {
		start := time.Now()
		if err := kubetest.InstallCNPCRD(ctx, adminCfg, "standard"); err != nil {
			t.Fatal(err)
		}
		a.waitMetric(t, "nftguard_cluster_network_policy_crd_served", 1, 30*time.Second)
		t.Logf("CRD installed: every agent watches ClusterNetworkPolicies %v later", time.Since(start).Round(time.Millisecond))
		for _, n := range agentTopology {
			if l := a.agents[n.Name].log(t); !strings.Contains(l, "ClusterNetworkPolicy CRD served: watching ClusterNetworkPolicies") || !strings.Contains(l, `"version":"v1beta1"`) {
				t.Errorf("agent %s did not log watching v1beta1:\n%s", n.Name, a.agents[n.Name].logTail())
			}
		}
	})

	// The Admin tier comes before NetworkPolicy: its Deny overrides the
	// allow of allow-from-y.
	base := a.expect(ctx)
	adminDeny := func(from, to string, p netlab.Port) bool {
		if nsOf(from) == "y" && nsOf(to) == "x" {
			return false
		}
		return base(from, to, p)
	}
	t.Run("Admin Deny overrides a NetworkPolicy allow", func(t *testing.T) {
		if _, err := cnps.PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, denyYToX(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Every agent has it in its desired state, without a restart.
		a.waitMetric(t, "nftguard_cluster_network_policies", 1, 30*time.Second)
		a.converge(t, "Admin Deny y -> x", "y/b", "x/a", agentPorts[0], false, adminDeny, 0)
	})

	t.Run("a ClusterNetworkPolicy the kernel refuses is quarantined", func(t *testing.T) {
		p, err := cnps.PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, &cnpv1beta1.ClusterNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "refused", Labels: map[string]string{refuseLabel: "yes"}},
			Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: cnpv1beta1.BaselineTier, Priority: 1,
				Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "none"}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes := []string{"n1", "n2", "n3"}
		a.waitQuarantined(ctx, t, "ClusterNetworkPolicy", "", "refused", nodes...)
		// Events about a cluster-scoped object are in "default", name the
		// object's UID and its storage version.
		list, err := a.admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=refused"})
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]int{}
		for _, e := range list.Items {
			io := e.InvolvedObject
			if e.Reason != "NftguardQuarantined" || e.Type != corev1.EventTypeWarning {
				continue
			}
			by[e.Source.Host]++
			if io.Kind != "ClusterNetworkPolicy" || io.APIVersion != "policy.networking.k8s.io/v1beta1" || io.Namespace != "" || io.UID != p.UID {
				t.Errorf("event %s names %+v, want the cluster-scoped policy.networking.k8s.io/v1beta1 ClusterNetworkPolicy of UID %s", e.Name, io, p.UID)
			}
		}
		for _, n := range nodes {
			if by[n] != 1 {
				t.Errorf("agent %s created %d events about the refused ClusterNetworkPolicy in default, want 1", n, by[n])
			}
		}
		a.waitReadyz(t, http.StatusOK, 10*time.Second)
		// The rest is still enforced, and changes still sync.
		a.checkMatrix(t, "with a quarantined ClusterNetworkPolicy", adminDeny)
	})

	t.Run("CRD removed", func(t *testing.T) {
		start := time.Now()
		if err := kubetest.RemoveCNPCRD(ctx, adminCfg); err != nil {
			t.Fatal(err)
		}
		a.waitMetric(t, "nftguard_cluster_network_policies", 0, 30*time.Second)
		t.Logf("CRD removed: no agent has a ClusterNetworkPolicy %v later", time.Since(start).Round(time.Millisecond))
		// The Admin Deny is gone: allow-from-y decides again.
		a.converge(t, "CRD removed", "y/b", "x/a", agentPorts[0], true, base, 0)
		a.waitMetric(t, "nftguard_cluster_network_policy_crd_served", 0, 30*time.Second)
		for _, n := range agentTopology {
			if l := a.agents[n.Name].log(t); !strings.Contains(l, "ClusterNetworkPolicy CRD no longer served") {
				t.Errorf("agent %s did not log the removal:\n%s", n.Name, a.agents[n.Name].logTail())
			}
		}
		// NetworkPolicy keeps syncing.
		a.deletePolicy(ctx, "x", "allow-from-y")
		a.converge(t, "allow-from-y deleted after the CRD's removal", "x/b", "x/a", agentPorts[0], true, a.expect(ctx), 0)
		a.waitReadyz(t, http.StatusOK, 10*time.Second)
		for _, n := range agentTopology {
			if v := metricValue(a.agents[n.Name].metrics(t), `nftguard_errors_total{kind="sync"}`); v != 0 {
				t.Errorf("agent %s had %v failed syncs", n.Name, v)
			}
		}
	})

	t.Run("CRD installed again", func(t *testing.T) {
		if err := kubetest.InstallCNPCRD(ctx, adminCfg, "experimental"); err != nil {
			t.Fatal(err)
		}
		a.waitMetric(t, "nftguard_cluster_network_policy_crd_served", 1, 30*time.Second)
		// Written as v1alpha2: the agent watches v1beta1 and sees it all
		// the same (the API server converts).
		if _, err := cnps.PolicyV1alpha2().ClusterNetworkPolicies().Create(ctx, &cnpv1alpha2.ClusterNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "baseline"},
			Spec: cnpv1alpha2.ClusterNetworkPolicySpec{Tier: cnpv1alpha2.BaselineTier, Priority: 0,
				Subject: cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		a.waitMetric(t, "nftguard_cluster_network_policies", 1, 30*time.Second)
	})
}

// waitMetric waits until every agent exports series with value want.
func (a *agentLab) waitMetric(t *testing.T, series string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, n := range agentTopology {
		for {
			got := metricValue(a.agents[n.Name].metrics(t), series)
			if got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent %s: %s = %v, want %v after %v\n%s", n.Name, series, got, want, within, a.logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// log is the agent's whole log.
func (ag *agentProc) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(ag.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// allowFromY is the NetworkPolicy the ClusterNetworkPolicy agent tests
// start from: it isolates namespace x for ingress and allows namespace y.
func allowFromY() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-from-y"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}}}},
		},
	}
}

// denyYToX is the Admin Deny (priority 10, rule "no-y") of namespace y to
// namespace x that overrides allowFromY, on the given protocols (none:
// all traffic).
func denyYToX(protocols ...cnpv1beta1.ClusterNetworkPolicyProtocol) *cnpv1beta1.ClusterNetworkPolicy {
	return &cnpv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-y-to-x"},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{
			Tier: cnpv1beta1.AdminTier, Priority: 10,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"}}},
			Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{
				Name: "no-y", Action: cnpv1beta1.ClusterNetworkPolicyRuleActionDeny,
				From:      []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}},
				Protocols: protocols,
			}},
		},
	}
}
