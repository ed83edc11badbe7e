package peerslice

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Options size slices. Every agent receives a whole slice whenever one of
// its records changes, so a slice is kept small: the cost of a change is
// the slice it lands in, not the namespace.
type Options struct {
	// MaxPeers is the most records a slice holds.
	MaxPeers int
	// MaxBytes is the most record bytes (Size) a slice holds: a tenant's
	// pod with large labels shares a slice with few others, and one too
	// large for it has a slice of its own.
	MaxBytes int
}

// DefaultOptions are the sizes the controller uses unless told otherwise.
// Measured (bench/results/apiload/REPORT.md, issue 37): a slice event
// carries ~520 B of envelope and metadata and ~150-190 B per record. Pod
// lives scattered over namespaces cost 2 slice writes each whatever the
// batching, 1.7 kB per agent at 4 records against 3.4 kB at 16; rollouts,
// whose changes batch, cost 765 B against 659 B; a re-list 283 B per record
// against 187. Scattered churn decides: 4.
func DefaultOptions() Options { return Options{MaxPeers: 4, MaxBytes: 4096} }

// GenerateName prefixes the names of the slices the controller creates.
const GenerateName = "peers-"

// Op is what a Change does.
type Op int

// The writes a plan is made of.
const (
	Create Op = iota + 1
	Update
	Delete
)

func (o Op) String() string {
	switch o {
	case Create:
		return "create"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// Change is one write.
type Change struct {
	Op Op
	// Slice is the object to write. To create, it has a GenerateName and
	// no name; to update, it is the current object (its resourceVersion
	// kept, so a concurrent writer makes the write conflict) with its new
	// records; to delete, the current object.
	Slice *PeerSlice
}

// bin is a slice being planned.
type bin struct {
	cur     *PeerSlice // nil for a slice to create
	peers   []Peer
	bytes   int
	changed bool
}

func (b *bin) fits(p *Peer, size int, opt Options) bool {
	return len(b.peers) < opt.MaxPeers && (len(b.peers) == 0 || b.bytes+size <= opt.MaxBytes)
}

func (b *bin) add(p *Peer, size int) {
	b.peers = append(b.peers, *p)
	b.bytes += size
	b.changed = true
}

// Plan returns the writes that make a namespace's slices hold exactly the
// desired records (one per pod name), in the order they are to be made:
// creates, then updates that add a record, then the other updates, then
// deletes, so that a record moved between slices is never missing from all
// of them.
//
// A record stays in the slice that holds it; only the slices whose records
// change are written. New records join slices that are written anyway
// before any other, so changes that arrive together cost one write per
// slice. What the plan repairs, because current is read from the API and
// anyone with write access may have changed it: a record that is not
// desired or differs from the desired one, a pod recorded twice, a slice
// over its size. A slice being deleted is left alone and its records are
// placed again. When the namespace's records would fit in fewer slices at
// half their size, the emptiest slice is emptied into the others (one per
// plan, and only if all its records fit), so pod churn does not leave many
// near-empty slices behind.
func Plan(namespace string, current []*PeerSlice, desired []Peer, opt Options) []Change {
	if opt.MaxPeers < 1 {
		opt.MaxPeers = 1
	}
	want := make(map[string]*Peer, len(desired))
	for i := range desired {
		want[desired[i].Name] = &desired[i]
	}
	live := make([]*PeerSlice, 0, len(current))
	for _, s := range current {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	slices.SortFunc(live, func(a, b *PeerSlice) int { return cmp.Compare(a.Name, b.Name) })

	placed := make(map[string]bool, len(desired))
	bins := make([]*bin, 0, len(live))
	for _, s := range live {
		// A slice without records is written: reused or deleted.
		b := &bin{cur: s, changed: len(s.Peers) == 0}
		for i := range s.Peers {
			p := &s.Peers[i]
			d, ok := want[p.Name]
			if !ok || placed[p.Name] {
				b.changed = true
				continue
			}
			size := Size(d)
			if !b.fits(d, size, opt) {
				b.changed = true
				continue
			}
			placed[p.Name] = true
			b.peers = append(b.peers, *d)
			b.bytes += size
			if !d.Equal(p) {
				b.changed = true
			}
		}
		bins = append(bins, b)
	}

	var todo []*Peer
	for i := range desired {
		if !placed[desired[i].Name] {
			todo = append(todo, &desired[i])
		}
	}
	slices.SortFunc(todo, func(a, b *Peer) int { return cmp.Compare(a.Name, b.Name) })
	for _, p := range todo {
		size := Size(p)
		if b := pick(bins, p, size, opt, nil); b != nil {
			b.add(p, size)
			continue
		}
		b := &bin{}
		b.add(p, size)
		bins = append(bins, b)
	}
	compact(bins, opt)
	return changes(namespace, bins)
}

// pick is the slice a record joins: one that is written anyway (an
// emptied one too: an update costs less than a delete and a create), else
// the emptiest other with room (the smallest write); nil if none has room.
// skip is never picked.
func pick(bins []*bin, p *Peer, size int, opt Options, skip *bin) *bin {
	var best *bin
	for _, b := range bins {
		if b == skip || !b.fits(p, size, opt) {
			continue
		}
		if b.changed {
			return b
		}
		if best == nil || len(b.peers) < len(best.peers) {
			best = b
		}
	}
	return best
}

// compact empties the emptiest slice into the others when the records
// would fit in one slice fewer at half size, and all of its records fit.
func compact(bins []*bin, opt Options) {
	n, k := 0, 0
	var src *bin
	for _, b := range bins {
		if len(b.peers) == 0 {
			continue
		}
		n += len(b.peers)
		k++
		if src == nil || len(b.peers) <= len(src.peers) {
			src = b
		}
	}
	if k < 2 || 2*n > (k-1)*opt.MaxPeers {
		return
	}
	// Try it on copies: all or nothing.
	trial := make([]*bin, len(bins))
	orig := make(map[*bin]*bin, len(bins))
	for i, b := range bins {
		c := *b
		c.peers = slices.Clone(b.peers)
		trial[i] = &c
		orig[&c] = b
	}
	var from *bin
	for _, c := range trial {
		if orig[c] == src {
			from = c
		}
	}
	for i := range from.peers {
		p := &from.peers[i]
		size := Size(p)
		to := pick(trial, p, size, opt, from)
		if to == nil || len(to.peers) == 0 {
			return // would need a new slice: nothing gained
		}
		to.add(p, size)
	}
	from.peers, from.bytes, from.changed = nil, 0, true
	for _, c := range trial {
		*orig[c] = *c
	}
}

func changes(namespace string, bins []*bin) []Change {
	var creates, adds, updates, deletes []Change
	for _, b := range bins {
		switch {
		case b.cur == nil:
			s := &PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: GenerateName}, Peers: b.peers}
			creates = append(creates, Change{Op: Create, Slice: s})
		case !b.changed:
		case len(b.peers) == 0:
			deletes = append(deletes, Change{Op: Delete, Slice: b.cur})
		default:
			s := &PeerSlice{TypeMeta: b.cur.TypeMeta, ObjectMeta: b.cur.ObjectMeta, Peers: b.peers}
			if gains(b) {
				adds = append(adds, Change{Op: Update, Slice: s})
			} else {
				updates = append(updates, Change{Op: Update, Slice: s})
			}
		}
	}
	return slices.Concat(creates, adds, updates, deletes)
}

// gains tells whether a slice is to hold a pod it did not hold.
func gains(b *bin) bool {
	had := make(map[string]bool, len(b.cur.Peers))
	for i := range b.cur.Peers {
		had[b.cur.Peers[i].Name] = true
	}
	for i := range b.peers {
		if !had[b.peers[i].Name] {
			return true
		}
	}
	return false
}
