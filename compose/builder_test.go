package compose

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
)

// TestBuilderAndEngineFollowEvents runs the agent's pipeline (one Builder,
// one engine) through random cluster events against the real kernel, and
// after every event checks the kernel's table against the one-shot Build
// of the same state: a fresh engine that reads the table back finds
// nothing to change.
func TestBuilderAndEngineFollowEvents(t *testing.T) {
	ns := testns.New(t, "bld")
	ctx := context.Background()
	eng, err := engine.New(Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rnd := rand.New(rand.NewSource(1))
	c := newEventCluster(rnd)
	var b Builder
	incremental := 0
	for step := 0; step < 150; step++ {
		in := c.input()
		res := b.Build(in)
		if len(res.Problems) > 0 {
			t.Fatalf("step %d: %v", step, res.Problems[0])
		}
		st, err := eng.Sync(ctx, res.Desired)
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, c.last, err)
		}
		if !st.Read {
			incremental++
		}
		check, err := engine.New(Table(), engine.WithNetNS(ns.Path))
		if err != nil {
			t.Fatal(err)
		}
		cst, err := check.Sync(ctx, Build(in).Desired)
		check.Close()
		if err != nil {
			t.Fatalf("step %d: fresh engine: %v", step, err)
		}
		if cst.Messages != 0 {
			t.Fatalf("step %d (%s): the kernel's table differs from a one-shot build: a fresh engine sent %d messages", step, c.last, cst.Messages)
		}
		c.event()
	}
	if incremental < 140 {
		t.Errorf("only %d of 150 syncs used the engine's cache", incremental)
	}
}

// eventCluster is a small cluster that changes one event at a time, with
// every changed object a new object, as informers deliver them.
type eventCluster struct {
	rnd        *rand.Rand
	namespaces []*corev1.Namespace
	pods       []*corev1.Pod
	policies   []*networkingv1.NetworkPolicy
	services   []*corev1.Service
	nodes      []*corev1.Node
	nextID     int
	last       string
}

func newEventCluster(rnd *rand.Rand) *eventCluster {
	c := &eventCluster{rnd: rnd}
	for i := 0; i < 4; i++ {
		c.namespaces = append(c.namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i), Labels: map[string]string{"team": fmt.Sprint("t", i%2)}}})
	}
	for i := 0; i < 2; i++ {
		c.nodes = append(c.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i+1)}}}})
	}
	for i := 0; i < 40; i++ {
		c.pods = append(c.pods, c.newPod())
	}
	for i := 0; i < 12; i++ {
		c.policies = append(c.policies, c.newPolicy())
	}
	for i := 0; i < 3; i++ {
		c.services = append(c.services, c.newService(i))
	}
	return c
}

func (c *eventCluster) input() Input {
	return Input{NodeName: "n0", Namespaces: c.namespaces, Nodes: c.nodes, Pods: podtest.Set(c.pods), NetworkPolicies: npset.New(c.policies), Services: c.services,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
}

func (c *eventCluster) pick(vals ...string) string { return vals[c.rnd.Intn(len(vals))] }

func (c *eventCluster) newPod() *corev1.Pod {
	c.nextID++
	id := c.nextID
	ip := fmt.Sprintf("10.0.%d.%d", id/250, id%250+1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.pick("ns0", "ns1", "ns2", "ns3"), Name: fmt.Sprintf("p%d", id),
			Labels: map[string]string{"app": c.pick("a", "b", "c")}},
		Spec: corev1.PodSpec{NodeName: c.pick("n0", "n1"), Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(8000 + c.rnd.Intn(3))}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}, {IP: fmt.Sprintf("fd00::%x", id)}}},
	}
}

func (c *eventCluster) newPolicy() *networkingv1.NetworkPolicy {
	c.nextID++
	named := intstr.FromString("http")
	num := intstr.FromInt32(int32(80 + c.rnd.Intn(3)))
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.pick("ns0", "ns1", "ns2", "ns3"), Name: fmt.Sprintf("np%d", c.nextID)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": c.pick("a", "b", "c")}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	switch c.rnd.Intn(3) {
	case 0:
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.pick("a", "b", "c")}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
		}}
	case 1:
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": c.pick("t0", "t1")}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.pick("a", "b", "c")}},
			}, {IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.0/12", Except: []string{"172.16.1.0/24"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &num}},
		}}
	}
	if c.rnd.Intn(2) == 0 {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.pick("a", "b", "c")}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
		}}
	}
	return np
}

func (c *eventCluster) newService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.pick("ns0", "ns1", "ns2", "ns3"), Name: fmt.Sprintf("svc%d", i),
			Annotations: map[string]string{"nftguard.io/egress": "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": c.pick("a", "b", "c")}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: fmt.Sprintf("198.51.100.%d", 10+c.rnd.Intn(50))}}}},
	}
}

// event applies one random change.
func (c *eventCluster) event() {
	switch c.rnd.Intn(9) {
	case 0:
		c.pods = append(slices.Clip(c.pods), c.newPod())
		c.last = "pod added"
	case 1:
		if len(c.pods) > 5 {
			i := c.rnd.Intn(len(c.pods))
			c.pods = slices.Delete(slices.Clone(c.pods), i, i+1)
			c.last = "pod deleted"
		}
	case 2, 3:
		i := c.rnd.Intn(len(c.pods))
		p := c.pods[i].DeepCopy()
		p.Labels["app"] = c.pick("a", "b", "c")
		c.pods = slices.Clone(c.pods)
		c.pods[i] = p
		c.last = "pod relabelled"
	case 4:
		i := c.rnd.Intn(len(c.pods))
		p := c.pods[i].DeepCopy()
		c.nextID++
		ip := fmt.Sprintf("10.0.%d.%d", c.nextID/250, c.nextID%250+1)
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		c.pods = slices.Clone(c.pods)
		c.pods[i] = p
		c.last = "pod readdressed"
	case 5:
		c.policies = append(slices.Clip(c.policies), c.newPolicy())
		c.last = "policy added"
	case 6:
		if len(c.policies) > 2 {
			i := c.rnd.Intn(len(c.policies))
			c.policies = slices.Delete(slices.Clone(c.policies), i, i+1)
			c.last = "policy deleted"
		}
	case 7:
		i := c.rnd.Intn(len(c.namespaces))
		n := c.namespaces[i].DeepCopy()
		n.Labels["team"] = c.pick("t0", "t1")
		c.namespaces = slices.Clone(c.namespaces)
		c.namespaces[i] = n
		c.last = "namespace relabelled"
	case 8:
		i := c.rnd.Intn(len(c.services))
		c.services = slices.Clone(c.services)
		c.services[i] = c.newService(i)
		c.last = "service changed"
	}
	if c.rnd.Intn(4) == 0 {
		// Listers return objects in no particular order.
		c.pods = slices.Clone(c.pods)
		c.rnd.Shuffle(len(c.pods), func(i, j int) { c.pods[i], c.pods[j] = c.pods[j], c.pods[i] })
	}
}
