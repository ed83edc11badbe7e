package agent

import (
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nftguard/nftguard/policy"
)

// strip is the informers' transform without label sharing (see stripper):
// it keeps only the fields the compilers read (policy, egress and
// compose), so the caches of a large cluster stay small. Pods and Nodes
// dominate memory and are rebuilt from scratch; the other kinds lose their
// managed fields (often larger than the object).
//
// UID and ResourceVersion stay on every object: Events name the UID, and
// the reflector relies on resource versions.
func strip(obj any) (any, error) { return stripWith(obj, nil) }

func stripWith(obj any, s *stripper) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return stripPod(o, s), nil
	case *corev1.Node:
		return stripNode(o), nil
	case *corev1.Namespace:
		// The policy compiler reads namespace labels and the
		// log-denied opt-in annotation only.
		o.ManagedFields = nil
		o.Annotations = keepAnnotation(o.Annotations, policy.AnnotationLogDenied)
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

func keepAnnotation(a map[string]string, key string) map[string]string {
	if v, ok := a[key]; ok {
		return map[string]string{key: v}
	}
	return nil
}

// stripper is the informers' transform with what equal pods repeat shared
// between them: the pods of one Deployment or StatefulSet carry equal
// label sets and equal container ports, and a label map (300 bytes and
// more) and a container with its ports (over 500 bytes) cost as much as the
// rest of a stripped pod. Measured at 150k pods: see agent/envelope_test.go
// and bench/results/ENVELOPE.md. Informer transforms run on the informers'
// goroutines, hence the lock.
//
// A shared value lives as long as a pod holding it: each stripped pod
// releases its references when the garbage collector frees it
// (runtime.AddCleanup), so pod churn never grows the tables.
type stripper struct {
	mu     sync.Mutex
	labels map[string]*shared[map[string]string] // by canonical encoding
	ports  map[string]*shared[[]corev1.Container]
	buf    []byte
	keys   []string
}

// shared is one shared value and the number of pods holding it.
type shared[T any] struct {
	v    T
	key  string
	refs int
}

// podShares are the shared values one pod holds.
type podShares struct {
	labels *shared[map[string]string]
	ports  *shared[[]corev1.Container]
}

func newStripper() *stripper {
	return &stripper{labels: map[string]*shared[map[string]string]{}, ports: map[string]*shared[[]corev1.Container]{}}
}

// strip is the transform, for informers.WithTransform.
func (s *stripper) strip(obj any) (any, error) { return stripWith(obj, s) }

// share gives the stripped pod out the shared copies of its labels and
// named ports (from the API object p).
func (s *stripper) share(out, p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ps podShares
	if len(p.Labels) > 0 {
		k := s.encodeLabels(p.Labels)
		ps.labels = s.labels[string(k)]
		if ps.labels == nil {
			m := make(map[string]string, len(p.Labels))
			for key, v := range p.Labels {
				m[intern(key)] = intern(v)
			}
			ps.labels = &shared[map[string]string]{v: m, key: string(k)}
			s.labels[ps.labels.key] = ps.labels
		}
		ps.labels.refs++
		out.Labels = ps.labels.v
	}
	if cs := namedPorts(p.Spec.InitContainers, p.Spec.Containers); cs != nil {
		k := s.encodePorts(cs[0].Ports)
		ps.ports = s.ports[string(k)]
		if ps.ports == nil {
			ps.ports = &shared[[]corev1.Container]{v: cs, key: string(k)}
			s.ports[ps.ports.key] = ps.ports
		}
		ps.ports.refs++
		out.Spec.Containers = ps.ports.v
	}
	if ps.labels != nil || ps.ports != nil {
		runtime.AddCleanup(out, s.release, ps)
	}
}

func (s *stripper) release(ps podShares) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := ps.labels; l != nil {
		if l.refs--; l.refs == 0 && s.labels[l.key] == l {
			delete(s.labels, l.key)
		}
	}
	if p := ps.ports; p != nil {
		if p.refs--; p.refs == 0 && s.ports[p.key] == p {
			delete(s.ports, p.key)
		}
	}
}

// liveShared is the number of label sets and port lists held.
func (s *stripper) liveShared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.labels) + len(s.ports)
}

// encodeLabels writes m unambiguously (sorted keys, every string length
// prefixed: tenants choose the text). The bytes are valid until the next
// encode.
func (s *stripper) encodeLabels(m map[string]string) []byte {
	keys := s.keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := s.buf[:0]
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	s.buf, s.keys = b, keys
	return b
}

// encodePorts writes a named port list unambiguously, in order (the order
// decides which of two equal names counts).
func (s *stripper) encodePorts(ports []corev1.ContainerPort) []byte {
	b := s.buf[:0]
	for _, p := range ports {
		b = appendString(b, p.Name)
		b = appendString(b, string(p.Protocol))
		b = strconv.AppendInt(b, int64(p.ContainerPort), 10)
		b = append(b, ';')
	}
	s.buf = b
	return b
}

func appendString(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// intern returns the canonical copy of a string many objects repeat
// (namespaces, node names, label keys and values, port names), so a
// hundred thousand pods hold one copy each.
func intern(s string) string { return unique.Make(s).Value() }

func keptMeta(m *metav1.ObjectMeta, labels bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: intern(m.Namespace), UID: m.UID, ResourceVersion: m.ResourceVersion}
	if labels {
		out.Labels = m.Labels
	}
	return out
}

// stripPod keeps what policy and egress read: identity and labels, the node,
// host networking, the phase, the addresses, and the named container ports
// (named ports in policies resolve against them; a port without a name is
// never looked up). With s, labels and ports are shared with equal pods.
func stripPod(p *corev1.Pod, s *stripper) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: keptMeta(&p.ObjectMeta, s == nil)}
	if s != nil {
		s.share(out, p)
	} else {
		out.Spec.Containers = namedPorts(p.Spec.InitContainers, p.Spec.Containers)
	}
	out.Spec.NodeName = intern(p.Spec.NodeName)
	out.Spec.HostNetwork = p.Spec.HostNetwork
	out.Status.Phase = corev1.PodPhase(intern(string(p.Status.Phase)))
	out.Status.PodIP = p.Status.PodIP
	out.Status.PodIPs = p.Status.PodIPs
	if len(out.Status.PodIPs) == 1 && out.Status.PodIPs[0].IP == out.Status.PodIP {
		out.Status.PodIP = out.Status.PodIPs[0].IP // one string for both
	}
	return out
}

// namedPorts gathers the named ports of all containers, init containers
// first, into one container: a Container is 400 bytes, and a named port
// resolves to the first match in that order (selection.NamedPort), which
// the gathered list keeps.
func namedPorts(lists ...[]corev1.Container) []corev1.Container {
	var ports []corev1.ContainerPort
	for _, cs := range lists {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.Name == "" {
					continue
				}
				ports = append(ports, corev1.ContainerPort{Name: intern(port.Name), ContainerPort: port.ContainerPort,
					Protocol: corev1.Protocol(intern(string(port.Protocol)))})
			}
		}
	}
	if ports == nil {
		return nil
	}
	return []corev1.Container{{Ports: slices.Clip(ports)}}
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
	ao, ok1 := a.(apiruntime.Object)
	bo, ok2 := b.(apiruntime.Object)
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
