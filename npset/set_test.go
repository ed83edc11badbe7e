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
