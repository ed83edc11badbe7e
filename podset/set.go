package podset

import (
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
)

// Set is the pods of a cluster grouped by namespace. A Set and its Groups
// are immutable: Replace returns a new Set that shares the Groups it did
// not replace. A nil *Set is empty.
type Set struct {
	groups []*Group // by namespace, sorted
	len    int
}

// Group is the pods of one namespace.
type Group struct {
	Namespace string
	// Pods in the order they were given (the first of two pods sharing a
	// name counts, so order can matter for manifests).
	Pods []*Pod

	local atomic.Pointer[localPods] // the last LocalTo answer
}

type localPods struct {
	node string
	pods []*Pod
}

// LocalTo returns the group's pods on node, in order. The answer for the
// last node asked is kept (compilers ask for their one node, from
// concurrent compiles too), so each group is scanned once per node.
func (g *Group) LocalTo(node string) []*Pod {
	if l := g.local.Load(); l != nil && l.node == node {
		return l.pods
	}
	l := &localPods{node: node}
	for _, p := range g.Pods {
		if p.NodeName == node {
			l.pods = append(l.pods, p)
		}
	}
	g.local.Store(l)
	return l.pods
}

// NewSet groups pods by namespace, keeping their order within each.
func NewSet(list []*Pod) *Set {
	return (*Set)(nil).Replace(byNamespace(list))
}

func byNamespace(list []*Pod) map[string][]*Pod {
	byNS := map[string][]*Pod{}
	for _, p := range list {
		byNS[p.Namespace] = append(byNS[p.Namespace], p)
	}
	return byNS
}

// Len is the number of pods.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.len
}

// Groups are the non-empty namespaces' groups, sorted by namespace. The
// list is shared and must not be changed.
func (s *Set) Groups() []*Group {
	if s == nil {
		return nil
	}
	return s.groups
}

// All lists every pod, namespace by namespace.
func (s *Set) All() []*Pod {
	out := make([]*Pod, 0, s.Len())
	for _, g := range s.Groups() {
		out = append(out, g.Pods...)
	}
	return out
}

// Replace returns a Set in which each namespace of byNS holds exactly the
// given pods (none: the namespace is gone); the other namespaces' Groups
// are s's own. Every pod of byNS[ns] must be in namespace ns. It costs the
// namespaces of the Set plus the pods given.
func (s *Set) Replace(byNS map[string][]*Pod) *Set {
	old := s.Groups()
	out := &Set{groups: make([]*Group, 0, len(old)+len(byNS))}
	for _, g := range old {
		if _, ok := byNS[g.Namespace]; !ok {
			out.groups = append(out.groups, g)
		}
	}
	for ns, list := range byNS {
		if len(list) > 0 {
			out.groups = append(out.groups, &Group{Namespace: ns, Pods: slices.Clip(slices.Clone(list))})
		}
	}
	slices.SortFunc(out.groups, func(a, b *Group) int { return strings.Compare(a.Namespace, b.Namespace) })
	for _, g := range out.groups {
		out.len += len(g.Pods)
	}
	return out
}

// Converter turns successive lists of pod objects into Sets as the agent's
// caches would: the same object gives the same record, and a namespace
// whose records are the same, in the same order, keeps its Group, so
// incremental compilers reuse what they derived. For manifests and tests;
// it costs every pod per call. The zero value is ready to use.
type Converter struct {
	rec map[*corev1.Pod]*Pod
	set *Set
}

// Set returns the Set of list.
func (c *Converter) Set(list []*corev1.Pod) *Set {
	rec := make(map[*corev1.Pod]*Pod, len(list))
	recs := make([]*Pod, len(list))
	for i, o := range list {
		p := c.rec[o]
		if p == nil {
			p = FromAPI(o)
		}
		rec[o], recs[i] = p, p
	}
	c.rec = rec // only what this list holds: nothing outlives its object
	byNS := byNamespace(recs)
	changed := map[string][]*Pod{}
	for _, g := range c.set.Groups() {
		if !slices.Equal(g.Pods, byNS[g.Namespace]) {
			changed[g.Namespace] = byNS[g.Namespace]
		}
		delete(byNS, g.Namespace)
	}
	for ns, ps := range byNS {
		changed[ns] = ps
	}
	c.set = c.set.Replace(changed)
	return c.set
}
