package podset

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/nsgroup"
)

// Set is the pods of a cluster grouped by namespace (see nsgroup.Set): a
// Set and its Groups are immutable, and Replace and Update return new Sets
// that share the Groups they did not change. A nil *Set is empty.
type Set = nsgroup.Set[*Pod]

// Group is the pods of one namespace, in the order they were given (the
// first of two pods sharing a name counts, so order can matter for
// manifests).
type Group = nsgroup.Group[*Pod]

// NewSet groups pods by namespace, keeping their order within each.
func NewSet(list []*Pod) *Set {
	return nsgroup.New(list)
}

// LocalTo returns the group's pods on node, in order. The answer for the
// last node asked is kept (compilers ask for their one node, from
// concurrent compiles too), so each group is scanned once per node.
func LocalTo(g *Group, node string) []*Pod {
	return g.Filter(node, func(p *Pod) bool { return p.NodeName == node })
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
	c.set = c.set.Update(recs)
	return c.set
}
