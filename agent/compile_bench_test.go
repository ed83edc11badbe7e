package agent

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// BenchmarkCompile10k measures what every agent sync costs before the
// kernel is touched: a full compose.Build over the caches at the scale of
// the goal (10k pods on 100 nodes, 100 local, 1k policies), with
// stripped pods as the informers hold them.
func BenchmarkCompile10k(b *testing.B) {
	in := compose.Input{NodeName: "node-000"}
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("ns-%02d", i)
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"ns": name, "tier": fmt.Sprintf("t%d", i%5)}}})
	}
	var podList []*podset.Pod
	for i := 0; i < 10000; i++ {
		ip := fmt.Sprintf("10.%d.%d.%d", 128+i/65536, i/256%256, i%256)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%02d", i%50), Name: fmt.Sprintf("p%05d", i),
				Labels: map[string]string{"app": fmt.Sprintf("app%d", i%20)}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%100), Containers: []corev1.Container{{
				Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		}
		podList = append(podList, stripPod(p, nil))
	}
	in.Pods = podset.NewSet(podList)
	named := intstr.FromString("http")
	for i := 0; i < 1000; i++ {
		in.NetworkPolicies = npset.New(append(in.NetworkPolicies.All(), &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%02d", i%50), Name: fmt.Sprintf("np%04d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%20)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": fmt.Sprintf("t%d", i%5)}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (i+1)%20)}},
					}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
				}},
			},
		}))
	}
	b.ResetTimer()
	for b.Loop() {
		if res := compose.Build(in); len(res.Problems) > 0 {
			b.Fatal(res.Problems[0])
		}
	}
}
