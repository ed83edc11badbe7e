package policy

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Input is the cluster state one node's policy is compiled from.
type Input struct {
	NodeName   string
	Namespaces []*corev1.Namespace
	Pods       *podset.Set
	Policies   []*networkingv1.NetworkPolicy
	// LogDenied, when set, logs the packets the chains of pods in
	// namespaces annotated AnnotationLogDenied drop (see logdenied.go).
	// nil, the default, leaves the table exactly as without logging.
	LogDenied *LogDenied
	// Tiers are the ClusterNetworkPolicy dispatch rules placed around the
	// NetworkPolicy dispatch (see Tiers); empty, the default, leaves the
	// table exactly as without them.
	Tiers Tiers
}

// Output is the policy part of the desired table.
type Output struct {
	Chains   []engine.Chain
	Sets     []engine.Set
	Problems []problem.Problem
}

// compiledPolicy is a valid policy with its pod selector parsed.
type compiledPolicy struct {
	np       *networkingv1.NetworkPolicy
	key      string // namespace/name
	selector labels.Selector
	ingress  bool
	egress   bool
}

// compiler is one call of Compile. Its state has three lifetimes, kept
// apart: the memo (what the previous call derived, read, and what this one
// derives, written: see Compiler), this call's output, and the scratch of
// the one rule being compiled.
type compiler struct {
	in  Input
	sel *selection.Index // pods, namespaces, selections (with their own memo)
	val validator

	// The memo.
	prev, next *memo

	// This call's output: the sets declared so far, the problems, and
	// each rule compiled once.
	sets     map[string]*engine.Set
	problems []problem.Problem
	rules    map[ruleKey]*compiledRule
	// dispatch is the pod whose chain each verdict-map key jumps to, and
	// sharedReported the shared addresses already reported (addDispatch).
	dispatch       map[dispatchKey]*selection.Pod
	sharedReported map[sharedKey]bool
	// logged are the namespaces whose pods' chains end in the shared
	// denied chains; nil when the node does not log.
	logged map[string]bool

	// The rule being compiled, see rule.
	scratch ruleScratch
}

// Compile turns the cluster state into the policy chains and sets for the
// node in.NodeName. Invalid objects are reported in Output.Problems and left
// out; everything else is compiled. It keeps nothing between calls; a
// Compiler compiles successive states of one cluster faster.
func Compile(in Input) Output {
	return new(Compiler).Compile(in)
}

// Compile is the package's Compile for the next state of the cluster: the
// result is the same, but what an earlier call derived from objects that
// are still the same objects (pointers) is reused.
func (m *Compiler) Compile(in Input) Output {
	if m.prev == nil || m.prev.node != in.NodeName {
		m.prev = &memo{node: in.NodeName}
	}
	sel := m.sel.Index(in.NodeName, in.Namespaces, in.Pods)
	c := &compiler{
		in:    in,
		sel:   sel,
		val:   validator{selectors: sel.Selectors(), portNames: map[string][]string{}},
		sets:  map[string]*engine.Set{},
		rules: map[ruleKey]*compiledRule{},
		prev:  m.prev,
		next:  newMemo(m.prev),
	}
	c.logged = loggedNamespaces(&c.in)
	defer func() { m.prev = c.next }()
	c.problems = append(c.problems, sel.Problems()...)

	// Every policy is validated (each node reports every invalid one);
	// the same list as the previous compile's is not looked at again.
	if c.prev.list != nil && sameList(c.prev.list.objs, in.Policies) {
		c.next.list = c.prev.list
	} else {
		c.next.list = c.readPolicies(in.Policies)
	}
	c.problems = append(c.problems, c.next.list.problems...)
	// Only the namespaces of local pods need their policies, in key
	// order (a NetworkPolicy selects pods of its own namespace only);
	// policies sharing a key (possible in manifests) in input order.
	local := dropSharedLocal(c.sel.Local(), &c.problems)
	policiesByNS := map[string][]*compiledPolicy{}
	for _, p := range local {
		ns := p.Obj.Namespace
		if _, done := policiesByNS[ns]; !done {
			list := slices.Clone(c.next.list.inNamespace(ns))
			sort.SliceStable(list, func(i, j int) bool { return list[i].key < list[j].key })
			policiesByNS[ns] = list
		}
	}

	maps := newDispatchMaps()
	var podChains []engine.Chain
	var ing, egr []*compiledPolicy
	for _, p := range local {
		ing, egr = ing[:0], egr[:0]
		for _, cp := range policiesByNS[p.Obj.Namespace] {
			if !cp.selector.Matches(labels.Set(p.Obj.Labels)) {
				continue
			}
			if cp.ingress {
				ing = append(ing, cp)
			}
			if cp.egress {
				egr = append(egr, cp)
			}
		}
		if len(ing) > 0 {
			ch := c.podChain(p, ing, &dirIngress)
			podChains = append(podChains, ch)
			c.addDispatch(&maps.ingress4, &maps.ingress6, p, ch.Name)
		}
		if len(egr) > 0 {
			ch := c.podChain(p, egr, &dirEgress)
			podChains = append(podChains, ch)
			c.addDispatch(&maps.egress4, &maps.egress6, p, ch.Name)
		}
	}
	sort.Slice(podChains, func(i, j int) bool { return podChains[i].Name < podChains[j].Name })

	out := Output{}
	fixed := fixedChains(&in.Tiers)
	out.Chains = make([]engine.Chain, 0, len(fixed)+2+len(podChains))
	out.Chains = append(out.Chains, fixed...)
	if in.LogDenied != nil {
		out.Chains = append(out.Chains, deniedChains(*in.LogDenied)...)
	}
	out.Chains = append(out.Chains, podChains...)
	out.Sets = make([]engine.Set, 0, 4+len(c.sets))
	for _, m := range maps.all() {
		sortElements(m)
		out.Sets = append(out.Sets, *m)
	}
	names := make([]string, 0, len(c.sets))
	for n := range c.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// addrSet stores its elements sorted.
		out.Sets = append(out.Sets, *c.sets[n])
	}
	out.Problems = c.problems
	return out
}

// policyList is a policy list as one compile read it: per position the
// object, its compiled form (nil for an invalid one) and its namespace,
// the problems in list order, and where each namespace's policies sit.
// The arrays are read in order, which costs little per policy: the next
// list is read against this one without a look at an unchanged policy.
type policyList struct {
	objs     []*networkingv1.NetworkPolicy
	ents     []policyEntry // one per object
	problems []problem.Problem
	// runs are the stretches of the list in one namespace: one per
	// namespace when the list comes namespace by namespace, as the agent
	// passes it.
	runs []nsRun
	// byNS are the valid policies of the namespaces asked for so far, in
	// list order. Compiles given the same list share it (one at a time).
	byNS map[string][]*compiledPolicy
	// spare is the entries of the list this one replaced, no longer
	// read: room for the next list's, as fresh memory of that size per
	// policy event costs more than filling it.
	spare []policyEntry
}

// policyEntry is what a compile knows of the policy at one position.
type policyEntry struct {
	vp *validPolicy
	cp *compiledPolicy // vp.cp, here to be read without a look at vp
	ns string
}

// nsRun is a stretch [start, end) of a policy list in namespace ns.
type nsRun struct {
	ns         string
	start, end int
}

// inNamespace lists the valid policies of namespace ns, in list order.
// The list is shared and must not be changed.
func (l *policyList) inNamespace(ns string) []*compiledPolicy {
	if out, ok := l.byNS[ns]; ok {
		return out
	}
	var out []*compiledPolicy
	for _, r := range l.runs {
		if r.ns != ns {
			continue
		}
		for _, e := range l.ents[r.start:r.end] {
			if e.cp != nil {
				out = append(out, e.cp)
			}
		}
	}
	if l.byNS == nil {
		l.byNS = map[string][]*compiledPolicy{}
	}
	l.byNS[ns] = out
	return out
}

// readPolicies reads a new policy list against the previous compile's:
// a policy at the position the previous list had it, or one further (one
// policy removed before it), is taken from there; any other is validated
// once and kept in the memo's table. Policies the walk passes over are
// dropped from that table, which is a cache: a dropped policy that is
// still listed (a list in a new order) is only validated again later.
func (c *compiler) readPolicies(objs []*networkingv1.NetworkPolicy) *policyList {
	prev := c.prev.list
	if prev == nil {
		prev = &policyList{}
	}
	l := &policyList{objs: objs, runs: make([]nsRun, 0, len(prev.runs)), spare: prev.ents}
	if l.ents = prev.spare[:0]; cap(l.ents) >= len(objs) {
		l.ents = l.ents[:len(objs)]
		clear(l.ents[len(objs):cap(l.ents)]) // nothing kept alive past the end
	} else {
		l.ents = make([]policyEntry, len(objs), len(objs)+len(objs)/8)
	}
	prev.spare = nil
	if objs == nil {
		l.objs = []*networkingv1.NetworkPolicy{} // known to be empty
	}
	j := 0
	for i := 0; i < len(objs); {
		if j+1 < len(prev.objs) && prev.objs[j] != objs[i] && prev.objs[j+1] == objs[i] {
			delete(c.next.policies, prev.objs[j]) // removed from the list
			j++
		}
		// The stretch the previous list has at j, copied at once.
		n := 0
		for i+n < len(objs) && j+n < len(prev.objs) && objs[i+n] == prev.objs[j+n] {
			n++
		}
		if n > 0 {
			copy(l.ents[i:i+n], prev.ents[j:j+n])
			i, j = i+n, j+n
			continue
		}
		vp := c.policy(objs[i])
		l.ents[i] = policyEntry{vp: vp, cp: vp.cp, ns: objs[i].Namespace}
		i++
	}
	for _, np := range prev.objs[j:] {
		delete(c.next.policies, np)
	}
	start := 0
	for i := range l.ents {
		e := &l.ents[i]
		if e.cp == nil {
			l.problems = append(l.problems, e.vp.problems...)
		}
		if e.ns != l.ents[start].ns {
			l.runs = append(l.runs, nsRun{ns: l.ents[start].ns, start: start, end: i})
			start = i
		}
	}
	if len(l.ents) > 0 {
		l.runs = append(l.runs, nsRun{ns: l.ents[start].ns, start: start, end: len(l.ents)})
	}
	return l
}

// policyTypes applies the API's defaulting: Ingress always, Egress when the
// policy has egress rules, unless policyTypes says otherwise.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func sortElements(s *engine.Set) {
	sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Key < s.Elements[j].Key })
}

// PolicyTypes tells whether np isolates the pods it selects for ingress
// and for egress, with the API's defaulting (Ingress always, Egress when
// the policy has egress rules, unless policyTypes says otherwise): what
// readers of denied-packet logs name the deciding policies by.
func PolicyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	return policyTypes(np)
}
