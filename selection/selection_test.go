package selection

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/podset"
)

// --- a deliberately simple reference ----------------------------------------

// enforced tells whether a pod is selected at all: it owns its addresses
// and every one of them parses.
func enforced(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Spec.HostNetwork {
		return false
	}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if _, err := netip.ParseAddr(ip.IP); err != nil {
			return false
		}
	}
	return len(ips) > 0
}

// nsLabels are a namespace's labels as selectors see them: the last
// object of the name, plus kubernetes.io/metadata.name.
func nsLabels(namespaces []*corev1.Namespace, name string) labels.Set {
	l := labels.Set{}
	for _, ns := range namespaces {
		if ns.Name == name {
			l = labels.Set{}
			for k, v := range ns.Labels {
				l[k] = v
			}
		}
	}
	l[corev1.LabelMetadataName] = name
	return l
}

// naiveSelect is what Select means: the enforced pods whose namespace nsSel
// selects (nil: ownNS) and whose labels podSel selects (nil: all), sorted
// by namespace, in input order within one; and whether a namespace with
// selected pods has two enforced pods of one name.
func naiveSelect(namespaces []*corev1.Namespace, pods []*corev1.Pod, ownNS string, nsSel, podSel *metav1.LabelSelector) ([]*corev1.Pod, bool) {
	var out []*corev1.Pod
	for _, p := range pods {
		if !enforced(p) {
			continue
		}
		if nsSel == nil && p.Namespace != ownNS {
			continue
		}
		if nsSel != nil {
			s, _ := metav1.LabelSelectorAsSelector(nsSel)
			if !s.Matches(nsLabels(namespaces, p.Namespace)) {
				continue
			}
		}
		if podSel != nil {
			s, _ := metav1.LabelSelectorAsSelector(podSel)
			if !s.Matches(labels.Set(p.Labels)) {
				continue
			}
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	dup := false
	for _, sp := range out {
		names := map[string]int{}
		for _, p := range pods {
			if enforced(p) && p.Namespace == sp.Namespace {
				names[p.Name]++
				dup = dup || names[p.Name] > 1
			}
		}
	}
	return out, dup
}

// --- random clusters ----------------------------------------------------------

type cluster struct {
	namespaces []*corev1.Namespace
	pods       []*corev1.Pod
}

func randomPod(r *rand.Rand, i int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", r.Intn(4)), Name: fmt.Sprintf("p%d", i%12),
		Labels: map[string]string{"app": []string{"a", "b", "c"}[r.Intn(3)]}}}
	p.Spec.NodeName = []string{"n1", "n2"}[r.Intn(2)]
	p.Spec.HostNetwork = r.Intn(10) == 0
	p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodFailed}[r.Intn(4)]
	switch r.Intn(6) {
	case 0:
		p.Status.PodIP = fmt.Sprintf("10.0.0.%d", i)
	case 1:
		p.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i)}, {IP: fmt.Sprintf("fd00::%x", i)}}
	case 2:
		p.Status.PodIPs = []corev1.PodIP{{IP: "bogus"}}
	case 3:
	default:
		p.Status.PodIPs = []corev1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i)}}
	}
	return p
}

func randomNamespace(r *rand.Rand, i int) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", i), Labels: map[string]string{"tier": []string{"x", "y"}[r.Intn(2)]}}}
}

// next keeps most objects, replaces, drops and adds some.
func (c cluster) next(r *rand.Rand, step int) cluster {
	var out cluster
	for i, ns := range c.namespaces {
		if r.Intn(4) == 0 {
			ns = randomNamespace(r, i)
		}
		out.namespaces = append(out.namespaces, ns)
	}
	for i, p := range c.pods {
		switch r.Intn(8) {
		case 0:
			continue
		case 1:
			p = p.DeepCopy()
			p.Labels["app"] = []string{"a", "b", "c"}[r.Intn(3)]
		case 2:
			p = randomPod(r, 100*step+i)
		}
		out.pods = append(out.pods, p)
	}
	if r.Intn(4) == 0 {
		r.Shuffle(len(out.pods), func(i, j int) { out.pods[i], out.pods[j] = out.pods[j], out.pods[i] })
	}
	return out
}

// selectorPairs are the questions asked of every cluster.
var selectorPairs = []struct {
	ownNS         string
	nsSel, podSel *metav1.LabelSelector
}{
	{"ns0", nil, nil},
	{"ns1", nil, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
	{"ns0", &metav1.LabelSelector{}, nil},
	{"ns0", &metav1.LabelSelector{}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}},
	{"ns2", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "x"}}, &metav1.LabelSelector{}},
	{"ns2", &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ns3"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "c"}}},
	{"ns3", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}, nil},
}

// records hands the compiles one record per pod object (the same object,
// the same record, as the agent's caches do) through a podset.Converter,
// which gives a namespace a new Group only when its pods changed. Every few
// steps it starts a fresh Set of the same records, as manifests do, so that
// both ways of finding what changed are exercised.
type records struct {
	conv podset.Converter
	obj  map[*podset.Pod]*corev1.Pod
}

func (r *records) next(list []*corev1.Pod, fresh bool) *podset.Set {
	set := r.conv.Set(list)
	r.obj = map[*podset.Pod]*corev1.Pod{}
	// The Converter keeps the order of each namespace's objects: map
	// records back by walking the list in the same order.
	byNS := map[string][]*corev1.Pod{}
	for _, o := range list {
		byNS[o.Namespace] = append(byNS[o.Namespace], o)
	}
	for _, g := range set.Groups() {
		for i, p := range g.Items {
			r.obj[p] = byNS[g.Namespace][i]
		}
	}
	if fresh {
		return podset.NewSet(set.All())
	}
	return set
}

func (r *records) objs(ps []*Member) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range ps {
		out = append(out, r.obj[p.Obj])
	}
	return out
}

// canon is a selection in the order Select promises: namespaces in name
// order; within a namespace where two pods share a name input order (the
// first selected counts), elsewhere any order, so sorted here.
func canon(all, ps []*corev1.Pod) []string {
	out := names(ps)
	dupNS := map[string]bool{}
	seen := map[string]bool{}
	for _, p := range all {
		if enforced(p) {
			k := p.Namespace + "/" + p.Name
			dupNS[p.Namespace] = dupNS[p.Namespace] || seen[k]
			seen[k] = true
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ps[i].Namespace != ps[j].Namespace || dupNS[ps[i].Namespace] {
			return ps[i].Namespace < ps[j].Namespace
		}
		return out[i] < out[j]
	})
	return out
}

// names names pod objects by identity, for comparing and for reading a
// failure: namespace/name and the object's address.
func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%s %p", p.Namespace, p.Name, p))
	}
	return out
}

// TestSelectEqualsNaiveSelect compares Select, Local and Unchanged with the
// reference over random event sequences through one Memo.
func TestSelectEqualsNaiveSelect(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		var c cluster
		for i := 0; i < 3; i++ { // ns3 has no Namespace object
			c.namespaces = append(c.namespaces, randomNamespace(r, i))
		}
		for i := 0; i < r.Intn(20); i++ {
			c.pods = append(c.pods, randomPod(r, i))
		}
		var m Memo
		var recs records
		var prev [][]string
		var prevDup []bool
		var prevKeys []PeerKey
		for step := 0; step < 8; step++ {
			x := m.Index("n1", c.namespaces, recs.next(c.pods, step%3 == 2))
			var wantLocal []*corev1.Pod
			for _, p := range c.pods {
				if enforced(p) && p.Spec.NodeName == "n1" {
					wantLocal = append(wantLocal, p)
				}
			}
			sort.SliceStable(wantLocal, func(i, j int) bool {
				return wantLocal[i].Namespace+"/"+wantLocal[i].Name < wantLocal[j].Namespace+"/"+wantLocal[j].Name
			})
			if diff := cmp.Diff(names(wantLocal), names(recs.objs(x.Local()))); diff != "" {
				t.Fatalf("seed %d step %d: Local (-want +got):\n%s", seed, step, diff)
			}
			var now [][]string
			var nowDup []bool
			var keys []PeerKey
			for i, q := range selectorPairs {
				want, wantDup := naiveSelect(c.namespaces, c.pods, q.ownNS, q.nsSel, q.podSel)
				if prev != nil {
					same := slices.Equal(prev[i], canon(c.pods, want)) && prevDup[i] == wantDup
					// Unchanged may say false for the same pods in a
					// new order, never true for others.
					if got := x.Unchanged(prevKeys[i]); got && !same {
						t.Fatalf("seed %d step %d pair %d: Unchanged = %v, want %v (before %v dup %v; now %v dup %v)", seed, step, i, got, same, prev[i], prevDup[i], canon(c.pods, want), wantDup)
					}
				}
				sel, k := x.Select(q.ownNS, q.nsSel, q.podSel)
				if diff := cmp.Diff(canon(c.pods, want), canon(c.pods, recs.objs(sel.Pods))); diff != "" {
					t.Fatalf("seed %d step %d pair %d: Select (-want +got):\n%s", seed, step, i, diff)
				}
				if sel.Dup != wantDup {
					t.Fatalf("seed %d step %d pair %d: Dup = %v, want %v", seed, step, i, sel.Dup, wantDup)
				}
				now, nowDup, keys = append(now, canon(c.pods, want)), append(nowDup, wantDup), append(keys, k)
			}
			prev, prevDup, prevKeys = now, nowDup, keys
			c = c.next(r, step+1)
		}
	}
}

func TestSelectorsParseOncePerContent(t *testing.T) {
	sc := NewSelectors()
	a := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1", "b": "2"}}
	b := &metav1.LabelSelector{MatchLabels: map[string]string{"b": "2", "a": "1"}}
	if sc.Parse(a) != sc.Parse(b) {
		t.Error("equal selectors parsed twice")
	}
	// Length prefixes keep these apart although their bytes run together.
	c := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1b"}}
	d := &metav1.LabelSelector{MatchLabels: map[string]string{"a1": "b"}}
	if sc.Parse(c) == sc.Parse(d) || sc.Parse(c).Key == sc.Parse(d).Key {
		t.Error("different selectors share a parse")
	}
	if bad := sc.Parse(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}); bad.Err == nil {
		t.Error("invalid selector parsed without error")
	}
}

func TestUnique(t *testing.T) {
	mk := func(ns, name string) *Member {
		return &Member{Obj: &podset.Pod{Namespace: ns, Name: name}}
	}
	b1, a, b2, c := mk("y", "b"), mk("x", "a"), mk("y", "b"), mk("x", "c")
	in := []*Member{b1, a, b2, c}
	if got := Unique(in); !slices.Equal(got, []*Member{a, c, b1}) {
		t.Errorf("Unique = %v, want x/a, x/c, y/b (the first)", got)
	}
	if in[0] != b1 || in[2] != b2 {
		t.Error("Unique changed its argument")
	}
}

// TestIndexWalksOnlyChangedNamespaces checks that a pod event costs its
// namespace: the other namespaces keep their entries (the same *Member) and
// are not marked changed, and a pod's entry survives its namespace's
// other pods changing.
func TestIndexWalksOnlyChangedNamespaces(t *testing.T) {
	rec := func(ns, name, ip string) *podset.Pod {
		return &podset.Pod{Namespace: ns, Name: name, NodeName: "n1", IPs: []string{ip}}
	}
	a1, a2, b1, c1 := rec("a", "1", "10.0.0.1"), rec("a", "2", "10.0.0.2"), rec("b", "1", "10.0.1.1"), rec("c", "1", "10.0.2.1")
	set := podset.NewSet([]*podset.Pod{a1, a2, b1, c1})
	var m Memo
	x := m.Index("n1", nil, set)
	entry := map[*podset.Pod]*Member{}
	for _, p := range x.All() {
		entry[p.Obj] = p
	}
	a3 := rec("a", "3", "10.0.0.3")
	x = m.Index("n1", nil, set.Replace(map[string][]*podset.Pod{"a": {a1, a3, a2}, "c": nil}))
	if !x.dirtyNS["a"] || !x.dirtyNS["c"] || x.dirtyNS["b"] || len(x.dirtyNS) != 2 {
		t.Fatalf("changed namespaces %v, want a and c", x.dirtyNS)
	}
	got := map[*podset.Pod]*Member{}
	for _, p := range x.All() {
		got[p.Obj] = p
	}
	for _, o := range []*podset.Pod{a1, a2, b1} {
		if got[o] != entry[o] {
			t.Errorf("%s/%s: a new entry for the same record", o.Namespace, o.Name)
		}
	}
	if got[a3] == nil || got[c1] != nil || len(got) != 4 {
		t.Errorf("entries %v: want a/1, a/2, a/3, b/1", got)
	}
	if !slices.Equal(x.nsNames, []string{"a", "b"}) {
		t.Errorf("namespaces with pods %v, want [a b]", x.nsNames)
	}
	if v4 := got[a3].V4Text(); !slices.Equal(v4, []string{"10.0.0.3"}) || len(got[a3].V6Text()) != 0 {
		t.Errorf("a/3 addresses %v %v", v4, got[a3].V6Text())
	}
}

func TestPodAddressesAsNftReadsThem(t *testing.T) {
	for _, c := range []struct {
		ips    []string
		v4, v6 []string
		valid  bool
	}{
		{[]string{"10.0.0.1"}, []string{"10.0.0.1"}, nil, true},
		{[]string{"fd00::1"}, nil, []string{"fd00::1"}, true},
		{[]string{"FD00:0::1"}, nil, []string{"fd00::1"}, true},        // canonical text
		{[]string{"::ffff:10.0.0.1"}, []string{"10.0.0.1"}, nil, true}, // mapped: IPv4
		{[]string{"fd00::1", "10.0.0.1"}, []string{"10.0.0.1"}, []string{"fd00::1"}, true},
		{[]string{"10.0.0.1", "::ffff:10.0.0.1"}, []string{"10.0.0.1"}, nil, true}, // one address twice
		{[]string{"10.0.0.1", "bogus"}, nil, nil, false},
		{[]string{"fe80::1%eth0"}, nil, nil, false},
		{nil, nil, nil, false},
	} {
		var m Memo
		o := &podset.Pod{Namespace: "a", Name: "p", NodeName: "n1", IPs: c.ips}
		x := m.Index("n1", nil, podset.NewSet([]*podset.Pod{o}))
		all := x.All()
		if (len(all) == 1) != c.valid {
			t.Errorf("%v: valid %v, want %v", c.ips, len(all) == 1, c.valid)
			continue
		}
		if !c.valid {
			continue
		}
		if p := all[0]; !slices.Equal(p.V4Text(), c.v4) || !slices.Equal(p.V6Text(), c.v6) {
			t.Errorf("%v: %v %v, want %v %v", c.ips, p.V4Text(), p.V6Text(), c.v4, c.v6)
		}
	}
}
