package clusterpolicy

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
	"github.com/nftguard/nftguard/tablelayout"
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
	// DNS, when set, redirects the DNS of domainNames rules' subject
	// pods to the agent's forwarder (see DNS); without it (apply,
	// render) those rules' sets are never filled: they match nothing.
	DNS *DNS
	// LogDenied, when set, makes Deny rules count and, for pods of
	// namespaces that opt in (tablelayout.AnnotationLogDenied), end in the
	// shared rate-limited log chains of package tablelayout instead of
	// a plain drop (see layout.go). Pass policy.Input's LogDenied: only
	// whether it is set matters here; policy.Compile emits the chains.
	LogDenied *tablelayout.LogDenied
	// LinkLocal are local pods' own link-local addresses (package
	// podguard's Output.LinkLocal), dispatched like their pod IPs.
	LinkLocal map[string][]string
}

// Output is the ClusterNetworkPolicy part of the desired table: the chains
// and sets, and the Tiers that policy places in its fixed chains (pass
// them as policy.Input.Tiers). Without a valid policy everything but the
// problems and warnings is empty, and the table is the NetworkPolicy table
// alone.
type Output struct {
	Chains []engine.Chain
	Sets   []engine.Set
	Tiers  tablelayout.Tiers
	// Problems name invalid objects or fields: an object whose placement
	// is invalid is left out, an invalid rule fails closed (see
	// compiledPolicy).
	Problems []problem.Problem
	// Warnings name valid rules nftguard cannot enforce as written
	// (domainNames peers outside Accept rules, peers of an unknown
	// kind), which fail closed.
	Warnings []problem.Problem
	// DNS is the DNS forwarder's table: the local subject pods of
	// domainNames rules and the sets their answers go to; nil when no
	// valid policy has such a rule.
	DNS *fqdn.Table
}

// Compile turns the cluster state into the ClusterNetworkPolicy chains,
// sets and tier rules for the node in.NodeName. It keeps nothing between
// calls; a Compiler compiles successive states faster.
func Compile(in Input) Output {
	return new(Compiler).Compile(in)
}

// compiler is one call of Compiler.Compile.
type compiler struct {
	in     Input
	sel    *selection.Index
	logged map[string]bool // namespaces whose pods log denied packets; nil: the node does not log
	prev   *memo
	next   *memo
	cyc    *podchain.Cycle // pod chains, rules and sets, with their memo
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
		in:   in,
		sel:  sel,
		prev: m.prev,
		next: newMemo(in.NodeName),
	}
	nodesSame := m.prev.nodes != nil && slices.Equal(m.prev.nodes, in.Nodes)
	c.cyc = podchain.NewCycle(sel, m.prev.chains, nodesSame)
	c.next.chains = c.cyc.Next()
	c.next.nodes = in.Nodes
	c.logged = podchain.LoggedNamespaces(in.LogDenied != nil, in.Namespaces, tablelayout.AnnotationLogDenied)
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
	// reported as policy reports them (compose keeps one of the two).
	local, shared := podchain.DropSharedLocal(c.sel.Local())
	out.Problems = append(out.Problems, shared...)
	kept := make(map[*selection.Member]bool, len(local))
	for _, p := range local {
		kept[p] = true
	}

	// Per kept local pod and slot, the policies selecting it in
	// evaluation order.
	type podSlots [4][]*compiledPolicy
	byPod := map[*selection.Member]*podSlots{}
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

	dispatch := podchain.NewDispatch(newMaps()...).WithLinkLocal(c.in.LinkLocal)
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
			dispatch.Add(&slots[si].Kind, p, ch.Name)
		}
	}
	sort.Slice(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	out.Chains = chains
	out.Sets = append(dispatch.Maps(), c.cyc.Sets()...)
	out.Problems = append(out.Problems, dispatch.Problems()...)
	out.Tiers = tiers()
	c.dnsOutput(&out, pols, local, func(p *selection.Member, si int) []*compiledPolicy {
		if ps := byPod[p]; ps != nil {
			return ps[si]
		}
		return nil
	})
	return out
}

// subject returns the local pods a policy's subject selects (the
// previous compile's list when the selection is the same pods).
func (c *compiler) subject(cp *compiledPolicy) []*selection.Member {
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
