package selection

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/problem"
)

// Pod is a live pod reduced to what selection and the compilers need. The
// same *Pod stands for the same object from compile to compile, so
// compilers may key what they derived from a pod by it.
type Pod struct {
	Local bool // on the node the Index was made for
	Obj   *corev1.Pod
	// Key is namespace/name: set for local pods, and for pods Unique
	// has seen.
	Key    string
	V4     []netip.Addr
	V6     []netip.Addr
	V4Text []string // V4 as text
	V6Text []string // V6 as text

	// Room for the usual single address of a family, to spare allocations.
	buf4  [1]netip.Addr
	buf4s [1]string
}

// podEntry is a pod object reduced: valid unless the pod is neither
// isolated nor selected; problem is set for an invalid one.
//
// What every compile reads comes first, with the start of Pod (Local), so
// that a compile touches one cache line per unchanged pod.
type podEntry struct {
	gen     uint64    // the last compile that saw the object
	bucket  *nsBucket // its namespace's, so grouping costs no lookup
	problem *problem.Problem
	valid   bool
	src     *corev1.Pod // the object, the entry's key
	Pod
}

// nsBucket gathers a namespace's pods during a compile.
type nsBucket struct {
	name string
	pods []*Pod
	gen  uint64 // the compile pods belongs to
	// spare is the list of the compile before pods' compile: no memo
	// holds it any more (dupOrder keeps only the previous compile's), so
	// the next compile writes into it instead of allocating.
	spare []*Pod
}

func (x *Index) indexPods(objs []*corev1.Pod) {
	x.dirtyNS = map[string]bool{}
	// The pod table is kept from call to call and updated in place: a
	// new table per call would cost more than everything else an
	// event needs.
	pods, buckets := x.prev.pods, x.prev.buckets
	if pods == nil {
		pods = make(map[*corev1.Pod]*podEntry, len(objs))
		buckets = map[string]*nsBucket{}
	}
	gen := x.prev.gen + 1
	x.next.pods, x.next.buckets, x.next.gen = pods, buckets, gen
	var fresh []podEntry // room for the pods seen for the first time
	seen := 0
	var used []*nsBucket
	// Two lists of entries take turns: the previous compile's is read
	// below, the one before it is free. A new list per event would cost
	// a pointer per pod in the cluster, and the garbage collector's
	// scans of the whole heap that such garbage brings.
	entries := x.prev.spare[:0]
	if cap(entries) < len(objs) {
		entries = make([]*podEntry, 0, len(objs)+len(objs)/8)
	}
	for _, o := range objs {
		e := pods[o]
		if e == nil {
			// A new object: its namespace's selections must be
			// evaluated again.
			x.dirtyNS[o.Namespace] = true
			// The first compile allocates every entry at once; later
			// ones one by one, as a block would live as long as its
			// longest-lived entry.
			if len(pods) == 0 && fresh == nil {
				fresh = make([]podEntry, 0, len(objs))
			}
			if len(fresh) < cap(fresh) {
				fresh = fresh[:len(fresh)+1]
				e = &fresh[len(fresh)-1]
			} else {
				e = new(podEntry)
			}
			x.newPod(o, e)
			e.src = o
			if e.bucket = buckets[o.Namespace]; e.bucket == nil {
				e.bucket = &nsBucket{name: o.Namespace}
				buckets[o.Namespace] = e.bucket
			}
			pods[o] = e
		}
		if e.gen != gen {
			e.gen = gen
			seen++
			entries = append(entries, e)
		}
		if e.problem != nil {
			x.problems = append(x.problems, *e.problem)
		}
		if !e.valid {
			continue
		}
		p := &e.Pod
		if p.Local {
			x.local = append(x.local, p)
		}
		b := e.bucket
		if b.gen != gen {
			// The memo keeps the previous list where order counts
			// (dupOrder): this compile writes into the one before.
			b.gen, b.pods, b.spare = gen, b.spare[:0], b.pods
			used = append(used, b)
		}
		b.pods = append(b.pods, p)
	}
	for _, b := range used {
		x.nsNames = append(x.nsNames, b.name)
		x.podsByNS[b.name] = b.pods
	}
	if len(buckets) > 2*len(used)+64 {
		for name, b := range buckets {
			if b.gen != gen {
				delete(buckets, name) // every pod of the namespace is gone
			}
		}
	}
	if seen < len(pods) {
		// The table holds exactly the previous compile's entries: the
		// ones this compile did not see are gone.
		for _, e := range x.prev.entries {
			if e.gen != gen {
				x.dirtyNS[e.src.Namespace] = true // deleted or replaced
				delete(pods, e.src)
				// The entry may sit in the first compile's block,
				// which outlives it: it must not keep the old
				// object alive.
				*e = podEntry{}
			}
		}
	}
	// Pointers left beyond the lists' ends would keep freed entries'
	// objects alive.
	clear(entries[len(entries):cap(entries)])
	for _, b := range used {
		clear(b.pods[len(b.pods):cap(b.pods)])
	}
	x.next.entries, x.next.spare = entries, x.prev.entries
	// Where pods share a name, the first selected counts, so there the
	// order of the same pods matters too.
	for ns, ps := range x.podsByNS {
		if x.dirtyNS[ns] {
			if x.nsHasDuplicates(ns) {
				x.next.dupOrder[ns] = ps
			}
			continue
		}
		if old, ok := x.prev.dupOrder[ns]; ok {
			if !slices.Equal(old, ps) {
				x.dirtyNS[ns] = true
			}
			x.next.dupOrder[ns] = ps
		}
	}
	// Local pods are compiled in key order (pods sharing a key in input
	// order), which decides which of two objects declaring one set name
	// declares it.
	sort.SliceStable(x.local, func(i, j int) bool { return x.local[i].Key < x.local[j].Key })
	sort.Strings(x.nsNames)
}

// newPod reduces a pod object to what the compilers need, in e. Pods that
// are not enforced or selected are not valid.
func (x *Index) newPod(o *corev1.Pod, e *podEntry) {
	// Terminated pods no longer own their address, and hostNetwork
	// pods use the node's: neither is isolated nor selected as a peer
	// (traffic from a hostNetwork pod is judged by its node's IP).
	if o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed || o.Spec.HostNetwork {
		return
	}
	p := &e.Pod
	*p = Pod{Obj: o, Local: o.Spec.NodeName == x.node}
	p.V4, p.V4Text = p.buf4[:0], p.buf4s[:0]
	ips := o.Status.PodIPs
	if len(ips) == 0 && o.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: o.Status.PodIP}}
	}
	for i, ip := range ips {
		a, err := netip.ParseAddr(ip.IP)
		if err != nil || a.Zone() != "" {
			// A zone (fe80::1%eth0) parses but is no pod address,
			// and nft would not read it in a rule.
			e.problem = &problem.Problem{Object: problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: o.Namespace, Name: o.Name},
				Field: fmt.Sprintf("status.podIPs[%d]", i), Reason: fmt.Sprintf("invalid IP %q", ip.IP)}
			return
		}
		if slices.Contains(p.V4, a.Unmap()) || slices.Contains(p.V6, a) {
			continue // listed twice: one map key, one rule
		}
		if a.Is4() {
			// ParseAddr takes only the canonical dotted quad:
			// the text is already what String returns.
			p.V4 = append(p.V4, a)
			p.V4Text = append(p.V4Text, ip.IP)
			continue
		}
		a = a.Unmap()
		if a.Is4() {
			p.V4 = append(p.V4, a)
			p.V4Text = append(p.V4Text, a.String())
		} else {
			p.V6 = append(p.V6, a)
			p.V6Text = append(p.V6Text, a.String())
		}
	}
	if len(p.V4)+len(p.V6) == 0 {
		return // without an address there is nothing to match
	}
	if p.Local {
		p.Key = o.Namespace + "/" + o.Name
	}
	e.valid = true
}

// nsHasDuplicates tells whether two pods of namespace ns share a name. Pods from an informer never
// do; it is checked once per namespace, when a peer first selects there.
func (x *Index) nsHasDuplicates(ns string) bool {
	if d, ok := x.nsDup[ns]; ok {
		return d
	}
	ps := x.podsByNS[ns]
	seen := make(map[string]struct{}, len(ps))
	dup := false
	for _, p := range ps {
		if _, ok := seen[p.Obj.Name]; ok {
			dup = true
			break
		}
		seen[p.Obj.Name] = struct{}{}
	}
	x.nsDup[ns] = dup
	return dup
}

// Unique returns pods with each namespace/name once, as the first of them,
// sorted by key: for a list that Selection.Dup says may hold pods sharing a
// key. pods is not changed.
func Unique(pods []*Pod) []*Pod {
	for _, p := range pods {
		if p.Key == "" {
			p.Key = p.Obj.Namespace + "/" + p.Obj.Name
		}
	}
	ps := append([]*Pod(nil), pods...)
	seen := map[string]bool{}
	out := ps[:0]
	for _, p := range ps {
		if !seen[p.Key] {
			seen[p.Key] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// NamedPort resolves a port name on a pod's containers (init containers
// first), matching protocol (nil: TCP), as Kubernetes does for
// NetworkPolicy and ClusterNetworkPolicy named ports.
func NamedPort(p *corev1.Pod, name string, proto *corev1.Protocol) (int32, bool) {
	want := corev1.ProtocolTCP
	if proto != nil {
		want = *proto
	}
	for _, cts := range [2][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cts {
			for _, port := range cts[i].Ports {
				got := port.Protocol
				if got == "" {
					got = corev1.ProtocolTCP
				}
				if port.Name == name && got == want {
					return port.ContainerPort, true
				}
			}
		}
	}
	return 0, false
}
