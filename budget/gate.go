package budget

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Input is what Gate.Apply reads: the cluster as the compilers read it.
type Input struct {
	NodeName   string
	Namespaces []*corev1.Namespace
	Pods       *podset.Set
	Policies   *npset.Set
	Limits     Limits
}

// Over is a NetworkPolicy that failed closed, and why.
type Over struct {
	Policy *networkingv1.NetworkPolicy
	// Cost is the policy's estimate on this node.
	Cost Cost
	// Node is set when the policy fits its own budget but not what the
	// node's total leaves: the largest policies give way first.
	Node bool
}

// Gate applies the budgets to successive states of one node's cluster,
// re-estimating only the policies whose own object changed, and, when pods
// or namespaces changed, those that select pods of this node (the others
// cost nothing here). It reads pod records directly, not a selection
// index of its own: it counts what selectors select, it keeps no pods.
// The zero value is ready to use; a Gate is not safe for concurrent use.
// Like the compilers, it relies on changed objects being new objects (see
// compose.Builder).
type Gate struct {
	entries      map[*networkingv1.NetworkPolicy]*entry
	groups       map[string]*npset.Group    // the input's group of each namespace, last call
	policyGroups []*npset.Group             // the input's groups, last call
	active       map[*entry]bool            // entries that select local pods
	readers      map[string]map[*entry]bool // the active entries that counted a namespace's pods
	total        Cost                       // of every entry within its own budget, last decide
	subst        map[string]substitution
	closed       map[*networkingv1.NetworkPolicy]*networkingv1.NetworkPolicy

	pods         *podset.Set
	podGroups    map[string]*podset.Group
	podGroupList []*podset.Group          // the Set's groups, last call
	local        map[string][]*podset.Pod // this node's pods by namespace
	addrs        map[*podset.Group]int    // addresses of each group's pods
	allAddrs     int
	namespaces   []*corev1.Namespace
	nsLabels     map[string]labels.Set
	// counts are addresses a pod selector selects in a group, kept for
	// the next call only as far as this one used them.
	counts, prevCounts map[countKey]int
}

type countKey struct {
	group *podset.Group
	sel   string // the selector's canonical text; "" every pod
}

// entry is one policy's estimate.
type entry struct {
	np      *networkingv1.NetworkPolicy
	cost    Cost
	invalid bool     // the compiler leaves it out
	reads   []string // namespaces whose pods it counted
	usesAll bool     // it counted every pod's addresses
	// shared are the addresses of the selections its rules hold, by
	// selection: counted in cost, and once per node however many
	// policies share them.
	shared map[string]int
}

// substitution is a namespace's group with its over-budget policies in
// their fail-closed form, kept while the input group and the verdicts
// stay the same, so that the compilers see the same group.
type substitution struct {
	in   *npset.Group
	over string
	out  *npset.Group
}

// Apply returns the policies with every over-budget one replaced by its
// fail-closed form (FailClosed), and those policies, sorted by namespace
// and name.
func (g *Gate) Apply(in Input) (*npset.Set, []Over) {
	if g.entries == nil {
		g.entries = map[*networkingv1.NetworkPolicy]*entry{}
		g.groups = map[string]*npset.Group{}
		g.active = map[*entry]bool{}
		g.readers = map[string]map[*entry]bool{}
		g.subst = map[string]substitution{}
		g.closed = map[*networkingv1.NetworkPolicy]*networkingv1.NetworkPolicy{}
		g.podGroups = map[string]*podset.Group{}
		g.local = map[string][]*podset.Pod{}
		g.addrs = map[*podset.Group]int{}
		g.nsLabels = map[string]labels.Set{}
	}
	g.prevCounts, g.counts = g.counts, map[countKey]int{}
	dirty := map[*entry]bool{}
	markNS := func(ns string) {
		if grp := g.groups[ns]; grp != nil {
			for _, np := range grp.Items {
				if e := g.entries[np]; e != nil {
					dirty[e] = true
				}
			}
		}
	}
	// Pods and namespaces: every policy of a namespace whose local pods
	// changed is estimated again, and the policies that select local pods
	// and counted pods of a namespace that changed (all of them when
	// namespaces came, went or changed their labels).
	changed := false
	if in.Pods != g.pods {
		changedNS, structural := g.readPods(in.Pods, in.NodeName, markNS)
		changed = structural
		for _, ns := range changedNS {
			for e := range g.readers[ns] {
				dirty[e] = true
			}
		}
		if len(changedNS) > 0 {
			for e := range g.active {
				if e.usesAll {
					dirty[e] = true
				}
			}
		}
	}
	if !sameList(in.Namespaces, g.namespaces) {
		g.namespaces = in.Namespaces
		clear(g.nsLabels)
		for _, ns := range in.Namespaces {
			l := make(labels.Set, len(ns.Labels)+1)
			for k, v := range ns.Labels {
				l[k] = v
			}
			l[corev1.LabelMetadataName] = ns.Name
			g.nsLabels[ns.Name] = l
		}
		changed = true
	}
	if changed {
		for e := range g.active {
			dirty[e] = true
		}
	}
	// Policies of changed namespaces: new ones estimated, gone ones
	// forgotten.
	// The policy groups: a Set made by Replace holds the previous one's
	// groups at the same places unless a namespace came or went, so an
	// event costs a pointer comparison per namespace and no lookups.
	pgroups := in.Policies.Groups()
	positional := len(pgroups) == len(g.policyGroups)
	for i, grp := range pgroups {
		if positional && g.policyGroups[i].Namespace != grp.Namespace {
			positional = false
			break
		}
	}
	seen := map[string]bool{}
	for i, grp := range pgroups {
		if positional && g.policyGroups[i] == grp {
			continue
		}
		if !positional {
			seen[grp.Namespace] = true
		}
		old := g.groups[grp.Namespace]
		if old == grp {
			continue
		}
		g.groups[grp.Namespace] = grp
		keep := make(map[*networkingv1.NetworkPolicy]bool, len(grp.Items))
		for _, np := range grp.Items {
			keep[np] = true
			if _, ok := g.entries[np]; !ok {
				// A policy the compiler leaves out costs nothing, and
				// its fail-closed form must not enforce it either.
				e := &entry{np: np, invalid: len(policy.Validate(np)) > 0}
				g.entries[np] = e
				dirty[e] = true
			}
		}
		if old != nil {
			for _, np := range old.Items {
				if !keep[np] {
					g.forget(np, in.Limits)
				}
			}
		}
	}
	if !positional {
		for ns, old := range g.groups {
			if !seen[ns] {
				for _, np := range old.Items {
					g.forget(np, in.Limits)
				}
				delete(g.groups, ns)
			}
		}
	}
	g.policyGroups = pgroups
	sc := selection.NewSelectors()
	for e := range dirty {
		if g.entries[e.np] != e {
			continue // forgotten
		}
		g.estimate(sc, e, in.Limits)
	}
	g.prevCounts = nil
	return g.decide(in)
}

// readPods notes the namespaces whose pods changed, re-reading their local
// pods and addresses; markNS is called for those whose local pods changed.
// It returns the namespaces whose pods changed, and whether namespaces
// came or went.
func (g *Gate) readPods(set *podset.Set, node string, markNS func(string)) (changedNS []string, structural bool) {
	g.pods = set
	groups := set.Groups()
	positional := len(groups) == len(g.podGroupList)
	for i, grp := range groups {
		if positional && g.podGroupList[i].Namespace != grp.Namespace {
			positional = false
			break
		}
	}
	defer func() { g.podGroupList = groups }()
	var seen map[string]bool
	if !positional {
		seen = make(map[string]bool, len(g.podGroups))
	}
	for i, grp := range groups {
		if positional {
			if g.podGroupList[i] == grp {
				continue
			}
		} else {
			seen[grp.Namespace] = true
		}
		old := g.podGroups[grp.Namespace]
		if old == grp {
			continue
		}
		changedNS = append(changedNS, grp.Namespace)
		if old == nil {
			structural = true
		}
		g.podGroups[grp.Namespace] = grp
		if old != nil {
			g.allAddrs -= g.addrs[old]
			delete(g.addrs, old)
		}
		n := 0
		for _, p := range grp.Items {
			n += selectableAddrs(p)
		}
		g.addrs[grp] = n
		g.allAddrs += n
		local := podset.LocalTo(grp, node)
		if !slices.Equal(local, g.local[grp.Namespace]) {
			markNS(grp.Namespace)
			if len(local) == 0 {
				delete(g.local, grp.Namespace)
			} else {
				g.local[grp.Namespace] = local
			}
		}
	}
	for ns, old := range g.podGroups {
		if positional {
			break // the same namespaces: none went
		}
		if !seen[ns] {
			structural = true
			changedNS = append(changedNS, ns)
			g.allAddrs -= g.addrs[old]
			delete(g.addrs, old)
			delete(g.podGroups, ns)
			if _, ok := g.local[ns]; ok {
				delete(g.local, ns)
				markNS(ns)
			}
		}
	}
	return changedNS, structural
}

func sameList(a, b []*corev1.Namespace) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// forget drops a policy's entry.
func (g *Gate) forget(np *networkingv1.NetworkPolicy, l Limits) {
	e, ok := g.entries[np]
	if !ok {
		return
	}
	g.setCost(e, Cost{}, l)
	g.deactivate(e)
	delete(g.entries, np)
	delete(g.closed, np)
}

// deactivate forgets what e counted.
func (g *Gate) deactivate(e *entry) {
	delete(g.active, e)
	for _, ns := range e.reads {
		if rs := g.readers[ns]; rs != nil {
			delete(rs, e)
			if len(rs) == 0 {
				delete(g.readers, ns)
			}
		}
	}
	e.reads, e.usesAll = e.reads[:0], false
}

// setCost replaces e's cost.
func (g *Gate) setCost(e *entry, c Cost, _ Limits) {
	e.cost = c
}

// estimate measures e's policy on this node.
func (g *Gate) estimate(sc *selection.Selectors, e *entry, l Limits) {
	g.deactivate(e)
	e.shared = nil
	np := e.np
	if e.invalid {
		g.setCost(e, Cost{}, l)
		return
	}
	ing, egr := policy.PolicyTypes(np)
	s := Shape{}
	if ing {
		s.Directions++
	}
	if egr {
		s.Directions++
	}
	subject := sc.Parse(&np.Spec.PodSelector)
	for _, p := range g.local[np.Namespace] {
		if subject.Selector.Matches(labels.Set(p.Labels)) {
			s.LocalPods++
		}
	}
	if s.LocalPods == 0 {
		// No chain holds its rules, and the compiler declares no set
		// for it: it costs nothing here, and its peers are not counted.
		g.setCost(e, Cost{}, l)
		return
	}
	g.active[e] = true
	rule := func(egress bool, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) {
		r := RuleShape{Egress: egress}
		for _, p := range ports {
			if p.Port != nil && p.Port.Type == intstr.String {
				r.NamedPorts++
			} else {
				r.Ports++
			}
		}
		for _, p := range peers {
			if p.IPBlock != nil {
				r.IPBlocks++
				r.Excepts += len(p.IPBlock.Except)
				continue
			}
			r.SelectorPeers++
			n, k := g.selected(sc, e, np.Namespace, p.NamespaceSelector, p.PodSelector)
			r.SelectedAddrs += n
			r.Selection += k + "\x00"
		}
		if r.Selection != "" {
			if e.shared == nil {
				e.shared = map[string]int{}
			}
			e.shared[r.Selection] = r.SelectedAddrs
		}
		if egress && r.NamedPorts > 0 && len(peers) == 0 {
			r.AllAddrs = g.allAddrs
			e.usesAll = true
		}
		s.Rules = append(s.Rules, r)
	}
	if ing {
		for _, r := range np.Spec.Ingress {
			rule(false, r.From, r.Ports)
		}
	}
	if egr {
		for _, r := range np.Spec.Egress {
			rule(true, r.To, r.Ports)
		}
	}
	g.setCost(e, Estimate(s), l)
}

// selected counts the addresses of the pods podSel selects (nil: all) in
// the namespaces nsSel selects (nil: ownNS), and names the peer as the
// compiler tells selections apart. Selectors are valid: the policy passed
// validation. Every address of a pod counts, enforced or not: an upper
// bound.
func (g *Gate) selected(sc *selection.Selectors, e *entry, ownNS string, nsSel, podSel *metav1.LabelSelector) (int, string) {
	var ps *selection.Parsed
	key := ""
	if podSel != nil {
		ps = sc.Parse(podSel)
		if ps.Selector.Empty() {
			ps = nil
		} else {
			key = "?" + ps.Key
		}
	}
	inGroup := func(grp *podset.Group) int {
		if rs := g.readers[grp.Namespace]; rs == nil {
			g.readers[grp.Namespace] = map[*entry]bool{e: true}
		} else {
			rs[e] = true
		}
		e.reads = append(e.reads, grp.Namespace)
		k := countKey{grp, key}
		if n, ok := g.counts[k]; ok {
			return n
		}
		n, ok := g.prevCounts[k]
		if !ok {
			if ps == nil {
				n = g.addrs[grp]
			} else {
				for _, p := range grp.Items {
					if ps.Selector.Matches(labels.Set(p.Labels)) {
						n += selectableAddrs(p)
					}
				}
			}
		}
		g.counts[k] = n
		return n
	}
	if nsSel == nil {
		peer := "ns=" + ownNS + key
		if grp := g.podGroups[ownNS]; grp != nil {
			return inGroup(grp), peer
		}
		return 0, peer
	}
	nsp := sc.Parse(nsSel)
	nss := nsp.Selector
	n := 0
	for ns, grp := range g.podGroups {
		l := g.nsLabels[ns]
		if l == nil {
			l = labels.Set{corev1.LabelMetadataName: ns}
		}
		if nss.Matches(l) {
			n += inGroup(grp)
		}
	}
	return n, "nss=" + nsp.Key + key
}

// decide picks the policies that fail closed and substitutes them.
func (g *Gate) decide(in Input) (*npset.Set, []Over) {
	l := in.Limits
	var over []Over
	// Only policies that select local pods cost anything here.
	for e := range g.active {
		if e.cost.Exceeds(l.Object) {
			over = append(over, Over{Policy: e.np, Cost: e.cost})
		}
	}
	// The node's total: every active policy within its own budget, with
	// a selection's set counted once however many policies hold it (the
	// compiler shares it). Only active policies count, so this costs the
	// policies that select this node's pods, not the cluster's.
	var fit []*entry
	refs := map[string]int{}
	g.total = Cost{}
	for e := range g.active {
		if e.cost.Exceeds(l.Object) || e.cost == (Cost{}) {
			continue
		}
		fit = append(fit, e)
		g.total.Rules += e.cost.Rules
		g.total.Elements += e.cost.Elements
		for k, n := range e.shared {
			if refs[k] > 0 {
				g.total.Elements -= n
			}
			refs[k]++
		}
	}
	if g.total.Exceeds(l.Node) {
		// The node's total is over: the largest policies within their
		// own budget give way until the rest fit, so that many small
		// policies are not failed for one large one.
		slices.SortFunc(fit, func(a, b *entry) int {
			if c := cmp.Compare(share(b.cost, l.Node), share(a.cost, l.Node)); c != 0 {
				return c
			}
			return compareNames(a.np, b.np)
		})
		rest := g.total
		for _, e := range fit {
			if !rest.Exceeds(l.Node) {
				break
			}
			// A shared selection leaves the total with the last
			// policy that holds it.
			c := e.cost
			for k, n := range e.shared {
				if refs[k]--; refs[k] > 0 {
					c.Elements -= n
				}
			}
			rest = rest.Sub(c)
			over = append(over, Over{Policy: e.np, Cost: e.cost, Node: true})
		}
	}
	slices.SortFunc(over, func(a, b Over) int { return compareNames(a.Policy, b.Policy) })

	byNS := map[string][]*networkingv1.NetworkPolicy{}
	for _, o := range over {
		byNS[o.Policy.Namespace] = append(byNS[o.Policy.Namespace], o.Policy)
	}
	// Only namespaces with a policy over budget now, or before, are
	// looked at: an event costs the namespaces it touched.
	repl := map[string]*npset.Group{}
	for ns := range g.subst {
		if _, ok := byNS[ns]; !ok {
			delete(g.subst, ns)
		}
	}
	for ns, closed := range byNS {
		grp := g.groups[ns]
		isOver := make(map[*networkingv1.NetworkPolicy]bool, len(closed))
		for _, np := range closed {
			isOver[np] = true
		}
		var key strings.Builder
		for _, np := range grp.Items {
			if isOver[np] {
				key.WriteByte('1')
			} else {
				key.WriteByte('0')
			}
		}
		if s, ok := g.subst[ns]; ok && s.in == grp && s.over == key.String() {
			repl[ns] = s.out
			continue
		}
		items := make([]*networkingv1.NetworkPolicy, len(grp.Items))
		for i, np := range grp.Items {
			items[i] = np
			if isOver[np] {
				items[i] = g.failClosed(np)
			}
		}
		out := &npset.Group{Namespace: ns, Items: items}
		g.subst[ns] = substitution{in: grp, over: key.String(), out: out}
		repl[ns] = out
	}
	return in.Policies.WithGroups(repl), over
}

// share is the larger of c's fractions of l.
func share(c, l Cost) float64 {
	return max(float64(c.Rules)/float64(l.Rules), float64(c.Elements)/float64(l.Elements))
}

func compareNames(a, b *networkingv1.NetworkPolicy) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// failClosed is np's fail-closed form, the same object while np is.
func (g *Gate) failClosed(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	if c, ok := g.closed[np]; ok {
		return c
	}
	c := FailClosed(np)
	g.closed[np] = c
	return c
}

// FailClosed is what an over-budget NetworkPolicy is enforced as:
// policy.FailClosed, the same subject and the same effective policyTypes,
// without rules.
func FailClosed(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	return policy.FailClosed(np)
}

// Estimate is np's estimate from the last Apply (zero for a policy it did
// not see, or one the compiler leaves out).
func (g *Gate) Estimate(np *networkingv1.NetworkPolicy) Cost {
	if e, ok := g.entries[np]; ok {
		return e.cost
	}
	return Cost{}
}

// Total is the estimate of every policy of the last Apply that fits its
// own budget (those failed closed for the node's total included), a
// shared selection counted once.
func (g *Gate) Total() Cost { return g.total }

// Problem names o for logs and Events. The message is the same on every
// node that finds the policy over budget (it names the limits, not this
// node's estimate), so that they write one Event between them.
func Problem(o Over, l Limits) problem.Problem {
	reason := fmt.Sprintf("over its budget (at most %d rules and %d set elements per NetworkPolicy on a node)", l.Object.Rules, l.Object.Elements)
	if o.Node {
		reason = fmt.Sprintf("over what the node's budget (%d rules and %d set elements for all NetworkPolicies) leaves it: the largest policies give way", l.Node.Rules, l.Node.Elements)
	}
	return problem.Problem{
		Object: problem.Object{APIVersion: problem.NetworkingV1, Kind: "NetworkPolicy", Namespace: o.Policy.Namespace, Name: o.Policy.Name},
		Reason: reason + "; enforced in its fail-closed form: the pods it selects stay isolated, its rules allow nothing",
		Local:  true,
	}
}

// selectableAddrs are the addresses of p a peer selector can put in the
// table: none for a finished pod (it gave them back) or a host-network pod
// (its traffic is its node's), which the compilers never select. Counting
// only these makes the estimate, and so the table, the same whether the
// agent reads every Pod or the controller's peer records, which leave such
// pods out (see package peerslice).
func selectableAddrs(p *podset.Pod) int {
	if p.Finished || p.HostNetwork {
		return 0
	}
	return len(p.IPs)
}
