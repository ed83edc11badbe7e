package selection

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// Memo carries what one compile selected to the next, so that the next
// re-evaluates only the selections an event touched. The zero value is
// ready to use; a Memo is not safe for concurrent use.
type Memo struct {
	prev *memo
}

// memo is what one compile derived, keyed by what it was derived from. A
// compile reads the previous memo and writes a new one holding only what it
// used, so nothing outlives the objects it came from.
type memo struct {
	node       string
	buckets    map[string]*nsBucket         // shared by successive memos: what each namespace's group gave
	groups     []*podset.Group              // the Set's groups the compile read
	byGroup    []*nsBucket                  // the bucket of each of groups
	gen        uint64                       // the compile that wrote this memo
	namespaces map[string]*corev1.Namespace // the object whose labels count, by name; never changed once made
	nsList     []*corev1.Namespace          // the list namespaces was made from
	// nsLabels are namespace objects' labels as selectors read them,
	// shared by successive memos: made once per object, when a
	// namespaceSelector first reads them.
	nsLabels map[*corev1.Namespace]labels.Set
	nsNames  []string // namespaces with pods, sorted
	peers    map[PeerKey]*peerMemo
}

func newMemo(node string) *memo {
	return &memo{
		node:  node,
		peers: map[PeerKey]*peerMemo{},
	}
}

// peerMemo is a selector pair and what it selected.
type peerMemo struct {
	pods       *Parsed // nil: every pod
	ns         *Parsed // nil: the namespace ownNS
	ownNS      string
	namespaces []string
	sel        Selection
	ends       []int  // where each namespace's pods end in sel.Pods
	dups       []bool // whether each namespace's part may hold pods sharing a key
}

// Index is one compile's view of the cluster: the enforced pods grouped by
// namespace, and the selections evaluated so far. It belongs to the
// compile that made it.
type Index struct {
	node      string
	all       []*Member // every enforced pod, once asked for
	nsNames   []string  // namespaces with pods, sorted
	local     []*Member // pods on this node, sorted by key
	problems  []problem.Problem
	selectors *Selectors
	nsMatches map[string][]string // namespaceSelector key → namespaces
	peers     map[PeerKey]Selection

	// What the previous compile derived (read) and what this one derives
	// (written).
	prev, next *memo
	dirtyNS    map[string]bool  // namespaces whose pods changed since prev
	nsChanged  bool             // namespaces or their labels changed since prev
	peerSame   map[PeerKey]bool // the selection is the previous compile's
}

// Index starts a compile of the cluster for node: it reduces the pods of namespaces whose group is new since
// the previous compile (reusing what it reduced for the same records) and
// notes which namespaces changed. From now on m remembers this compile,
// not the previous one.
func (m *Memo) Index(node string, namespaces []*corev1.Namespace, set *podset.Set) *Index {
	if m.prev == nil || m.prev.node != node {
		m.prev = &memo{node: node}
	}
	x := &Index{
		node:      node,
		selectors: NewSelectors(),
		nsMatches: map[string][]string{},
		peers:     map[PeerKey]Selection{},
		prev:      m.prev,
		next:      newMemo(node),
		peerSame:  map[PeerKey]bool{},
	}
	m.prev = x.next
	x.next.nsLabels = x.prev.nsLabels
	if x.next.nsLabels == nil {
		x.next.nsLabels = map[*corev1.Namespace]labels.Set{}
	}
	x.indexPods(set)
	x.compareNamespaces(namespaces)
	return x
}

// compareNamespaces records the namespaces whose labels count and tells
// whether namespace selections may differ from the previous compile's.
func (x *Index) compareNamespaces(namespaces []*corev1.Namespace) {
	x.next.nsList = namespaces
	x.next.nsNames = x.nsNames
	if x.prev.namespaces != nil && len(namespaces) > 0 && len(namespaces) == len(x.prev.nsList) && &namespaces[0] == &x.prev.nsList[0] {
		// The very same list (the agent passes it again while no
		// namespace changed): the same objects.
		x.next.namespaces = x.prev.namespaces
		x.nsChanged = !slices.Equal(x.nsNames, x.prev.nsNames)
		return
	}
	x.next.namespaces = make(map[string]*corev1.Namespace, len(namespaces))
	for _, ns := range namespaces {
		x.next.namespaces[ns.Name] = ns // the last of a name wins
	}
	if len(x.next.nsLabels) > 2*len(x.next.namespaces)+64 {
		// Forget the labels of objects no longer listed.
		live := make(map[*corev1.Namespace]bool, len(x.next.namespaces))
		for _, ns := range x.next.namespaces {
			live[ns] = true
		}
		for ns := range x.next.nsLabels {
			if !live[ns] {
				delete(x.next.nsLabels, ns)
			}
		}
	}
	x.nsChanged = len(x.next.namespaces) != len(x.prev.namespaces) || !slices.Equal(x.nsNames, x.prev.nsNames)
	if !x.nsChanged {
		for name, ns := range x.next.namespaces {
			if x.prev.namespaces[name] != ns {
				x.nsChanged = true
				break
			}
		}
	}
}

// Selectors is this compile's selector cache.
func (x *Index) Selectors() *Selectors { return x.selectors }

// Problems are the pods that could not be read (an address that does not
// parse), namespace by namespace, each namespace's in input order.
func (x *Index) Problems() []problem.Problem { return x.problems }

// Local returns the enforced pods on the node, sorted by key (pods sharing
// a key in input order). The list is shared and must not be changed.
func (x *Index) Local() []*Member { return x.local }

// All returns every enforced pod, namespace by namespace in name order,
// each namespace's in input order. The list is shared and must not be
// changed.
func (x *Index) All() []*Member {
	if x.all == nil {
		for _, ns := range x.nsNames {
			x.all = append(x.all, x.nsPods(ns)...)
		}
	}
	return x.all
}

// PodsChanged tells whether any pod was added, removed or replaced since
// the previous compile.
func (x *Index) PodsChanged() bool { return len(x.dirtyNS) > 0 }

// PeerKey names what a selector pair selects: the namespaces (ns is "="
// and the own namespace without a namespaceSelector, else "?" and the
// selector's canonical text) and the pods in them.
type PeerKey struct {
	ns  string
	pod string
}

// Selection is what a selector pair selects, and whether pods sharing a
// key may be among them (then Unique gives each once). Pods come by
// namespace in name order; within a namespace where two pods share a name
// in input order (the first counts), elsewhere in an order that may be an
// earlier compile's.
type Selection struct {
	Pods []*Member
	Dup  bool
}

// Select returns the pods that podSel selects in the namespaces nsSel
// selects; nsSel nil means the namespace ownNS alone (a NetworkPolicy peer
// without namespaceSelector), podSel nil every pod. Both selectors must be
// valid. Equal pairs are evaluated once per compile; the result is shared
// and must not be changed. The key names the pair for Unchanged in the
// next compile.
func (x *Index) Select(ownNS string, nsSel, podSel *metav1.LabelSelector) (Selection, PeerKey) {
	var ps, ns *Parsed
	var k PeerKey
	if podSel != nil {
		ps = x.selectors.Parse(podSel)
		k.pod = ps.Key
	}
	if nsSel == nil {
		k.ns = "=" + ownNS
	} else {
		ns = x.selectors.Parse(nsSel)
		k.ns = "?" + ns.Key
	}
	if out, ok := x.peers[k]; ok {
		return out, k
	}
	out, _ := x.evalPeer(k, &peerMemo{pods: ps, ns: ns, ownNS: ownNS})
	return out, k
}

// Unchanged tells whether the selection k named in the previous compile
// selects the very same pods now, so that what a compiler derived from it
// still holds (evaluating it again if this compile has not yet). It may
// say false for the same pods in a new order, never true for others.
func (x *Index) Unchanged(k PeerKey) bool {
	if _, ok := x.peers[k]; ok {
		return x.peerSame[k]
	}
	pm, ok := x.prev.peers[k]
	if !ok {
		return false
	}
	_, same := x.evalPeer(k, pm)
	return same
}

// evalPeer evaluates the pair pm describes, reusing the previous compile's
// selection when none of its inputs changed, or when evaluating again gives
// the same pods.
func (x *Index) evalPeer(k PeerKey, pm *peerMemo) (Selection, bool) {
	old, hadOld := x.prev.peers[k]
	var namespaces []string
	switch {
	case pm.ns == nil:
		namespaces = []string{pm.ownNS}
	case hadOld && !x.nsChanged:
		namespaces = old.namespaces
	default:
		namespaces = x.Namespaces(pm.ns)
	}
	next := &peerMemo{pods: pm.pods, ns: pm.ns, ownNS: pm.ownNS, namespaces: namespaces}
	same := hadOld && (pm.ns == nil || !x.nsChanged)
	for _, ns := range namespaces {
		if x.dirtyNS[ns] {
			same = false
			break
		}
	}
	if same {
		next.sel, next.ends, next.dups = old.sel, old.ends, old.dups
	} else {
		// Namespaces whose pods did not change keep their part of the
		// old selection.
		reuse := hadOld && len(old.ends) == len(namespaces) && (pm.ns == nil || !x.nsChanged)
		everything := pm.pods == nil || pm.pods.Selector.Empty()
		next.ends, next.dups = make([]int, len(namespaces)), make([]bool, len(namespaces))
		for i, ns := range namespaces {
			n := len(next.sel.Pods)
			start := 0
			if reuse && i > 0 {
				start = old.ends[i-1]
			}
			if reuse && !x.dirtyNS[ns] {
				next.sel.Pods = append(next.sel.Pods, old.sel.Pods[start:old.ends[i]]...)
				next.dups[i] = old.dups[i]
			} else if d := x.nsDelta(ns); reuse && d != nil && !old.dups[i] && !x.nsHasDuplicates(ns) {
				// The part the previous compile selected, without the
				// pods that went, with the new pods that match: the
				// event's pods are matched, not the namespace's.
				for _, p := range old.sel.Pods[start:old.ends[i]] {
					if !d.removed[p] {
						next.sel.Pods = append(next.sel.Pods, p)
					}
				}
				for _, p := range d.added {
					if everything || pm.pods.Selector.Matches(labels.Set(p.Obj.Labels)) {
						next.sel.Pods = append(next.sel.Pods, p)
					}
				}
			} else {
				for _, p := range x.nsPods(ns) {
					if everything || pm.pods.Selector.Matches(labels.Set(p.Obj.Labels)) {
						next.sel.Pods = append(next.sel.Pods, p)
					}
				}
				next.dups[i] = len(next.sel.Pods) > n && x.nsHasDuplicates(ns)
			}
			next.ends[i] = len(next.sel.Pods)
			next.sel.Dup = next.sel.Dup || next.dups[i]
		}
		if hadOld && old.sel.Dup == next.sel.Dup && slices.Equal(old.sel.Pods, next.sel.Pods) {
			next.sel, same = old.sel, true
		}
	}
	x.peers[k], x.peerSame[k] = next.sel, same
	x.next.peers[k] = next
	return next.sel, same
}

// Namespaces returns the namespaces with enforced pods that a
// namespaceSelector selects, sorted. A namespace without a Namespace
// object has only its kubernetes.io/metadata.name label. The list is
// shared and must not be changed.
func (x *Index) Namespaces(sel *Parsed) []string {
	if out, ok := x.nsMatches[sel.Key]; ok {
		return out
	}
	var out []string
	for _, ns := range x.nsNames {
		if sel.Selector.Matches(x.namespaceLabels(ns)) {
			out = append(out, ns)
		}
	}
	x.nsMatches[sel.Key] = out
	return out
}

// namespaceLabels are the labels a namespaceSelector matches namespace name
// against: its object's, with kubernetes.io/metadata.name.
func (x *Index) namespaceLabels(name string) labels.Set {
	ns := x.next.namespaces[name]
	if ns == nil {
		return labels.Set{corev1.LabelMetadataName: name}
	}
	if l, ok := x.next.nsLabels[ns]; ok {
		return l
	}
	l := make(labels.Set, len(ns.Labels)+1)
	for k, v := range ns.Labels {
		l[k] = v
	}
	// The API server puts this label on every namespace; manifests
	// applied without one must select the same way.
	l[corev1.LabelMetadataName] = ns.Name
	x.next.nsLabels[ns] = l
	return l
}
