package controller

import (
	"strconv"

	"github.com/nftguard/nftguard/peerslice"
)

// overlay remembers the controller's own writes until the informer has
// delivered them: the cache lags the writes, and a plan made from a cache
// that does not yet hold a created slice would create another. Pure.
type overlay struct {
	// written maps namespace/name to the slice as written (nil: deleted)
	// and its resourceVersion.
	written map[string]written
}

type written struct {
	slice *peerslice.PeerSlice
	rv    string
}

func newOverlay() *overlay { return &overlay{written: map[string]written{}} }

func sliceKey(ns, name string) string { return ns + "/" + name }

// wrote records a write's result; deleted slices are recorded with the
// resourceVersion they had.
func (o *overlay) wrote(s *peerslice.PeerSlice, deleted bool) {
	w := written{slice: s, rv: s.ResourceVersion}
	if deleted {
		w.slice = nil
	}
	o.written[sliceKey(s.Namespace, s.Name)] = w
}

// forget drops what is known of a slice (after a conflict: the API server
// knows better).
func (o *overlay) forget(ns, name string) { delete(o.written, sliceKey(ns, name)) }

// Event kinds the informer reports for a slice.
const (
	echo    = iota // our own latest write, or an older one of ours
	foreign        // someone else's change: a hand edit, another writer
)

// observe takes an informer event for a slice (rv: its resourceVersion;
// deleted: a delete event) and tells whether it is an echo of the
// controller's own writes or a foreign change. An echo of the latest write
// ends the overlay entry: the cache now holds it.
func (o *overlay) observe(ns, name, rv string, deleted bool) int {
	k := sliceKey(ns, name)
	w, ok := o.written[k]
	if !ok {
		return foreign
	}
	if deleted {
		if w.slice == nil {
			delete(o.written, k)
			return echo
		}
		delete(o.written, k)
		return foreign
	}
	switch compareRV(rv, w.rv) {
	case 0:
		// Also for a delete of ours: the update that preceded it.
		if w.slice != nil {
			delete(o.written, k)
		}
		return echo
	case -1:
		return echo // an older write of ours, still on its way
	}
	delete(o.written, k)
	return foreign
}

// current merges the cache's slices of a namespace with the overlay: the
// newer of each, the slices created but not yet in the cache, and not
// those deleted.
func (o *overlay) current(ns string, cached []*peerslice.PeerSlice) []*peerslice.PeerSlice {
	out := make([]*peerslice.PeerSlice, 0, len(cached))
	seen := map[string]bool{}
	for _, s := range cached {
		seen[s.Name] = true
		w, ok := o.written[sliceKey(ns, s.Name)]
		if !ok || compareRV(s.ResourceVersion, w.rv) > 0 {
			out = append(out, s)
			continue
		}
		if w.slice != nil {
			out = append(out, w.slice)
		}
	}
	for k, w := range o.written {
		if w.slice != nil && w.slice.Namespace == ns && !seen[w.slice.Name] && k == sliceKey(ns, w.slice.Name) {
			out = append(out, w.slice)
		}
	}
	return out
}

// compareRV orders two resourceVersions. They are opaque to clients, but
// the API server's are etcd revisions: decimal, growing. If either is not
// a number, only equality is known (unequal counts as newer).
func compareRV(a, b string) int {
	if a == b {
		return 0
	}
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return 1
	}
	if x < y {
		return -1
	}
	return 1
}
