package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/engine/nftsyntax"
)

// Names of the fixed chains and maps of the policy layout (see the package
// documentation). Every policy object starts with "np_": it keeps names clear
// of nft keywords (forward, ingress) and of the egress SNAT objects.
const (
	ChainForward = "np_forward"
	ChainIngress = "np_ingress"
	MapIngress4  = "np_ingress4"
	MapIngress6  = "np_ingress6"
	MapEgress4   = "np_egress4"
	MapEgress6   = "np_egress6"
)

// Input is the cluster state one node's policy is compiled from.
type Input struct {
	NodeName   string
	Namespaces []*corev1.Namespace
	Pods       []*corev1.Pod
	Policies   []*networkingv1.NetworkPolicy
}

// Output is the policy part of the desired table.
type Output struct {
	Chains   []engine.Chain
	Sets     []engine.Set
	Problems []Problem
}

// pod is a live pod reduced to what the compiler needs.
type pod struct {
	local bool
	obj   *corev1.Pod
	key   string // namespace/name; set for local pods and where needed
	v4    []netip.Addr
	v6    []netip.Addr
	v4s   []string // v4 as text
	v6s   []string // v6 as text

	// Room for the usual single address of a family, to spare allocations.
	buf4  [1]netip.Addr
	buf4s [1]string
}

// compiledPolicy is a valid policy with its selectors parsed once.
type compiledPolicy struct {
	np       *networkingv1.NetworkPolicy
	key      string
	selector labels.Selector
	ingress  bool
	egress   bool
}

// peerKey names what a podSelector/namespaceSelector peer selects: the
// namespaces (ns is "=" and the policy's namespace without a
// namespaceSelector, else "?" and the selector's canonical text) and the pods
// in them.
type peerKey struct {
	ns  string
	pod string
}

// ruleKey names one ingress or egress rule of a policy.
type ruleKey struct {
	cp     *compiledPolicy
	egress bool
	idx    int
}

// compiledRule is what a rule compiles to independent of the pod whose
// chain it goes into: the rules are these peer matches crossed with the
// port matches, then the named-port matches.
type compiledRule struct {
	comment      string
	peerMatches  []string
	namedMatches []string
	// portMatches when they do not depend on the destination pod.
	portMatches []string
	perDst      bool
}

type compiler struct {
	in       Input
	nsLabels map[string]labels.Set
	pods     []*pod
	podsByNS map[string][]*pod
	nsNames  []string        // namespaces with pods, sorted
	local    []*pod          // pods on this node, sorted by key
	nsDup    map[string]bool // namespace → two of its pods share a name
	sets     map[string]*engine.Set
	problems []Problem

	sc        *selectorCache
	nsMatches map[string][]string // namespaceSelector key → namespaces
	peers     map[peerKey]peerSelection
	rules     map[ruleKey]*compiledRule

	// What the previous compile derived (read) and what this one derives
	// (written), see Compiler.
	prev, next *memo
	dirtyNS    map[string]bool  // namespaces whose pods changed since prev
	nsChanged  bool             // namespaces or their labels changed since prev
	peerSame   map[peerKey]bool // the selection is the previous compile's
	// While a rule compiles: the sets it declares, whether it named a set
	// declared before, the peers it selects, and whether it read every pod.
	declared []*engine.Set
	collided bool
	used     *[]peerKey
	allPods  bool
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
	c := &compiler{
		in:        in,
		nsLabels:  make(map[string]labels.Set, len(in.Namespaces)),
		podsByNS:  map[string][]*pod{},
		sets:      map[string]*engine.Set{},
		sc:        newSelectorCache(),
		nsMatches: map[string][]string{},
		peers:     map[peerKey]peerSelection{},
		nsDup:     map[string]bool{},
		rules:     map[ruleKey]*compiledRule{},
		prev:      m.prev,
		next:      newMemo(in.NodeName, len(in.Policies)),
		peerSame:  map[peerKey]bool{},
	}
	defer func() { m.prev = c.next }()
	for _, ns := range in.Namespaces {
		l := make(labels.Set, len(ns.Labels)+1)
		for k, v := range ns.Labels {
			l[k] = v
		}
		// The API server puts this label on every namespace; manifests
		// applied without one must select the same way.
		l[corev1.LabelMetadataName] = ns.Name
		c.nsLabels[ns.Name] = l
	}
	c.indexPods()
	c.compareNamespaces()

	policies := make([]*compiledPolicy, 0, len(in.Policies))
	known := true // every policy is an object the previous compile saw
	for _, np := range in.Policies {
		if _, ok := c.prev.policies[np]; !ok {
			known = false
		}
		pm := c.policy(np)
		if pm.cp == nil {
			c.problems = append(c.problems, pm.problems...)
			continue
		}
		policies = append(policies, pm.cp)
	}
	// Policies by namespace, each list in key order: the previous
	// compile's when the policies are the same objects (and no two share
	// a key, whose order would follow the input's).
	policiesByNS := c.prev.policiesByNS
	if !known || policiesByNS == nil || c.prev.dupPolicyKeys ||
		len(c.prev.policies) != len(in.Policies) || len(c.next.policies) != len(in.Policies) {
		sort.Slice(policies, func(i, j int) bool { return policies[i].key < policies[j].key })
		policiesByNS = map[string][]*compiledPolicy{}
		for i, cp := range policies {
			policiesByNS[cp.np.Namespace] = append(policiesByNS[cp.np.Namespace], cp)
			if i > 0 && policies[i-1].key == cp.key {
				c.next.dupPolicyKeys = true
			}
		}
	} else {
		c.next.dupPolicyKeys = c.prev.dupPolicyKeys
	}
	c.next.policiesByNS = policiesByNS

	out := Output{}
	ingress4 := engine.Set{Name: MapIngress4, Type: "ipv4_addr", Map: "verdict", Comment: "local pods isolated for ingress"}
	ingress6 := engine.Set{Name: MapIngress6, Type: "ipv6_addr", Map: "verdict", Comment: "local pods isolated for ingress"}
	egress4 := engine.Set{Name: MapEgress4, Type: "ipv4_addr", Map: "verdict", Comment: "local pods isolated for egress"}
	egress6 := engine.Set{Name: MapEgress6, Type: "ipv6_addr", Map: "verdict", Comment: "local pods isolated for egress"}

	var podChains []engine.Chain
	var ing, egr []*compiledPolicy
	for _, p := range c.local {
		ing, egr = ing[:0], egr[:0]
		for _, cp := range policiesByNS[p.obj.Namespace] {
			if !cp.selector.Matches(labels.Set(p.obj.Labels)) {
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
			addDispatch(&ingress4, &ingress6, p, ch.Name)
		}
		if len(egr) > 0 {
			ch := c.podChain(p, egr, &dirEgress)
			podChains = append(podChains, ch)
			addDispatch(&egress4, &egress6, p, ch.Name)
		}
	}
	sort.Slice(podChains, func(i, j int) bool { return podChains[i].Name < podChains[j].Name })

	out.Chains = make([]engine.Chain, 0, 2+len(podChains))
	out.Chains = append(out.Chains,
		engine.Chain{
			Name: ChainForward, Type: "filter", Hook: "forward", Priority: 0, Policy: "accept",
			Comment: "NetworkPolicy: pod traffic routed or bridged through this node",
			Rules:   forwardRules(),
		},
		engine.Chain{
			Name:    ChainIngress,
			Comment: "NetworkPolicy: ingress isolation of local pods",
			Rules: []engine.Rule{
				{Rule: "ip daddr vmap @" + MapIngress4},
				{Rule: "ip6 daddr vmap @" + MapIngress6},
				{Rule: "accept"},
			},
		},
	)
	out.Chains = append(out.Chains, podChains...)
	out.Sets = make([]engine.Set, 0, 4+len(c.sets))
	for _, m := range []*engine.Set{&ingress4, &ingress6, &egress4, &egress6} {
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

func (c *compiler) indexPods() {
	c.dirtyNS = map[string]bool{}
	// The pod table is kept from call to call and updated in place: a
	// new table per call would cost more than everything else an
	// event needs.
	pods, buckets := c.prev.pods, c.prev.buckets
	if pods == nil {
		pods = make(map[*corev1.Pod]*podEntry, len(c.in.Pods))
		buckets = map[string]*nsBucket{}
	}
	gen := c.prev.gen + 1
	c.next.pods, c.next.buckets, c.next.gen = pods, buckets, gen
	var fresh []podEntry // room for the pods seen for the first time
	seen := 0
	var used []*nsBucket
	entries := make([]*podEntry, 0, len(c.in.Pods))
	for _, o := range c.in.Pods {
		e := pods[o]
		if e == nil {
			// A new object: its namespace's selections must be
			// evaluated again.
			c.dirtyNS[o.Namespace] = true
			// The first compile allocates every entry at once; later
			// ones one by one, as a block would live as long as its
			// longest-lived entry.
			if len(pods) == 0 && fresh == nil {
				fresh = make([]podEntry, 0, len(c.in.Pods))
			}
			if len(fresh) < cap(fresh) {
				fresh = fresh[:len(fresh)+1]
				e = &fresh[len(fresh)-1]
			} else {
				e = new(podEntry)
			}
			c.newPod(o, e)
			e.src = o
			if e.bucket = buckets[o.Namespace]; e.bucket == nil {
				e.bucket = &nsBucket{name: o.Namespace}
				buckets[o.Namespace] = e.bucket
			}
			pods[o] = e
		}
		if e.gen != gen {
			e.gen = gen
			seen++
			entries = append(entries, e)
		}
		if e.problem != nil {
			c.problems = append(c.problems, *e.problem)
		}
		if !e.valid {
			continue
		}
		p := &e.pod
		if p.local {
			c.local = append(c.local, p)
		}
		b := e.bucket
		if b.gen != gen {
			// The lists are new every time: the memo keeps the
			// previous ones where order counts.
			b.gen, b.pods = gen, make([]*pod, 0, len(b.pods))
			used = append(used, b)
		}
		b.pods = append(b.pods, p)
	}
	for _, b := range used {
		c.nsNames = append(c.nsNames, b.name)
		c.podsByNS[b.name] = b.pods
	}
	if len(buckets) > 2*len(used)+64 {
		for name, b := range buckets {
			if b.gen != gen {
				delete(buckets, name) // every pod of the namespace is gone
			}
		}
	}
	if seen < len(pods) {
		// The table holds exactly the previous compile's entries: the
		// ones this compile did not see are gone.
		for _, e := range c.prev.entries {
			if e.gen != gen {
				c.dirtyNS[e.src.Namespace] = true // deleted or replaced
				delete(pods, e.src)
				// The entry may sit in the first compile's block,
				// which outlives it: it must not keep the old
				// object alive.
				*e = podEntry{}
			}
		}
	}
	c.next.entries = entries
	// Where pods share a name, the first selected counts, so there the
	// order of the same pods matters too.
	for ns, ps := range c.podsByNS {
		if c.dirtyNS[ns] {
			if c.nsHasDuplicates(ns) {
				c.next.dupOrder[ns] = ps
			}
			continue
		}
		if old, ok := c.prev.dupOrder[ns]; ok {
			if !slices.Equal(old, ps) {
				c.dirtyNS[ns] = true
			}
			c.next.dupOrder[ns] = ps
		}
	}
	// Local pods are compiled in key order (pods sharing a key in input
	// order), which decides which of two objects declaring one set name
	// declares it.
	sort.SliceStable(c.local, func(i, j int) bool { return c.local[i].key < c.local[j].key })
	sort.Strings(c.nsNames)
}

// allPodsList returns every enforced pod, in input order.
func (c *compiler) allPodsList() []*pod {
	if c.pods == nil {
		c.pods = make([]*pod, 0, len(c.in.Pods))
		for _, o := range c.in.Pods {
			if e := c.next.pods[o]; e.valid {
				c.pods = append(c.pods, &e.pod)
			}
		}
	}
	return c.pods
}

// newPod reduces a pod object to what the compiler needs, in e. Pods that
// are not enforced or selected are not valid.
func (c *compiler) newPod(o *corev1.Pod, e *podEntry) {
	// Terminated pods no longer own their address, and hostNetwork
	// pods use the node's: neither is isolated nor selected as a peer
	// (traffic from a hostNetwork pod is judged by its node's IP).
	if o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed || o.Spec.HostNetwork {
		return
	}
	p := &e.pod
	*p = pod{obj: o, local: o.Spec.NodeName == c.in.NodeName}
	p.v4, p.v4s = p.buf4[:0], p.buf4s[:0]
	ips := o.Status.PodIPs
	if len(ips) == 0 && o.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: o.Status.PodIP}}
	}
	for i, ip := range ips {
		a, err := netip.ParseAddr(ip.IP)
		if err != nil {
			e.problem = &Problem{Kind: "Pod", Namespace: o.Namespace, Name: o.Name,
				Field: fmt.Sprintf("status.podIPs[%d]", i), Reason: fmt.Sprintf("invalid IP %q", ip.IP)}
			return
		}
		if a.Is4() {
			// ParseAddr takes only the canonical dotted quad:
			// the text is already what String returns.
			p.v4 = append(p.v4, a)
			p.v4s = append(p.v4s, ip.IP)
			continue
		}
		a = a.Unmap()
		if a.Is4() {
			p.v4 = append(p.v4, a)
			p.v4s = append(p.v4s, a.String())
		} else {
			p.v6 = append(p.v6, a)
			p.v6s = append(p.v6s, a.String())
		}
	}
	if len(p.v4)+len(p.v6) == 0 {
		return // without an address there is nothing to match
	}
	if p.local {
		p.key = o.Namespace + "/" + o.Name
	}
	e.valid = true
}

// nsHasDuplicates tells whether two pods of namespace ns share a name. Pods from an informer never
// do; it is checked once per namespace, when a peer first selects there.
func (c *compiler) nsHasDuplicates(ns string) bool {
	if d, ok := c.nsDup[ns]; ok {
		return d
	}
	ps := c.podsByNS[ns]
	seen := make(map[string]struct{}, len(ps))
	dup := false
	for _, p := range ps {
		if _, ok := seen[p.obj.Name]; ok {
			dup = true
			break
		}
		seen[p.obj.Name] = struct{}{}
	}
	c.nsDup[ns] = dup
	return dup
}

func addDispatch(m4, m6 *engine.Set, p *pod, chain string) {
	v := "jump " + chain
	for _, a := range p.v4s {
		m4.Elements = append(m4.Elements, engine.Element{Key: a, Value: v})
	}
	for _, a := range p.v6s {
		m6.Elements = append(m6.Elements, engine.Element{Key: a, Value: v})
	}
}

// direction holds what differs between ingress and egress rules.
type direction struct {
	egress  bool
	tag     string // "in" or "eg", used in set names
	field   string // "ingress" or "egress", used in comments
	peer4   string // "ip saddr" or "ip daddr"
	peer6   string
	verdict string // what a matching rule does
}

var (
	dirIngress = direction{tag: "in", field: "ingress", peer4: "ip saddr", peer6: "ip6 saddr", verdict: "accept"}
	dirEgress  = direction{egress: true, tag: "eg", field: "egress", peer4: "ip daddr", peer6: "ip6 daddr", verdict: "goto " + ChainIngress}
)

func (c *compiler) ingressChain(p *pod, pols []*compiledPolicy) engine.Chain {
	d := &dirIngress
	ch := engine.Chain{Name: objName("ing", p.obj.Namespace, p.obj.Name), Comment: nftsyntax.ClipComment("ingress of pod " + p.key)}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "ct state invalid drop"})
	// A pod may always reach itself, also through the node (hairpin).
	for _, a := range p.v4s {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip saddr " + a + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.v6s {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip6 saddr " + a + " accept", Comment: "pod to itself"})
	}
	for _, cp := range pols {
		for i, r := range cp.np.Spec.Ingress {
			ch.Rules = c.appendRule(ch.Rules, d, cp, i, r.From, r.Ports, p)
		}
	}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "drop", Comment: "isolated for ingress: no rule allowed"})
	return ch
}

func (c *compiler) egressChain(p *pod, pols []*compiledPolicy) engine.Chain {
	d := &dirEgress
	ch := engine.Chain{Name: objName("egr", p.obj.Namespace, p.obj.Name), Comment: nftsyntax.ClipComment("egress of pod " + p.key)}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "ct state invalid drop"})
	for _, a := range p.v4s {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip daddr " + a + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.v6s {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip6 daddr " + a + " accept", Comment: "pod to itself"})
	}
	for _, cp := range pols {
		for i, r := range cp.np.Spec.Egress {
			ch.Rules = c.appendRule(ch.Rules, d, cp, i, r.To, r.Ports, nil)
		}
	}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "drop", Comment: "isolated for egress: no rule allowed"})
	return ch
}

// appendRule appends the nft rules of one ingress or egress rule of a
// policy. For ingress, dst is the pod the chain belongs to, against which
// named ports resolve; for egress dst is nil and named ports resolve per
// peer pod.
func (c *compiler) appendRule(rules []engine.Rule, d *direction, cp *compiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, dst *pod) []engine.Rule {
	cr := c.rule(d, cp, idx, peers, ports)
	pm := cr.portMatches
	if cr.perDst {
		pm = portMatchesFor(ports, dst)
	}
	for _, peer := range cr.peerMatches {
		for _, m := range pm {
			rules = append(rules, engine.Rule{Rule: joinMatch(peer, m, d.verdict), Comment: cr.comment})
		}
	}
	for _, peer := range cr.namedMatches {
		rules = append(rules, engine.Rule{Rule: joinMatch(peer, "", d.verdict), Comment: cr.comment})
	}
	return rules
}

// joinMatch joins the non-empty matches and the verdict with spaces.
func joinMatch(peer, port, verdict string) string {
	switch {
	case peer == "" && port == "":
		return verdict
	case peer == "":
		return port + " " + verdict
	case port == "":
		return peer + " " + verdict
	}
	return peer + " " + port + " " + verdict
}

// portMatchesFor returns the port matches that apply to any peer: numbers,
// ranges, protocols, and (for ingress, dst != nil) names resolved on the
// destination pod. One "" stands for no port restriction.
func portMatchesFor(ports []networkingv1.NetworkPolicyPort, dst *pod) []string {
	if len(ports) == 0 {
		return []string{""}
	}
	var portMatches []string
	for _, pp := range ports {
		proto := protoName(pp.Protocol)
		switch {
		case pp.Port == nil:
			portMatches = append(portMatches, "meta l4proto "+proto)
		case pp.Port.Type == intstr.Int && pp.EndPort != nil && *pp.EndPort != pp.Port.IntVal:
			portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(pp.Port.IntVal))+"-"+strconv.Itoa(int(*pp.EndPort)))
		case pp.Port.Type == intstr.Int:
			portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(pp.Port.IntVal)))
		case dst != nil:
			if n, ok := namedPort(dst.obj, pp.Port.StrVal, pp.Protocol); ok {
				portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(n)))
			}
		}
	}
	return portMatches
}

// compileRule compiles the part of a rule that does not depend on the pod
// whose chain it goes into, declaring its sets.
func (c *compiler) compileRule(d *direction, cp *compiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) *compiledRule {
	idxText := strconv.Itoa(idx)
	cr := &compiledRule{comment: nftsyntax.ClipComment(cp.key + " " + d.field + "[" + idxText + "]")}
	base := []string{cp.np.Namespace, cp.np.Name, d.tag + idxText}

	// Named ports resolve on the destination pod: for ingress that is the
	// chain's pod, for egress each peer pod.
	var named []networkingv1.NetworkPolicyPort
	for _, pp := range ports {
		if pp.Port != nil && pp.Port.Type != intstr.Int {
			if d.egress {
				named = append(named, pp)
			} else {
				cr.perDst = true
			}
		}
	}
	if !cr.perDst {
		cr.portMatches = portMatchesFor(ports, nil)
	}

	if len(peers) == 0 {
		// No peers: every source (ingress) or destination (egress).
		cr.peerMatches = []string{""}
		if len(named) > 0 {
			c.allPods = true
			cr.namedMatches = c.namedEgress(base, c.allPodsList(), named)
		}
		return cr
	}

	var selected []*pod
	var blocks4, blocks6 []addrRange
	nsel, dup := 0, false
	for _, peer := range peers {
		if peer.IPBlock != nil {
			cidr, _ := netip.ParsePrefix(peer.IPBlock.CIDR)
			var except []netip.Prefix
			for _, e := range peer.IPBlock.Except {
				ep, _ := netip.ParsePrefix(e)
				except = append(except, ep)
			}
			rs := blockRanges(cidr, except)
			if cidr.Addr().Is4() {
				blocks4 = append(blocks4, rs...)
			} else {
				blocks6 = append(blocks6, rs...)
			}
			continue
		}
		sel := c.selectPeers(cp.np.Namespace, peer)
		if nsel == 0 {
			selected = sel.pods // shared with the cache: copied before changing
		} else {
			if nsel == 1 {
				selected = append([]*pod(nil), selected...)
			}
			selected = append(selected, sel.pods...)
		}
		dup = dup || sel.dup
		nsel++
	}
	if dup {
		// Pods sharing a key count once, as the first selected.
		for _, p := range selected {
			if p.key == "" {
				p.key = p.obj.Namespace + "/" + p.obj.Name
			}
		}
		selected = uniquePods(append([]*pod(nil), selected...))
	}
	// Otherwise duplicates are the same pod, and addrSet drops repeated
	// elements.

	n4, n6 := 0, 0
	for _, p := range selected {
		n4 += len(p.v4s)
		n6 += len(p.v6s)
	}
	if n4 > 0 {
		v4 := make([]string, 0, n4)
		for _, p := range selected {
			v4 = append(v4, p.v4s...)
		}
		cr.peerMatches = append(cr.peerMatches, d.peer4+" @"+c.addrSet(append(base, "pods4"), "ipv4_addr", false, v4, cr.comment))
	}
	if n6 > 0 {
		v6 := make([]string, 0, n6)
		for _, p := range selected {
			v6 = append(v6, p.v6s...)
		}
		cr.peerMatches = append(cr.peerMatches, d.peer6+" @"+c.addrSet(append(base, "pods6"), "ipv6_addr", false, v6, cr.comment))
	}
	if rs := mergeRanges(blocks4); len(rs) > 0 {
		cr.peerMatches = append(cr.peerMatches, d.peer4+" @"+c.addrSet(append(base, "cidr4"), "ipv4_addr", true, rangeTexts(rs), cr.comment))
	}
	if rs := mergeRanges(blocks6); len(rs) > 0 {
		cr.peerMatches = append(cr.peerMatches, d.peer6+" @"+c.addrSet(append(base, "cidr6"), "ipv6_addr", true, rangeTexts(rs), cr.comment))
	}
	if len(named) > 0 {
		cr.namedMatches = c.namedEgress(base, selected, named)
	}
	return cr
}

// namedEgress matches egress named ports: the name resolves on each
// destination pod, so the rule looks up address . protocol . port tuples.
func (c *compiler) namedEgress(base []string, peers []*pod, named []networkingv1.NetworkPolicyPort) []string {
	var t4, t6 []string
	for _, p := range peers {
		for _, pp := range named {
			n, ok := namedPort(p.obj, pp.Port.StrVal, pp.Protocol)
			if !ok {
				continue
			}
			suffix := " . " + protoName(pp.Protocol) + " . " + strconv.Itoa(int(n))
			for _, a := range p.v4s {
				t4 = append(t4, a+suffix)
			}
			for _, a := range p.v6s {
				t6 = append(t6, a+suffix)
			}
		}
	}
	comment := nftsyntax.ClipComment(base[0] + "/" + base[1] + " " + base[2])
	var out []string
	if len(t4) > 0 {
		out = append(out, "ip daddr . meta l4proto . th dport @"+c.addrSet(append(base, "named4"), "ipv4_addr . inet_proto . inet_service", false, t4, comment))
	}
	if len(t6) > 0 {
		out = append(out, "ip6 daddr . meta l4proto . th dport @"+c.addrSet(append(base, "named6"), "ipv6_addr . inet_proto . inet_service", false, t6, comment))
	}
	return out
}

// parse parses a (validated) label selector once per compile.
func (c *compiler) parse(ls *metav1.LabelSelector) *parsedSelector { return c.sc.get(ls) }

// peerSelection is what a peer selects: pods in input order per namespace,
// and whether pods sharing a key may be among them.
type peerSelection struct {
	pods []*pod
	dup  bool
}

// selectPeers returns the pods a podSelector/namespaceSelector peer selects:
// the selectors AND together; a missing namespaceSelector means the policy's
// own namespace. Equal peers are evaluated once per compile; the result is
// shared and must not be changed.
func (c *compiler) selectPeers(policyNS string, peer networkingv1.NetworkPolicyPeer) peerSelection {
	var ps, ns *parsedSelector
	var k peerKey
	if peer.PodSelector != nil {
		ps = c.parse(peer.PodSelector)
		k.pod = ps.key
	}
	if peer.NamespaceSelector == nil {
		k.ns = "=" + policyNS
	} else {
		ns = c.parse(peer.NamespaceSelector)
		k.ns = "?" + ns.key
	}
	if c.used != nil {
		*c.used = append(*c.used, k)
	}
	if out, ok := c.peers[k]; ok {
		return out
	}
	pm := &peerMemo{pods: ps, ns: ns, policyNS: policyNS}
	out, _ := c.evalPeer(k, pm)
	return out
}

// peer returns the selection of a peer evaluated in an earlier compile,
// and whether it is the very selection that compile found.
func (c *compiler) peer(k peerKey) (peerSelection, bool) {
	if out, ok := c.peers[k]; ok {
		return out, c.peerSame[k]
	}
	pm, ok := c.prev.peers[k]
	if !ok {
		return peerSelection{}, false
	}
	return c.evalPeer(k, pm)
}

// evalPeer evaluates the peer pm describes, reusing the previous compile's
// selection when none of its inputs changed, or when evaluating again gives
// the same pods.
func (c *compiler) evalPeer(k peerKey, pm *peerMemo) (peerSelection, bool) {
	old, hadOld := c.prev.peers[k]
	var namespaces []string
	switch {
	case pm.ns == nil:
		namespaces = []string{pm.policyNS}
	case hadOld && !c.nsChanged:
		namespaces = old.namespaces
	default:
		namespaces = c.selectNamespaces(pm.ns)
	}
	next := &peerMemo{pods: pm.pods, ns: pm.ns, policyNS: pm.policyNS, namespaces: namespaces}
	same := hadOld && (pm.ns == nil || !c.nsChanged)
	for _, ns := range namespaces {
		if c.dirtyNS[ns] {
			same = false
			break
		}
	}
	if same {
		next.sel, next.ends, next.dups = old.sel, old.ends, old.dups
	} else {
		// Namespaces whose pods did not change keep their part of the
		// old selection.
		reuse := hadOld && len(old.ends) == len(namespaces) && (pm.ns == nil || !c.nsChanged)
		everything := pm.pods == nil || pm.pods.sel.Empty()
		next.ends, next.dups = make([]int, len(namespaces)), make([]bool, len(namespaces))
		for i, ns := range namespaces {
			n := len(next.sel.pods)
			if reuse && !c.dirtyNS[ns] {
				start := 0
				if i > 0 {
					start = old.ends[i-1]
				}
				next.sel.pods = append(next.sel.pods, old.sel.pods[start:old.ends[i]]...)
				next.dups[i] = old.dups[i]
			} else {
				for _, p := range c.podsByNS[ns] {
					if everything || pm.pods.sel.Matches(labels.Set(p.obj.Labels)) {
						next.sel.pods = append(next.sel.pods, p)
					}
				}
				next.dups[i] = len(next.sel.pods) > n && c.nsHasDuplicates(ns)
			}
			next.ends[i] = len(next.sel.pods)
			next.sel.dup = next.sel.dup || next.dups[i]
		}
		if hadOld && old.sel.dup == next.sel.dup && slices.Equal(old.sel.pods, next.sel.pods) {
			next.sel, same = old.sel, true
		}
	}
	c.peers[k], c.peerSame[k] = next.sel, same
	c.next.peers[k] = next
	return next.sel, same
}

// selectNamespaces returns the namespaces with pods that a
// namespaceSelector selects.
func (c *compiler) selectNamespaces(ps *parsedSelector) []string {
	if out, ok := c.nsMatches[ps.key]; ok {
		return out
	}
	var out []string
	for _, ns := range c.nsNames {
		l, ok := c.nsLabels[ns]
		if !ok {
			l = labels.Set{corev1.LabelMetadataName: ns}
		}
		if ps.sel.Matches(l) {
			out = append(out, ns)
		}
	}
	c.nsMatches[ps.key] = out
	return out
}

// addrSet declares (once) a named set holding the given elements, sorted
// and without repeats, and returns its name. It may reorder elems.
func (c *compiler) addrSet(parts []string, typ string, interval bool, elems []string, comment string) string {
	name := setName(parts)
	if _, ok := c.sets[name]; ok {
		c.collided = true
		return name
	}
	s := &engine.Set{Name: name, Type: typ, Interval: interval, Comment: comment}
	sort.Strings(elems)
	s.Elements = make([]engine.Element, 0, len(elems))
	for i, e := range elems {
		if i == 0 || e != elems[i-1] {
			s.Elements = append(s.Elements, engine.Element{Key: e})
		}
	}
	c.sets[name] = s
	c.declared = append(c.declared, s)
	return name
}

// namedPort resolves a port name on a pod's containers, matching protocol.
func namedPort(p *corev1.Pod, name string, proto *corev1.Protocol) (int32, bool) {
	want := corev1.ProtocolTCP
	if proto != nil {
		want = *proto
	}
	for _, cts := range [2][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cts {
			for _, port := range cts[i].Ports {
				got := port.Protocol
				if got == "" {
					got = corev1.ProtocolTCP
				}
				if port.Name == name && got == want {
					return port.ContainerPort, true
				}
			}
		}
	}
	return 0, false
}

func protoName(p *corev1.Protocol) string {
	if p == nil {
		return "tcp"
	}
	return strings.ToLower(string(*p))
}

func uniquePods(ps []*pod) []*pod {
	seen := map[string]bool{}
	out := ps[:0]
	for _, p := range ps {
		if !seen[p.key] {
			seen[p.key] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func rangeTexts(rs []addrRange) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = rangeText(r)
	}
	return out
}

func sortElements(s *engine.Set) {
	sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Key < s.Elements[j].Key })
}

// maxName keeps chain and set names well inside the kernel's 256-byte limit;
// longer names are shortened with a hash that keeps them unique.
const maxName = 200

// objName names a per-pod chain. Kubernetes names never contain '_', so the
// joined name is unambiguous.
func objName(prefix, ns, name string) string {
	return shorten("np_" + prefix + "_" + ns + "_" + name)
}

func setName(parts []string) string {
	return shorten("np_" + strings.Join(parts, "_"))
}

func shorten(s string) string {
	if len(s) <= maxName {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return s[:maxName-17] + "_" + hex.EncodeToString(h[:8])
}
