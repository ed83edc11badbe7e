package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

// equivCluster is a cluster with a pod of every kind the two peer sources
// could disagree on, on three nodes, with NetworkPolicies and
// ClusterNetworkPolicies that select them by labels and named ports.
func equivCluster() (pods []*corev1.Pod, nps []*networkingv1.NetworkPolicy, cnps []*cnp.ClusterNetworkPolicy, nss []*corev1.Namespace) {
	web := apitest.WithLabels("app", "web", "role", "client")
	pods = []*corev1.Pod{
		// Dual-stack web pods on each node, with a referenced and an
		// unreferenced named port.
		apitest.Pod("x", "a", "", apitest.OnNode("n1"), web, apitest.IPs("10.0.1.1", "fd00:1::1"),
			apitest.Port("metrics", 9090, ""), apitest.Port("http", 80, "")),
		apitest.Pod("x", "b", "", apitest.OnNode("n2"), web, apitest.IPs("10.0.2.1", "fd00:2::1"),
			apitest.Port("http", 8080, ""), apitest.Port("metrics", 9091, "")),
		apitest.Pod("x", "c", "", apitest.OnNode("n3"), web, apitest.IPs("10.0.3.1", "fd00:3::1"), apitest.Port("http", 8081, "")),
		// Pending: no address yet.
		apitest.Pod("x", "pending", "", apitest.OnNode("n2"), web, apitest.IPs(), apitest.Port("http", 80, "")),
		// Finished: its address is given back (and reused below).
		apitest.Pod("x", "done", "10.0.3.9", apitest.OnNode("n3"), web, apitest.Phase(corev1.PodSucceeded), apitest.Port("http", 80, "")),
		apitest.Pod("x", "reuse", "10.0.3.9", apitest.OnNode("n3"), apitest.WithLabels("app", "db"), apitest.Port("pg", 5432, "")),
		apitest.Pod("x", "failed", "10.0.1.9", apitest.OnNode("n1"), web, apitest.Phase(corev1.PodFailed)),
		// Host network: the node's address.
		apitest.Pod("x", "hostnet", "192.168.0.2", apitest.OnNode("n2"), web, apitest.HostNetwork(), apitest.Port("http", 80, "")),
		apitest.Pod("x", "hostnet-local", "192.168.0.1", apitest.OnNode("n1"), web, apitest.HostNetwork()),
		// Not scheduled yet.
		apitest.Pod("x", "unscheduled", "", apitest.OnNode(""), web, apitest.IPs()),
		// An address the compilers refuse, and an IPv6-only pod.
		apitest.Pod("y", "badip", "10.0.2.300", apitest.OnNode("n2"), apitest.WithLabels("role", "client")),
		apitest.Pod("y", "v6", "fd00:3::7", apitest.OnNode("n3"), apitest.WithLabels("role", "client", "tier", "db"),
			apitest.Port("pg", 5432, ""), apitest.Port("dns", 53, corev1.ProtocolUDP)),
		apitest.Pod("y", "local", "10.0.1.5", apitest.OnNode("n1"), apitest.WithLabels("role", "client"), apitest.Port("dns", 5353, corev1.ProtocolUDP)),
		// A named port of the same name on two protocols, SCTP too.
		apitest.Pod("z", "dns", "10.0.2.53", apitest.OnNode("n2"), apitest.WithLabels("app", "dns"),
			apitest.Port("dns", 53, corev1.ProtocolUDP), apitest.Port("dns", 53, corev1.ProtocolTCP), apitest.Port("sig", 2905, corev1.ProtocolSCTP)),
		apitest.Pod("z", "db", "10.0.3.5", apitest.OnNode("n3"), apitest.WithLabels("tier", "db"), apitest.Port("pg", 5432, "")),
		// No labels at all.
		apitest.Pod("z", "bare", "10.0.1.6", apitest.OnNode("n1"), apitest.WithLabels()),
		apitest.Pod("z", "bare2", "10.0.2.6", apitest.OnNode("n2"), apitest.WithLabels()),
	}
	nss = []*corev1.Namespace{apitest.Namespace("x", "ns", "x"), apitest.Namespace("y", "ns", "y"), apitest.Namespace("z", "ns", "z")}
	http, dns, pg := intstr.FromString("http"), intstr.FromString("dns"), intstr.FromString("pg")
	p443 := intstr.FromInt32(443)
	udp := corev1.ProtocolUDP
	nps = []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web-from-clients"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *apitest.Selector("app", "web"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: apitest.Selector("role", "client")}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &http}, {Port: &p443}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: apitest.Selector("app", "db")}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &pg}},
			}, {
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: apitest.Selector("ns", "z"), PodSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &dns, Protocol: &udp}},
			}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "egress-all-pods"}, Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "z", Name: "from-x"}, Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: apitest.Selector("ns", "x")}, {PodSelector: &metav1.LabelSelector{}}},
			}},
		}},
	}
	admin := &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "admin-deny-y-to-web"}}
	admin.Spec.Tier, admin.Spec.Priority = "Admin", 10
	admin.Spec.Subject = cnptest.PodsSubject(&metav1.LabelSelector{}, apitest.Selector("app", "web"))
	admin.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Deny",
		From:      []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: apitest.Selector("ns", "y")}},
		Protocols: []cnp.ClusterNetworkPolicyProtocol{cnptest.NamedPort("http")}}}
	admin.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Accept",
		To:        []cnp.ClusterNetworkPolicyEgressPeer{cnptest.PeerPods(&metav1.LabelSelector{}, apitest.Selector("app", "dns"))},
		Protocols: []cnp.ClusterNetworkPolicyProtocol{cnptest.NamedPort("dns"), cnptest.NamedPort("sig")}}}
	base := &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "baseline-db"}}
	base.Spec.Tier, base.Spec.Priority = "Baseline", 5
	base.Spec.Subject = cnptest.NamespacesSubject(&metav1.LabelSelector{})
	base.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Deny",
		To:        []cnp.ClusterNetworkPolicyEgressPeer{cnptest.PeerPods(&metav1.LabelSelector{}, apitest.Selector("tier", "db"))},
		Protocols: []cnp.ClusterNetworkPolicyProtocol{cnptest.NamedPort("pg")}}}
	cnps = []*cnp.ClusterNetworkPolicy{admin, base}
	return pods, nps, cnps, nss
}

// referencedPorts are the port names the policies refer to, as the
// controller would compute them.
func referencedPorts(nps []*networkingv1.NetworkPolicy, cnps []*cnp.ClusterNetworkPolicy) func(string) bool {
	names := map[string]bool{}
	add := func(ports []networkingv1.NetworkPolicyPort) {
		for _, p := range ports {
			if p.Port != nil && p.Port.Type == intstr.String {
				names[p.Port.StrVal] = true
			}
		}
	}
	for _, np := range nps {
		for _, r := range np.Spec.Ingress {
			add(r.Ports)
		}
		for _, r := range np.Spec.Egress {
			add(r.Ports)
		}
	}
	addCNP := func(protos []cnp.ClusterNetworkPolicyProtocol) {
		for _, p := range protos {
			if p.DestinationNamedPort != "" {
				names[p.DestinationNamedPort] = true
			}
		}
	}
	for _, c := range cnps {
		for _, r := range c.Spec.Ingress {
			addCNP(r.Protocols)
		}
		for _, r := range c.Spec.Egress {
			addCNP(r.Protocols)
		}
	}
	return func(name string) bool { return names[name] }
}

// publish is what the controller would publish for the pods: per
// namespace, the slices peerslice.Plan creates from nothing (small slices,
// so that a namespace has several), named in order, through the dynamic
// client's form and the agent's transform.
func publish(t *testing.T, s *stripper, node string, pods []*corev1.Pod, referenced func(string) bool, extra ...*peerslice.PeerSlice) []any {
	t.Helper()
	byNS := map[string][]peerslice.Peer{}
	var order []string
	for _, o := range pods {
		rec := podset.FromAPI(o)
		if !peerslice.Published(rec) {
			continue
		}
		if _, ok := byNS[o.Namespace]; !ok {
			order = append(order, o.Namespace)
		}
		byNS[o.Namespace] = append(byNS[o.Namespace], peerslice.FromPod(rec, referenced))
	}
	var out []any
	add := func(ps *peerslice.PeerSlice) {
		u, err := peerslice.ToUnstructured(ps)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.slice(u, node)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rs)
	}
	for _, ns := range order {
		for i, c := range peerslice.Plan(ns, nil, byNS[ns], peerslice.Options{MaxPeers: 2, MaxBytes: 4096}) {
			if c.Op != peerslice.Create {
				t.Fatalf("plan from nothing: %v", c.Op)
			}
			c.Slice.Name = fmt.Sprintf("%s%02d", peerslice.GenerateName, i)
			add(c.Slice)
		}
	}
	for _, ps := range extra {
		add(ps)
	}
	return out
}

func render(t *testing.T, in compose.Input) (string, []string) {
	t.Helper()
	res := compose.Build(in)
	txt, err := engine.Render(compose.Table(), res.Desired)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, p := range res.Problems {
		problems = append(problems, p.Error())
	}
	for _, o := range res.OverBudget {
		problems = append(problems, "over budget: "+o.Policy.Namespace+"/"+o.Policy.Name)
	}
	return txt, problems
}

// TestPeerSourcesCompileTheSameTable compiles the table of each node once
// from every Pod (pods mode) and once from the node's own Pods and the
// records the controller would publish (slices mode, duplicates included),
// and compares the rendered tables byte for byte, under the default budget
// and under budgets tight enough that one address more or less would fail
// a policy closed.
func TestPeerSourcesCompileTheSameTable(t *testing.T) {
	pods, nps, cnps, nss := equivCluster()
	referenced := referencedPorts(nps, cnps)
	limits := []budget.Limits{budget.Default()}
	for e := 1; e <= 24; e++ {
		limits = append(limits, budget.Limits{Object: budget.Cost{Rules: 10_000, Elements: e}, Node: budget.Cost{Rules: 50_000, Elements: 200_000}})
		limits = append(limits, budget.Limits{Object: budget.Cost{Rules: 10_000, Elements: 150_000}, Node: budget.Cost{Rules: 50_000, Elements: e}})
	}
	for _, node := range []string{"n1", "n2", "n3", "n4"} {
		t.Run(node, func(t *testing.T) {
			s := newStripper()
			var all, local []any
			for _, o := range pods {
				rec := stripPod(o.DeepCopy(), s)
				all = append(all, rec)
				if o.Spec.NodeName == node {
					local = append(local, rec)
				}
			}
			// A record being moved between slices (in both, equal), and
			// a stale record of a local pod (moved here, in a slice that
			// sorts first): the local pod must win.
			var moved peerslice.Peer
			for _, o := range pods {
				if o.Namespace == "x" && o.Name == "c" {
					moved = peerslice.FromPod(podset.FromAPI(o), referenced)
				}
			}
			extra := []*peerslice.PeerSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "peers-zz"}, Peers: []peerslice.Peer{moved}}}
			for _, o := range local {
				p := o.(*podset.Pod)
				if p.HostNetwork || p.Finished || len(p.IPs) == 0 {
					continue
				}
				extra = append(extra, &peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "peers-0"},
					Peers: []peerslice.Peer{{Name: p.Name, Node: "elsewhere", IPs: []string{"10.99.0.1"}, Labels: map[string]string{"stale": "yes"}}}})
				break
			}
			fromPods := podset.NewSet(mergePods(all, nil))
			fromSlices := podset.NewSet(mergePods(local, publish(t, s, node, pods, referenced, extra...)))
			for _, l := range limits {
				mk := func(set *podset.Set) compose.Input {
					return compose.Input{NodeName: node, Namespaces: nss, Pods: set, NetworkPolicies: npset.New(nps),
						ClusterNetworkPolicies: cnps, Budget: &l}
				}
				want, wantProblems := render(t, mk(fromPods))
				got, gotProblems := render(t, mk(fromSlices))
				if got != want {
					t.Fatalf("budget %+v: tables differ\n--- pods\n%s\n--- slices\n%s", l, want, got)
				}
				if !slices.Equal(gotProblems, wantProblems) {
					t.Fatalf("budget %+v: problems differ\npods:   %q\nslices: %q", l, wantProblems, gotProblems)
				}
			}
			// The table is not trivially the same: it holds remote peers
			// (n4 has no pod, so no pod chain either).
			if node == "n4" {
				return
			}
			want, _ := render(t, compose.Input{NodeName: node, Namespaces: nss, Pods: fromPods, NetworkPolicies: npset.New(nps), ClusterNetworkPolicies: cnps})
			for _, addr := range []string{"10.0.2.1", "fd00:3::7", "10.0.2.53"} {
				if !strings.Contains(want, addr) {
					t.Errorf("table of %s has no %s: the fixture selects no remote peer", node, addr)
				}
			}
		})
	}
}

// TestPodInputMergesIncrementally: the sources' pod input, read again for a
// dirty namespace, is what mergePods gives for the whole cache, and keeps
// the Groups of clean namespaces.
func TestPodInputMergesIncrementally(t *testing.T) {
	pods, nps, cnps, _ := equivCluster()
	s := newStripper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	src := &sources{pods: idx(), slices: idx(), dirtyNS: map[string]bool{}, dirtyKinds: map[string]bool{}, dirtyPolicyNS: map[string]bool{}}
	for _, o := range pods {
		if o.Spec.NodeName == "n1" {
			if err := src.pods.Add(stripPod(o, s)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range publish(t, s, "n1", pods, referencedPorts(nps, cnps)) {
		if err := src.slices.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	first := src.podInput()
	if got, want := keys(first), keys(podset.NewSet(src.allPods())); !slices.Equal(got, want) {
		t.Fatalf("first input %q, want %q", got, want)
	}
	// A record changes in x: only x is read again.
	var changed *remoteSlice
	for _, o := range src.slices.List() {
		if rs := o.(*remoteSlice); rs.Namespace == "x" && len(rs.pods) > 0 {
			changed = rs
		}
	}
	c := *changed
	c.pods = slices.Clone(c.pods)
	renamed := *c.pods[0]
	renamed.Name = "renamed"
	c.pods[0] = &renamed
	if err := src.slices.Update(&c); err != nil {
		t.Fatal(err)
	}
	src.podTouched(&c)
	second := src.podInput()
	if got, want := keys(second), keys(podset.NewSet(src.allPods())); !slices.Equal(got, want) {
		t.Fatalf("after a change: %q, want %q", got, want)
	}
	if !slices.ContainsFunc(keys(second), func(k string) bool { return strings.HasPrefix(k, "x/renamed ") }) {
		t.Errorf("the changed record is not read: %q", keys(second))
	}
	for i, g := range second.Groups() {
		if g.Namespace != "x" && g != first.Groups()[i] {
			t.Errorf("namespace %s read again, though only x changed", g.Namespace)
		}
	}
}

func keys(s *podset.Set) []string {
	var out []string
	for _, p := range s.All() {
		out = append(out, p.Key()+" "+strings.Join(p.IPs, ","))
	}
	return out
}

// memPublisher is the controller in memory: it keeps each namespace's
// PeerSlices and applies peerslice.Plan to them, handing every written
// slice to the agent's slice cache through the transform.
type memPublisher struct {
	t          *testing.T
	s          *stripper
	node       string
	referenced func(string) bool
	current    map[string][]*peerslice.PeerSlice
	cache      cache.Indexer
	created    int
}

func (m *memPublisher) publish(ns string, pods []*corev1.Pod, touched func(any)) {
	m.t.Helper()
	var desired []peerslice.Peer
	for _, o := range pods {
		if rec := podset.FromAPI(o); o.Namespace == ns && peerslice.Published(rec) {
			desired = append(desired, peerslice.FromPod(rec, m.referenced))
		}
	}
	// Small slices, so that records move between them.
	for _, c := range peerslice.Plan(ns, m.current[ns], desired, peerslice.Options{MaxPeers: 2, MaxBytes: 4096}) {
		ps := c.Slice.DeepCopy()
		cur := m.current[ns]
		switch c.Op {
		case peerslice.Create:
			m.created++
			ps.Name = fmt.Sprintf("%s%03d", peerslice.GenerateName, m.created)
			m.current[ns] = append(cur, ps)
		case peerslice.Update:
			for i := range cur {
				if cur[i].Name == ps.Name {
					cur[i] = ps
				}
			}
		case peerslice.Delete:
			m.current[ns] = slices.DeleteFunc(cur, func(s *peerslice.PeerSlice) bool { return s.Name == ps.Name })
		}
		u, err := peerslice.ToUnstructured(ps)
		if err != nil {
			m.t.Fatal(err)
		}
		rs, err := m.s.slice(u, m.node)
		if err != nil {
			m.t.Fatal(err)
		}
		if c.Op == peerslice.Delete {
			err = m.cache.Delete(rs)
		} else {
			err = m.cache.Add(rs)
		}
		if err != nil {
			m.t.Fatal(err)
		}
		touched(rs)
	}
}

// TestPeerSourcesIncrementally follows a cluster through pod changes with
// two agents' sources and incremental Builders, one reading every Pod, one
// reading this node's Pods and the records an in-memory controller
// publishes with peerslice.Plan (records move between small slices), and
// compares the rendered tables after every change.
func TestPeerSourcesIncrementally(t *testing.T) {
	pods, nps, cnps, nss := equivCluster()
	const node = "n1"
	referenced := referencedPorts(nps, cnps)
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	newSrc := func(withSlices bool) *sources {
		s := &sources{pods: idx(), dirtyNS: map[string]bool{}, dirtyKinds: map[string]bool{}, dirtyPolicyNS: map[string]bool{}}
		if withSlices {
			s.slices = idx()
		}
		return s
	}
	podsSrc, slicesSrc := newSrc(false), newSrc(true)
	st := newStripper()
	pub := &memPublisher{t: t, s: st, node: node, referenced: referenced, current: map[string][]*peerslice.PeerSlice{}, cache: slicesSrc.slices}
	byKey := map[string]*corev1.Pod{}
	// set puts a pod (nil: deletes key) as the API would: into the pods
	// agent's cache, into the slices agent's if it is on node, and
	// through the controller into the slices.
	set := func(key string, o *corev1.Pod) {
		t.Helper()
		old := byKey[key]
		for _, p := range []*corev1.Pod{old, o} {
			if p == nil {
				continue
			}
			rec := stripPod(p.DeepCopy(), st)
			caches := []*sources{podsSrc}
			if p.Spec.NodeName == node {
				caches = append(caches, slicesSrc)
			}
			for _, s := range caches {
				var err error
				if p == old {
					err = s.pods.Delete(rec)
				} else {
					err = s.pods.Add(rec)
				}
				if err != nil {
					t.Fatal(err)
				}
				s.podTouched(rec)
			}
		}
		if o == nil {
			delete(byKey, key)
		} else {
			byKey[key] = o
		}
		ns, _, _ := strings.Cut(key, "/")
		var list []*corev1.Pod
		for _, p := range byKey {
			list = append(list, p)
		}
		pub.publish(ns, list, slicesSrc.podTouched)
	}
	for _, o := range pods {
		set(o.Namespace+"/"+o.Name, o)
	}
	var bPods, bSlices compose.Builder
	compare := func(step string) {
		t.Helper()
		mk := func(s *sources) compose.Input {
			l := budget.Default()
			return compose.Input{NodeName: node, Namespaces: nss, Pods: s.podInput(), NetworkPolicies: npset.New(nps), ClusterNetworkPolicies: cnps, Budget: &l}
		}
		rp, rs := bPods.Build(mk(podsSrc)), bSlices.Build(mk(slicesSrc))
		want, err := engine.Render(compose.Table(), rp.Desired)
		if err != nil {
			t.Fatal(err)
		}
		got, err := engine.Render(compose.Table(), rs.Desired)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: tables differ\n--- pods\n%s\n--- slices\n%s", step, want, got)
		}
	}
	compare("initial")
	relabel := func(key string, kv ...string) {
		o := byKey[key].DeepCopy()
		o.Labels = apitest.Labels(kv...)
		set(key, o)
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"remote pod gains the client role", func() { relabel("z/bare2", "role", "client") }},
		{"remote web pod loses its label", func() { relabel("x/c") }},
		{"remote pod deleted", func() { set("x/b", nil) }},
		{"pending pod gets its address", func() {
			o := byKey["x/pending"].DeepCopy()
			o.Status.PodIPs = []corev1.PodIP{{IP: "10.0.2.77"}}
			set("x/pending", o)
		}},
		{"new remote pods", func() {
			for i := range 5 {
				set(fmt.Sprintf("x/new%d", i), apitest.Pod("x", fmt.Sprintf("new%d", i), fmt.Sprintf("10.0.3.%d", 100+i), apitest.OnNode("n3"),
					apitest.WithLabels("app", "db"), apitest.Port("pg", 5432, "")))
			}
		}},
		{"a pod finishes", func() {
			o := byKey["x/new2"].DeepCopy()
			o.Status.Phase = corev1.PodFailed
			set("x/new2", o)
		}},
		{"new pods deleted (slices emptied and compacted)", func() {
			for i := range 5 {
				set(fmt.Sprintf("x/new%d", i), nil)
			}
		}},
		{"local pod relabelled", func() { relabel("x/a", "app", "web") }},
		{"remote named port changes", func() {
			o := byKey["z/dns"].DeepCopy()
			o.Spec.Containers[0].Ports[0].ContainerPort = 5353
			set("z/dns", o)
		}},
		{"local pod deleted, a remote one of its name appears", func() {
			set("y/local", nil)
			set("y/local", apitest.Pod("y", "local", "10.0.2.55", apitest.OnNode("n2"), apitest.WithLabels("role", "client")))
		}},
	}
	for _, s := range steps {
		s.do()
		compare(s.name)
	}
}
