package nsgroup

import (
	"slices"
	"sync"
	"testing"
)

type item struct{ ns, name, node string }

func (i *item) GetNamespace() string { return i.ns }

func it(ns, name string) *item { return &item{ns: ns, name: name} }

func names(items []*item) []string {
	var out []string
	for _, i := range items {
		out = append(out, i.ns+"/"+i.name)
	}
	return out
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []*item
		want []string
	}{
		{"nil", nil, nil},
		{"namespaces sorted, order within kept", []*item{it("b", "z"), it("a", "y"), it("b", "a"), it("a", "x")},
			[]string{"a/y", "a/x", "b/z", "b/a"}},
		{"same key twice kept in input order", []*item{it("a", "p"), it("a", "p")}, []string{"a/p", "a/p"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.in)
			if got := names(s.All()); !slices.Equal(got, c.want) {
				t.Fatalf("All = %v, want %v", got, c.want)
			}
			if s.Len() != len(c.in) {
				t.Fatalf("Len = %d, want %d", s.Len(), len(c.in))
			}
			for _, g := range s.Groups() {
				for _, i := range g.Items {
					if i.ns != g.Namespace {
						t.Fatalf("%s/%s in group %s", i.ns, i.name, g.Namespace)
					}
				}
			}
		})
	}
}

func TestNilSet(t *testing.T) {
	var s *Set[*item]
	if s.Len() != 0 || s.Groups() != nil || len(s.All()) != 0 {
		t.Fatal("a nil Set is not empty")
	}
	if got := names(s.Update([]*item{it("a", "p")}).All()); !slices.Equal(got, []string{"a/p"}) {
		t.Fatalf("Update of nil = %v", got)
	}
	if u := s.Update(nil); u == nil || u.Len() != 0 {
		t.Fatalf("Update of nil with nothing = %v, want an empty Set", u)
	}
}

func TestReplaceSharesUntouchedGroups(t *testing.T) {
	a1, a2, b1, c1 := it("a", "1"), it("a", "2"), it("b", "1"), it("c", "1")
	s := New([]*item{a1, a2, b1, c1})
	a, b := s.Groups()[0], s.Groups()[1]
	r := s.Replace(map[string][]*item{"c": nil, "d": {it("d", "1")}, "b": {b1, it("b", "2")}})
	if got, want := names(r.All()), []string{"a/1", "a/2", "b/1", "b/2", "d/1"}; !slices.Equal(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	if r.Groups()[0] != a {
		t.Fatal("an untouched namespace's Group was not shared")
	}
	if r.Groups()[1] == b {
		t.Fatal("a replaced namespace kept its Group")
	}
	if r.Len() != 5 || s.Len() != 4 || len(s.Groups()) != 3 {
		t.Fatal("Replace changed the Set it was called on")
	}
	if got, want := names(s.All()), []string{"a/1", "a/2", "b/1", "c/1"}; !slices.Equal(got, want) {
		t.Fatalf("the old Set's All = %v, want %v", got, want)
	}
}

func TestUpdate(t *testing.T) {
	a1, a2, b1 := it("a", "1"), it("a", "2"), it("b", "1")
	s := New([]*item{a1, a2, b1})
	if s.Update([]*item{b1, a1, a2}) != s {
		t.Fatal("the same items per namespace did not give the same Set")
	}
	u := s.Update([]*item{a2, a1, b1}) // a reordered
	if u.Groups()[0] == s.Groups()[0] || u.Groups()[1] != s.Groups()[1] {
		t.Fatal("Update shared the changed group or replaced the unchanged one")
	}
	if got, want := names(u.All()), []string{"a/2", "a/1", "b/1"}; !slices.Equal(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	if g := s.Update([]*item{a1}); g.Len() != 1 || len(g.Groups()) != 1 {
		t.Fatal("a namespace without items was kept")
	}
	if g := s.Update([]*item{a1, a2, it("b", "1")}); g.Groups()[1] == s.Groups()[1] {
		t.Fatal("an equal but new object kept the old Group")
	}
}

// Filter answers for its key, keeps the last answer, and answers for
// another key after it; concurrent callers (run with -race) get the same
// answer.
func TestFilter(t *testing.T) {
	mk := func(name, node string) *item { return &item{ns: "a", name: name, node: node} }
	s := New([]*item{mk("1", "n1"), mk("2", "n2"), mk("3", "n1")})
	g := s.Groups()[0]
	calls := 0
	on := func(node string) func(*item) bool {
		return func(i *item) bool { calls++; return i.node == node }
	}
	if got := names(g.Filter("n1", on("n1"))); !slices.Equal(got, []string{"a/1", "a/3"}) {
		t.Fatalf("n1: %v", got)
	}
	if got := names(g.Filter("n1", on("n1"))); !slices.Equal(got, []string{"a/1", "a/3"}) || calls != 3 {
		t.Fatalf("n1 again: %v after %d calls of keep, want the kept answer after 3", got, calls)
	}
	if got := names(g.Filter("n2", on("n2"))); !slices.Equal(got, []string{"a/2"}) {
		t.Fatalf("n2 after n1: %v", got)
	}
	if got := g.Filter("n3", on("n3")); len(got) != 0 {
		t.Fatalf("n3: %v", names(got))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if got := names(g.Filter("n1", func(i *item) bool { return i.node == "n1" })); !slices.Equal(got, []string{"a/1", "a/3"}) {
					t.Errorf("concurrent n1: %v", got)
					return
				}
			}
		})
	}
	wg.Wait()
}
