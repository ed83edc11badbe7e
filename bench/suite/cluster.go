package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// The synthetic cluster models a 100-node cluster seen from one node: pods
// are spread round-robin over the nodes, so about 1% of them are local to
// localNode, the node whose table is benchmarked.
const (
	clusterNodes   = 100
	localNode      = "node-000"
	policiesPerNS  = 10
	appsPerNS      = 10
	teams          = 10
	podsAddrOffset = 1 << 16 // pods start at 10.1.0.0, clear of the lab's 10.0.0.0/16 uses
)

// size is one synthetic cluster size.
type size struct {
	Pods, Policies int
}

func (s size) String() string {
	return fmt.Sprintf("%s pods / %s policies", human(s.Pods), human(s.Policies))
}

// human prints 1000 as 1k, the way the sizes are named in the issue.
func human(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// cluster is the API objects of one synthetic cluster.
type cluster struct {
	Namespaces []*corev1.Namespace
	Pods       []*corev1.Pod
	Policies   []*networkingv1.NetworkPolicy
	// pods gives the compilers the same record for the same pod object,
	// as the agent's cache does; copies of a cluster share it.
	pods *podset.Converter
	// policies is the last input's policy Set: the next keeps its
	// unchanged namespaces, as the agent's does.
	policies *npset.Set
}

// newCluster generates a cluster with a realistic policy mix: every
// namespace has a default-deny policy, then policies with pod-selector,
// namespace-selector and ipBlock (with except) peers, numeric and named
// ports. It is a pure function of s, so every repetition sees the same
// objects.
func newCluster(s size) *cluster {
	nns := max(s.Policies/policiesPerNS, 1)
	c := &cluster{pods: new(podset.Converter)}
	for i := range nns {
		c.Namespaces = append(c.Namespaces, namespace(i))
	}
	for i := range s.Pods {
		// Namespace and node both cycle with i; adding i/nns to the node
		// index keeps them from lining up (with 100 namespaces every
		// local pod would otherwise be in the same one).
		node := fmt.Sprintf("node-%03d", (i+i/nns)%clusterNodes)
		c.Pods = append(c.Pods, pod(i, i%nns, node, fmt.Sprintf("app%d", (i/nns)%appsPerNS)))
	}
	for i := range s.Policies {
		c.Policies = append(c.Policies, policy(i, i%nns, (i/nns)%policiesPerNS))
	}
	return c
}

func nsName(i int) string { return fmt.Sprintf("ns%04d", i) }

func namespace(i int) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: nsName(i), Labels: map[string]string{
			"kubernetes.io/metadata.name": nsName(i),
			"team":                        fmt.Sprintf("team%d", i%teams),
		}},
	}
}

// podAddr is pod i's IPv4 address: 10.1.0.0 + i.
func podAddr(i int) string {
	a := netip.AddrFrom4([4]byte{10, byte((podsAddrOffset + i) >> 16), byte((podsAddrOffset + i) >> 8), byte(podsAddrOffset + i)})
	return a.String()
}

func pod(i, ns int, node, app string) *corev1.Pod {
	ip := podAddr(i)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: nsName(ns), Name: fmt.Sprintf("pod%06d", i), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name:  "main",
			Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// policy returns policy i of namespace ns; k (0..9) picks its kind, so that
// each namespace has one default-deny and a mix of the rest.
func policy(i, ns, k int) *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	named := func(name string) networkingv1.NetworkPolicyPort {
		p := intstr.FromString(name)
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p}
	}
	num := func(proto *corev1.Protocol, n int) networkingv1.NetworkPolicyPort {
		p := intstr.FromInt32(int32(n))
		return networkingv1.NetworkPolicyPort{Protocol: proto, Port: &p}
	}
	app := func(a int) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", a%appsPerNS)}}
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: nsName(ns), Name: fmt.Sprintf("np%06d", i)},
	}
	spec := &np.Spec
	switch k % 5 {
	case 0: // namespace default-deny, both directions
		if k == 0 {
			spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			return np
		}
		// DNS egress for the namespace, to the DNS pods (app0) of the
		// first namespace, which plays kube-system.
		spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsName(0)}},
				PodSelector:       app(0),
			}},
			Ports: []networkingv1.NetworkPolicyPort{num(&udp, 53), num(&tcp, 53)},
		}}
	case 1: // app-to-app in the namespace on a named port
		spec.PodSelector = *app(k)
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: app(k + 1)}},
			Ports: []networkingv1.NetworkPolicyPort{named("http")},
		}}
	case 2: // monitoring from another team's namespaces, named port
		spec.PodSelector = *app(k)
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("team%d", (ns+1)%teams)}},
				PodSelector:       app(k + 2),
			}},
			Ports: []networkingv1.NetworkPolicyPort{named("metrics")},
		}}
	case 3: // egress to the outside except private ranges
		spec.PodSelector = *app(k)
		spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
				CIDR:   "0.0.0.0/0",
				Except: []string{"10.0.0.0/8", "172.16.0.0/12", fmt.Sprintf("192.168.%d.0/24", ns%256)},
			}}},
			Ports: []networkingv1.NetworkPolicyPort{num(&tcp, 443)},
		}}
	case 4: // ingress from a partner subnet and from pods in the namespace
		spec.PodSelector = *app(k)
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("198.%d.0.0/16", 18+ns%2), Except: []string{fmt.Sprintf("198.%d.%d.0/24", 18+ns%2, ns%256)}}},
				{PodSelector: app(k + 3)},
			},
			Ports: []networkingv1.NetworkPolicyPort{num(&tcp, 5432), named("http")},
		}}
	}
	return np
}

// input is the compose input for the benchmarked node.
func (c *cluster) input() compose.Input {
	c.policies = c.policies.Update(c.Policies)
	return compose.Input{NodeName: localNode, Namespaces: c.Namespaces, Pods: c.pods.Set(c.Pods), NetworkPolicies: c.policies}
}

// writeManifests writes the cluster as one JSON List into dir, the form
// `nftguard apply -f` reads.
func (c *cluster) writeManifests(dir string) (string, error) {
	items := make([]any, 0, len(c.Namespaces)+len(c.Pods)+len(c.Policies))
	for _, o := range c.Namespaces {
		items = append(items, o)
	}
	for _, o := range c.Pods {
		items = append(items, o)
	}
	for _, o := range c.Policies {
		items = append(items, o)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return "", fmt.Errorf("encode manifests: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("write manifests: %w", err)
	}
	return path, nil
}
