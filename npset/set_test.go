package npset

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func np(ns, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func names(s *Set) []string {
	var out []string
	for _, p := range s.All() {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []*networkingv1.NetworkPolicy
		want []string
	}{
		{"nil", nil, nil},
		{"namespaces sorted, order within kept", []*networkingv1.NetworkPolicy{np("b", "z"), np("a", "y"), np("b", "a"), np("a", "x")},
			[]string{"a/y", "a/x", "b/z", "b/a"}},
		{"same key twice kept in input order", []*networkingv1.NetworkPolicy{np("a", "p"), np("a", "p")}, []string{"a/p", "a/p"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.in)
			if got := names(s); !slices.Equal(got, c.want) {
				t.Fatalf("All = %v, want %v", got, c.want)
			}
			if s.Len() != len(c.in) {
				t.Fatalf("Len = %d, want %d", s.Len(), len(c.in))
			}
		})
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	if s.Len() != 0 || s.Groups() != nil || len(s.All()) != 0 {
		t.Fatal("a nil Set is not empty")
	}
	if got := names(s.Update([]*networkingv1.NetworkPolicy{np("a", "p")})); !slices.Equal(got, []string{"a/p"}) {
		t.Fatalf("Update of nil = %v", got)
	}
}

func TestReplaceSharesUntouchedGroups(t *testing.T) {
	a1, a2, b1, c1 := np("a", "1"), np("a", "2"), np("b", "1"), np("c", "1")
	s := New([]*networkingv1.NetworkPolicy{a1, a2, b1, c1})
	a, b := s.Groups()[0], s.Groups()[1]
	r := s.Replace(map[string][]*networkingv1.NetworkPolicy{"c": nil, "d": {np("d", "1")}, "b": {b1, np("b", "2")}})
	if got, want := names(r), []string{"a/1", "a/2", "b/1", "b/2", "d/1"}; !slices.Equal(got, want) {
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
}

func TestUpdate(t *testing.T) {
	a1, a2, b1 := np("a", "1"), np("a", "2"), np("b", "1")
	s := New([]*networkingv1.NetworkPolicy{a1, a2, b1})
	if s.Update([]*networkingv1.NetworkPolicy{b1, a1, a2}) != s {
		t.Fatal("the same policies per namespace did not give the same Set")
	}
	u := s.Update([]*networkingv1.NetworkPolicy{a2, a1, b1}) // a reordered
	if u.Groups()[0] == s.Groups()[0] || u.Groups()[1] != s.Groups()[1] {
		t.Fatal("Update shared the changed group or replaced the unchanged one")
	}
	if got, want := names(u), []string{"a/2", "a/1", "b/1"}; !slices.Equal(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	if g := s.Update([]*networkingv1.NetworkPolicy{a1}); g.Len() != 1 || len(g.Groups()) != 1 {
		t.Fatal("a namespace without policies was kept")
	}
}
