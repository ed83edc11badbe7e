package selection

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// Member is a pod that counts (see the package doc: it runs and owns an
// address that parses), as the Index holds it for selection and the
// compilers: its record, its addresses as nft text, whether it is on the
// node. Selections are made of Members, and the local pods the compilers
// give chains are Members. The record itself is Obj: a Member adds what
// the Index derived from it, so it is not a second kind of pod. The same
// *Member stands for the same record from compile to compile, so
// compilers may key what they derived from a pod by it.
type Member struct {
	Obj *podset.Pod // the record
	// Key is namespace/name: set for local pods, and for pods Unique
	// has seen.
	Key string
	// addrs are the pod's addresses as nft reads them (canonical text),
	// IPv4 first: every selected pod in the cluster has an entry, so it
	// holds one list and no parsed copies.
	addrs []string
	n4    int32 // how many of addrs are IPv4
	Local bool  // on the node the Index was made for
	valid bool  // enforced or selectable: it has an address and runs

	// Room for the usual single address, to spare an allocation.
	buf [1]string
}

// V4Text are the pod's IPv4 addresses as text.
func (p *Member) V4Text() []string { return p.addrs[:p.n4] }

// V6Text are the pod's IPv6 addresses as text.
func (p *Member) V6Text() []string { return p.addrs[p.n4:] }

// podEntry is a pod record reduced: valid unless the pod is neither
// isolated nor selected; problem is set for an invalid one. Obj is set in
// every entry: it is the entry's key.
type podEntry struct {
	gen     uint64 // the last compile that walked the record's group
	problem *problem.Problem
	Member
}

// nsBucket is what the compiles derived from one namespace's group of
// pods. It is rebuilt only when the group is a new one: an event costs the
// namespaces it touched, not the cluster.
type nsBucket struct {
	group    *podset.Group
	gen      uint64      // the last compile that saw the group
	entries  []*podEntry // of the group's records, each once, in group order
	pods     []*Member   // the valid ones, in group order
	local    []*Member   // the valid ones on the node
	dup      bool        // two of pods share a name
	problems []problem.Problem
	// What the walk that made the bucket changed against the bucket the
	// previous compile read (set when there was one): selections update
	// their part of the namespace by these instead of matching every pod
	// of it again, so that an event costs what it changed.
	delta *podDelta
}

// podDelta is how a namespace's valid pods changed in one walk.
type podDelta struct {
	gen     uint64           // the compile that walked
	removed map[*Member]bool // valid before, gone or replaced
	added   []*Member        // valid now, new records, in group order
}

func (x *Index) indexPods(set *podset.Set) {
	x.dirtyNS = map[string]bool{}
	// The table is kept from call to call and updated in place.
	buckets := x.prev.buckets
	if buckets == nil {
		buckets = map[string]*nsBucket{}
	}
	gen := x.prev.gen + 1
	groups := set.Groups()
	x.next.buckets, x.next.gen = buckets, gen
	// A Set made by Replace holds the previous Set's groups at the same
	// places unless a namespace came or went: then a group is found
	// without a lookup, and an event costs a pointer comparison per
	// namespace.
	prevGroups, prevBuckets := x.prev.groups, x.prev.byGroup
	byGroup := prevBuckets // read at i before written at i; prev is not read after this compile
	if len(byGroup) != len(groups) {
		byGroup = make([]*nsBucket, len(groups))
	}
	x.next.groups, x.next.byGroup = groups, byGroup
	namesSame := len(groups) == len(prevGroups)
	for i, g := range groups {
		var b *nsBucket
		if i < len(prevGroups) && prevGroups[i] == g {
			b = prevBuckets[i]
		} else {
			if b = buckets[g.Namespace]; b == nil {
				b = &nsBucket{}
				buckets[g.Namespace] = b
			}
			if i >= len(prevGroups) || prevGroups[i].Namespace != g.Namespace {
				namesSame = false
			}
			if b.group != g {
				x.dirtyNS[g.Namespace] = true
				hadPods := len(b.pods) > 0
				x.walkGroup(g, b, gen)
				if hadPods != (len(b.pods) > 0) {
					namesSame = false
				}
			}
		}
		b.gen = gen
		x.next.byGroup[i] = b
		x.problems = append(x.problems, b.problems...)
		x.local = append(x.local, b.local...)
	}
	if namesSame && x.prev.nsNames != nil {
		x.nsNames = x.prev.nsNames
	} else {
		for i, g := range groups {
			if len(x.next.byGroup[i].pods) > 0 {
				x.nsNames = append(x.nsNames, g.Namespace)
			}
		}
	}
	if len(buckets) > len(groups) {
		for ns, b := range buckets {
			if b.gen != gen { // every pod of the namespace is gone
				x.dirtyNS[ns] = true
				delete(buckets, ns)
			}
		}
	}
	// Local pods are compiled in key order (pods sharing a key in input
	// order), which decides which of two objects declaring one set name
	// declares it.
	sort.SliceStable(x.local, func(i, j int) bool { return x.local[i].Key < x.local[j].Key })
}

// walkGroup derives b from a namespace's new group g, reusing the entries
// of records the previous group had and dropping those of records that
// are gone.
func (x *Index) walkGroup(g *podset.Group, b *nsBucket, gen uint64) {
	old := b.entries
	var delta *podDelta
	if b.group != nil && b.gen == gen-1 {
		// The previous compile read this bucket: what changes now is
		// what its selections must change.
		delta = &podDelta{gen: gen}
	}
	*b = nsBucket{group: g, gen: gen, entries: make([]*podEntry, 0, len(g.Items)), delta: delta}
	// A new group is mostly the old one in the same order (the agent
	// sorts by name), so records are first looked for in step with the
	// old entries; a map of this namespace's entries is made only when
	// that fails. No table of every pod in the cluster is kept.
	var byRecord map[*podset.Pod]*podEntry
	j := 0
	var fresh []podEntry // room for the records seen for the first time
	for _, o := range g.Items {
		var e *podEntry
		if j < len(old) && old[j].Obj == o {
			e = old[j]
			j++
		} else {
			if byRecord == nil {
				byRecord = make(map[*podset.Pod]*podEntry, len(old))
				for _, oe := range old {
					byRecord[oe.Obj] = oe
				}
			}
			e = byRecord[o]
		}
		if e == nil {
			if fresh == nil && len(old) == 0 {
				// A namespace seen for the first time (the first
				// compile sees them all) gets one block for its
				// records; later records come one by one, as a block
				// lives as long as its longest-lived entry.
				fresh = make([]podEntry, 0, len(g.Items)-len(b.entries))
			}
			if len(fresh) < cap(fresh) {
				fresh = fresh[:len(fresh)+1]
				e = &fresh[len(fresh)-1]
			} else {
				e = new(podEntry)
			}
			x.newPod(o, e)
			if delta != nil && e.valid {
				delta.added = append(delta.added, &e.Member)
			}
			if byRecord != nil {
				byRecord[o] = e
			}
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
			b.pods = append(b.pods, &e.Member)
			if e.Local {
				b.local = append(b.local, &e.Member)
			}
		}
	}
	b.dup = hasDuplicates(b.pods)
	for _, e := range old {
		if e.gen != gen { // deleted or replaced
			if delta != nil && e.valid {
				if delta.removed == nil {
					delta.removed = map[*Member]bool{}
				}
				delta.removed[&e.Member] = true
			}
			// The entry may sit in a block that outlives it: it must
			// not keep the old record alive.
			*e = podEntry{}
		}
	}
}

// newPod reduces a pod record to what the compilers need, in e. Pods that
// are not enforced or selected are not valid.
func (x *Index) newPod(o *podset.Pod, e *podEntry) {
	e.Obj = o
	// Terminated pods no longer own their address, and hostNetwork
	// pods use the node's: neither is isolated nor selected as a peer
	// (traffic from a hostNetwork pod is judged by its node's IP).
	if o.Finished || o.HostNetwork {
		return
	}
	p := &e.Member
	p.Local = o.NodeName == x.node
	// Pods have one or two addresses: the lists stay on the stack.
	var a4, a6 [2]string
	v4, v6 := a4[:0], a6[:0]
	for i, ip := range o.IPs {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			// A zone (fe80::1%eth0) parses but is no pod address,
			// and nft would not read it in a rule.
			e.problem = &problem.Problem{Object: problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: o.Namespace, Name: o.Name},
				Field: fmt.Sprintf("status.podIPs[%d]", i), Reason: fmt.Sprintf("invalid IP %q", ip)}
			return
		}
		// ParseAddr takes only the canonical dotted quad: an IPv4
		// address's text is already what String returns.
		text := ip
		if a = a.Unmap(); !a.Is4() || strings.Contains(ip, ":") {
			text = a.String()
		}
		if slices.Contains(v4, text) || slices.Contains(v6, text) {
			continue // listed twice: one map key, one rule
		}
		if a.Is4() {
			v4 = append(v4, text)
		} else {
			v6 = append(v6, text)
		}
	}
	switch n := len(v4) + len(v6); {
	case n == 0:
		return // without an address there is nothing to match
	case n == 1:
		p.buf[0] = append(v4, v6...)[0]
		p.addrs = p.buf[:]
	default:
		p.addrs = append(append(make([]string, 0, n), v4...), v6...)
	}
	p.n4 = int32(len(v4))
	if p.Local {
		p.Key = o.Namespace + "/" + o.Name
	}
	p.valid = true
}

// nsPods are the enforced pods of namespace ns, in input order.
func (x *Index) nsPods(ns string) []*Member {
	if b := x.next.buckets[ns]; b != nil {
		return b.pods
	}
	return nil
}

// nsDelta is how namespace ns's pods changed since the previous compile,
// or nil when that is not known.
func (x *Index) nsDelta(ns string) *podDelta {
	if b := x.next.buckets[ns]; b != nil && b.delta != nil && b.delta.gen == x.next.gen {
		return b.delta
	}
	return nil
}

// nsHasDuplicates tells whether two pods of namespace ns share a name.
func (x *Index) nsHasDuplicates(ns string) bool {
	b := x.next.buckets[ns]
	return b != nil && b.dup
}

// hasDuplicates tells whether two of pods share a name. Pods from an
// informer never do, and come sorted by name: then neighbours tell.
func hasDuplicates(pods []*Member) bool {
	if slices.IsSortedFunc(pods, func(a, b *Member) int { return strings.Compare(a.Obj.Name, b.Obj.Name) }) {
		for i := 1; i < len(pods); i++ {
			if pods[i].Obj.Name == pods[i-1].Obj.Name {
				return true
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(pods))
	for _, p := range pods {
		if _, ok := seen[p.Obj.Name]; ok {
			return true
		}
		seen[p.Obj.Name] = struct{}{}
	}
	return false
}

// Unique returns pods with each namespace/name once, as the first of them,
// sorted by key: for a list that Selection.Dup says may hold pods sharing a
// key. pods is not changed.
func Unique(pods []*Member) []*Member {
	for _, p := range pods {
		if p.Key == "" {
			p.Key = p.Obj.Namespace + "/" + p.Obj.Name
		}
	}
	ps := append([]*Member(nil), pods...)
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
