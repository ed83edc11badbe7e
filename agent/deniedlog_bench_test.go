package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/flowlog"
)

// BenchmarkDeniedRecord is the agent's work per record after the kernel
// handed it over: resolving both addresses and the isolating policies from
// caches of 10,000 pods and 1,000 policies (10 in the pod's namespace),
// and writing the JSON slog record.
func BenchmarkDeniedRecord(b *testing.B) {
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podAddrIndex: podAddrs})
	npIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range 10000 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("p%d", i),
			Labels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}}}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}}
		podIdx.Add(p)
	}
	for i := range 1000 {
		npIdx.Add(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("np%d", i)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}}}})
	}
	res := listerResolver{pods: corelisters.NewPodLister(podIdx), addrs: podIdx, policies: netlisters.NewNetworkPolicyLister(npIdx)}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	rec := flowlog.Record{Direction: flowlog.Ingress, Protocol: 6, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 40000, DstPort: 80}
	b.ReportAllocs()
	for b.Loop() {
		r := rec
		flowlog.Resolve(&r, res)
		log.Info("denied", deniedAttrs(&r)...)
	}
	if r := rec; true {
		flowlog.Resolve(&r, res)
		if r.DstPod != "ns2/p2" || len(r.Policies) == 0 {
			b.Fatalf("resolved %+v", r)
		}
	}
}
