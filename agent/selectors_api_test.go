package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestStoredSelectorsKeepIsolation: a NetworkPolicy whose selectors hold a
// label value the API server refuses on create (it accepted them in
// matchExpressions before Kubernetes 1.27 and still serves them), written
// straight into etcd, and a ClusterNetworkPolicy with such a value (its
// schema never checks them) still isolate the pods they select: the
// invalid value selects no pod, the valid ones theirs. Before, both were
// left out and the pod lost its isolation.
func TestStoredSelectorsKeepIsolation(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	cfg := srv.Config(kubetest.Admin)
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := kubetest.InstallCNPCRD(ctx, cfg, "standard"); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.CreateNamespaces(ctx, admin, "t", "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.CreateRunningPod(ctx, admin, apiPod("t", "p", "n1"), "10.77.0.2"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.CreateRunningPod(ctx, admin, apiPod("u", "q", "n1"), "10.77.0.3"); err != nil {
		t.Fatal(err)
	}
	const bad = "not a label value!"
	in := func(vals ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: vals}}}
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "stored"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *in("t"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: in("t")}}}}}}
	// The API server of today refuses the value...
	withBad := np.DeepCopy()
	withBad.Spec.PodSelector = *in("t", bad)
	withBad.Spec.Ingress[0].From[0].PodSelector = in(bad)
	if _, err := admin.NetworkingV1().NetworkPolicies("t").Create(ctx, withBad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("the API server accepted a new policy with the value %q: %v", bad, err)
	}
	// ... and serves it once stored.
	created, err := admin.NetworkingV1().NetworkPolicies("t").Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := created.DeepCopy()
	stored.Spec = withBad.Spec
	stored.ResourceVersion = ""
	stored.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
	value, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.PutStored(ctx, "/registry/networkpolicies/t/stored", value); err != nil {
		t.Fatal(err)
	}
	served, err := admin.NetworkingV1().NetworkPolicies("t").Get(ctx, "stored", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := served.Spec.PodSelector.MatchExpressions[0].Values; len(got) != 2 || got[1] != bad {
		t.Fatalf("the API server serves podSelector values %q, not the stored ones", got)
	}

	cnp := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-u"},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: cnpv1beta1.AdminTier, Priority: 10,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{
				NamespaceSelector: metav1.LabelSelector{}, PodSelector: *in("u", bad)}},
			Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{Action: cnpv1beta1.ClusterNetworkPolicyRuleActionDeny,
				From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}}
	if _, err := cnpclient.NewForConfigOrDie(cfg).PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, cnp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused a ClusterNetworkPolicy with the value %q: %v", bad, err)
	}

	ns := testns.New(t, "sel")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		err := Run(ctx, Config{REST: cfg, NodeName: "n1", NetNS: ns.Path, MetricsAddr: freeAddr(t),
			ClusterCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.77.0.0/16")},
			MinSyncInterval: 10 * time.Millisecond, MaxSyncInterval: 100 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	set := func(name string) string {
		out, _ := ns.Exec("", "nft", "list", "map", "inet", "nftguard", name)
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(set("np_ingress4"), "10.77.0.2 ") || !strings.Contains(set("cnp_admin_ingress4"), "10.77.0.3 ") {
		if time.Now().After(deadline) {
			t.Fatalf("a pod lost its isolation:\n%s\n%s", set("np_ingress4"), set("cnp_admin_ingress4"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := set("np_ingress4"); strings.Contains(s, "10.77.0.3 ") {
		t.Errorf("the stored policy isolates a pod of another namespace:\n%s", s)
	}
	if s := set("cnp_admin_ingress4"); strings.Contains(s, "10.77.0.2 ") {
		t.Errorf("the ClusterNetworkPolicy's subject selects a pod its valid value does not:\n%s", s)
	}
}
