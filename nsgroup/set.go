package nsgroup

import (
	"slices"
	"strings"
	"sync/atomic"
)

// Item is what a Set holds: a namespaced object, compared by identity (a
// changed object is a new one).
type Item interface {
	comparable
	GetNamespace() string
}

// Set is items grouped by namespace. A Set and its Groups are immutable:
// Replace and Update return new Sets that share the Groups they did not
// change. A nil *Set is empty.
type Set[T Item] struct {
	groups []*Group[T] // non-empty, sorted by namespace
	len    int
}

// Group is the items of one namespace.
type Group[T Item] struct {
	Namespace string
	// Items in the order they were given (of two objects sharing a name
	// the first counts, so order can matter for manifests).
	Items []T

	filtered atomic.Pointer[filtered[T]] // the last Filter answer
}

type filtered[T any] struct {
	key   string
	items []T
}

// Filter returns the group's items keep accepts, in order. The answer for
// the last key asked is kept, so callers that ask with the same key (a
// node's compilers ask for its local pods, from concurrent compiles too)
// scan each group once per key. A key stands for its filter: every caller
// that passes key k must pass the same keep with it.
func (g *Group[T]) Filter(key string, keep func(T) bool) []T {
	if f := g.filtered.Load(); f != nil && f.key == key {
		return f.items
	}
	f := &filtered[T]{key: key}
	for _, it := range g.Items {
		if keep(it) {
			f.items = append(f.items, it)
		}
	}
	g.filtered.Store(f)
	return f.items
}

// New groups list by namespace, keeping the order within each namespace.
func New[T Item](list []T) *Set[T] {
	return (*Set[T])(nil).Replace(byNamespace(list))
}

func byNamespace[T Item](list []T) map[string][]T {
	byNS := map[string][]T{}
	for _, it := range list {
		ns := it.GetNamespace()
		byNS[ns] = append(byNS[ns], it)
	}
	return byNS
}

// Len is the number of items.
func (s *Set[T]) Len() int {
	if s == nil {
		return 0
	}
	return s.len
}

// Groups are the non-empty namespaces' groups, sorted by namespace. The
// list is shared and must not be changed.
func (s *Set[T]) Groups() []*Group[T] {
	if s == nil {
		return nil
	}
	return s.groups
}

// All lists every item, namespace by namespace.
func (s *Set[T]) All() []T {
	out := make([]T, 0, s.Len())
	for _, g := range s.Groups() {
		out = append(out, g.Items...)
	}
	return out
}

// Replace returns a Set in which each namespace of byNS holds exactly the
// given items (none: the namespace is gone); the other namespaces' Groups
// are s's own. Every item of byNS[ns] must be in namespace ns. It costs
// the namespaces of the Set plus the items given.
func (s *Set[T]) Replace(byNS map[string][]T) *Set[T] {
	old := s.Groups()
	out := &Set[T]{groups: make([]*Group[T], 0, len(old)+len(byNS))}
	for _, g := range old {
		if _, ok := byNS[g.Namespace]; !ok {
			out.groups = append(out.groups, g)
		}
	}
	for ns, list := range byNS {
		if len(list) > 0 {
			out.groups = append(out.groups, &Group[T]{Namespace: ns, Items: slices.Clip(slices.Clone(list))})
		}
	}
	slices.SortFunc(out.groups, func(a, b *Group[T]) int { return strings.Compare(a.Namespace, b.Namespace) })
	for _, g := range out.groups {
		out.len += len(g.Items)
	}
	return out
}

// Update returns the Set of list, sharing s's Group of every namespace
// whose items are the same objects in the same order (s itself when all
// are): what a caller holding whole lists (manifests, tests, benchmarks)
// passes to keep an incremental compiler's work for unchanged namespaces.
// It costs every item.
func (s *Set[T]) Update(list []T) *Set[T] {
	byNS := byNamespace(list)
	changed := map[string][]T{}
	for _, g := range s.Groups() {
		if !slices.Equal(g.Items, byNS[g.Namespace]) {
			changed[g.Namespace] = byNS[g.Namespace]
		}
		delete(byNS, g.Namespace)
	}
	for ns, l := range byNS {
		changed[ns] = l
	}
	if len(changed) == 0 && s != nil {
		return s
	}
	return s.Replace(changed)
}

// WithGroups returns a Set whose groups of the namespaces in repl are the
// given Groups (which must hold items of their namespace), and every other
// group s's own. A caller that substitutes some items passes the same
// Group again while nothing changed, so that a compiler comparing Groups
// by identity sees no change.
func (s *Set[T]) WithGroups(repl map[string]*Group[T]) *Set[T] {
	if len(repl) == 0 {
		return s
	}
	out := &Set[T]{groups: make([]*Group[T], 0, len(s.Groups()))}
	for _, g := range s.Groups() {
		if r, ok := repl[g.Namespace]; ok {
			g = r
		}
		out.groups = append(out.groups, g)
		out.len += len(g.Items)
	}
	return out
}
