package clusterpolicy

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/podtest"
)

// bigCNPCluster is the benchmark suite's shape: 10k pods in 100
// namespaces on 100 nodes (n1 has 100 of them), 100 Admin and 100 Baseline
// ClusterNetworkPolicies selecting by namespace and pod labels.
func bigCNPCluster() Input {
	in := Input{NodeName: "node-000"}
	for n := 0; n < 100; n++ {
		in.Namespaces = append(in.Namespaces, apitest.Namespace(fmt.Sprintf("ns%03d", n), "team", fmt.Sprintf("t%d", n%10)))
	}
	var podList []*corev1.Pod
	for i := 0; i < 10000; i++ {
		p := apitest.Pod(fmt.Sprintf("ns%03d", i%100), fmt.Sprintf("p%05d", i), fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255),
			apitest.OnNode(fmt.Sprintf("node-%03d", i%100)), apitest.WithLabels("app", fmt.Sprintf("app%d", i%20)), apitest.Port("web", 8080, corev1.ProtocolTCP))
		podList = append(podList, p)
	}
	in.Pods = podtest.Set(podList)
	for i := 0; i < 200; i++ {
		tier := v1beta1.AdminTier
		if i >= 100 {
			tier = v1beta1.BaselineTier
		}
		in.Policies = append(in.Policies, bigCNP(i, tier))
	}
	return in
}

func bigCNP(i int, tier v1beta1.Tier) *v1beta1.ClusterNetworkPolicy {
	return cnp(fmt.Sprintf("cnp%03d", i), tier, int32(i%50), func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Pods: &v1beta1.NamespacedPod{
			NamespaceSelector: *sel("team", fmt.Sprintf("t%d", i%10)), PodSelector: *sel("app", fmt.Sprintf("app%d", i%20))}}
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
			ingress(accept, "", []v1beta1.ClusterNetworkPolicyIngressPeer{fromPods(sel("team", fmt.Sprintf("t%d", (i+1)%10)), sel("app", fmt.Sprintf("app%d", (i+5)%20)))}, cnptest.TCP(8080)),
			ingress(deny, "", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(&metav1.LabelSelector{})}),
		}
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
			egress(pass, "", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("team", fmt.Sprintf("t%d", (i+2)%10)))}),
			egress(deny, "", []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("169.254.169.254/32")}),
		}
	})
}

// labelChange returns in with one local pod relabelled into other
// policies' subjects.
func labelChange(in Input) Input {
	out := in
	podList := append([]*corev1.Pod(nil), podtest.List(in.Pods)...)
	c := podList[100].DeepCopy() // p00100, on node-000
	c.Labels["app"] = "app10"    // out of the subjects of cnp000, cnp020, ...; into cnp010, cnp030, ...
	podList[100] = c
	out.Pods = podtest.Set(podList)
	return out
}

// TestCompilerReusesUnchangedWork: after one local pod's label change the
// Compiler returns the very chains of the previous call for every other
// pod, and the same result as Compile.
func TestCompilerReusesUnchangedWork(t *testing.T) {
	in := bigCNPCluster()
	var m Compiler
	first := m.Compile(in)
	next := labelChange(in)
	second := m.Compile(next)
	if len(first.Chains) < 100 {
		t.Fatalf("%d chains: the cluster selects too little", len(first.Chains))
	}
	if diff := cmp.Diff(Compile(next), second); diff != "" {
		t.Fatalf("Compiler differs from Compile (-Compile +Compiler):\n%s", diff)
	}
	firstRules := map[string]string{}
	for _, ch := range first.Chains {
		if len(ch.Rules) > 0 {
			firstRules[ch.Name] = fmt.Sprintf("%p", &ch.Rules[0])
		}
	}
	same := 0
	for _, ch := range second.Chains {
		if len(ch.Rules) > 0 && firstRules[ch.Name] == fmt.Sprintf("%p", &ch.Rules[0]) {
			same++
		}
	}
	t.Logf("chains reused %d of %d", same, len(second.Chains))
	if same != len(second.Chains)-4 { // p00100's four chains change, nothing else
		t.Errorf("only %d of %d chains reused after one pod's label change", same, len(second.Chains))
	}
}

func BenchmarkCompileFull10k(b *testing.B) {
	in := bigCNPCluster()
	for b.Loop() {
		Compile(in)
	}
}

func BenchmarkCompilerLabelChange10k(b *testing.B) {
	in := bigCNPCluster()
	benchmarkFlip(b, in, labelChange(in))
}

func BenchmarkCompilerAddCNP10k(b *testing.B) {
	in := bigCNPCluster()
	more := in
	more.Policies = append(append([]*v1beta1.ClusterNetworkPolicy(nil), in.Policies...), bigCNP(200, v1beta1.AdminTier))
	benchmarkFlip(b, in, more)
}

// benchmarkFlip measures one Compiler flipping between two states: each
// iteration compiles the change from the other state, not a full table.
func benchmarkFlip(b *testing.B, from, to Input) {
	states := [2]Input{from, to}
	var m Compiler
	m.Compile(from)
	i := 0
	for b.Loop() {
		i++
		m.Compile(states[i%2])
	}
}
