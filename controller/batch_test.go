package controller

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/peerslice"
)

func TestBatcher(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := newBatcher(200 * time.Millisecond)
	names := func(ds []dirtyNS) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ns)
		}
		return out
	}
	if !b.mark("a", at(0)) {
		t.Fatal("first mark: want a new flush time")
	}
	// Later changes do not postpone the flush: the delay is bounded.
	for ms := 50; ms < 200; ms += 50 {
		if b.mark("a", at(ms)) {
			t.Errorf("mark at %dms moved the flush", ms)
		}
	}
	b.mark("b", at(100))
	ready, next := b.due(at(199))
	if len(ready) != 0 || !next.Equal(at(200)) {
		t.Fatalf("at 199ms: ready %q, next %v", names(ready), next.Sub(t0))
	}
	ready, next = b.due(at(200))
	if !slices.Equal(names(ready), []string{"a"}) || !ready[0].since.Equal(at(0)) || !next.Equal(at(300)) {
		t.Fatalf("at 200ms: ready %q, next %v", names(ready), next.Sub(t0))
	}
	// Changed while being flushed: flushed again after, not twice at once.
	b.mark("a", at(250))
	ready, _ = b.due(at(500))
	if !slices.Equal(names(ready), []string{"b"}) {
		t.Fatalf("a is busy: ready %q, want [b]", names(ready))
	}
	b.done("a")
	ready, _ = b.due(at(500))
	if !slices.Equal(names(ready), []string{"a"}) || !ready[0].since.Equal(at(250)) {
		t.Fatalf("after done: ready %+v", ready)
	}
	b.done("a")
	b.done("b")
	// A failed flush is retried later, keeping when its change came.
	b.retry("b", at(100), at(1500))
	if ready, next = b.due(at(1000)); len(ready) != 0 || !next.Equal(at(1500)) {
		t.Fatalf("retry: ready %q next %v", names(ready), next.Sub(t0))
	}
	// markAt brings a flush forward (a new leader's full reconcile).
	b.markAt("b", at(1000), at(1000))
	if ready, _ = b.due(at(1000)); len(ready) != 1 || !ready[0].since.Equal(at(100)) {
		t.Fatalf("markAt: %+v", ready)
	}
	if b.pending() != 0 {
		t.Errorf("pending %d", b.pending())
	}
}

func slice(ns, name, rv string, peers ...string) *peerslice.PeerSlice {
	s := &peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
	for _, p := range peers {
		s.Peers = append(s.Peers, peerslice.Peer{Name: p, IPs: []string{"10.0.0.1"}})
	}
	return s
}

func TestOverlay(t *testing.T) {
	sliceNames := func(ss []*peerslice.PeerSlice) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name+"@"+s.ResourceVersion)
		}
		slices.Sort(out)
		return out
	}
	o := newOverlay()
	cache := []*peerslice.PeerSlice{slice("a", "s1", "10", "p")}
	// A created slice is planned with before the informer has it.
	o.wrote(slice("a", "s2", "11", "q"), false)
	o.wrote(slice("a", "s1", "12", "p", "r"), false)
	o.wrote(slice("b", "s3", "13", "x"), false)
	if got := sliceNames(o.current("a", cache)); !slices.Equal(got, []string{"s1@12", "s2@11"}) {
		t.Fatalf("current: %q", got)
	}
	// The informer delivers an older write of ours: still an echo, and
	// the overlay stays.
	if k := o.observe("a", "s1", "10", false); k != echo {
		t.Errorf("older write: %d", k)
	}
	if k := o.observe("a", "s1", "12", false); k != echo {
		t.Errorf("latest write: %d", k)
	}
	if _, ok := o.written["a/s1"]; ok {
		t.Error("echo of the latest write kept the overlay")
	}
	// Someone else's change after ours: foreign.
	if k := o.observe("a", "s1", "14", false); k != foreign {
		t.Errorf("hand edit: %d", k)
	}
	// A cache already newer than the overlay wins (a relist skipped the
	// echo).
	cache = []*peerslice.PeerSlice{slice("a", "s2", "20", "q", "z")}
	if got := sliceNames(o.current("a", cache)); !slices.Equal(got, []string{"s2@20"}) {
		t.Errorf("newer cache: %q", got)
	}
	// A deleted slice is gone from the plan until the delete arrives; the
	// update before it is an echo.
	o.wrote(slice("b", "s3", "13", "x"), true)
	if got := o.current("b", []*peerslice.PeerSlice{slice("b", "s3", "13", "x")}); len(got) != 0 {
		t.Errorf("deleted: %q", sliceNames(got))
	}
	if k := o.observe("b", "s3", "13", false); k != echo {
		t.Errorf("update before our delete: %d", k)
	}
	if k := o.observe("b", "s3", "13", true); k != echo {
		t.Errorf("our delete: %d", k)
	}
	if k := o.observe("b", "s3", "13", true); k != foreign {
		t.Errorf("a delete not ours: %d", k)
	}
	if k := o.observe("c", "s9", "5", false); k != foreign {
		t.Errorf("unknown slice: %d", k)
	}
	if compareRV("9", "10") != -1 || compareRV("10", "9") != 1 || compareRV("x", "y") != 1 || compareRV("x", "x") != 0 {
		t.Error("compareRV")
	}
}
