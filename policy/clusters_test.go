package policy

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// Test clusters: randomCluster for the golden files and the incremental
// Compiler's random event sequences, bigCluster for benchmarks.

// randomCluster builds a small cluster that exercises every path of the
// compiler: shared and distinct selectors, missing namespaces, duplicate
// objects, dual-stack and broken pods, named ports, ipBlocks and invalid
// policies.
func randomCluster(r *rand.Rand) Input {
	in := Input{NodeName: "n1"}
	pick := func(vals ...string) string { return vals[r.Intn(len(vals))] }
	nsCount := 1 + r.Intn(6)
	nsName := func() string { return fmt.Sprintf("ns%d", r.Intn(nsCount+1)) } // ns<nsCount> has no Namespace object
	for i := 0; i < nsCount; i++ {
		l := map[string]string{}
		if r.Intn(2) == 0 {
			l["tier"] = pick("a", "b", "c")
		}
		if r.Intn(3) == 0 {
			l["env"] = pick("prod", "dev")
		}
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i), Labels: l}})
	}
	protos := []corev1.Protocol{"", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	sidecar := corev1.ContainerRestartPolicyAlways
	nPods := r.Intn(40)
	var podList []*corev1.Pod
	for i := 0; i < nPods; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName(), Name: fmt.Sprintf("p%d", i)}}
		if r.Intn(15) == 0 && len(podList) > 0 {
			p.Name = podList[r.Intn(len(podList))].Name // duplicate key (maybe)
		}
		p.Labels = map[string]string{}
		for _, k := range []string{"app", "role", "x"} {
			if r.Intn(2) == 0 {
				p.Labels[k] = pick("a", "b", "c", "d")
			}
		}
		p.Spec.NodeName = pick("n1", "n1", "n2", "")
		if p.Name != fmt.Sprintf("p%d", i) {
			// At most one local pod per key: two local pods with one
			// key would give two chains of one name.
			p.Spec.NodeName = "n2"
		}
		p.Spec.HostNetwork = r.Intn(15) == 0
		p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodFailed, corev1.PodSucceeded}[r.Intn(6)]
		v4 := fmt.Sprintf("10.0.%d.%d", r.Intn(3), r.Intn(20))
		v6 := fmt.Sprintf("fd00::%x", r.Intn(40))
		switch r.Intn(8) {
		case 0:
			p.Status.PodIP = v4
		case 1:
			p.Status.PodIPs = []corev1.PodIP{{IP: v6}}
		case 2:
			p.Status.PodIPs = []corev1.PodIP{{IP: v4}, {IP: v6}}
		case 3:
			p.Status.PodIPs = []corev1.PodIP{{IP: "bogus"}}
		case 4:
			// no address
		default:
			p.Status.PodIPs = []corev1.PodIP{{IP: v4}}
		}
		for j := r.Intn(3); j > 0; j-- {
			ct := corev1.Container{Name: "c"}
			for k := r.Intn(3); k > 0; k-- {
				ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: pick("http", "dns", "metrics"), ContainerPort: int32(1 + r.Intn(9000)), Protocol: protos[r.Intn(len(protos))]})
			}
			if r.Intn(4) == 0 {
				// A pod's first init container is a sidecar (its ports
				// are looked up after the containers'), a second one a
				// plain init container (its ports never are).
				if len(p.Spec.InitContainers) == 0 {
					ct.RestartPolicy = &sidecar
				}
				p.Spec.InitContainers = append(p.Spec.InitContainers, ct)
			} else {
				p.Spec.Containers = append(p.Spec.Containers, ct)
			}
		}
		podList = append(podList, p)
	}
	in.Pods = podtest.Set(podList)

	labelSel := func(keys ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{}
		switch r.Intn(5) {
		case 0:
			// empty: everything
		case 1:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: pick(keys...), Operator: metav1.LabelSelectorOpIn, Values: []string{pick("a", "b", "c", "d", "prod"), pick("a", "b", "c", "d", "dev")}}}
		case 2:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: pick(keys...), Operator: []metav1.LabelSelectorOperator{metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}[r.Intn(2)]}}
			if r.Intn(2) == 0 {
				s.MatchLabels = map[string]string{pick(keys...): pick("a", "b", "c", "d", "prod", "dev")}
			}
		case 3:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: pick(keys...), Operator: metav1.LabelSelectorOpNotIn, Values: []string{pick("a", "b", "prod")}}}
		default:
			s.MatchLabels = map[string]string{pick(keys...): pick("a", "b", "c", "d", "prod", "dev")}
		}
		return s
	}
	podKeys := []string{"app", "role", "x"}
	nsKeys := []string{"tier", "env", corev1.LabelMetadataName}
	peer := func() networkingv1.NetworkPolicyPeer {
		var p networkingv1.NetworkPolicyPeer
		switch r.Intn(6) {
		case 0:
			if r.Intn(2) == 0 {
				p.IPBlock = &networkingv1.IPBlock{CIDR: fmt.Sprintf("10.%d.0.0/%d", r.Intn(2), 8+r.Intn(17))}
				if r.Intn(2) == 0 {
					p.IPBlock.Except = []string{fmt.Sprintf("10.%d.%d.0/24", r.Intn(2), r.Intn(3))}
				}
			} else {
				p.IPBlock = &networkingv1.IPBlock{CIDR: "fd00::/64"}
				if r.Intn(2) == 0 {
					p.IPBlock.Except = []string{"fd00::/120"}
				}
			}
		case 1:
			p.NamespaceSelector = labelSel(nsKeys...)
		case 2:
			p.PodSelector = labelSel(podKeys...)
		default:
			p.PodSelector = labelSel(podKeys...)
			p.NamespaceSelector = labelSel(nsKeys...)
		}
		if r.Intn(20) == 0 {
			p.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}} // invalid
		}
		return p
	}
	portList := func() []networkingv1.NetworkPolicyPort {
		var out []networkingv1.NetworkPolicyPort
		for k := r.Intn(4); k > 0; k-- {
			var pp networkingv1.NetworkPolicyPort
			if pr := protos[r.Intn(len(protos))]; pr != "" {
				pp.Protocol = &pr
			}
			switch r.Intn(4) {
			case 0:
			case 1:
				v := intstr.FromString(pick("http", "dns", "metrics", "none"))
				pp.Port = &v
			case 2:
				v := intstr.FromInt32(int32(1 + r.Intn(1000)))
				pp.Port = &v
				end := v.IntVal + int32(r.Intn(3))
				pp.EndPort = &end
			default:
				v := intstr.FromInt32(int32(1 + r.Intn(1000)))
				pp.Port = &v
			}
			out = append(out, pp)
		}
		return out
	}
	peers := func() []networkingv1.NetworkPolicyPeer {
		var out []networkingv1.NetworkPolicyPeer
		for k := r.Intn(4); k > 0; k-- {
			out = append(out, peer())
		}
		return out
	}
	nPol := r.Intn(15)
	var nps []*networkingv1.NetworkPolicy // in the order made: names below pick from it
	for i := 0; i < nPol; i++ {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsName(), Name: fmt.Sprintf("np%d", i)}}
		if r.Intn(10) == 0 && len(nps) > 0 {
			np.Name = nps[r.Intn(len(nps))].Name // duplicate key (maybe)
		}
		np.Spec.PodSelector = *labelSel(podKeys...)
		for k := r.Intn(3); k > 0; k-- {
			np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers(), Ports: portList()})
		}
		for k := r.Intn(3); k > 0; k-- {
			np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: peers(), Ports: portList()})
		}
		switch r.Intn(4) {
		case 0:
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		case 1:
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		case 2:
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		}
		if r.Intn(8) == 0 {
			breakPolicy(r, np)
		}
		nps = append(nps, np)
	}
	in.Policies = npset.New(nps)
	return in
}

// breakPolicy makes a policy invalid in one of the ways Validate reports.
func breakPolicy(r *rand.Rand, np *networkingv1.NetworkPolicy) {
	bad := func() networkingv1.NetworkPolicyPort {
		switch r.Intn(5) {
		case 0:
			v := intstr.FromInt32(int32([]int{0, 70000}[r.Intn(2)]))
			return networkingv1.NetworkPolicyPort{Port: &v}
		case 1:
			v, end := intstr.FromInt32(500), int32(400)
			return networkingv1.NetworkPolicyPort{Port: &v, EndPort: &end}
		case 2:
			v := intstr.FromString([]string{"Bad_Name", "x", "waytoolongportname"}[r.Intn(3)])
			return networkingv1.NetworkPolicyPort{Port: &v}
		case 3:
			p := corev1.Protocol("ICMP")
			return networkingv1.NetworkPolicyPort{Protocol: &p}
		}
		end := int32(9)
		return networkingv1.NetworkPolicyPort{EndPort: &end}
	}
	switch r.Intn(6) {
	case 0:
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{bad()}})
	case 1:
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{}, bad()}})
	case 2:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{"Sideways", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeIngress}
	case 3:
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{}}})
	case 4:
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "nope", Except: []string{"x"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"fd00::/64", "bad", "11.0.0.0/16"}}},
		}})
	default:
		np.Name = ""
		np.Spec.PodSelector.MatchExpressions = append(np.Spec.PodSelector.MatchExpressions, metav1.LabelSelectorRequirement{Key: "app", Operator: "Near"})
	}
}

// bigCluster is the agent benchmark's scale: 10k pods on 100 nodes (100
// local), 50 namespaces, 1k policies.
func bigCluster() Input {
	in := Input{NodeName: "node-000"}
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("ns-%02d", i)
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"ns": name, "tier": fmt.Sprintf("t%d", i%5)}}})
	}
	var podList []*corev1.Pod
	for i := 0; i < 10000; i++ {
		ip := fmt.Sprintf("10.%d.%d.%d", 128+i/65536, i/256%256, i%256)
		podList = append(podList, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%02d", i%50), Name: fmt.Sprintf("p%05d", i),
				Labels: map[string]string{"app": fmt.Sprintf("app%d", i%20)}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%100), Containers: []corev1.Container{{
				Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		})
	}
	in.Pods = podtest.Set(podList)
	named := intstr.FromString("http")
	for i := 0; i < 1000; i++ {
		in.Policies = npset.New(append(in.Policies.All(), &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%02d", i%50), Name: fmt.Sprintf("np%04d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%20)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": fmt.Sprintf("t%d", i%5)}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (i+1)%20)}},
					}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
				}},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (i+3)%20)}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
				}},
			},
		}))
	}
	return in
}

func BenchmarkCompile10k(b *testing.B) {
	in := bigCluster()
	b.ResetTimer()
	for b.Loop() {
		Compile(in)
	}
}
