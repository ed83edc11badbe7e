package policy

import (
	"flag"
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"maps"
	"slices"
)

var incrSeeds = flag.Int("incr.seeds", 1500, "random change sequences TestCompilerEqualsCompileOnRandomChanges replays")

// TestCompilerEqualsCompileOnRandomChanges replays random sequences of
// cluster changes (objects kept, replaced by changed copies, added,
// deleted, reordered; namespaces relabelled; the node renamed) through one
// Compiler and checks every result against a fresh Compile.
func TestCompilerEqualsCompileOnRandomChanges(t *testing.T) {
	n := *incrSeeds
	if testing.Short() {
		n = 150
	}
	for seed := int64(0); seed < int64(n); seed++ {
		r := rand.New(rand.NewSource(seed))
		var m Compiler
		in := randomCluster(r)
		for step := 0; step < 10; step++ {
			got, want := m.Compile(in), Compile(in)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d step %d: Compiler differs from Compile (-Compile +Compiler):\n%s", seed, step, diff)
			}
			in = mutate(r, in)
		}
	}
}

// mutate returns the next state of a cluster: most objects are the same
// objects, some are changed copies, some are new, some are gone. in is not
// modified.
func mutate(r *rand.Rand, in Input) Input {
	other := randomCluster(r)
	out := Input{NodeName: in.NodeName}
	if r.Intn(25) == 0 {
		out.NodeName = other.NodeName + "x"
		if r.Intn(2) == 0 {
			out.NodeName = "n2"
		}
	}
	out.Namespaces = apitest.Mix(r, in.Namespaces, other.Namespaces, 8, func(ns *corev1.Namespace) *corev1.Namespace {
		c := ns.DeepCopy()
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels["tier"] = []string{"a", "b", "c"}[r.Intn(3)]
		return c
	})
	out.Pods = podtest.Set(apitest.Mix(r, podtest.List(in.Pods), podtest.List(other.Pods), 8, func(p *corev1.Pod) *corev1.Pod {
		c := p.DeepCopy()
		switch r.Intn(5) {
		case 0:
			if c.Labels == nil {
				c.Labels = map[string]string{}
			}
			c.Labels["app"] = []string{"a", "b", "c", "d"}[r.Intn(4)]
		case 1:
			c.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.0.%d.%d", r.Intn(3), r.Intn(20))}}
			c.Status.PodIP = ""
		case 2:
			c.Spec.NodeName = []string{"n1", "n2"}[r.Intn(2)]
		case 3:
			c.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodFailed}[r.Intn(2)]
		default:
			// an update that changes nothing the compiler reads
			c.ResourceVersion = "2"
		}
		return c
	}))
	// Update keeps the groups of namespaces whose policies stayed the
	// same objects, as the agent does.
	out.Policies = in.Policies.Update(apitest.Mix(r, in.Policies.All(), other.Policies.All(), 8, func(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
		c := np.DeepCopy()
		switch r.Intn(3) {
		case 0:
			breakPolicy(r, c)
		case 1:
			c.Spec.Ingress = nil
			if other.Policies.Len() > 0 {
				c.Spec.Ingress = other.Policies.All()[0].DeepCopy().Spec.Ingress
			}
		default:
			c.Generation++
		}
		return c
	}))
	return out
}

// TestCompilerReusesUnchangedWork checks that the Compiler returns the
// very chains and set elements of the previous call for what an event did
// not touch, which is what lets the engine skip them without comparing.
func TestCompilerReusesUnchangedWork(t *testing.T) {
	in := selectingCluster()
	var m Compiler
	first := m.Compile(in)
	// A remote pod changes its labels: it leaves the sets of the rules
	// that selected it and joins others.
	next := in
	podList := append([]*corev1.Pod(nil), podtest.List(in.Pods)...)
	c := podList[1].DeepCopy() // p00001, on node-001
	c.Labels["app"] = "app6"
	podList[1] = c
	next.Pods = podtest.Set(podList)
	second := m.Compile(next)
	if diff := cmp.Diff(Compile(next), second); diff != "" {
		t.Fatalf("Compiler differs from Compile after a label change (-Compile +Compiler):\n%s", diff)
	}
	firstChains := map[string]*engine.Rule{}
	for _, ch := range first.Chains {
		firstChains[ch.Name] = &ch.Rules[0]
	}
	sameChains := 0
	for _, ch := range second.Chains {
		if firstChains[ch.Name] == &ch.Rules[0] {
			sameChains++
		}
	}
	firstSets := map[string]*engine.Element{}
	for _, s := range first.Sets {
		if len(s.Elements) > 0 {
			firstSets[s.Name] = &s.Elements[0]
		}
	}
	sameSets, changedSets := 0, 0
	for _, s := range second.Sets {
		switch {
		case len(s.Elements) == 0:
		case firstSets[s.Name] == &s.Elements[0]:
			sameSets++
		default:
			changedSets++
		}
	}
	t.Logf("chains reused %d of %d; sets reused %d, rebuilt %d", sameChains, len(second.Chains), sameSets, changedSets)
	// Peer and named-port sets are one per selection: the pod leaves one
	// selection and joins another, which rebuilds at most those two
	// selections' peer and named-port sets.
	if changedSets == 0 || changedSets > 4 {
		t.Errorf("%d sets rebuilt, %d reused, for one label change", changedSets, sameSets)
	}
	if sameChains < len(second.Chains)*3/4 {
		t.Errorf("only %d of %d chains reused", sameChains, len(second.Chains))
	}
}

// selectingCluster is bigCluster with selectors that select pods, so that
// every rule has address sets.
func selectingCluster() Input {
	in := bigCluster()
	for _, np := range in.Policies.All() {
		var i int // the policy's place in bigCluster's list
		if _, err := fmt.Sscanf(np.Name, "np%d", &i); err != nil {
			panic(err)
		}
		np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app"] = fmt.Sprintf("app%d", (i+5)%20)
		np.Spec.Egress[0].To[0].PodSelector.MatchLabels["app"] = fmt.Sprintf("app%d", (i+10)%20)
	}
	return in
}

func BenchmarkCompilerLabelChange10k(b *testing.B) {
	in := selectingCluster()
	var m Compiler
	m.Compile(in)
	states := [2]Input{in, in}
	podList := append([]*corev1.Pod(nil), podtest.List(in.Pods)...)
	c := podList[1].DeepCopy()
	c.Labels["app"] = "app6"
	podList[1] = c
	states[1].Pods = podtest.Set(podList)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		m.Compile(states[i%2])
	}
}

// TestCompilerReadsOnlyChangedNamespaces checks that a policy event costs
// its namespace: the groups of other namespaces are taken as the previous
// compile read them (no policy of theirs validated again), and a namespace
// whose last policy is gone leaves the memo.
func TestCompilerReadsOnlyChangedNamespaces(t *testing.T) {
	in := bigCluster() // 1,000 policies over 50 namespaces
	var m Compiler
	m.Compile(in)
	before := maps.Clone(m.prev.npByNS)
	if len(before) != 50 {
		t.Fatalf("%d namespaces read, want 50", len(before))
	}
	// One policy added in ns-07, every policy of ns-08 removed.
	g07 := in.Policies.Groups()[7]
	if g07.Namespace != "ns-07" {
		t.Fatalf("group 7 is %s", g07.Namespace)
	}
	added := netpol("ns-07", "np9999", *apitest.Selector("app", "app1"), nil)
	next := in
	next.Policies = in.Policies.Replace(map[string][]*networkingv1.NetworkPolicy{
		"ns-07": append(slices.Clone(g07.Items), added),
		"ns-08": nil,
	})
	out := m.Compile(next)
	if diff := cmp.Diff(Compile(next), out); diff != "" {
		t.Fatalf("Compiler differs from Compile (-Compile +Compiler):\n%s", diff)
	}
	after := m.prev.npByNS
	for ns, r := range before {
		switch ns {
		case "ns-07":
			if after[ns] == r {
				t.Errorf("%s changed but was not read again", ns)
			}
			for i, vp := range after[ns].vps[:len(r.vps)] {
				if vp != r.vps[i] {
					t.Errorf("%s: policy %d of the old group validated again", ns, i)
				}
			}
		case "ns-08":
			if _, ok := after[ns]; ok {
				t.Errorf("%s has no policy left but stays in the memo", ns)
			}
		default:
			if after[ns] != r {
				t.Errorf("%s did not change but was read again", ns)
			}
		}
	}
	// The very same Set again: nothing is read.
	m.Compile(next)
	if got := m.prev.npByNS["ns-07"]; got != after["ns-07"] {
		t.Error("the same Set was read again")
	}
}
