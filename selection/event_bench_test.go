package selection

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/podset"
)

// BenchmarkPodEvent is one pod event (a pod relabelled) in a namespace of
// 10,000 pods while S distinct cross-namespace selector pairs select in
// it, each selecting a few of its pods: the per-event cost the compilers
// pay in selection. It must follow the event (and the selectors'
// answers), not selectors × the namespace's pods.
func BenchmarkPodEvent(b *testing.B) {
	const pods = 10000
	for _, selectors := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("selectors=%d", selectors), func(b *testing.B) {
			var list []*podset.Pod
			for i := range pods {
				list = append(list, &podset.Pod{Namespace: "big", Name: fmt.Sprintf("p%05d", i),
					Labels: map[string]string{"app": fmt.Sprintf("a%d", i%2000)}, NodeName: "n2",
					IPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+1)}})
			}
			list = append(list, &podset.Pod{Namespace: "mine", Name: "me", NodeName: "n1", IPs: []string{"10.200.0.1"}})
			namespaces := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{"team": "big"}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}}
			nsSel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "big"}}
			var podSels []*metav1.LabelSelector
			for i := range selectors {
				podSels = append(podSels, &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("a%d", i)}})
			}
			set := podset.NewSet(list)
			var m Memo
			compile := func() {
				x := m.Index("n1", namespaces, set)
				for _, ps := range podSels {
					x.Select("mine", nsSel, ps)
				}
			}
			compile()
			i := 0
			for b.Loop() {
				// Relabel one pod: a new record in a new group.
				i++
				j := i % pods
				p := *list[j]
				p.Labels = map[string]string{"app": fmt.Sprintf("a%d", (j+i)%2000)}
				list[j] = &p
				set = set.Update(list)
				compile()
			}
		})
	}
}
