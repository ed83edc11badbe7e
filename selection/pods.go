package selection

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// Pod is a live pod reduced to what selection and the compilers need. The
// same *Pod stands for the same record from compile to compile, so
// compilers may key what they derived from a pod by it.
type Pod struct {
	Local bool        // on the node the Index was made for
	Obj   *podset.Pod // the record
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

// podEntry is a pod record reduced: valid unless the pod is neither
// isolated nor selected; problem is set for an invalid one.
type podEntry struct {
	gen     uint64 // the last compile that walked the record's group
	problem *problem.Problem
	valid   bool
	src     *podset.Pod // the record, the entry's key
	Pod
}

// nsBucket is what the compiles derived from one namespace's group of
// pods. It is rebuilt only when the group is a new one: an event costs the
// namespaces it touched, not the cluster.
type nsBucket struct {
	group    *podset.Group
	gen      uint64      // the last compile that saw the group
	entries  []*podEntry // of the group's records, each once
	pods     []*Pod      // the valid ones, in group order
	local    []*Pod      // the valid ones on the node
	problems []problem.Problem
}

func (x *Index) indexPods(set *podset.Set) {
	x.dirtyNS = map[string]bool{}
	// The tables are kept from call to call and updated in place.
	entries, buckets := x.prev.pods, x.prev.buckets
	if entries == nil {
		entries = make(map[*podset.Pod]*podEntry, set.Len())
		buckets = map[string]*nsBucket{}
	}
	gen := x.prev.gen + 1
	x.next.pods, x.next.buckets, x.next.gen = entries, buckets, gen
	for _, g := range set.Groups() {
		b := buckets[g.Namespace]
		if b == nil {
			b = &nsBucket{}
			buckets[g.Namespace] = b
		}
		b.gen = gen
		if b.group != g {
			x.dirtyNS[g.Namespace] = true
			x.walkGroup(g, b, entries, gen)
		}
		x.problems = append(x.problems, b.problems...)
		x.local = append(x.local, b.local...)
		if len(b.pods) > 0 {
			x.nsNames = append(x.nsNames, g.Namespace)
			x.podsByNS[g.Namespace] = b.pods
		}
	}
	if len(buckets) > len(set.Groups()) {
		for ns, b := range buckets {
			if b.gen != gen { // every pod of the namespace is gone
				x.dirtyNS[ns] = true
				for _, e := range b.entries {
					delete(entries, e.src)
				}
				delete(buckets, ns)
			}
		}
	}
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
}

// walkGroup derives b from a namespace's new group g, reusing the entries
// of records the previous compiles saw and dropping those of records that
// are gone.
func (x *Index) walkGroup(g *podset.Group, b *nsBucket, entries map[*podset.Pod]*podEntry, gen uint64) {
	old := b.entries
	*b = nsBucket{group: g, gen: gen, entries: make([]*podEntry, 0, len(g.Pods))}
	var fresh []podEntry // room for the records seen for the first time
	for _, o := range g.Pods {
		e := entries[o]
		if e == nil {
			if fresh == nil && len(old) == 0 {
				// A namespace seen for the first time (the first
				// compile sees them all) gets one block for its
				// records; later records come one by one, as a block
				// lives as long as its longest-lived entry.
				fresh = make([]podEntry, 0, len(g.Pods)-len(b.entries))
			}
			if len(fresh) < cap(fresh) {
				fresh = fresh[:len(fresh)+1]
				e = &fresh[len(fresh)-1]
			} else {
				e = new(podEntry)
			}
			x.newPod(o, e)
			e.src = o
			entries[o] = e
		}
		if e.gen == gen {
			continue // the same record twice
		}
		e.gen = gen
		b.entries = append(b.entries, e)
		if e.problem != nil {
			b.problems = append(b.problems, *e.problem)
		}
		if e.valid {
			b.pods = append(b.pods, &e.Pod)
			if e.Local {
				b.local = append(b.local, &e.Pod)
			}
		}
	}
	for _, e := range old {
		if e.gen != gen { // deleted or replaced
			delete(entries, e.src)
			// The entry may sit in a block that outlives it: it must
			// not keep the old record alive.
			*e = podEntry{}
		}
	}
}

// newPod reduces a pod record to what the compilers need, in e. Pods that
// are not enforced or selected are not valid.
func (x *Index) newPod(o *podset.Pod, e *podEntry) {
	// Terminated pods no longer own their address, and hostNetwork
	// pods use the node's: neither is isolated nor selected as a peer
	// (traffic from a hostNetwork pod is judged by its node's IP).
	if o.Finished || o.HostNetwork {
		return
	}
	p := &e.Pod
	*p = Pod{Obj: o, Local: o.NodeName == x.node}
	p.V4, p.V4Text = p.buf4[:0], p.buf4s[:0]
	for i, ip := range o.IPs {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			// A zone (fe80::1%eth0) parses but is no pod address,
			// and nft would not read it in a rule.
			e.problem = &problem.Problem{Object: problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: o.Namespace, Name: o.Name},
				Field: fmt.Sprintf("status.podIPs[%d]", i), Reason: fmt.Sprintf("invalid IP %q", ip)}
			return
		}
		if slices.Contains(p.V4, a.Unmap()) || slices.Contains(p.V6, a) {
			continue // listed twice: one map key, one rule
		}
		if a.Is4() {
			// ParseAddr takes only the canonical dotted quad:
			// the text is already what String returns.
			p.V4 = append(p.V4, a)
			p.V4Text = append(p.V4Text, ip)
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
