package budget_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// TestFourPoliciesOfOddPortsInTheKernel: four policies of 45,000 lone
// ports each (15,000 odd ports per protocol, no two adjacent) selecting a
// pod of the node. The kernel holds two elements per port (an interval's
// start and its end), 360,000 and more for the four: each policy's
// estimate bounds what it adds to the kernel, counted by reading the
// kernel's sets back through the engine (and the kernel form the unit
// tests count is exactly what the kernel holds). Under the default
// limits (200,000 elements per node) the policies no longer fit together:
// the largest give way until the table the kernel holds is within the
// node's limit. When a port counted one element, the four passed with an
// estimate of 180,000 while the kernel held twice that.
func TestFourPoliciesOfOddPortsInTheKernel(t *testing.T) {
	ns := testns.New(t, "ctrbudget")
	nss := []*corev1.Namespace{apitest.Namespace("a")}
	pods := []*corev1.Pod{apitest.Pod("a", "p", "10.1.0.1")}
	const perProto = 15000
	var nps []*networkingv1.NetworkPolicy
	for k := range 4 {
		var ports []networkingv1.NetworkPolicyPort
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
			for i := range perProto {
				p := intstr.FromInt32(int32(1 + 2*(i+k)))
				ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p})
			}
		}
		nps = append(nps, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("odd%d", k)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports}}}})
	}
	eng, err := engine.New(compose.Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	// inKernel syncs d and counts the elements of the kernel's sets.
	inKernel := func(d *engine.Desired) int {
		t.Helper()
		if _, err := eng.Sync(ctx, d); err != nil {
			t.Fatal(err)
		}
		tables, err := engine.List(ns.Path, engine.ListOptions{ElementsOf: []string{"inet nftguard"}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tb := range tables {
			if tb.Family == "inet" && tb.Name == "nftguard" {
				for _, s := range tb.Sets {
					n += len(s.Elements)
				}
			}
		}
		if want := cost(t, d).Elements; n != want {
			t.Fatalf("the kernel holds %d elements, the kernel form counts %d", n, want)
		}
		return n
	}
	huge := budget.Limits{Object: budget.Cost{Rules: 1 << 40, Elements: 1 << 40}, Node: budget.Cost{Rules: 1 << 40, Elements: 1 << 40}}
	build := func(nps []*networkingv1.NetworkPolicy, l *budget.Limits) compose.Result {
		return compose.Build(input(nss, pods, nps, l))
	}
	base := inKernel(build(nil, &huge).Desired)
	var g budget.Gate
	g.Apply(budget.Input{NodeName: "n1", Namespaces: nss, Pods: podset.NewSet(podset.FromAPIList(pods)), Policies: npset.New(nps), Limits: huge})
	prev, estimated := base, 0
	for i, np := range nps {
		now := inKernel(build(nps[:i+1], &huge).Desired)
		est := g.Estimate(np).Elements
		if now-prev > est {
			t.Errorf("%s adds %d elements in the kernel, estimated %d", np.Name, now-prev, est)
		}
		if now-prev < 2*3*perProto {
			t.Errorf("%s adds %d elements in the kernel, want at least two per port (%d)", np.Name, now-prev, 2*3*perProto)
		}
		t.Logf("%s: %d elements in the kernel, estimated %d", np.Name, now-prev, est)
		prev, estimated = now, estimated+est
	}
	t.Logf("all four: %d elements in the kernel (%d without them), estimated %d", prev, base, estimated)

	def := budget.Default()
	res := build(nps, &def)
	if len(res.OverBudget) < 2 {
		t.Errorf("%d policies over the node's budget, want at least 2", len(res.OverBudget))
	}
	limited := inKernel(res.Desired)
	if node := def.Node.Elements; limited > node {
		t.Errorf("under the default limits the kernel holds %d elements, over the node's %d", limited, node)
	}
	t.Logf("default limits: %d policies fail closed, %d elements in the kernel", len(res.OverBudget), limited)
}
