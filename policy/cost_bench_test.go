package policy

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// costCluster is namespace x with 10 local pods, 20 namespaces of 50
// remote pods each, and the given policies; the pod sets a and b differ
// by one remote pod (an event that every all-namespace selection sees).
func costCluster(nps []*networkingv1.NetworkPolicy) (in Input, a, b []*corev1.Pod) {
	in = Input{NodeName: "n1", Namespaces: []*corev1.Namespace{apitest.Namespace("x")}, Policies: npset.New(nps)}
	for i := range 10 {
		a = append(a, apitest.Pod("x", fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i+1)))
	}
	for n := range 20 {
		ns := fmt.Sprintf("r%02d", n)
		in.Namespaces = append(in.Namespaces, apitest.Namespace(ns))
		for i := range 50 {
			a = append(a, apitest.Pod(ns, fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", n, i+1), apitest.OnNode("n2")))
		}
	}
	b = append(append([]*corev1.Pod(nil), a...), apitest.Pod("r00", "new", "10.1.99.1", apitest.OnNode("n2")))
	return in, a, b
}

// benchCost reports, for one cluster: the table's rules and set elements,
// the heap a Compiler keeps, and (as ns/op and B/op) one event: the
// Compiler compiling the cluster after a remote pod came or went.
func benchCost(b *testing.B, nps []*networkingv1.NetworkPolicy) {
	in, podsA, podsB := costCluster(nps)
	setA, setB := podtest.Set(podsA), podtest.Set(podsB)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var m Compiler
	in.Pods = setA
	out := m.Compile(in)
	runtime.GC()
	runtime.ReadMemStats(&after)
	rules, elems := size(out)
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		in.Pods = setB
		if i%2 == 1 {
			in.Pods = setA
		}
		i++
		m.Compile(in)
	}
	// After the loop: resetting the timer clears reported metrics.
	b.ReportMetric(float64(rules), "rules")
	b.ReportMetric(float64(elems), "elements")
	b.ReportMetric(heap, "heap-bytes")
}

// Policies that select the same pods (every pod of x) and allow ingress
// from every namespace on one port: the table and an event cost the
// policies' own size, the shared peer set once.
func BenchmarkCostSamePods(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			var nps []*networkingv1.NetworkPolicy
			for i := range n {
				nps = append(nps, netpol("x", fmt.Sprintf("np%05d", i), metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
					s.Ingress = []networkingv1.NetworkPolicyIngressRule{{
						From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
						Ports: []networkingv1.NetworkPolicyPort{tcp(80)}}}
				}))
			}
			benchCost(b, nps)
		})
	}
}

// One policy selecting the 10 local pods with P numbered ports in one
// rule (never adjacent, so P elements): rules stay flat, elements grow
// with P.
func BenchmarkCostPortsPerRule(b *testing.B) {
	for _, p := range []int{1, 10, 100, 1000, 20000} {
		b.Run(fmt.Sprintf("ports=%d", p), func(b *testing.B) {
			var ports []networkingv1.NetworkPolicyPort
			for i := range p {
				ports = append(ports, tcp(2*(i+1)))
			}
			benchCost(b, []*networkingv1.NetworkPolicy{netpol("x", "ports", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
				s.Ingress = []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
					Ports: ports}}
			})})
		})
	}
}
