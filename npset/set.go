package npset

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/nsgroup"
)

// Set is NetworkPolicies grouped by namespace (see nsgroup.Set): a Set
// and its Groups are immutable, and Replace and Update return new Sets
// that share the Groups they did not change. A nil *Set is empty.
type Set = nsgroup.Set[*networkingv1.NetworkPolicy]

// Group is the policies of one namespace, in the order they were given.
type Group = nsgroup.Group[*networkingv1.NetworkPolicy]

// New groups list by namespace, keeping the order within each namespace.
func New(list []*networkingv1.NetworkPolicy) *Set {
	return nsgroup.New(list)
}
