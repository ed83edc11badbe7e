package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpfake "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/fake"
)

func servedList(version string) *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: cnpv1beta1.GroupName + "/" + version,
		APIResources: []metav1.APIResource{{Name: cnpResource, Kind: "ClusterNetworkPolicy"}}}
}

// waitFor polls cond; the minute is a guard against a hang, not a
// bound on how fast cond becomes true.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCNPSourceLifecycle follows the CRD through its life with a fake
// discovery and clientset: absent (NetworkPolicy only, said once),
// installed (watched without a restart), discovery failing (nothing
// changes), removed (the policies leave the desired state).
func TestCNPSourceLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disc := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}}
	// Another resource of the group (the old AdminNetworkPolicy) is not
	// ClusterNetworkPolicy.
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: cnpv1beta1.GroupName + "/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "adminnetworkpolicies"}}}}
	client := cnpfake.NewSimpleClientset(&cnpv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-imds", Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Spec:       cnpv1beta1.ClusterNetworkPolicySpec{Tier: cnpv1beta1.AdminTier, Priority: 3},
		Status:     cnpv1beta1.ClusterNetworkPolicyStatus{Conditions: []metav1.Condition{{Type: "Ready"}}},
	})
	var logs syncBuffer
	var changes atomic.Int32
	m := newMetrics()
	c := newCNPSource(client, disc, time.Hour, m, slog.New(slog.NewTextHandler(&logs, nil)), func(kind string, _ bool) {
		if kind != cnpKind {
			t.Errorf("change of kind %q", kind)
		}
		changes.Add(1)
	})
	defer c.shutdown()

	if !c.waitReady(ctx) || c.watching() != "" || c.list() != nil {
		t.Fatalf("without the CRD: watching %q, list %v", c.watching(), c.list())
	}
	c.check(ctx)
	if n := strings.Count(logs.String(), "CRD not served: enforcing NetworkPolicy only"); n != 1 {
		t.Fatalf("said %d times that the CRD is not served, want once:\n%s", n, logs.String())
	}
	if v := testutil.ToFloat64(c.servedGauge); v != 0 {
		t.Errorf("served gauge %v", v)
	}

	// Installed.
	disc.Resources = append(disc.Resources, servedList("v1alpha2"), servedList("v1beta1"))
	c.check(ctx)
	if c.watching() != "v1beta1" {
		t.Fatalf("watching %q, want the storage version v1beta1", c.watching())
	}
	waitFor(t, "the policy in the list", func() bool { return len(c.list()) == 1 })
	p := c.list()[0]
	if p.Name != "deny-imds" || p.Spec.Priority != 3 || p.Annotations != nil || p.Status.Conditions != nil {
		t.Errorf("cached %+v, want the spec without annotations and status", p)
	}
	if c.get("deny-imds") != p || c.get("other") != nil {
		t.Errorf("get does not find the cached object")
	}
	if changes.Load() == 0 || testutil.ToFloat64(c.servedGauge) != 1 || testutil.ToFloat64(c.count) != 1 {
		t.Errorf("changes %d, served %v, count %v", changes.Load(), testutil.ToFloat64(c.servedGauge), testutil.ToFloat64(c.count))
	}
	if !strings.Contains(logs.String(), "CRD served: watching ClusterNetworkPolicies") {
		t.Errorf("installation not logged:\n%s", logs.String())
	}

	// A new policy arrives through the watch.
	before := changes.Load()
	if _, err := client.PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "baseline"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new policy", func() bool { return len(c.list()) == 2 })
	if changes.Load() == before || c.list()[0].Name != "baseline" {
		t.Errorf("the watch did not report the new policy, or the list is not in name order")
	}

	// Discovery fails: the API server is unreachable, not the CRD gone.
	disc.PrependReactor("get", "resource", func(kubetesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	c.check(ctx)
	c.check(ctx)
	if c.watching() != "v1beta1" || len(c.list()) != 2 {
		t.Fatalf("a discovery error changed the state: watching %q, %d policies", c.watching(), len(c.list()))
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Errorf("discovery error logged %d times, want once", n)
	}
	disc.ReactionChain = disc.ReactionChain[1:]

	// Removed.
	disc.Resources = disc.Resources[:1]
	before = changes.Load()
	c.check(ctx)
	if c.watching() != "" || c.list() != nil || changes.Load() == before || testutil.ToFloat64(c.servedGauge) != 0 || testutil.ToFloat64(c.count) != 0 {
		t.Fatalf("after removal: watching %q, list %v, served %v", c.watching(), c.list(), testutil.ToFloat64(c.servedGauge))
	}
	if !strings.Contains(logs.String(), "CRD no longer served") {
		t.Errorf("removal not logged:\n%s", logs.String())
	}
}

// TestCNPSourceV1alpha2Only: when only v1alpha2 is served, it is watched
// and its objects are cached as v1beta1 with every field.
func TestCNPSourceV1alpha2Only(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disc := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{servedList("v1alpha2")}
	client := cnpfake.NewSimpleClientset(&cnpv1alpha2.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "iso", UID: "u-1"},
		Spec: cnpv1alpha2.ClusterNetworkPolicySpec{Tier: cnpv1alpha2.BaselineTier, Priority: 7,
			Subject: cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
			Ingress: []cnpv1alpha2.ClusterNetworkPolicyIngressRule{{Name: "r", Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny,
				From: []cnpv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}},
	})
	c := newCNPSource(client, disc, time.Hour, newMetrics(), slog.New(slog.DiscardHandler), func(string, bool) {})
	defer c.shutdown()
	if !c.waitReady(ctx) || c.watching() != "v1alpha2" {
		t.Fatalf("watching %q, want v1alpha2", c.watching())
	}
	got := c.list()
	if len(got) != 1 {
		t.Fatalf("list %v", got)
	}
	p := got[0]
	if p.UID != "u-1" || p.Spec.Tier != cnpv1beta1.BaselineTier || p.Spec.Priority != 7 || p.Spec.Subject.Namespaces.MatchLabels["a"] != "b" ||
		p.Spec.Ingress[0].Name != "r" || p.Spec.Ingress[0].Action != cnpv1beta1.ClusterNetworkPolicyRuleActionDeny || p.Spec.Ingress[0].From[0].Namespaces == nil {
		t.Fatalf("converted %+v", p)
	}
	// The same object on every list: the compilers and the quarantine
	// compare by identity.
	if c.list()[0] != p {
		t.Fatalf("list returns a new object each time")
	}
}
