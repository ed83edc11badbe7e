package flowlog

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/policy"
)

// Resolver is what a reader knows about the cluster: the agent answers
// from its informer caches, `nftguard flows -f` from manifests (Objects).
type Resolver interface {
	// PodByAddr names the pod ("namespace/name") that has addr, or "".
	PodByAddr(addr netip.Addr) string
	// Isolating names the NetworkPolicies of the pod's namespace that
	// isolate the pod ("namespace/name") in direction d, sorted
	// (IsolatingPolicies of the namespace's policies).
	Isolating(pod string, d Direction) []string
}

// Resolve names the pods at both ends of r and the decision. The pod whose
// chain denied the packet is the one its direction's dispatch map is keyed
// by: the destination for ingress, the source for egress. res may be nil:
// the record then names addresses only.
func Resolve(r *Record, res Resolver) {
	if res != nil {
		r.SrcPod, r.DstPod = res.PodByAddr(r.Src), res.PodByAddr(r.Dst)
	}
	var addr netip.Addr
	switch r.Direction {
	case Forged:
		resolveForged(r, res)
		return
	case Ingress:
		r.Pod, addr = r.DstPod, r.Dst
	case Egress:
		r.Pod, addr = r.SrcPod, r.Src
	default:
		r.Decision = fmt.Sprintf("logged with prefix %q, not by nftguard's table", r.Prefix)
		return
	}
	if r.Pod == "" {
		r.Decision = fmt.Sprintf("pod at %s isolated for %s; no rule allowed (pod not known to this reader)", addr, r.Direction)
		return
	}
	if clusterDecision(r, res) {
		return
	}
	r.Policies = res.Isolating(r.Pod, r.Direction)
	names := make([]string, len(r.Policies))
	for i, p := range r.Policies {
		names[i] = p[strings.IndexByte(p, '/')+1:]
	}
	word := "policies"
	if len(names) == 1 {
		word = "policy"
	}
	r.Decision = fmt.Sprintf("pod %s isolated for %s by %s %s; no rule allowed", r.Pod, r.Direction, word, strings.Join(names, ", "))
}

// IsolatingPolicies names the NetworkPolicies among nps (those of the
// pod's namespace) that isolate a pod with the labels podLabels in
// direction d, sorted: policy.IsolatingPolicies, the compiler's reading,
// for a record's direction. Only Ingress and Egress isolate; no policy is
// named for another direction (Resolve never asks for one). Every
// Resolver answers Isolating with it.
func IsolatingPolicies(nps []*networkingv1.NetworkPolicy, podLabels map[string]string, d Direction) []string {
	if d != Ingress && d != Egress {
		return nil
	}
	return policy.IsolatingPolicies(nps, podLabels, d == Egress)
}

// Objects is a Resolver over a fixed set of objects (manifests, a test).
type Objects struct {
	cluster  *explain.Cluster // see WithCluster
	byAddr   map[netip.Addr]string
	labels   map[string]labels.Set
	policies map[string][]*networkingv1.NetworkPolicy // by namespace
}

// NewObjects indexes pods by address and policies by namespace. Pods on
// the host network (whose address is their node's) and finished pods are
// left out.
func NewObjects(pods []*corev1.Pod, policies []*networkingv1.NetworkPolicy) *Objects {
	o := &Objects{byAddr: map[netip.Addr]string{}, labels: map[string]labels.Set{}, policies: map[string][]*networkingv1.NetworkPolicy{}}
	for _, p := range pods {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key := p.Namespace + "/" + p.Name
		o.labels[key] = labels.Set(p.Labels)
		ips := p.Status.PodIPs
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = []corev1.PodIP{{IP: p.Status.PodIP}}
		}
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				if _, taken := o.byAddr[a]; !taken {
					o.byAddr[a] = key
				}
			}
		}
	}
	for _, np := range policies {
		o.policies[np.Namespace] = append(o.policies[np.Namespace], np)
	}
	return o
}

// WithCluster makes o a ClusterDenier that evaluates records on c (built
// from the same objects, with their ClusterNetworkPolicies and the node's
// name), and returns o.
func (o *Objects) WithCluster(c *explain.Cluster) *Objects {
	o.cluster = c
	return o
}

// ClusterDeny implements ClusterDenier: nil without WithCluster.
func (o *Objects) ClusterDeny(r *Record) *ClusterRule { return ClusterDeny(o.cluster, r) }

// PodByAddr implements Resolver.
func (o *Objects) PodByAddr(a netip.Addr) string { return o.byAddr[a.Unmap()] }

// Isolating implements Resolver.
func (o *Objects) Isolating(pod string, d Direction) []string {
	ns := pod[:max(strings.IndexByte(pod, '/'), 0)]
	return IsolatingPolicies(o.policies[ns], o.labels[pod], d)
}

// InterfaceResolver is a Resolver that also knows whose interface a
// packet came in by: the agent does, from the interfaces its last sync
// guarded.
type InterfaceResolver interface {
	// PodByIfindex names the pod ("namespace/name") whose interface has
	// index i in the node's network namespace, or "".
	PodByIfindex(i uint32) string
}

// resolveForged names the pod a forged packet came from: the one whose
// interface it entered by (its source address is the forgery, so it
// names no one).
func resolveForged(r *Record, res Resolver) {
	r.SrcPod = ""
	if ir, ok := res.(InterfaceResolver); ok && r.InIfindex != 0 {
		r.Pod = ir.PodByIfindex(r.InIfindex)
	}
	if r.Pod == "" {
		r.Decision = fmt.Sprintf("source %s is no address of the pod it came from (interface %d), or of no pod of this node: dropped", r.Src, r.InIfindex)
		return
	}
	r.SrcPod = r.Pod
	r.Decision = fmt.Sprintf("source %s is not an address of pod %s, whose interface it came from: only the pod's own addresses may leave it", r.Src, r.Pod)
}
