package deniedflow

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// BenchmarkDeniedRecord is the work per record after the kernel
// handed it over: resolving both addresses and the isolating policies from
// caches of 10,000 pods and 1,000 policies (10 in the pod's namespace),
// and writing the JSON slog record. With ClusterNetworkPolicies (20, the
// 11th of which denies the record's flow), the record's flow is evaluated
// on the explain.Cluster of the last sync, built once per sync generation
// (its build is reported as build-ms, outside the per-record numbers).
func BenchmarkDeniedRecord(b *testing.B) {
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podAddrIndex: podAddrs})
	npIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range 10000 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("p%d", i),
			Labels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}}}
		p.Spec.NodeName = "n1"
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}}
		podIdx.Add(podset.FromAPI(p))
	}
	for i := range 1000 {
		npIdx.Add(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("np%d", i)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}}}})
	}
	res := NewResolver(podIdx, netlisters.NewNetworkPolicyLister(npIdx))
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	rec := flowlog.Record{Direction: flowlog.Ingress, Protocol: 6, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 40000, DstPort: 80}
	run := func(b *testing.B, res *Resolver) {
		b.ReportAllocs()
		for b.Loop() {
			r := rec
			flowlog.Resolve(&r, res)
			log.Info("denied", recordAttrs(&r)...)
		}
	}
	b.Run("NetworkPolicy", func(b *testing.B) {
		run(b, res)
		r := rec
		flowlog.Resolve(&r, res)
		if r.DstPod != "ns2/p2" || len(r.Policies) == 0 {
			b.Fatalf("resolved %+v", r)
		}
	})
	b.Run("ClusterNetworkPolicy", func(b *testing.B) {
		in := compose.Input{NodeName: "n1"}
		var pods []*podset.Pod
		for _, o := range podIdx.List() {
			pods = append(pods, o.(*podset.Pod))
		}
		slices.SortFunc(pods, func(a, b *podset.Pod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		in.Pods = podset.NewSet(pods)
		for _, o := range npIdx.List() {
			in.NetworkPolicies = npset.New(append(in.NetworkPolicies.All(), o.(*networkingv1.NetworkPolicy)))
		}
		for i := range 100 {
			in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i),
				Labels: map[string]string{"team": fmt.Sprintf("t%d", i%10)}}})
		}
		for i := range 20 {
			in.ClusterNetworkPolicies = append(in.ClusterNetworkPolicies, &cnp.ClusterNetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cnp%02d", i)},
				Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: int32(i),
					Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", (i+2)%10)}}},
					Ingress: []cnp.ClusterNetworkPolicyIngressRule{{Name: "r", Action: cnp.ClusterNetworkPolicyRuleActionDeny,
						From:      []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}},
						Protocols: []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: int32(70 + i)}}}}}}}})
		}
		res := NewResolver(podIdx, netlisters.NewNetworkPolicyLister(npIdx))
		res.Synced(in, compose.Result{})
		start := time.Now()
		if res.cluster.get() == nil {
			b.Fatal("no cluster")
		}
		build := time.Since(start)
		run(b, res)
		b.ReportMetric(float64(build.Microseconds())/1000, "build-ms")
		r := rec
		flowlog.Resolve(&r, res)
		if r.ClusterRule == nil || r.ClusterRule.Policy != "cnp10" {
			b.Fatalf("resolved %+v", r)
		}
	})
}
