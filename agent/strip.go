package agent

import (
	"reflect"
	"slices"
	"strconv"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/tablelayout"
	"unsafe"
)

// strip is the informers' transform without label sharing (see stripper):
// it keeps only the fields the compilers read (policy, egress and
// compose), so the caches of a large cluster stay small. Pods dominate
// memory: the pod cache holds podset records, not API objects (see
// package podset). Nodes are rebuilt from scratch; the other kinds lose
// their managed fields (often larger than the object).
//
// UIDs stay (Events name them) and so do the resource versions of API
// objects.
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
		o.Annotations = keepAnnotation(o.Annotations, tablelayout.AnnotationLogDenied)
		o.Spec, o.Status = corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
		return o, nil
	case *networkingv1.NetworkPolicy:
		// kubectl's last-applied annotation duplicates the spec.
		o.ManagedFields, o.Annotations = nil, nil
		// Compilers compare and hash it once per policy.
		o.Namespace = intern(o.Namespace)
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
// The tables hold every value handed out since the last sweep; sweep drops
// those no cached pod holds, and the sync loop calls it whenever the tables
// have doubled since (needsSweep), so pod churn never grows them past twice
// what live pods hold. A sweep costs a walk over the cached pods; a
// per-pod release (a runtime cleanup per record) cost 50 bytes a pod.
type stripper struct {
	mu     sync.Mutex
	labels map[string]map[string]string // by canonical encoding
	ports  map[string][]podset.Port
	kept   int // values kept by the last sweep
	buf    []byte
	keys   []string
}

func newStripper() *stripper {
	return &stripper{labels: map[string]map[string]string{}, ports: map[string][]podset.Port{}}
}

// strip is the transform, for informers.WithTransform.
func (s *stripper) strip(obj any) (any, error) { return stripWith(obj, s) }

// share gives the record out the shared copies of its labels and named
// ports (from the API object p).
func (s *stripper) share(out *podset.Pod, p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out.Labels = s.shareLabels(p.Labels)
	out.Ports = s.sharePorts(namedPorts(p))
}

// shareRecord replaces a peer record's labels and named ports with the
// shared copies (interning them as a pod's are).
func (s *stripper) shareRecord(rec *podset.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Labels = s.shareLabels(rec.Labels)
	for i := range rec.Ports {
		rec.Ports[i].Name = intern(rec.Ports[i].Name)
		rec.Ports[i].Protocol = corev1.Protocol(intern(string(rec.Ports[i].Protocol)))
	}
	rec.Ports = s.sharePorts(slices.Clip(rec.Ports))
}

// shareLabels returns the shared copy of labels; s.mu is held.
func (s *stripper) shareLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	k := s.encodeLabels(labels)
	m, ok := s.labels[string(k)]
	if !ok {
		m = make(map[string]string, len(labels))
		for key, v := range labels {
			m[intern(key)] = intern(v)
		}
		s.labels[string(k)] = m
	}
	return m
}

// sharePorts returns the shared copy of a named port list; s.mu is held.
func (s *stripper) sharePorts(ports []podset.Port) []podset.Port {
	if len(ports) == 0 {
		return nil
	}
	k := s.encodePorts(ports)
	if shared, ok := s.ports[string(k)]; ok {
		return shared
	}
	s.ports[string(k)] = ports
	return ports
}

// needsSweep tells whether the tables have doubled since the last sweep.
func (s *stripper) needsSweep() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.labels)+len(s.ports) > 2*s.kept+1024
}

// sweep drops the shared values that none of pods (the cached objects:
// pod records and remoteSlices) holds. A value handed out while it runs may be dropped too: the pod
// keeps it, and only the next equal pod gets a copy of its own.
func (s *stripper) sweep(pods []any) {
	labels := make(map[unsafe.Pointer]bool, len(pods)/8)
	ports := make(map[*podset.Port]bool, len(pods)/8)
	var records []*podset.Pod
	for _, o := range pods {
		if rs, ok := o.(*remoteSlice); ok {
			records = append(records, rs.pods...)
			continue
		}
		if p, ok := o.(*podset.Pod); ok {
			records = append(records, p)
		}
	}
	for _, p := range records {
		if p.Labels != nil {
			labels[reflect.ValueOf(p.Labels).UnsafePointer()] = true
		}
		if len(p.Ports) > 0 {
			ports[&p.Ports[0]] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, m := range s.labels {
		if !labels[reflect.ValueOf(m).UnsafePointer()] {
			delete(s.labels, k)
		}
	}
	for k, l := range s.ports {
		if len(l) == 0 || !ports[&l[0]] {
			delete(s.ports, k)
		}
	}
	s.kept = len(s.labels) + len(s.ports)
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
func (s *stripper) encodePorts(ports []podset.Port) []byte {
	b := s.buf[:0]
	for _, p := range ports {
		b = appendString(b, p.Name)
		b = appendString(b, string(p.Protocol))
		b = strconv.AppendInt(b, int64(p.Number), 10)
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

// stripPod reduces a pod to its record (podset.FromAPI), with its strings
// interned and, with s, its labels and named ports shared with equal pods.
// Only named ports are kept: a port without a name is never looked up.
func stripPod(p *corev1.Pod, s *stripper) *podset.Pod {
	out := &podset.Pod{
		Namespace:   intern(p.Namespace),
		Name:        p.Name,
		UID:         p.UID,
		NodeName:    intern(p.Spec.NodeName),
		HostNetwork: p.Spec.HostNetwork,
		Finished:    podset.Finished(p),
		IPs:         podset.IPs(p),
	}
	if s != nil {
		s.share(out, p)
	} else {
		out.Labels, out.Ports = p.Labels, namedPorts(p)
	}
	return out
}

// namedPorts is podset.NamedPorts with the strings interned and the list
// clipped (it is kept, shared, for the pod's life).
func namedPorts(p *corev1.Pod) []podset.Port {
	ports := podset.NamedPorts(p)
	for i := range ports {
		ports[i].Name = intern(ports[i].Name)
		ports[i].Protocol = corev1.Protocol(intern(string(ports[i].Protocol)))
	}
	return slices.Clip(ports)
}

// stripNode keeps the node's addresses and pod ranges (egress never
// translates traffic to nodes or pods). A node's image list alone can be
// tens of kilobytes.
func stripNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: keptMeta(&n.ObjectMeta, true)}
	out.Status.Addresses = n.Status.Addresses
	out.Spec.PodCIDR, out.Spec.PodCIDRs = n.Spec.PodCIDR, n.Spec.PodCIDRs
	return out
}

// sameContent reports whether two cached objects differ only in resource
// version: after stripping, most pod and node status updates (conditions,
// heartbeats) are such no-ops and must not cost a sync.
func sameContent(a, b any) bool {
	if ap, ok := a.(*podset.Pod); ok {
		bp, ok := b.(*podset.Pod)
		return ok && ap.Same(bp)
	}
	if as, ok := a.(*remoteSlice); ok {
		bs, ok := b.(*remoteSlice)
		return ok && sameSlice(as, bs)
	}
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
