package engine

import (
	"testing"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// TestElemIDs: the ids cut from one string are elemID's.
func TestElemIDs(t *testing.T) {
	elems := []nftwire.Elem{
		{Key: []byte{10, 0, 0, 1}},
		{Key: []byte{10, 0, 0, 2}, IntervalEnd: true},
		{Key: []byte{1, 0, 0, 0, 0, 80, 0, 0}, KeyEnd: []byte{1, 0, 0, 9, 0, 90, 0, 0}},
		{Key: nil},
		{Key: []byte{0, 0}, KeyEnd: []byte{}, IntervalEnd: true},
	}
	ids := elemIDs(elems)
	for i, e := range elems {
		if ids[i] != elemID(e) {
			t.Errorf("elemIDs[%d] = %q, elemID = %q", i, ids[i], elemID(e))
		}
	}
	if want := string([]byte{10, 0, 0, 1}) + "\x00\x00" + "0"; elemID(elems[0]) != want {
		t.Errorf("elemID = %q, want %q", elemID(elems[0]), want)
	}
}

// TestAddKeepsFirstPlace: a repeated id replaces the element but keeps
// its place in order.
func TestAddKeepsFirstPlace(t *testing.T) {
	s := &kernelSet{elems: map[string]nftwire.Elem{}}
	a := nftwire.Elem{Key: []byte{1}}
	b := nftwire.Elem{Key: []byte{2}}
	a2 := nftwire.Elem{Key: []byte{1}, Data: []byte{9}}
	s.add(a)
	s.add(b)
	s.add(a2)
	if len(s.order) != 2 || s.order[0] != elemID(a) || s.order[1] != elemID(b) {
		t.Errorf("order = %q", s.order)
	}
	if got := s.elems[elemID(a)]; len(got.Data) != 1 {
		t.Errorf("repeated element not replaced: %+v", got)
	}
}
