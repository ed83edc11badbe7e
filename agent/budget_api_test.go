package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/problemevents"
)

// TestOverBudgetOneEvent: a NetworkPolicy over its budget on three nodes
// is enforced there in its fail-closed form (its pod isolated, its allows
// not installed), named in nftguard_objects_over_budget on each, and in
// one Event, which all three write under the same name; a policy within
// budget beside it is enforced as written.
func TestOverBudgetOneEvent(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(srv.Config(kubetest.Admin))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kubetest.CreateNamespaces(ctx, admin, "t"); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if _, err := kubetest.CreateRunningPod(ctx, admin, apiPod("t", "p-"+n, n), fmt.Sprintf("10.77.%d.2", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Small limits: 200 ports are estimated as 401 port-set elements,
	// over 100.
	limits := budget.Limits{Object: budget.Cost{Rules: 100, Elements: 100}, Node: budget.Cost{Rules: 1000, Elements: 10000}}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	type agent struct {
		ns   *testns.NS
		addr string
	}
	agents := map[string]agent{}
	for _, n := range nodes {
		a := agent{ns: testns.New(t, "bg"+n), addr: freeAddr(t)}
		attachPod(t, a.ns, "vp0", fmt.Sprintf("10.77.%d.2", slices.Index(nodes, n)))
		agents[n] = a
		wg.Go(func() {
			err := Run(ctx, Config{REST: srv.Config(kubetest.Admin), NodeName: n, NetNS: a.ns.Path, MetricsAddr: a.addr, Budget: limits,
				MinSyncInterval: 10 * time.Millisecond, MaxSyncInterval: 100 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Errorf("agent %s: %v", n, err)
			}
		})
	}
	var ports []networkingv1.NetworkPolicyPort
	for i := range 200 {
		p := intstr.FromInt32(int32(1000 + i))
		ports = append(ports, networkingv1.NetworkPolicyPort{Port: &p})
	}
	big := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "many-ports"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports}}}}
	small := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "egress-80"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: ports[:1]}}}}
	for _, np := range []*networkingv1.NetworkPolicy{big, small} {
		if _, err := admin.NetworkingV1().NetworkPolicies("t").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(a agent, kind, name string) string {
		out, _ := a.ns.Exec("", "nft", "list", kind, "inet", "nftguard", name)
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, n := range nodes {
		a := agents[n]
		ip := fmt.Sprintf("10.77.%d.2", i)
		for !strings.Contains(get(t, a.addr, "/metrics"), `nftguard_objects_over_budget{budget="object",kind="NetworkPolicy",name="many-ports",namespace="t"} 1`) ||
			!strings.Contains(list(a, "map", "np_egress4"), ip+" ") {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s: the policy is not over budget, or the policy within budget is not enforced:\n%s", n, list(a, "table", ""))
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Fail closed: isolated for ingress, none of its ports allowed.
		if m := list(a, "map", "np_ingress4"); !strings.Contains(m, ip+" ") {
			t.Errorf("agent %s: the over-budget policy's pod is not isolated:\n%s", n, m)
		}
		ch := list(a, "chain", "np_ing_t_p-"+n)
		if strings.Contains(ch, "np_pi_t_many-ports") || !strings.Contains(ch, "drop") {
			t.Errorf("agent %s: the pod's chain is not the fail-closed one:\n%s", n, ch)
		}
		if ch := list(a, "chain", "np_pi_t_many-ports"); ch != "" {
			t.Errorf("agent %s: the over-budget policy's rules are installed:\n%s", n, ch)
		}
		if ch := list(a, "chain", "np_egr_t_p-"+n); !strings.Contains(ch, "jump np_pe_t_egress-80") {
			t.Errorf("agent %s: the pod does not jump to the policy within budget:\n%s", n, ch)
		}
		if ch := list(a, "chain", "np_pe_t_egress-80"); !strings.Contains(ch, "dport 1000") {
			t.Errorf("agent %s: the policy within budget is not enforced as written:\n%s", n, ch)
		}
	}
	events := func() []corev1.Event {
		l, err := admin.CoreV1().Events("t").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, e := range l.Items {
			if e.Reason == problemevents.ReasonOverBudget {
				out = append(out, e)
			}
		}
		return out
	}
	for len(events()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no NftguardOverBudget Event")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every agent reports this problem (each node hosts a pod of its
	// namespace, so all three are among its three reporters): wait until
	// each has tried its create; then there must still be one Event.
	sent := func() (created, exists int) {
		for _, n := range nodes {
			m := get(t, agents[n].addr, "/metrics")
			if strings.Contains(m, `nftguard_events_total{result="created"} 1`) {
				created++
			}
			if strings.Contains(m, `nftguard_events_total{result="exists"} 1`) {
				exists++
			}
		}
		return created, exists
	}
	for c, e := sent(); c+e < len(nodes); c, e = sent() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d agents tried to create the Event", c+e, len(nodes))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ev := events(); len(ev) != 1 || ev[0].InvolvedObject.Name != "many-ports" {
		t.Fatalf("%d NftguardOverBudget Events, want 1 about many-ports: %+v", len(ev), ev)
	}
	created, exists := sent()
	if created != 1 || exists != 2 {
		t.Errorf("Event creates: %d created, %d refused as existing; want 1 and 2", created, exists)
	}
}
