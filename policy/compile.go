package policy

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
	"github.com/nftguard/nftguard/tablelayout"
)

// Input is the cluster state one node's policy is compiled from.
type Input struct {
	NodeName   string
	Namespaces []*corev1.Namespace
	Pods       *podset.Set
	Policies   *npset.Set
	// LogDenied, when set, logs the packets the chains of pods in
	// namespaces annotated tablelayout.AnnotationLogDenied drop, and
	// Compile emits the shared np_denied_* chains (of either tier's
	// pods). nil, the default, leaves the table exactly as without logging.
	LogDenied *tablelayout.LogDenied
	// Tiers are the ClusterNetworkPolicy dispatch rules placed around the
	// NetworkPolicy dispatch (see tablelayout.Tiers); empty, the
	// default, leaves the table exactly as without them.
	Tiers tablelayout.Tiers
	// LinkLocal are local pods' own link-local addresses (package
	// podguard's Output.LinkLocal), dispatched like their pod IPs.
	LinkLocal map[string][]string
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

	// This call's problems, and its pod chains, rules and sets (with
	// their own memo in prev and next).
	problems []problem.Problem
	cyc      *podchain.Cycle
	polRules map[policyRulesKey][]*podchain.Rule // see policyRules
	// logged are the namespaces whose pods' chains end in the shared
	// denied chains; nil when the node does not log.
	logged map[string]bool
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
		in:   in,
		sel:  sel,
		val:  validator{selectors: sel.Selectors(), portNames: map[string][]string{}},
		prev: m.prev,
		next: &memo{node: m.prev.node},
		cyc:  podchain.NewCycle(sel, m.prev.chains, false),

		polRules: map[policyRulesKey][]*podchain.Rule{},
	}
	c.next.chains = c.cyc.Next()
	c.logged = podchain.LoggedNamespaces(in.LogDenied != nil, in.Namespaces, tablelayout.AnnotationLogDenied)
	defer func() { m.prev = c.next }()
	c.problems = append(c.problems, sel.Problems()...)

	// Every policy is validated (each node reports every invalid one);
	// the groups of namespaces whose policies did not change are not
	// looked at again.
	c.readPolicies(in.Policies)
	c.problems = append(c.problems, c.next.npProblems...)
	// Only the namespaces of local pods need their policies.
	local, shared := podchain.DropSharedLocal(c.sel.Local())
	c.problems = append(c.problems, shared...)

	mapsIng, mapsEgr := tablelayout.DispatchMaps()
	dispatch := podchain.NewDispatch(
		podchain.KindMaps{Kind: &dirIngress.Kind, Maps: mapsIng},
		podchain.KindMaps{Kind: &dirEgress.Kind, Maps: mapsEgr},
	).WithLinkLocal(in.LinkLocal)
	var podChains []engine.Chain
	var ing, egr []*compiledPolicy
	for _, p := range local {
		ing, egr = ing[:0], egr[:0]
		for _, cp := range c.next.nsPolicies(p.Obj.Namespace) {
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
			dispatch.Add(&dirIngress.Kind, p, ch.Name)
		}
		if len(egr) > 0 {
			ch := c.podChain(p, egr, &dirEgress)
			podChains = append(podChains, ch)
			dispatch.Add(&dirEgress.Kind, p, ch.Name)
		}
	}
	podChains = append(podChains, c.cyc.PolicyChains()...)
	sort.Slice(podChains, func(i, j int) bool { return podChains[i].Name < podChains[j].Name })

	out := Output{}
	fixed := tablelayout.FixedChains(&in.Tiers)
	out.Chains = make([]engine.Chain, 0, len(fixed)+2+len(podChains))
	out.Chains = append(out.Chains, fixed...)
	if in.LogDenied != nil {
		out.Chains = append(out.Chains, tablelayout.DeniedChains(*in.LogDenied)...)
	}
	out.Chains = append(out.Chains, podChains...)
	out.Sets = append(dispatch.Maps(), c.cyc.Sets()...)
	out.Problems = append(c.problems, dispatch.Problems()...)
	return out
}

// nsPolicies is what compiles read from one namespace's group of
// policies. It is read again only when the group is a new one: a policy
// event costs its namespace, not the cluster.
type nsPolicies struct {
	group *npset.Group
	gen   uint64         // the last compile that saw the group
	vps   []*validPolicy // one per policy of the group, in group order
	// valid are the valid policies in key order (policies sharing a key,
	// possible in manifests, in group order): the order local pods'
	// chains list them in.
	valid    []*compiledPolicy
	problems []problem.Problem
}

// readPolicies reads in's policies into c.next: the previous compile's
// reading of each group that is the same group, a new reading of the
// others.
func (c *compiler) readPolicies(set *npset.Set) {
	prev, next := c.prev, c.next
	byNS := prev.npByNS
	if byNS == nil {
		byNS = map[string]*nsPolicies{}
	}
	gen := prev.npGen + 1
	groups := set.Groups()
	next.npByNS, next.npGen, next.npGroups = byNS, gen, groups
	if prev.npGroups != nil && slices.Equal(prev.npGroups, groups) {
		// The same groups (no policy event since): nothing to read. The
		// readings keep their gen: the next compile that reads marks
		// every group it holds before it drops the others.
		next.npRead, next.npProblems = prev.npRead, prev.npProblems
		return
	}
	// A Set made by Replace holds the previous Set's groups at the same
	// places unless a namespace came or went: then each unchanged group
	// costs a pointer comparison.
	read := make([]*nsPolicies, len(groups))
	for i, g := range groups {
		var r *nsPolicies
		if i < len(prev.npGroups) && prev.npGroups[i] == g {
			r = prev.npRead[i]
		} else if r = byNS[g.Namespace]; r == nil || r.group != g {
			r = c.readGroup(g, r)
			byNS[g.Namespace] = r
		}
		r.gen = gen
		read[i] = r
	}
	if len(byNS) > len(groups) {
		for ns, r := range byNS {
			if r.gen != gen { // the namespace has no policy left
				delete(byNS, ns)
			}
		}
	}
	next.npRead = read
	for _, r := range read {
		next.npProblems = append(next.npProblems, r.problems...)
	}
}

// readGroup reads a namespace's new group g, taking the validation of the
// policies the namespace's previous group (old, if any) held.
func (c *compiler) readGroup(g *npset.Group, old *nsPolicies) *nsPolicies {
	r := &nsPolicies{group: g, vps: make([]*validPolicy, len(g.Items))}
	var oldPolicies []*networkingv1.NetworkPolicy
	if old != nil {
		oldPolicies = old.group.Items
	}
	var byObject map[*networkingv1.NetworkPolicy]*validPolicy // made when the old group is not in step
	j := 0
	for i, np := range g.Items {
		var vp *validPolicy
		if j < len(oldPolicies) && oldPolicies[j] == np {
			vp = old.vps[j]
			j++
		} else if len(oldPolicies) > 0 {
			if byObject == nil {
				byObject = make(map[*networkingv1.NetworkPolicy]*validPolicy, len(oldPolicies))
				for k, o := range oldPolicies {
					byObject[o] = old.vps[k]
				}
			}
			vp = byObject[np]
		}
		if vp == nil {
			vp = c.validate(np)
		}
		r.vps[i] = vp
		// An invalid policy is reported, and enforced fail-closed.
		r.problems = append(r.problems, vp.problems...)
		r.valid = append(r.valid, vp.cp)
	}
	slices.SortStableFunc(r.valid, func(a, b *compiledPolicy) int { return strings.Compare(a.key, b.key) })
	return r
}

// nsPolicies are the valid policies of namespace ns in key order. The
// list is shared and must not be changed.
func (m *memo) nsPolicies(ns string) []*compiledPolicy {
	if r := m.npByNS[ns]; r != nil {
		return r.valid
	}
	return nil
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

// PolicyTypes tells whether np isolates the pods it selects for ingress
// and for egress, with the API's defaulting (Ingress always, Egress when
// the policy has egress rules, unless policyTypes says otherwise): what
// readers of denied-packet logs name the deciding policies by, and what
// explain reads isolation from.
func PolicyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	return policyTypes(np)
}
