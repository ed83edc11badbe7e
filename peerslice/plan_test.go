package peerslice

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func peer(name string, ip string) Peer {
	return Peer{Name: name, Node: "n1", IPs: []string{ip}, Labels: map[string]string{"app": "a"}}
}

func slice(name string, peers ...Peer) *PeerSlice {
	return &PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"}, Peers: peers}
}

// render writes a plan as "op name:[pods]" lines, created slices as "+".
func render(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		name := c.Slice.Name
		if c.Op == Create {
			name = "+"
		}
		var pods []string
		for _, p := range c.Slice.Peers {
			pods = append(pods, p.Name+"="+p.IPs[0])
		}
		fmt.Fprintf(&b, "%s %s:%s\n", c.Op, name, strings.Join(pods, ","))
	}
	return b.String()
}

func TestPlan(t *testing.T) {
	a, b, c, d := peer("a", "10.0.0.1"), peer("b", "10.0.0.2"), peer("c", "10.0.0.3"), peer("d", "10.0.0.4")
	a2 := peer("a", "10.0.0.9")
	deleting := slice("s9", c)
	deleting.DeletionTimestamp = &metav1.Time{}
	big := peer("big", "10.0.0.5")
	big.Labels = map[string]string{"k": strings.Repeat("v", 200)}
	opt := Options{MaxPeers: 2, MaxBytes: 4096}
	for _, tc := range []struct {
		name    string
		current []*PeerSlice
		desired []Peer
		opt     Options
		want    string
	}{
		{name: "nothing", want: ""},
		{name: "first publish fills slices", desired: []Peer{c, a, b}, opt: opt,
			want: "create +:a=10.0.0.1,b=10.0.0.2\ncreate +:c=10.0.0.3\n"},
		{name: "unchanged writes nothing", current: []*PeerSlice{slice("s1", a, b), slice("s2", c)}, desired: []Peer{a, b, c}, opt: opt, want: ""},
		{name: "a changed record rewrites its slice only", current: []*PeerSlice{slice("s1", a, b), slice("s2", c)}, desired: []Peer{a2, b, c}, opt: opt,
			want: "update s1:a=10.0.0.9,b=10.0.0.2\n"},
		{name: "a removed record", current: []*PeerSlice{slice("s1", a, b), slice("s2", c)}, desired: []Peer{a, c}, opt: opt,
			want: "update s1:a=10.0.0.1\n"},
		{name: "the last record of a slice deletes it", current: []*PeerSlice{slice("s1", a, b), slice("s2", c)}, desired: []Peer{a, b}, opt: opt,
			want: "delete s2:c=10.0.0.3\n"},
		{name: "a new record joins a slice written anyway", current: []*PeerSlice{slice("s1", a), slice("s2", b)}, desired: []Peer{a, peer("b", "10.0.0.8"), c}, opt: opt,
			want: "update s2:b=10.0.0.8,c=10.0.0.3\n"},
		{name: "an emptied slice is reused", current: []*PeerSlice{slice("s1", a, b), slice("s2", c)}, desired: []Peer{a, b, d}, opt: opt,
			want: "update s2:d=10.0.0.4\n"},
		{name: "else the emptiest with room", current: []*PeerSlice{slice("s1", a, b), slice("s2", c)}, desired: []Peer{a, b, c, d}, opt: Options{MaxPeers: 3, MaxBytes: 4096},
			want: "update s2:c=10.0.0.3,d=10.0.0.4\n"},
		{name: "a pod recorded twice keeps its first slice", current: []*PeerSlice{slice("s1", a, b), slice("s2", a, c)}, desired: []Peer{a, b, c}, opt: opt,
			want: "update s2:c=10.0.0.3\n"},
		{name: "a record edited by hand is repaired", current: []*PeerSlice{slice("s1", a2, b)}, desired: []Peer{a, b}, opt: opt,
			want: "update s1:a=10.0.0.1,b=10.0.0.2\n"},
		{name: "a record added by hand is removed", current: []*PeerSlice{slice("s1", a, d)}, desired: []Peer{a}, opt: opt,
			want: "update s1:a=10.0.0.1\n"},
		{name: "an overfull slice moves its excess, adding first", current: []*PeerSlice{slice("s1", a, b, c)}, desired: []Peer{a, b, c}, opt: opt,
			want: "create +:c=10.0.0.3\nupdate s1:a=10.0.0.1,b=10.0.0.2\n"},
		{name: "a slice being deleted is left alone", current: []*PeerSlice{slice("s1", a), deleting}, desired: []Peer{a, c}, opt: opt,
			want: "update s1:a=10.0.0.1,c=10.0.0.3\n"},
		{name: "an empty slice is deleted", current: []*PeerSlice{slice("s1", a), slice("s2")}, desired: []Peer{a}, opt: opt,
			want: "delete s2:\n"},
		{name: "near-empty slices are merged, one per plan, adding first", current: []*PeerSlice{slice("s1", a), slice("s2", b), slice("s3", c)}, desired: []Peer{a, b, c}, opt: Options{MaxPeers: 4, MaxBytes: 4096},
			want: "update s1:a=10.0.0.1,c=10.0.0.3\ndelete s3:c=10.0.0.3\n"},
		{name: "a large record has a slice of its own", current: []*PeerSlice{slice("s1", a)}, desired: []Peer{a, big}, opt: Options{MaxPeers: 4, MaxBytes: 200},
			want: "create +:big=10.0.0.5\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(Plan("ns", tc.current, tc.desired, tc.opt))
			if got != tc.want {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestPlanKeepsVersion: an update carries the version it was planned from,
// so a write racing another writer conflicts instead of overwriting it.
func TestPlanKeepsVersion(t *testing.T) {
	cs := Plan("ns", []*PeerSlice{slice("s1", peer("a", "10.0.0.1"))}, []Peer{peer("a", "10.0.0.2")}, Options{MaxPeers: 2, MaxBytes: 4096})
	if len(cs) != 1 || cs[0].Slice.ResourceVersion != "7" || cs[0].Slice.Namespace != "ns" {
		t.Fatalf("plan = %+v", cs)
	}
}

// TestPlanConverges: applying a plan and planning again writes nothing, for
// random histories of records coming, changing and going.
func TestPlanConverges(t *testing.T) {
	opt := Options{MaxPeers: 4, MaxBytes: 4096}
	var cur []*PeerSlice
	desired := map[string]Peer{}
	seq := 0
	for step := range 300 {
		// A deterministic mix: add two, change one, remove one.
		for range 2 {
			seq++
			n := fmt.Sprintf("p%03d", seq)
			desired[n] = peer(n, fmt.Sprintf("10.0.%d.%d", seq/250, seq%250))
		}
		for n, p := range desired {
			if (len(n)+step)%7 == 0 {
				p.IPs = []string{"10.9.9.9"}
				desired[n] = p
			}
			break
		}
		if step%3 != 0 {
			for n := range desired {
				delete(desired, n)
				break
			}
		}
		var want []Peer
		for _, p := range desired {
			want = append(want, p)
		}
		cur = apply(t, cur, Plan("ns", cur, want, opt))
		if again := Plan("ns", cur, want, opt); len(again) != 0 {
			t.Fatalf("step %d: plan after apply is not empty:\n%s", step, render(again))
		}
		held := map[string]bool{}
		for _, s := range cur {
			if len(s.Peers) == 0 || len(s.Peers) > opt.MaxPeers {
				t.Fatalf("step %d: slice %s holds %d records", step, s.Name, len(s.Peers))
			}
			for _, p := range s.Peers {
				if held[p.Name] || !p.Equal(ptr(desired[p.Name])) {
					t.Fatalf("step %d: record %s twice or wrong", step, p.Name)
				}
				held[p.Name] = true
			}
		}
		if len(held) != len(desired) {
			t.Fatalf("step %d: %d records held, %d desired", step, len(held), len(desired))
		}
	}
	if n := len(desired); len(cur) > 2*((n+opt.MaxPeers-1)/opt.MaxPeers)+1 {
		t.Errorf("%d slices for %d records of at most %d", len(cur), n, opt.MaxPeers)
	}
}

func ptr[T any](v T) *T { return &v }

// apply plays a plan as the API server would.
func apply(t *testing.T, cur []*PeerSlice, cs []Change) []*PeerSlice {
	t.Helper()
	byName := map[string]*PeerSlice{}
	var order []string
	for _, s := range cur {
		byName[s.Name] = s
		order = append(order, s.Name)
	}
	for _, c := range cs {
		s := c.Slice.DeepCopy()
		switch c.Op {
		case Create:
			s.Name = fmt.Sprintf("s%04d", len(order)+len(byName))
			byName[s.Name] = s
			order = append(order, s.Name)
		case Update:
			if byName[s.Name] == nil {
				t.Fatalf("update of missing %s", s.Name)
			}
			byName[s.Name] = s
		case Delete:
			delete(byName, s.Name)
		}
	}
	var out []*PeerSlice
	for _, n := range order {
		if s := byName[n]; s != nil {
			out = append(out, s)
			delete(byName, n)
		}
	}
	return out
}
