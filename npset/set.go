package npset

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// Set is NetworkPolicies grouped by namespace. A Set and its Groups are
// immutable: Replace and Update return new Sets that share the Groups they
// did not change. A nil *Set is empty.
type Set struct {
	groups []*Group // non-empty, sorted by namespace
	len    int
}

// Group is the policies of one namespace, in the order they were given.
type Group struct {
	Namespace string
	Policies  []*networkingv1.NetworkPolicy
}

// New groups list by namespace, keeping the order within each namespace.
func New(list []*networkingv1.NetworkPolicy) *Set {
	return (*Set)(nil).Replace(byNamespace(list))
}

func byNamespace(list []*networkingv1.NetworkPolicy) map[string][]*networkingv1.NetworkPolicy {
	byNS := map[string][]*networkingv1.NetworkPolicy{}
	for _, np := range list {
		byNS[np.Namespace] = append(byNS[np.Namespace], np)
	}
	return byNS
}

// Len is the number of policies.
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

// All lists every policy, namespace by namespace.
func (s *Set) All() []*networkingv1.NetworkPolicy {
	out := make([]*networkingv1.NetworkPolicy, 0, s.Len())
	for _, g := range s.Groups() {
		out = append(out, g.Policies...)
	}
	return out
}

// Replace returns a Set in which each namespace of byNS holds exactly the
// given policies (none: the namespace has none left); the other
// namespaces' Groups are s's own. Every policy of byNS[ns] must be in
// namespace ns. It costs the namespaces of the Set plus the policies
// given.
func (s *Set) Replace(byNS map[string][]*networkingv1.NetworkPolicy) *Set {
	old := s.Groups()
	out := &Set{groups: make([]*Group, 0, len(old)+len(byNS))}
	for _, g := range old {
		if _, ok := byNS[g.Namespace]; !ok {
			out.groups = append(out.groups, g)
		}
	}
	for ns, list := range byNS {
		if len(list) > 0 {
			out.groups = append(out.groups, &Group{Namespace: ns, Policies: slices.Clip(slices.Clone(list))})
		}
	}
	slices.SortFunc(out.groups, func(a, b *Group) int { return strings.Compare(a.Namespace, b.Namespace) })
	for _, g := range out.groups {
		out.len += len(g.Policies)
	}
	return out
}

// Update returns the Set of list, sharing s's Group of every namespace
// whose policies are the same objects in the same order: what a caller
// holding whole lists (manifests, tests) passes to keep an incremental
// compiler's work for unchanged namespaces. It costs every policy.
func (s *Set) Update(list []*networkingv1.NetworkPolicy) *Set {
	byNS := byNamespace(list)
	changed := map[string][]*networkingv1.NetworkPolicy{}
	for _, g := range s.Groups() {
		if !slices.Equal(g.Policies, byNS[g.Namespace]) {
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
