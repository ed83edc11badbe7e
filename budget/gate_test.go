package budget_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// cost counts a table's rules and set elements, the elements as the
// kernel stores them: an interval set's elements in the kernel form the
// engine sends (nftsyntax.EncodeElements: a start and an end element per
// interval, and the zero sentinel), which is what the kernel holds (the
// kernel test TestFourPoliciesOfOddPortsInTheKernel compares them).
func cost(t testing.TB, d *engine.Desired) budget.Cost {
	t.Helper()
	var c budget.Cost
	for _, ch := range d.Chains {
		c.Rules += len(ch.Rules)
	}
	for _, s := range d.Sets {
		c.Elements += kernelElements(t, s)
	}
	return c
}

// kernelElements is how many elements set s is in the kernel.
func kernelElements(t testing.TB, s engine.Set) int {
	t.Helper()
	if !s.Interval {
		return len(s.Elements)
	}
	decl, err := nftsyntax.ParseSetDecl(s.Name, s.Type, s.Map, true)
	if err != nil {
		t.Fatalf("set %s: %v", s.Name, err)
	}
	texts := make([]nftsyntax.ElementText, len(s.Elements))
	for i, e := range s.Elements {
		texts[i] = nftsyntax.ElementText{Key: e.Key, Value: e.Value}
	}
	elems, err := nftsyntax.EncodeElements(decl, texts)
	if err != nil {
		t.Fatalf("set %s: %v", s.Name, err)
	}
	return len(elems)
}

// cluster is namespaces a, b, c with pods labelled app=x|y|z, some on n1,
// dual-stack every third, each with a named port "http".
func cluster(r *rand.Rand, pods int) ([]*corev1.Namespace, []*corev1.Pod) {
	nss := []*corev1.Namespace{apitest.Namespace("a", "team", "a"), apitest.Namespace("b", "team", "b"), apitest.Namespace("c")}
	var out []*corev1.Pod
	for i := 0; i < pods; i++ {
		ns := nss[i%3].Name
		opts := []apitest.PodOpt{apitest.WithLabels("app", []string{"x", "y", "z"}[r.Intn(3)]), apitest.Port("http", int32(8000+i%7), corev1.ProtocolTCP)}
		if r.Intn(3) > 0 {
			opts = append(opts, apitest.OnNode("n2"))
		}
		if i%3 == 0 {
			opts = append(opts, apitest.IPs(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), fmt.Sprintf("fd00::%x", i+1)))
		}
		out = append(out, apitest.Pod(ns, fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), opts...))
	}
	return nss, out
}

func randomPolicy(r *rand.Rand, ns, name string) *networkingv1.NetworkPolicy {
	sel := func() *metav1.LabelSelector {
		if r.Intn(3) == 0 {
			return &metav1.LabelSelector{}
		}
		return apitest.Selector("app", []string{"x", "y", "z"}[r.Intn(3)])
	}
	peers := func() []networkingv1.NetworkPolicyPeer {
		var out []networkingv1.NetworkPolicyPeer
		for range r.Intn(4) {
			switch r.Intn(4) {
			case 0:
				out = append(out, networkingv1.NetworkPolicyPeer{PodSelector: sel()})
			case 1:
				out = append(out, networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(), PodSelector: sel()})
			case 2:
				out = append(out, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
			default:
				out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24", "192.168.9.0/24"}[:r.Intn(3)]}})
			}
		}
		return out
	}
	ports := func() []networkingv1.NetworkPolicyPort {
		var out []networkingv1.NetworkPolicyPort
		if r.Intn(4) == 0 {
			// Many lone ports (no two adjacent), where the kernel
			// holds two elements per port.
			protos := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
			for i := range 100 + r.Intn(200) {
				proto := protos[r.Intn(3)]
				p := intstr.FromInt32(int32(2001 + 2*i))
				out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p})
			}
		}
		for i := range r.Intn(5) {
			tcp := corev1.ProtocolTCP
			p := intstr.FromInt32(int32(100 + i))
			if r.Intn(3) == 0 {
				p = intstr.FromString("http")
			}
			out = append(out, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p})
		}
		return out
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel()}}
	for range r.Intn(3) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers(), Ports: ports()})
	}
	for range r.Intn(3) {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: peers(), Ports: ports()})
	}
	if r.Intn(2) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	}
	return np
}

func input(nss []*corev1.Namespace, pods []*corev1.Pod, nps []*networkingv1.NetworkPolicy, l *budget.Limits) compose.Input {
	return compose.Input{NodeName: "n1", Namespaces: nss, Pods: podset.NewSet(podset.FromAPIList(pods)),
		NetworkPolicies: npset.New(nps), Budget: l}
}

// TestEstimateBoundsTheCompile: what a random policy adds to the compiled
// table (with other policies beside it) never exceeds its estimate.
func TestEstimateBoundsTheCompile(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	n := 300
	if testing.Short() {
		n = 60
	}
	worst := 0.0
	for i := range n {
		nss, pods := cluster(r, 30+r.Intn(60))
		var others []*networkingv1.NetworkPolicy
		for j := range r.Intn(3) {
			others = append(others, randomPolicy(r, nss[r.Intn(3)].Name, fmt.Sprintf("o%d", j)))
		}
		np := randomPolicy(r, nss[r.Intn(3)].Name, "p")
		without := cost(t, compose.Build(input(nss, pods, others, nil)).Desired)
		with := cost(t, compose.Build(input(nss, pods, append(others, np), nil)).Desired)
		delta := with.Sub(without)
		var g budget.Gate
		huge := budget.Limits{Object: budget.Cost{Rules: 1 << 40, Elements: 1 << 40}, Node: budget.Cost{Rules: 1 << 40, Elements: 1 << 40}}
		if _, over := g.Apply(budget.Input{NodeName: "n1", Namespaces: nss, Pods: podset.NewSet(podset.FromAPIList(pods)),
			Policies: npset.New([]*networkingv1.NetworkPolicy{np}), Limits: huge}); len(over) > 0 {
			t.Fatalf("case %d: over a huge budget", i)
		}
		est := g.Estimate(np)
		if delta.Rules > est.Rules || delta.Elements > est.Elements {
			t.Fatalf("case %d: the policy adds %+v, estimated %+v:\n%s", i, delta, est, apitest.JSON(t, np))
		}
		if delta.Rules+delta.Elements > 0 {
			worst = max(worst, float64(est.Rules+est.Elements)/float64(delta.Rules+delta.Elements))
		}
	}
	t.Logf("estimate / actual, worst case: %.1f", worst)
}

// TestOverBudgetFailsClosed: a policy over its own budget keeps its pods
// isolated without its allows; one that fits is compiled as written; when
// the node's total is over, the largest give way. The result equals a
// fresh compile of the fail-closed forms, and an unchanged input gives the
// same groups to the compiler.
func TestOverBudgetFailsClosed(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	nss, pods := cluster(r, 60)
	ports := func(n int) []networkingv1.NetworkPolicyPort {
		var out []networkingv1.NetworkPolicyPort
		for i := range n {
			p := intstr.FromInt32(int32(1000 + i))
			out = append(out, networkingv1.NetworkPolicyPort{Port: &p})
		}
		return out
	}
	big := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "big"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports(500)}}}}
	small := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "small"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *apitest.Selector("app", "x"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports(2)}}}}
	egress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "to-all"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}}}
	nps := []*networkingv1.NetworkPolicy{big, small, egress}

	for _, tc := range []struct {
		name   string
		limits budget.Limits
		over   []string
		node   []bool
	}{
		{"everything fits", budget.Default(), nil, nil},
		{"one over its own budget", budget.Limits{Object: budget.Cost{Rules: 1000, Elements: 400}, Node: budget.Default().Node}, []string{"a/big"}, []bool{false}},
		{"the node's total: the largest gives way", budget.Limits{Object: budget.Default().Object, Node: budget.Cost{Rules: 1000, Elements: 400}}, []string{"a/big"}, []bool{true}},
		{"the node's total: more give way", budget.Limits{Object: budget.Default().Object, Node: budget.Cost{Rules: 1000, Elements: 40}}, []string{"a/big", "b/to-all"}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b compose.Builder
			in := input(nss, pods, nps, &tc.limits)
			res := b.Build(in)
			var got []string
			for i, o := range res.OverBudget {
				got = append(got, o.Policy.Namespace+"/"+o.Policy.Name)
				if i < len(tc.node) && o.Node != tc.node[i] {
					t.Errorf("%s: Node = %v", got[i], o.Node)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.over, ",") {
				t.Fatalf("over budget: %v, want %v", got, tc.over)
			}
			// A fresh compile of the fail-closed forms, without budgets.
			want := append([]*networkingv1.NetworkPolicy(nil), nps...)
			for i, np := range want {
				for _, o := range res.OverBudget {
					if o.Policy == np {
						want[i] = budget.FailClosed(np)
					}
				}
			}
			fresh := compose.Build(input(nss, pods, want, nil))
			if a, b := render(res.Desired), render(fresh.Desired); a != b {
				t.Errorf("the table differs from a compile of the fail-closed forms:\n%s\n---\n%s", a, b)
			}
			// The over-budget policy's pods stay isolated.
			for _, o := range res.OverBudget {
				if !strings.Contains(render(res.Desired), "np_ing_"+o.Policy.Namespace+"_") && !strings.Contains(render(res.Desired), "np_eg_"+o.Policy.Namespace+"_") {
					t.Errorf("%s: no pod chain of its namespace", o.Policy.Name)
				}
			}
			// The same input again: the same result, nothing new.
			again := b.Build(compose.Input{NodeName: in.NodeName, Namespaces: in.Namespaces, Pods: in.Pods, NetworkPolicies: in.NetworkPolicies, Budget: in.Budget})
			if render(again.Desired) != render(res.Desired) || len(again.OverBudget) != len(res.OverBudget) {
				t.Error("a second build of the same input differs")
			}
		})
	}
}

func render(d *engine.Desired) string {
	var b strings.Builder
	for _, ch := range d.Chains {
		b.WriteString("chain " + ch.Name + "\n")
		for _, r := range ch.Rules {
			b.WriteString("  " + r.Rule + "\n")
		}
	}
	for _, s := range d.Sets {
		fmt.Fprintf(&b, "set %s %d\n", s.Name, len(s.Elements))
	}
	return b.String()
}

// TestGateIncremental: a Gate that follows random changes (pods added,
// removed and relabelled; policies added, replaced and removed) decides
// at every step as a fresh Gate does.
func TestGateIncremental(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	steps := 400
	if testing.Short() {
		steps = 80
	}
	nss, pods := cluster(r, 80)
	var nps []*networkingv1.NetworkPolicy
	for i := range 12 {
		nps = append(nps, randomPolicy(r, nss[r.Intn(3)].Name, fmt.Sprintf("np%d", i)))
	}
	l := budget.Limits{Object: budget.Cost{Rules: 120, Elements: 150}, Node: budget.Cost{Rules: 400, Elements: 500}}
	var g budget.Gate
	conv := podset.Converter{}
	var npSet *npset.Set
	overs := 0
	for step := range steps {
		switch r.Intn(4) {
		case 0:
			i := r.Intn(len(pods))
			p := pods[i].DeepCopy()
			p.Labels = apitest.Labels("app", []string{"x", "y", "z"}[r.Intn(3)])
			pods = append(append(pods[:i:i], p), pods[i+1:]...)
		case 1:
			i := r.Intn(len(pods))
			pods = append(pods[:i:i], pods[i+1:]...)
			_, more := cluster(r, 1)
			p := more[0].DeepCopy()
			p.Name = fmt.Sprintf("s%d", step)
			p.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.2.%d.%d", step/250, step%250+1)}}
			pods = append(pods, p)
		case 2:
			i := r.Intn(len(nps))
			nps = append(append(nps[:i:i], randomPolicy(r, nps[i].Namespace, nps[i].Name)), nps[i+1:]...)
		default:
			i := r.Intn(len(nps))
			nps = append(append(nps[:i:i], nps[i+1:]...), randomPolicy(r, nss[r.Intn(3)].Name, fmt.Sprintf("n%d", step)))
		}
		set := conv.Set(pods)
		npSet = npSet.Update(nps)
		_, got := g.Apply(budget.Input{NodeName: "n1", Namespaces: nss, Pods: set, Policies: npSet, Limits: l})
		overs += len(got)
		var fresh budget.Gate
		_, want := fresh.Apply(budget.Input{NodeName: "n1", Namespaces: nss, Pods: podset.NewSet(podset.FromAPIList(pods)), Policies: npset.New(nps), Limits: l})
		if a, b := names(got), names(want); a != b {
			t.Fatalf("step %d: over budget %s, a fresh gate says %s", step, a, b)
		}
	}
	if overs == 0 || overs == steps*len(nps) {
		t.Fatalf("%d policies over budget in %d steps: the limits do not test the choice", overs, steps)
	}
	t.Logf("%d policies over budget in %d steps", overs, steps)
}

func names(over []budget.Over) string {
	var out []string
	for _, o := range over {
		out = append(out, fmt.Sprintf("%s/%s:%+v:%v", o.Policy.Namespace, o.Policy.Name, o.Cost, o.Node))
	}
	return strings.Join(out, ",")
}

// TestSharedSelectionCountsOnce: many policies that select the same peers
// share one set in the table, so the node's total counts it once: 100
// copies of "egress to every namespace" fit a node budget that two
// unshared copies would not.
func TestSharedSelectionCountsOnce(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	nss, pods := cluster(r, 60)
	var nps []*networkingv1.NetworkPolicy
	for i := range 100 {
		nps = append(nps, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: fmt.Sprintf("to-all-%d", i)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}}})
	}
	huge := budget.Cost{Rules: 1 << 40, Elements: 1 << 40}
	total := func(n int, l budget.Limits) (budget.Cost, []budget.Over) {
		var g budget.Gate
		_, over := g.Apply(budget.Input{NodeName: "n1", Namespaces: nss, Pods: podset.NewSet(podset.FromAPIList(pods)),
			Policies: npset.New(nps[:n]), Limits: l})
		return g.Total(), over
	}
	unlimited := budget.Limits{Object: huge, Node: huge}
	t1, _ := total(1, unlimited)
	t2, _ := total(2, unlimited)
	t100, _ := total(100, unlimited)
	own := t2.Elements - t1.Elements
	if shared := t1.Elements - own; shared < 60 {
		t.Fatalf("one policy's estimate %+v counts %d shared addresses, want at least one per pod", t1, shared)
	}
	if want := t1.Elements + 99*own; t100.Elements != want {
		t.Errorf("100 policies sharing one selection: total %d elements, want %d (one %d, each more %d)", t100.Elements, want, t1.Elements, own)
	}
	l := budget.Limits{Object: huge, Node: budget.Cost{Rules: 1 << 40, Elements: t100.Elements}}
	if 100*t1.Elements <= l.Node.Elements {
		t.Fatalf("the limit %d would fit 100 unshared copies of %d", l.Node.Elements, t1.Elements)
	}
	if _, over := total(100, l); len(over) > 0 {
		t.Fatalf("%d of 100 policies sharing one selection over the node's budget %+v", len(over), l.Node)
	}
	// The table agrees: one set of peers for the 100 policies.
	d := compose.Build(input(nss, pods, nps, nil)).Desired
	sets := 0
	for _, s := range d.Sets {
		if strings.HasPrefix(s.Name, "np_sel_") {
			sets++
		}
	}
	if sets == 0 || sets > 2 {
		t.Errorf("the table holds %d shared peer sets, want one per family", sets)
	}
}
