package egress

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/podtest"
)

// BenchmarkCompile10k is one egress compile at 10k pods over 100 nodes
// (100 on this node, half of them behind one egress Service, one pending
// so the guard is on): with the Node's own pod range, the guard knows this
// node's pods; without it, every pod of the cluster.
func BenchmarkCompile10k(b *testing.B) {
	for _, own := range []bool{true, false} {
		b.Run(fmt.Sprintf("own-range=%v", own), func(b *testing.B) {
			in := baseInput()
			in.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
			var pods []*corev1.Pod
			for i := 0; i < 10000; i++ {
				node := fmt.Sprintf("n%d", 1+i%100)
				app := "other"
				if node == "n1" && i%200 == 0 {
					app = "web"
				}
				pods = append(pods, pod("x", fmt.Sprintf("p%05d", i), app, node, fmt.Sprintf("10.%d.%d.%d", 1+i%100, i/256%256, i%256)))
			}
			pods = append(pods, pod("x", "pending", "web", "n1"))
			in.Pods = podtest.Set(pods)
			if own {
				in.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.1.0.0/16"}}}}
			}
			in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7")}
			in.Local = &LocalAddrs{Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}}
			known := len(findSetB(Compile(in), SetKnown4).Elements)
			for b.Loop() {
				Compile(in)
			}
			b.ReportMetric(float64(known), "known")
		})
	}
}

func findSetB(out Output, name string) (s struct{ Elements []string }) {
	for _, set := range out.Sets {
		if set.Name == name {
			for _, e := range set.Elements {
				s.Elements = append(s.Elements, e.Key)
			}
		}
	}
	return s
}
