package budget_test

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
)

// BenchmarkCostFactors measures what one rule and one set element of a
// compiled NetworkPolicy cost: compile time and live bytes of the desired
// table and the engine's model of it (engine.Fake), per rule or element.
// These are the factors doc.go turns the budgets into time and memory by.
func BenchmarkCostFactors(b *testing.B) {
	var pods []*corev1.Pod
	for i := range 10 {
		pods = append(pods, apitest.Pod("a", fmt.Sprintf("l%d", i), fmt.Sprintf("10.0.0.%d", i+1)))
	}
	for i := range 20000 {
		pods = append(pods, apitest.Pod("b", fmt.Sprintf("r%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), apitest.OnNode("n2")))
	}
	nss := []*corev1.Namespace{apitest.Namespace("a"), apitest.Namespace("b")}
	ports := func(n int) []networkingv1.NetworkPolicyPort {
		var out []networkingv1.NetworkPolicyPort
		for i := range n {
			p := intstr.FromInt32(int32(1000 + i))
			out = append(out, networkingv1.NetworkPolicyPort{Port: &p})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		nps  func() []*networkingv1.NetworkPolicy
	}{
		{"rules", func() []*networkingv1.NetworkPolicy { // 10 pods × 2,000 ports
			return []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "ports"},
				Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports(2000)}}}}}
		}},
		{"elements", func() []*networkingv1.NetworkPolicy { // 10 policies × 20,000 remote pods
			var out []*networkingv1.NetworkPolicy
			for i := range 10 {
				out = append(out, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("all%d", i)},
					Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
						Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}}})
			}
			return out
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			base := input(nss, pods, nil, nil)
			empty := cost(b, compose.Build(base).Desired)
			var live uint64
			var c budget.Cost
			var res compose.Result
			var f *engine.Fake
			for b.Loop() {
				res, f = compose.Result{}, nil
				in := input(nss, pods, tc.nps(), nil)
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				res = compose.Build(in)
				var err error
				if f, err = engine.NewFake(compose.Table()); err != nil {
					b.Fatal(err)
				}
				if _, err := f.Sync(b.Context(), res.Desired); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				live = m1.HeapAlloc - m0.HeapAlloc
				c = cost(b, res.Desired).Sub(empty)
				runtime.KeepAlive(in)
			}
			runtime.KeepAlive(f)
			n := c.Rules + c.Elements
			b.ReportMetric(float64(c.Rules), "rules")
			b.ReportMetric(float64(c.Elements), "elements")
			b.ReportMetric(float64(live)/float64(n), "B/item")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/item")
		})
	}
}
