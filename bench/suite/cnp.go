package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
)

// Scenario 7: ClusterNetworkPolicies. The scenario-2 cluster
// plus Admin and Baseline ClusterNetworkPolicies:
//
//   - change latency of adding one Admin CNP and of one label change that
//     moves a local pod into a CNP's subject: compose.Builder + engine.Sync
//     (incremental, as the agent does it) against `nft -f` of the whole
//     rendered table, each change from the same base table;
//   - the data path with those CNPs present, the lab's server a subject
//     of several of them (its packets walk the Admin chain, Pass into the
//     NetworkPolicy tier), against no firewall and against the same
//     cluster without CNPs, all in one lab per repetition.

// cnpSpec is the scenario's size: a cluster and how many CNPs per tier.
type cnpSpec struct {
	Size            size
	Admin, Baseline int
}

func (s cnpSpec) String() string {
	return fmt.Sprintf("%v + %d Admin / %d Baseline CNPs", s.Size, s.Admin, s.Baseline)
}

// guardLabel is the pod label a few CNP subjects select and no generated
// pod carries: the label change of the scenario adds it to a local pod.
const guardLabel = "guard"

// cnpResult is scenario 7.
type cnpResult struct {
	Spec       cnpSpec
	TableRules int // rules of the base table, CNPs included
	RulesNoCNP int // ... of the same cluster without CNPs
	Change     []changeResult
	DPNone     dpResult // no firewall
	DPNoCNP    dpResult // NetworkPolicies only
	DPCNP      dpResult // NetworkPolicies and CNPs
	LoadAvg    []string // at start, after the change part, at the end
}

// clusterNetworkPolicies generates admin Admin and baseline Baseline CNPs
// over a cluster of nns namespaces. Subjects pick namespaces by label (a
// team, one namespace by name) or pods (namespace + pod selector); peers
// are namespaces, pods and networks (IPv4 and IPv6); actions mix Accept,
// Deny and Pass; priorities spread over 0–1000 with some equal; ports are
// numbers, ranges and named ports. A Deny never selects the data-path
// namespace "dp", so the lab's traffic stays allowed while it walks the
// chains. Pure function of its arguments.
func clusterNetworkPolicies(admin, baseline, nns int) []*cnpv1beta1.ClusterNetworkPolicy {
	var out []*cnpv1beta1.ClusterNetworkPolicy
	for i := range admin {
		out = append(out, genCNP(i, cnpv1beta1.AdminTier, nns))
	}
	for i := range baseline {
		out = append(out, genCNP(i, cnpv1beta1.BaselineTier, nns))
	}
	return out
}

func genCNP(i int, tier cnpv1beta1.Tier, nns int) *cnpv1beta1.ClusterNetworkPolicy {
	byName := func(j int) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsName(j % nns)}}
	}
	team := func(t int) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("team%d", t%teams)}}
	}
	app := func(a int) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", a%appsPerNS)}}
	}
	tcp := func(p int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
		return cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Number: p}}}
	}
	udp := func(p int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
		return cnpv1beta1.ClusterNetworkPolicyProtocol{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnpv1beta1.Port{Number: p}}}
	}
	tcpRange := func(a, b int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
		return cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: a, End: b}}}}
	}
	named := cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: "metrics"}
	accept, deny, pass := cnpv1beta1.ClusterNetworkPolicyRuleActionAccept, cnpv1beta1.ClusterNetworkPolicyRuleActionDeny, cnpv1beta1.ClusterNetworkPolicyRuleActionPass

	prefix := "admin"
	if tier == cnpv1beta1.BaselineTier {
		prefix = "baseline"
	}
	p := &cnpv1beta1.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1beta1", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i)},
		// Spread over 0..1000; every tenth shares its priority with the
		// one before, as equal priorities happen.
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: tier, Priority: int32((i - boolInt(i%10 == 9)) * 37 % 1001)},
	}
	s := &p.Spec
	switch i % 4 {
	case 0: // a team's namespaces
		s.Subject.Namespaces = team(i / 4)
	case 1: // one namespace by name
		s.Subject.Namespaces = byName(i)
	case 2: // an app in a team's namespaces
		s.Subject.Pods = &cnpv1beta1.NamespacedPod{NamespaceSelector: *team(i + 3), PodSelector: app(i)}
	case 3: // guarded pods anywhere (no pod carries the label at first);
		// the value is the policy's own name, so the label change of the
		// scenario moves a pod into exactly one subject.
		s.Subject.Pods = &cnpv1beta1.NamespacedPod{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{guardLabel: p.Name}}}
	}
	s.Ingress = []cnpv1beta1.ClusterNetworkPolicyIngressRule{
		{Name: "monitoring", Action: accept, From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{
			Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *byName(0), PodSelector: app(i + 1)},
		}}, Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{named, tcp(9100)}},
		{Name: "quarantine", Action: deny, From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{
			{Namespaces: byName(i + 7)},
		}},
	}
	s.Egress = []cnpv1beta1.ClusterNetworkPolicyEgressRule{
		{Name: "metadata", Action: deny, To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{
			Networks: []cnpv1beta1.CIDR{"169.254.169.254/32", "fd00:ec2::254/128"},
		}}},
		{Name: "dns", Action: accept, To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{
			Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *byName(0), PodSelector: app(0)},
		}}, Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{udp(53), tcp(53)}},
		{Name: "partners", Action: accept, To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{
			Networks: []cnpv1beta1.CIDR{cnpv1beta1.CIDR(fmt.Sprintf("203.0.%d.0/24", i%256)), cnpv1beta1.CIDR(fmt.Sprintf("2001:db8:%x::/48", i))},
		}}, Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{tcpRange(8000, 8999), tcp(443)}},
	}
	if i%3 == 0 {
		// Leave the decision about the team's own traffic to the next
		// tier: namespace owners decide.
		s.Ingress = append(s.Ingress, cnpv1beta1.ClusterNetworkPolicyIngressRule{
			Name: "team-decides", Action: pass, From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: team(i / 4)}},
		})
		s.Egress = append(s.Egress, cnpv1beta1.ClusterNetworkPolicyEgressRule{
			Name: "team-decides", Action: pass, To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Namespaces: team(i / 4)}},
		})
	}
	if tier == cnpv1beta1.BaselineTier && i%5 == 0 {
		// The usual baseline: a namespace is isolated from the others
		// unless its NetworkPolicies say otherwise.
		s.Ingress = append(s.Ingress, cnpv1beta1.ClusterNetworkPolicyIngressRule{
			Name: "isolate", Action: deny, From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: byName(i + 1)}, {Namespaces: byName(i + 2)}},
		})
	}
	return p
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cnpCluster is the scenario's cluster and its CNPs.
type cnpCluster struct {
	*cluster
	CNPs []*cnpv1beta1.ClusterNetworkPolicy
}

func (c cnpCluster) input() compose.Input {
	in := c.cluster.input()
	in.ClusterNetworkPolicies = c.CNPs
	return in
}

// cnpChanges returns the two events applied to base: an Admin CNP added
// whose subject is an app in the namespace of a local pod, and a local
// pod relabelled into the subject of an existing guard CNP.
func cnpChanges(base cnpCluster) ([]string, []cnpCluster, error) {
	anchor := slices.IndexFunc(base.Pods, func(p *corev1.Pod) bool { return p.Spec.NodeName == localNode })
	if anchor < 0 {
		return nil, nil, fmt.Errorf("no pod on %s", localNode)
	}
	ap := base.Pods[anchor]
	withCNP := base
	added := genCNP(len(base.CNPs), cnpv1beta1.AdminTier, len(base.Namespaces))
	added.Name = "admin-added"
	added.Spec.Priority = 500
	added.Spec.Subject = cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ap.Namespace}},
		PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": ap.Labels["app"]}},
	}}
	withCNP.CNPs = append(slices.Clip(base.CNPs), added)

	// The guard CNPs (generator case 3) each select guard=<own name>;
	// the first one (admin-0003) gets the pod.
	guard := ""
	for _, p := range base.CNPs {
		if s := p.Spec.Subject.Pods; s != nil {
			if v, ok := s.PodSelector.MatchLabels[guardLabel]; ok {
				guard = v
				break
			}
		}
	}
	if guard == "" {
		return nil, nil, fmt.Errorf("no CNP selects the %s label (need ≥ 4 Admin CNPs)", guardLabel)
	}
	relabeled := base
	c := *base.cluster
	c.Pods = slices.Clone(base.Pods)
	cp := *ap
	cp.ObjectMeta = *ap.ObjectMeta.DeepCopy()
	cp.Labels[guardLabel] = guard
	c.Pods[anchor] = &cp
	relabeled.cluster = &c
	return []string{"CNP added", "pod label into a CNP subject"}, []cnpCluster{withCNP, relabeled}, nil
}

// runCNP measures scenario 7 (zero Admin and Baseline CNPs skip it).
func (r *runner) runCNP() (cnpResult, error) {
	spec := r.prof.CNP
	res := cnpResult{Spec: spec, LoadAvg: []string{loadAvg()}}
	if spec.Admin+spec.Baseline == 0 {
		return res, nil
	}
	r.logf("cnp: change latency at %v", spec)
	if err := r.cnpChange(&res); err != nil {
		return res, err
	}
	for _, c := range res.Change {
		r.logf("cnp: %s: engine %s (Sync %s, %d msgs), nft -f %s", c.Change, c.Engine.ms(), c.Sync.ms(), c.Messages, c.NftF.ms())
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	if err := r.cnpDataPath(&res); err != nil {
		return res, err
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	return res, nil
}

func (r *runner) cnpChange(res *cnpResult) error {
	s := res.Spec
	c := newCluster(s.Size)
	base := cnpCluster{cluster: c, CNPs: clusterNetworkPolicies(s.Admin, s.Baseline, len(c.Namespaces))}
	names, afters, err := cnpChanges(base)
	if err != nil {
		return err
	}
	b0 := compose.Build(base.input())
	if len(b0.Problems) > 0 {
		return fmt.Errorf("base: invalid objects: %v", b0.Problems[0])
	}
	_, res.TableRules, _, _ = tableSize(b0)
	_, res.RulesNoCNP, _, _ = tableSize(compose.Build(c.input()))
	text0, err := engine.Render(compose.Table(), b0.Desired)
	if err != nil {
		return fmt.Errorf("render base table: %w", err)
	}
	texts := make([]string, len(afters))
	res.Change = make([]changeResult, len(afters))
	for i, a := range afters {
		res.Change[i] = changeResult{Size: s.Size, Change: names[i]}
		b := compose.Build(a.input())
		if len(b.Problems) > 0 {
			return fmt.Errorf("%s: invalid objects: %v", names[i], b.Problems[0])
		}
		if texts[i], err = engine.Render(compose.Table(), b.Desired); err != nil {
			return fmt.Errorf("%s: render: %w", names[i], err)
		}
		if texts[i] == text0 {
			return fmt.Errorf("%s: the table does not change", names[i])
		}
	}
	for rep := range r.prof.Reps {
		if err := r.inNS(func(ns *testns.NS) error { return r.cnpEngineChanges(ns, base, afters, res.Change) }); err != nil {
			return fmt.Errorf("cnp engine, repetition %d: %w", rep+1, err)
		}
		if err := r.inNS(func(ns *testns.NS) error { return nftChanges(ns, text0, texts, res.Change) }); err != nil {
			return fmt.Errorf("cnp nft -f, repetition %d: %w", rep+1, err)
		}
	}
	return nil
}

// cnpEngineChanges is engineChanges for clusters with CNPs: one Builder,
// the base programmed once, each change timed from the base and undone
// untimed.
func (r *runner) cnpEngineChanges(ns *testns.NS, base cnpCluster, afters []cnpCluster, res []changeResult) error {
	e, err := engine.New(compose.Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	defer e.Close()
	var bld compose.Builder
	in0 := base.input()
	if _, err := e.Sync(r.ctx, bld.Build(in0).Desired); err != nil {
		return fmt.Errorf("program base table: %w", err)
	}
	for i, a := range afters {
		in := a.input()
		start := time.Now()
		b := bld.Build(in)
		syncStart := time.Now()
		st, err := e.Sync(r.ctx, b.Desired)
		end := time.Now()
		if err != nil {
			return fmt.Errorf("%s: %w", res[i].Change, err)
		}
		res[i].Engine = append(res[i].Engine, end.Sub(start).Seconds())
		res[i].Sync = append(res[i].Sync, end.Sub(syncStart).Seconds())
		res[i].Messages, res[i].Operations, res[i].Read = st.Messages, st.Operations, st.Read
		if _, err := e.Sync(r.ctx, bld.Build(in0).Desired); err != nil {
			return fmt.Errorf("%s: back to base: %w", res[i].Change, err)
		}
	}
	return nil
}

// cnpDataPathCluster is dataPathCluster(policies) with the scenario's CNPs
// and one more Admin CNP whose subject is the lab's server and which
// passes the client on to the NetworkPolicy tier. The dp namespace joins
// team0, so the team0 CNPs of both tiers (admin-0000, baseline-0000, and
// every 40th after them) select both lab pods as well and pass their
// traffic on: each new flow walks Admin and Baseline pod chains.
func cnpDataPathCluster(spec cnpSpec) cnpCluster {
	c := dataPathCluster(spec.Size.Policies)
	dp := c.Namespaces[len(c.Namespaces)-1]
	dp.Labels["kubernetes.io/metadata.name"] = "dp"
	dp.Labels["team"] = "team0"
	cnps := clusterNetworkPolicies(spec.Admin, spec.Baseline, len(c.Namespaces)-1)
	cnps = append(cnps, &cnpv1beta1.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1beta1", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "dp-server"},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{
			Tier: cnpv1beta1.AdminTier, Priority: 999,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "dp"}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			}},
			Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{
				Name: "client-to-namespace-owner", Action: cnpv1beta1.ClusterNetworkPolicyRuleActionPass,
				From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Pods: &cnpv1beta1.NamespacedPod{
					NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "dp"}},
					PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
				}}},
			}},
		},
	})
	return cnpCluster{cluster: c, CNPs: cnps}
}

func (r *runner) cnpDataPath(res *cnpResult) error {
	c := cnpDataPathCluster(res.Spec)
	tables := make([]*engine.Desired, 3) // none, NetworkPolicies only, with CNPs
	for i, in := range []compose.Input{c.cluster.input(), c.input()} {
		in.NodeName = dpNode
		b := compose.Build(in)
		if len(b.Problems) > 0 {
			return fmt.Errorf("data path table %d: invalid objects: %v", i, b.Problems[0])
		}
		tables[i+1] = b.Desired
	}
	if len(tables[2].Chains) <= len(tables[1].Chains) {
		return fmt.Errorf("data path: the CNPs add no chain to the lab node's table")
	}
	dst := []*dpResult{&res.DPNone, &res.DPNoCNP, &res.DPCNP}
	res.DPNone.Config, res.DPNoCNP.Config, res.DPCNP.Config = dpConfig{Policies: dpNone}, dpConfig{Policies: res.Spec.Size.Policies}, dpConfig{Policies: res.Spec.Size.Policies}
	for rep := range r.prof.dpReps() {
		order := []int{rep % 3, (rep + 1) % 3, (rep + 2) % 3}
		err := r.dataPathRound(tables, order, func(i int, tcp, udp float64) {
			dst[i].TCPConn = append(dst[i].TCPConn, tcp)
			dst[i].UDPRR = append(dst[i].UDPRR, udp)
			r.logf("cnp: data path %s: %.0f TCP conn/s, %.0f UDP req/s", []string{"no firewall", "NetworkPolicies only", "with CNPs"}[i], tcp, udp)
		})
		if err != nil {
			return fmt.Errorf("cnp data path, repetition %d: %w", rep+1, err)
		}
	}
	return nil
}

// summaryRows adds scenario 7 to the summary table.
func (c cnpResult) summaryRows(w io.Writer) {
	for _, ch := range c.Change {
		fmt.Fprintf(w, "| %s, %v | engine %s (Sync %s, %d msgs) | nft -f %s | %s faster |\n",
			ch.Change, c.Spec, msf(ch.Engine.median()), msf(ch.Sync.median()), ch.Messages, msf(ch.NftF.median()), times(ratio(ch.NftF, ch.Engine)))
	}
	if len(c.DPCNP.TCPConn) > 0 {
		fmt.Fprintf(w, "| data path, %v | %.0f TCP conn/s, %.0f UDP req/s | no firewall: %.0f, %.0f | %.2f×, %.2f× |\n",
			c.Spec, c.DPCNP.TCPConn.median(), c.DPCNP.UDPRR.median(), c.DPNone.TCPConn.median(), c.DPNone.UDPRR.median(),
			pairedRatio(c.DPCNP.TCPConn, c.DPNone.TCPConn), pairedRatio(c.DPCNP.UDPRR, c.DPNone.UDPRR))
	}
}

// goal is the data-path goal line (≥ 0.9× no firewall with CNPs).
func (c cnpResult) goal() string {
	if len(c.DPCNP.TCPConn) == 0 {
		return "Data path with ClusterNetworkPolicies ≥ 0.9× no firewall: not measured in this run."
	}
	t, u := pairedRatio(c.DPCNP.TCPConn, c.DPNone.TCPConn), pairedRatio(c.DPCNP.UDPRR, c.DPNone.UDPRR)
	return fmt.Sprintf("Data path with ClusterNetworkPolicies ≥ 0.9× no firewall (%v): %s — TCP connections %.2f×, UDP request/response %.2f× (against the same cluster without CNPs: %.2f×, %.2f×).",
		c.Spec, verdict(t >= 0.9 && u >= 0.9), t, u, pairedRatio(c.DPCNP.TCPConn, c.DPNoCNP.TCPConn), pairedRatio(c.DPCNP.UDPRR, c.DPNoCNP.UDPRR))
}

func (c cnpResult) section(w io.Writer, prof profile) {
	fmt.Fprintln(w, "## 7. ClusterNetworkPolicies")
	fmt.Fprintln(w)
	if c.Spec.Admin+c.Spec.Baseline == 0 {
		fmt.Fprintln(w, "Not part of this profile.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "The section-2 cluster (%v) plus %d Admin and %d Baseline ClusterNetworkPolicies (v1beta1). Subjects: a team's namespaces, one namespace by name, an app in a team's namespaces, or pods with a `%s` label no pod carries at first; peers: namespaces, namespace+pod selectors, IPv4 and IPv6 networks; actions Accept, Deny and Pass (a third of the policies pass their team's own traffic to the next tier; a fifth of the Baseline ones isolate namespaces); priorities spread over 0–1000, every tenth equal to the one before; ports as numbers, a range and a named port. Base table: %d rules (%d without the CNPs). Load average: %s.\n\n",
		c.Spec.Size, c.Spec.Admin, c.Spec.Baseline, guardLabel, c.TableRules, c.RulesNoCNP, strings.Join(c.LoadAvg, " → "))
	fmt.Fprintf(w, "Change latency, each change from the same base table, %d repetitions: *CNP added* is an Admin CNP (priority 500) whose subject is the app of a pod on %s in that pod's namespace; *pod label into a CNP subject* adds the `%s` label to a local pod so that exactly one existing CNP (admin-0003) selects it; that CNP selected no local pod before, so its peer sets (a namespace's pods, a team's pods, networks) enter the table with it. **engine** and **nft -f** as in section 2 (one compose.Builder + engine that have just handled the base; nft -f rewrites the whole rendered table in one transaction).\n\n",
		prof.Reps, localNode, guardLabel)
	fmt.Fprintln(w, "| change | engine | of which Sync | msgs / ops | nft -f | nft -f / engine | nft -f / Sync |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, ch := range c.Change {
		read := ""
		if ch.Read {
			read = " (read back!)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d / %d%s | %s | %s | %s |\n", ch.Change, ch.Engine.ms(), ch.Sync.ms(), ch.Messages, ch.Operations, read,
			ch.NftF.ms(), times(ratio(ch.NftF, ch.Engine)), times(ratio(ch.NftF, ch.Sync)))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Data path: section 3's lab and load at %s NetworkPolicies, with the CNPs above plus one Admin CNP (priority 999) whose subject is `dp/server` and which passes `dp/client` on to the NetworkPolicy tier; the `dp` namespace is in team0, so team0's CNPs (Admin and Baseline) select both lab pods, pass their team's traffic on, and every new flow walks Admin and Baseline pod chains on both sides. The three configurations run in one lab per repetition in rotating order, %d repetitions; ratios are medians of the paired per-repetition ratios.\n\n",
		human(c.Spec.Size.Policies), prof.dpReps())
	fmt.Fprintln(w, "| configuration | TCP conn/s | vs no firewall | UDP req/s | vs no firewall |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, d := range []struct {
		name string
		r    dpResult
	}{{"no firewall", c.DPNone}, {"NetworkPolicies only", c.DPNoCNP}, {"with CNPs", c.DPCNP}} {
		fmt.Fprintf(w, "| %s | %s | %.2f | %s | %.2f |\n", d.name, d.r.TCPConn.rate(), pairedRatio(d.r.TCPConn, c.DPNone.TCPConn),
			d.r.UDPRR.rate(), pairedRatio(d.r.UDPRR, c.DPNone.UDPRR))
	}
	fmt.Fprintln(w)
}
