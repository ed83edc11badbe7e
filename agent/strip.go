package agent

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nftguard/nftguard/policy"
)

// strip is the informers' transform: it keeps only the fields the compilers
// read (policy, egress and compose), so the caches of a 10k-pod cluster stay
// small. Pods and Nodes dominate memory and are rebuilt from scratch; the
// other kinds lose their managed fields (often larger than the object).
//
// UID and ResourceVersion stay on every object: Events name the UID, and
// the reflector relies on resource versions.
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return stripPod(o), nil
	case *corev1.Node:
		return stripNode(o), nil
	case *corev1.Namespace:
		// The policy compiler reads namespace labels, and one
		// annotation: the opt-in to logging of denied packets.
		o.ManagedFields = nil
		if v, ok := o.Annotations[policy.AnnotationLogDenied]; ok {
			o.Annotations = map[string]string{policy.AnnotationLogDenied: v}
		} else {
			o.Annotations = nil
		}
		o.Spec, o.Status = corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
		return o, nil
	case *networkingv1.NetworkPolicy:
		// kubectl's last-applied annotation duplicates the spec.
		o.ManagedFields, o.Annotations = nil, nil
		return o, nil
	case *corev1.Service:
		// Egress is configured by annotations: keep them.
		o.ManagedFields = nil
		return o, nil
	}
	// Tombstones (cache.DeletedFinalStateUnknown) and anything else pass.
	return obj, nil
}

func keptMeta(m *metav1.ObjectMeta, labels bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	if labels {
		out.Labels = m.Labels
	}
	return out
}

// stripPod keeps what policy and egress read: identity and labels, the node,
// host networking, the phase, the addresses, and container ports (named
// ports in policies resolve against them).
func stripPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: keptMeta(&p.ObjectMeta, true)}
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.HostNetwork = p.Spec.HostNetwork
	out.Spec.InitContainers = portsOnly(p.Spec.InitContainers)
	out.Spec.Containers = portsOnly(p.Spec.Containers)
	out.Status.Phase = p.Status.Phase
	out.Status.PodIP = p.Status.PodIP
	out.Status.PodIPs = p.Status.PodIPs
	return out
}

func portsOnly(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		if len(c.Ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return out
}

// stripNode keeps the node's addresses (egress never translates traffic to
// nodes). A node's image list alone can be tens of kilobytes.
func stripNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: keptMeta(&n.ObjectMeta, true)}
	out.Status.Addresses = n.Status.Addresses
	return out
}

// sameContent reports whether two cached objects differ only in resource
// version: after stripping, most pod and node status updates (conditions,
// heartbeats) are such no-ops and must not cost a sync.
func sameContent(a, b any) bool {
	ao, ok1 := a.(runtime.Object)
	bo, ok2 := b.(runtime.Object)
	if !ok1 || !ok2 {
		return false
	}
	am, ok1 := ao.DeepCopyObject().(metav1.Object)
	bm, ok2 := bo.DeepCopyObject().(metav1.Object)
	if !ok1 || !ok2 {
		return false
	}
	am.SetResourceVersion("")
	bm.SetResourceVersion("")
	return reflect.DeepEqual(am, bm)
}
