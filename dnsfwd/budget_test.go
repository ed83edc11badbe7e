package dnsfwd

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/fqdn"
)

func elemsOf(set string, pod, from, n int, ttl time.Duration) []fqdn.Element {
	out := make([]fqdn.Element, n)
	for i := range out {
		out[i] = fqdn.Element{Set: set, Key: fmt.Sprintf("10.0.0.%d . 198.18.%d.%d", pod, (from+i)/250, (from+i)%250), TTL: ttl}
	}
	return out
}

func budgetPod(i int) [2]netip.Addr {
	return [2]netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})}
}

// TestElementBudget: distinct elements count once however often they are
// refreshed; expired ones count until pruned (at most once a pruneEvery);
// the pod's share and the node's limit bound the rest, and every pod keeps
// its first MinPodElements.
func TestElementBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type commit struct {
		at           time.Duration
		pod          int
		from, n      int
		ttl          time.Duration
		podLimit     int
		fit, overPod int
		overNode     int
		held, shared int // the node's counts after it
	}
	for _, tc := range []struct {
		name    string
		commits []commit
	}{{
		name: "a refresh counts once",
		commits: []commit{
			{pod: 1, n: 3, ttl: time.Hour, podLimit: 300, fit: 3, held: 3},
			{at: time.Second, pod: 1, n: 3, ttl: time.Hour, podLimit: 300, fit: 3, held: 3},
			{at: 2 * time.Second, pod: 1, from: 1, n: 3, ttl: time.Hour, podLimit: 300, fit: 3, held: 4},
		},
	}, {
		name: "the pod's share; expired elements make room once pruned",
		commits: []commit{
			{pod: 1, n: 300, ttl: 10 * time.Second, podLimit: 300, fit: 300, held: 300, shared: 44},
			{at: time.Second, pod: 1, from: 300, n: 5, ttl: time.Hour, podLimit: 300, overPod: 5, held: 300, shared: 44},
			// At 10 s all 300 expired: the prune (a second after the
			// last) frees them.
			{at: 10 * time.Second, pod: 1, from: 300, n: 5, ttl: time.Hour, podLimit: 300, fit: 5, held: 5},
		},
	}, {
		name: "pods at their limit fill the node, a new one keeps its own",
		commits: []commit{
			// Node limit 1000 beyond each pod's first 256: four pods of
			// 506 fill it (4 × 250 shared).
			{pod: 1, n: 506, ttl: time.Hour, podLimit: 16384, fit: 506, held: 506, shared: 250},
			{pod: 2, n: 506, ttl: time.Hour, podLimit: 16384, fit: 506, held: 1012, shared: 500},
			{pod: 3, n: 506, ttl: time.Hour, podLimit: 16384, fit: 506, held: 1518, shared: 750},
			{pod: 4, n: 600, ttl: time.Hour, podLimit: 16384, fit: 506, overNode: 94, held: 2024, shared: 1000},
			// A fifth pod gets its first 256 and no more.
			{at: time.Second, pod: 5, n: 300, ttl: time.Hour, podLimit: 16384, fit: 256, overNode: 44, held: 2280, shared: 1000},
			// Refreshes of what a pod holds still fit.
			{at: 2 * time.Second, pod: 1, n: 506, ttl: time.Hour, podLimit: 16384, fit: 506, held: 2280, shared: 1000},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newElementBudget()
			for i, c := range tc.commits {
				fit, overPod, overNode := b.admit(t0.Add(c.at), budgetPod(c.pod), elemsOf("s4", c.pod, c.from, c.n, c.ttl), c.podLimit, 1000)
				if len(fit) != c.fit || overPod != c.overPod || overNode != c.overNode || b.n != c.held || b.shared != c.shared {
					t.Fatalf("commit %d: fit %d over pod %d over node %d, node holds %d (%d shared); want %d %d %d %d (%d)",
						i, len(fit), overPod, overNode, b.n, b.shared, c.fit, c.overPod, c.overNode, c.held, c.shared)
				}
			}
		})
	}
}

func TestPodShare(t *testing.T) {
	for _, tc := range []struct{ subjects, want int }{
		{0, 16384}, {1, 16384}, {4, 16384}, {5, 13363}, {110, 851}, {256, 512}, {1000, 321},
	} {
		if got := podShare(tc.subjects, DefaultPodElements, DefaultNodeElements); got != tc.want {
			t.Errorf("%d subjects: %d, want %d", tc.subjects, got, tc.want)
		}
	}
}

// TestElementBudgetForgetsDroppedSets: a set the table no longer has is
// gone from the kernel with its elements, which stop counting.
func TestElementBudgetForgetsDroppedSets(t *testing.T) {
	b := newElementBudget()
	t0 := time.Unix(1000, 0)
	b.admit(t0, budgetPod(1), elemsOf("a4", 1, 0, 300, time.Hour), 16384, 1000)
	b.admit(t0, budgetPod(1), elemsOf("b4", 1, 0, 10, time.Hour), 16384, 1000)
	b.forgetSets(map[string]bool{"b4": true})
	if b.n != 10 || b.shared != 0 || len(b.sets) != 1 {
		t.Fatalf("after dropping a4: %d held, %d shared, sets %v", b.n, b.shared, b.sets)
	}
}

// TestPodElementsLimit: a pod's answers add at most Limits.PodElements
// elements while they live; the answers beyond are relayed, add nothing,
// and are counted; another pod's budget is its own.
func TestPodElementsLimit(t *testing.T) {
	h := start(t, Limits{PodElements: 3})
	h.up.set("x.a.example", dns.TypeA, "x.a.example. 60 IN A 192.0.2.1", "x.a.example. 60 IN A 192.0.2.2")
	h.up.set("y.a.example", dns.TypeA, "y.a.example. 60 IN A 192.0.2.3", "y.a.example. 60 IN A 192.0.2.4")
	for _, name := range []string{"x.a.example.", "y.a.example."} {
		if r, err := h.query(t, podA, "udp", name, dns.TypeA); err != nil || len(r.Answer) != 2 {
			t.Fatalf("%s: %v %v", name, r, err)
		}
	}
	if got := h.com.keys("web4"); len(got) != 3 {
		t.Errorf("podA added %v, want its 3", got)
	}
	if c := counter(t, h.fwd.m.AddrsIgnored.WithLabelValues(addrsPodLimit)); c != 1 {
		t.Errorf("pod_limit addresses %v, want 1", c)
	}
	if r, err := h.query(t, podB, "udp", "x.a.example.", dns.TypeA); err != nil || len(r.Answer) != 2 {
		t.Fatalf("podB: %v %v", r, err)
	}
	n := 0
	for _, k := range h.com.keys("web4") {
		if strings.HasPrefix(k, podB.String()+" . ") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("podB added %d elements, want 2 (its own budget)", n)
	}
}

// TestNodeElementsLimit: beyond each pod's first MinPodElements, the
// pods' answers hold at most Limits.NodeElements; the rest are relayed,
// add nothing, and are counted as node_limit. podA fills the node while it
// is the only subject; podB, a subject after that, still gets its own.
func TestNodeElementsLimit(t *testing.T) {
	h := start(t, Limits{NodeElements: 10})
	full := h.fwd.table.Load()
	h.fwd.SetTable(&fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{podA: full.Pods[podA], podA6: full.Pods[podA6]}, Servers: full.Servers})
	const n = 300
	records := make([]string, n)
	for i := range records {
		records[i] = fmt.Sprintf("big.a.example. 60 IN A 10.0.%d.%d", i/250, i%250+1)
	}
	h.up.set("big.a.example", dns.TypeA, records...)
	if r, err := h.query(t, podA, "tcp", "big.a.example.", dns.TypeA); err != nil || len(r.Answer) != n {
		t.Fatalf("%v, %v", r, err)
	}
	if got, want := len(h.com.keys("web4")), MinPodElements+10; got != want {
		t.Errorf("podA added %d elements, want %d", got, want)
	}
	if c := counter(t, h.fwd.m.AddrsIgnored.WithLabelValues(addrsPodLimit)); c != n-MinPodElements-10 {
		t.Errorf("pod_limit addresses %v, want %d (podA alone: its share is the node's)", c, n-MinPodElements-10)
	}
	// podB still gets its own first MinPodElements.
	h.fwd.SetTable(full)
	if r, err := h.query(t, podB, "tcp", "big.a.example.", dns.TypeA); err != nil || len(r.Answer) != n {
		t.Fatalf("%v, %v", r, err)
	}
	nb := 0
	for _, k := range h.com.keys("web4") {
		if strings.HasPrefix(k, podB.String()+" . ") {
			nb++
		}
	}
	if nb != MinPodElements {
		t.Errorf("podB added %d elements, want %d", nb, MinPodElements)
	}
	if c := counter(t, h.fwd.m.AddrsIgnored.WithLabelValues(addrsNodeLimit)); c != n-MinPodElements {
		t.Errorf("node_limit addresses %v, want %d", c, n-MinPodElements)
	}
}

// TestSeed: elements an earlier agent left in the kernel count: a pod
// holding its share adds nothing new, another pod still has its own.
func TestSeed(t *testing.T) {
	h := start(t, Limits{PodElements: 3})
	h.fwd.Seed([]fqdn.Element{
		{Set: "web4", Key: "127.0.0.2 . 192.0.2.1", TTL: time.Hour},
		{Set: "web6", Key: "::1 . 2001:db8::1", TTL: time.Hour}, // podA's other address
		{Set: "web4", Key: "127.0.0.2 . 192.0.2.2", TTL: time.Hour},
		{Set: "web4", Key: "garbage", TTL: time.Hour},
	})
	h.up.set("x.a.example", dns.TypeA, "x.a.example. 60 IN A 192.0.2.1", "x.a.example. 60 IN A 192.0.2.3", "x.a.example. 60 IN A 192.0.2.4")
	if r, err := h.query(t, podA, "udp", "x.a.example.", dns.TypeA); err != nil || len(r.Answer) != 3 {
		t.Fatalf("%v %v", r, err)
	}
	// podA holds its 3 (both addresses count): 192.0.2.1 is refreshed,
	// the two new ones do not fit.
	if got := h.com.keys("web4"); len(got) != 1 {
		t.Errorf("podA added %v, want only the refresh", got)
	}
	if r, err := h.query(t, podB, "udp", "x.a.example.", dns.TypeA); err != nil || len(r.Answer) != 3 {
		t.Fatalf("%v %v", r, err)
	}
	if got := h.com.keys("web4"); len(got) != 4 {
		t.Errorf("after podB: %v, want podB's 3 too", got)
	}
}

// TestBudgetFollowsTheTablesSets: elements of a set that no local pod is a
// subject of any more still count (the set keeps them until they expire);
// those of a set the table dropped do not.
func TestBudgetFollowsTheTablesSets(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("x.a.example", dns.TypeA, "x.a.example. 60 IN A 192.0.2.1")
	if r, err := h.query(t, podA, "udp", "x.a.example.", dns.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("%v %v", r, err)
	}
	full := h.fwd.table.Load()
	h.fwd.SetTable(&fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{}, Servers: full.Servers, Sets: []string{"web4", "web6"}})
	if n := testutil.ToFloat64(h.fwd.m.ElementsCounted); n != 1 {
		t.Errorf("no subject left, the set kept: %v counted, want 1", n)
	}
	h.fwd.SetTable(&fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{}, Servers: full.Servers})
	if n := testutil.ToFloat64(h.fwd.m.ElementsCounted); n != 0 {
		t.Errorf("the set dropped: %v counted, want 0", n)
	}
}

// TestElementBudgetMemory measures what the budget costs the agent at the
// node's bound with the kubelet's default of 110 subject pods (each its
// first MinPodElements and a share of DefaultNodeElements): its maps and
// the element keys they keep.
func TestElementBudgetMemory(t *testing.T) {
	const pods = 110
	share := podShare(pods, DefaultPodElements, DefaultNodeElements)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := newElementBudget()
	now := time.Unix(1000, 0)
	for p := range pods {
		elems := make([]fqdn.Element, 0, share)
		for i := range share {
			a := netip.AddrFrom4([4]byte{198, byte(18 + i>>16), byte(i >> 8), byte(i)})
			elems = append(elems, fqdn.Element{Set: "cnp_dns_0123456789abcdef_4", Key: fmt.Sprintf("10.0.%d.%d . %s", p>>8, p&255, a), TTL: time.Hour})
		}
		b.admit(now, budgetPod(p), elems, share, DefaultNodeElements)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if b.n != pods*MinPodElements+DefaultNodeElements-DefaultNodeElements%pods {
		t.Fatalf("%d elements counted", b.n)
	}
	bytes := after.HeapAlloc - before.HeapAlloc
	t.Logf("%d elements of %d pods: the budget holds %.1f MiB (%d B an element)", b.n, pods, float64(bytes)/(1<<20), int(bytes)/b.n)
	runtime.KeepAlive(b)
}
