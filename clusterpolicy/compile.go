package clusterpolicy

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Input is the cluster state one node's ClusterNetworkPolicies are
// compiled from.
type Input struct {
	NodeName   string
	Namespaces []*corev1.Namespace
	Pods       *podset.Set
	// Nodes are what egress nodes peers select (their InternalIP and
	// ExternalIP addresses).
	Nodes    []*corev1.Node
	Policies []*v1beta1.ClusterNetworkPolicy
	// LogDenied, when set, makes Deny rules count and, for pods of
	// namespaces that opt in (policy.AnnotationLogDenied), end in the
	// shared rate-limited log chains of package policy instead of a
	// plain drop (see layout.go). Pass policy.Input's LogDenied: only
	// whether it is set matters here, the chains are policy's.
	LogDenied *policy.LogDenied
}

// Output is the ClusterNetworkPolicy part of the desired table: the chains
// and sets, and the Tiers that policy places in its fixed chains (pass
// them as policy.Input.Tiers). Without a valid policy everything but the
// problems and warnings is empty, and the table is the NetworkPolicy table
// alone.
type Output struct {
	Chains []engine.Chain
	Sets   []engine.Set
	Tiers  policy.Tiers
	// Problems name invalid objects or fields: an object whose placement
	// is invalid is left out, an invalid rule fails closed (see
	// compiledPolicy).
	Problems []problem.Problem
	// Warnings name valid rules nftguard cannot enforce as written
	// (domainNames peers, peers of an unknown kind), which fail closed.
	Warnings []problem.Problem
}

// Compile turns the cluster state into the ClusterNetworkPolicy chains,
// sets and tier rules for the node in.NodeName. It keeps nothing between
// calls; a Compiler compiles successive states faster.
func Compile(in Input) Output {
	return new(Compiler).Compile(in)
}

// compiler is one call of Compiler.Compile.
type compiler struct {
	in       Input
	sel      *selection.Index
	logged   map[string]bool // namespaces whose pods log denied packets; nil: the node does not log
	prev     *memo
	next     *memo
	nodesSet bool // Input.Nodes are the previous compile's
	sets     map[string]*engine.Set
	rules    map[ruleKey]*compiledRule
	addrs    map[string]*peerAddrs // see peerElems
	// scratch of the rule being compiled: its selections and sets.
	used     []selection.PeerKey
	declared []*engine.Set
}

// Compile is the package's Compile for the next state of the cluster: the
// same result, re-deriving only what depends on objects that changed.
func (m *Compiler) Compile(in Input) Output {
	if len(in.Policies) == 0 {
		// Nothing to keep: forget the cluster rather than hold it.
		*m = Compiler{}
		return Output{}
	}
	if m.prev == nil || m.prev.node != in.NodeName {
		m.prev = newMemo(in.NodeName)
	}
	sel := m.sel.Index(in.NodeName, in.Namespaces, in.Pods)
	c := &compiler{
		in:    in,
		sel:   sel,
		prev:  m.prev,
		next:  newMemo(in.NodeName),
		sets:  map[string]*engine.Set{},
		rules: map[ruleKey]*compiledRule{},
		addrs: map[string]*peerAddrs{},
	}
	c.next.nodes = in.Nodes
	c.logged = loggedNamespaces(&in)
	c.nodesSet = m.prev.nodes != nil && slices.Equal(m.prev.nodes, in.Nodes)
	defer func() { m.prev = c.next }()
	return c.compile()
}

// ordered is a valid policy and its place in the input.
type ordered struct {
	cp  *compiledPolicy
	pos int
}

func (c *compiler) compile() Output {
	var out Output
	// Validate; the first object of a name counts (two share one only
	// in manifests: their sets would share names).
	var pols []ordered
	byName := map[string]bool{}
	for i, cnp := range c.in.Policies {
		vp := c.policy(cnp)
		out.Problems = append(out.Problems, vp.problems...)
		out.Warnings = append(out.Warnings, vp.warnings...)
		if vp.cp == nil {
			continue
		}
		if byName[cnp.Name] {
			out.Problems = append(out.Problems, duplicateName(cnp))
			continue
		}
		byName[cnp.Name] = true
		pols = append(pols, ordered{vp.cp, i})
	}
	if len(pols) == 0 {
		return out
	}
	// Evaluation order within a tier: priority, then name (the API
	// leaves equal priorities to the implementation; by name makes it
	// the same on every node and every run).
	sort.Slice(pols, func(i, j int) bool {
		a, b := pols[i].cp.cnp, pols[j].cp.cnp
		if a.Spec.Priority != b.Spec.Priority {
			return a.Spec.Priority < b.Spec.Priority
		}
		return a.Name < b.Name
	})

	// The local pods with chains: one per key (the first in key order),
	// as policy does; policy reports the others.
	local := c.sel.Local()
	kept := make(map[*selection.Pod]bool, len(local))
	for i, p := range local {
		if i > 0 && local[i-1].Key == p.Key {
			continue
		}
		kept[p] = true
	}

	// Per kept local pod and slot, the policies selecting it in
	// evaluation order.
	type podSlots [4][]*compiledPolicy
	byPod := map[*selection.Pod]*podSlots{}
	for _, o := range pols {
		cp := o.cp
		ing, egr := len(cp.cnp.Spec.Ingress) > 0, len(cp.cnp.Spec.Egress) > 0
		if !ing && !egr {
			continue
		}
		for _, p := range c.subject(cp) {
			if !kept[p] {
				continue
			}
			ps := byPod[p]
			if ps == nil {
				ps = &podSlots{}
				byPod[p] = ps
			}
			if ing {
				i := slotIndex(cp.admin, false)
				ps[i] = append(ps[i], cp)
			}
			if egr {
				i := slotIndex(cp.admin, true)
				ps[i] = append(ps[i], cp)
			}
		}
	}

	maps := newMaps()
	taken := map[string]bool{} // slot and address already a map key
	var chains []engine.Chain
	for _, p := range local {
		ps := byPod[p]
		if ps == nil {
			continue
		}
		for si := range slots {
			if len(ps[si]) == 0 {
				continue
			}
			ch := c.podChain(p, si, ps[si])
			chains = append(chains, ch)
			v := "jump " + ch.Name
			for f, addrs := range [2][]string{p.V4Text(), p.V6Text()} {
				for _, a := range addrs {
					// An address two local pods list (a stale
					// status) stays with the first in key order.
					if k := string(rune('0'+si)) + a; !taken[k] {
						taken[k] = true
						maps[si][f].Elements = append(maps[si][f].Elements, engine.Element{Key: a, Value: v})
					}
				}
			}
		}
	}
	sort.Slice(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	out.Chains = chains
	for si := range maps {
		for f := range maps[si] {
			s := &maps[si][f]
			sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Key < s.Elements[j].Key })
			out.Sets = append(out.Sets, *s)
		}
	}
	names := make([]string, 0, len(c.sets))
	for n := range c.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out.Sets = append(out.Sets, *c.sets[n])
	}
	out.Tiers = tiers()
	return out
}

// subject returns the local pods a policy's subject selects (the
// previous compile's list when the selection is the same pods).
func (c *compiler) subject(cp *compiledPolicy) []*selection.Pod {
	if sm, ok := c.prev.subjects[cp]; ok && c.sel.Unchanged(sm.key) {
		c.next.subjects[cp] = sm
		return sm.local
	}
	s, k := c.sel.Select("", cp.subjNS, cp.subjPod)
	sm := &subjectMemo{key: k}
	for _, p := range s.Pods {
		if p.Local {
			sm.local = append(sm.local, p)
		}
	}
	c.next.subjects[cp] = sm
	return sm.local
}
