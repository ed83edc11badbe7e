package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/agent"
	"github.com/nftguard/nftguard/internal/kubetest"
)

// kernelSets reads the set and map elements of a node's table over netlink
// (read-only; the test's oracle for "enforced in the kernel").
type kernelSets struct {
	conn  *nftables.Conn
	ns    *os.File
	table *nftables.Table
}

func newKernelSets(t *testing.T, nsPath string) *kernelSets {
	t.Helper()
	f, err := os.Open(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())), nftables.AsLasting())
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	k := &kernelSets{conn: c, ns: f, table: &nftables.Table{Family: nftables.TableFamilyINet, Name: "nftguard"}}
	t.Cleanup(func() { c.CloseLasting(); f.Close() })
	return k
}

// where returns the names of the sets and maps that hold addr as a key.
func (k *kernelSets) where(addr netip.Addr) (map[string]bool, error) {
	sets, err := k.conn.GetSets(k.table)
	if err != nil {
		return nil, fmt.Errorf("list sets: %w", err)
	}
	key := addr.AsSlice()
	out := map[string]bool{}
	// Every set is read: google/nftables reports a verdict map's data
	// type as its key type, so the key length cannot filter them.
	for _, s := range sets {
		els, err := k.conn.GetSetElements(s)
		if err != nil && (errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), "no such file or directory")) {
			continue // replaced by a sync since the listing: read next time
		}
		if err != nil {
			return nil, fmt.Errorf("list elements of %s: %w", s.Name, err)
		}
		for _, e := range els {
			if !e.IntervalEnd && string(e.Key) == string(key) {
				out[s.Name] = true
				break
			}
		}
	}
	return out, nil
}

// countIn counts the keys of a set or map inside prefix.
func (k *kernelSets) countIn(set string, prefix netip.Prefix) (int, error) {
	s, err := k.conn.GetSetByName(k.table, set)
	if err != nil {
		return 0, fmt.Errorf("get set %s: %w", set, err)
	}
	els, err := k.conn.GetSetElements(s)
	if err != nil {
		return 0, fmt.Errorf("list elements of %s: %w", set, err)
	}
	n := 0
	for _, e := range els {
		if a, ok := netip.AddrFromSlice(e.Key); ok && !e.IntervalEnd && prefix.Contains(a) {
			n++
		}
	}
	return n, nil
}

// waitCount polls until the set holds want keys inside prefix.
func (k *kernelSets) waitCount(t *testing.T, set string, prefix netip.Prefix, want int, logs func() string) {
	t.Helper()
	start := time.Now()
	for {
		got, err := k.countIn(set, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%s holds %d addresses of %v after a minute, want %d\n%s", set, got, prefix, want, logs())
		}
		time.Sleep(time.Millisecond)
	}
}

// isolated reports whether addr is a local pod isolated for ingress.
func (k *kernelSets) isolated(addr netip.Addr) (bool, error) {
	w, err := k.where(addr)
	return w["np_ingress4"], err
}

// peer reports whether addr is in a policy's peer set.
func (k *kernelSets) peer(addr netip.Addr) (bool, error) {
	w, err := k.where(addr)
	for name := range w {
		if !strings.HasPrefix(name, "np_ingress") && !strings.HasPrefix(name, "np_egress") {
			return true, err
		}
	}
	return false, err
}

// latencies collects API write -> kernel times per change kind. Each write
// is made pause after the previous change was seen in the kernel.
type latencies struct {
	by    map[string][]time.Duration
	pause time.Duration
}

func (l latencies) report(t *testing.T) {
	kinds := make([]string, 0, len(l.by))
	for k := range l.by {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		d := append([]time.Duration(nil), l.by[k]...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("API write -> kernel, %-24s n=%d  p50 %6.1fms  p95 %6.1fms  max %6.1fms", k, len(d),
			ms(d[len(d)/2]), ms(d[len(d)*95/100]), ms(d[len(d)-1]))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// measure runs write and then polls until the kernel reads want.
func (l latencies) measure(t *testing.T, kind string, write func() error, kernel func() (bool, error), want bool) {
	t.Helper()
	time.Sleep(l.pause)
	start := time.Now()
	if err := write(); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	for {
		got, err := kernel()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if got == want {
			l.by[kind] = append(l.by[kind], time.Since(start))
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: the kernel still reads %v after 10s", kind, got)
		}
		time.Sleep(500 * time.Microsecond)
	}
}

func latPod(ns, name, node, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "agnhost",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}
}

// createPodWithIP writes a pod and then its status, as a kubelet would.
func createPodWithIP(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, ip string, more ...string) error {
	created, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return setPodIP(ctx, c, created, ip, more...)
}

// setPodIP sets the pod's status.podIPs: ip, then more (the other family).
func setPodIP(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, ip string, more ...string) error {
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
	for _, m := range more {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: m})
	}
	_, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// TestAgentLatency measures, on n1's kernel table, how long a change takes
// from the API write to the kernel, with the agents' default sync
// intervals: 100 changes of each kind, one after another, each measured
// from just before its write until the table reads the new state. Then a
// burst of 1,000 pod deletions, counted in syncs. With -agent.scale, the
// 10k-pod / 1k-policy load is written first.
func TestAgentLatency(t *testing.T) {
	a := newAgentLabWith(t, agentLabOptions{args: []string{}})
	ctx := context.Background()
	cfg := a.srv.Config(kubetest.Admin)
	cfg.QPS, cfg.Burst = 5000, 5000
	admin := kubernetes.NewForConfigOrDie(cfg)
	if *agentScale {
		a.loadScale(t, scalePods, scalePolicies)
	}
	n1 := a.agents["n1"]
	k := newKernelSets(t, a.lab.Node("n1").Path)
	const n = 100

	for _, ns := range []string{"lat", "latpeer"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One policy isolates the app=lat pods and names two peers: pods of
	// lat with role=client, and pods of namespaces with team=blue.
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "lat", Name: "isolate"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "lat"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}},
			}}},
		},
	})
	fixed := []struct{ ns, name, node, ip string }{
		{"latpeer", "q", "n2", "10.250.1.1"},
		{"lat", "solo", "n1", "10.250.2.1"},
		{"lat", "r1", "n2", "10.250.3.1"},
		{"lat", "r2", "n2", "10.250.3.2"},
	}
	for _, f := range fixed {
		labels := map[string]string{"pod": f.name, "solo": fmt.Sprint(f.name == "solo"), "role": f.name}
		if err := createPodWithIP(ctx, admin, latPod(f.ns, f.name, f.node, f.ip, labels), f.ip); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // let the set-up syncs pass
	syncsBefore := metricValue(n1.metrics(t), `nftguard_syncs_total{result="success"}`)

	// Changes made 50ms after the previous one was enforced: each after a
	// quiet moment, as changes by different users and controllers mostly
	// are. The back-to-back series below shows the other case.
	lat := latencies{by: map[string][]time.Duration{}, pause: 50 * time.Millisecond}
	podIP := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 250, 0, byte(i + 1)}) }
	for i := 0; i < n; i++ {
		p := latPod("lat", fmt.Sprintf("p%03d", i), "n1", podIP(i).String(), map[string]string{"app": "lat"})
		created, err := admin.CoreV1().Pods("lat").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A pod is enforceable once its address is known: measured from
		// the status write that gives it one, which a kubelet sends well
		// after the pod was created.
		lat.measure(t, "pod created (gets its IP)", func() error { return setPodIP(ctx, admin, created, podIP(i).String()) },
			func() (bool, error) { return k.isolated(podIP(i)) }, true)
	}
	// Label changes are one Update each (the object from the previous
	// write carries the resource version), so one round trip is measured.
	p0, err := admin.CoreV1().Pods("lat").Get(ctx, "p000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		role := map[bool]string{true: "client", false: "none"}[i%2 == 0]
		lat.measure(t, "pod label changed", func() error {
			p0.Labels["role"] = role
			p0, err = admin.CoreV1().Pods("lat").Update(ctx, p0, metav1.UpdateOptions{})
			return err
		}, func() (bool, error) { return k.peer(podIP(0)) }, role == "client")
	}
	q := netip.MustParseAddr("10.250.1.1")
	peerNS, err := admin.CoreV1().Namespaces().Get(ctx, "latpeer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		blue := i%2 == 0
		lat.measure(t, "namespace label changed", func() error {
			if blue {
				peerNS.Labels["team"] = "blue"
			} else {
				delete(peerNS.Labels, "team")
			}
			peerNS, err = admin.CoreV1().Namespaces().Update(ctx, peerNS, metav1.UpdateOptions{})
			return err
		}, func() (bool, error) { return k.peer(q) }, blue)
	}
	solo := netip.MustParseAddr("10.250.2.1")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("solo-%03d", i)
		lat.measure(t, "policy created", func() error {
			_, err := admin.NetworkingV1().NetworkPolicies("lat").Create(ctx, &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"solo": "true"}},
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				},
			}, metav1.CreateOptions{})
			return err
		}, func() (bool, error) { return k.isolated(solo) }, true)
		lat.measure(t, "policy deleted", func() error {
			return admin.NetworkingV1().NetworkPolicies("lat").Delete(ctx, name, metav1.DeleteOptions{})
		}, func() (bool, error) { return k.isolated(solo) }, false)
	}
	upd := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "lat", Name: "upd"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"solo": "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "r1"}}}}}},
		},
	}
	a.createPolicy(ctx, upd)
	upd, err = admin.NetworkingV1().NetworkPolicies("lat").Get(ctx, "upd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := netip.MustParseAddr("10.250.3.1"), netip.MustParseAddr("10.250.3.2")
	for i := 0; i < n; i++ {
		to, addr := "r2", r2
		if i%2 == 1 {
			to, addr = "r1", r1
		}
		lat.measure(t, "policy updated", func() error {
			upd.Spec.Ingress[0].From[0].PodSelector.MatchLabels["role"] = to
			upd, err = admin.NetworkingV1().NetworkPolicies("lat").Update(ctx, upd, metav1.UpdateOptions{})
			return err
		}, func() (bool, error) { return k.peer(addr) }, true)
	}
	// Back to back: each update written as soon as the previous one is
	// in the kernel, ~50-100 per second, which the agent treats as a
	// stream (each waits for the triggers to pause for min).
	b2b := latencies{by: map[string][]time.Duration{}}
	for i := 0; i < n; i++ {
		to, addr := "r2", r2
		if i%2 == 1 {
			to, addr = "r1", r1
		}
		b2b.measure(t, "policy updated, back to back", func() error {
			upd.Spec.Ingress[0].From[0].PodSelector.MatchLabels["role"] = to
			upd, err = admin.NetworkingV1().NetworkPolicies("lat").Update(ctx, upd, metav1.UpdateOptions{})
			return err
		}, func() (bool, error) { return k.peer(addr) }, true)
	}
	lat.report(t)
	b2b.report(t)
	if os.Getenv("NFTGUARD_TEST_DEBUG") != "" {
		t.Log(n1.logTail())
	}
	m := n1.metrics(t)
	t.Logf("n1: %v syncs for %d changes", metricValue(m, `nftguard_syncs_total{result="success"}`)-syncsBefore, 8*n)
	for _, kind := range []string{"Pod", "Namespace", "NetworkPolicy"} {
		sum := metricValue(m, fmt.Sprintf(`nftguard_event_to_kernel_seconds_sum{kind=%q}`, kind))
		cnt := metricValue(m, fmt.Sprintf(`nftguard_event_to_kernel_seconds_count{kind=%q}`, kind))
		if cnt <= 0 {
			t.Errorf("nftguard_event_to_kernel_seconds{kind=%q} has no observations", kind)
			continue
		}
		t.Logf("n1: nftguard_event_to_kernel_seconds{kind=%q}: %v events, mean %.1fms", kind, cnt, 1000*sum/cnt)
	}

	t.Run("1000-pod burst", func(t *testing.T) { a.burst(t, admin, k) })
}

// burst creates 1,000 pods on n1 and deletes them with one DeleteCollection
// (a namespace of pods going away), and counts n1's syncs for each half.
func (a *agentLab) burst(t *testing.T, admin kubernetes.Interface, k *kernelSets) {
	ctx := context.Background()
	n1 := a.agents["n1"]
	const pods = 1000
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "burst", Labels: map[string]string{"ns": "burst"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "burst", Name: "isolate"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	})
	ip := func(i int) string { return fmt.Sprintf("10.251.%d.%d", i/250, i%250+1) }
	prefix := netip.MustParsePrefix("10.251.0.0/16")
	settle := func() (syncs float64) {
		// Settled: no sync for a second.
		prev := -1.0
		for {
			s := metricValue(n1.metrics(t), `nftguard_syncs_total{result="success"}`)
			if s == prev {
				return s
			}
			prev = s
			time.Sleep(time.Second)
		}
	}
	base := settle()
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, pods)
	for w := 0; w < 16; w++ {
		go func() {
			for i := range work {
				errs <- createPodWithIP(ctx, admin, latPod("burst", fmt.Sprintf("b%04d", i), "n1", ip(i), nil), ip(i))
			}
		}()
	}
	for i := 0; i < pods; i++ {
		work <- i
	}
	close(work)
	for i := 0; i < pods; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	written := time.Since(start)
	k.waitCount(t, "np_ingress4", prefix, pods, a.logs)
	enforced := time.Since(start)
	created := settle()
	t.Logf("burst: %d pods created (%d writes) in %v, all in n1's kernel after %v: %v syncs", pods, 2*pods,
		written.Round(time.Millisecond), enforced.Round(time.Millisecond), created-base)

	// The deletions as a watcher of the same API server sees them arrive:
	// the pattern the agent's informer sees, up to delivery jitter.
	arrived := watchArrivals(t, admin, "burst", pods)
	start = time.Now()
	if err := admin.CoreV1().Pods("burst").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	written = time.Since(start)
	k.waitCount(t, "np_ingress4", prefix, 0, a.logs)
	enforced = time.Since(start)
	deleted := settle()
	t.Logf("burst: %d pods deleted by one DeleteCollection in %v, gone from n1's kernel after %v: %v syncs", pods,
		written.Round(time.Millisecond), enforced.Round(time.Millisecond), deleted-created)
	// How many syncs the deletions may cost depends on how they arrived,
	// not on how long the API server took: a slow API server spreads them
	// out, and each pause in a sparse arrival is a quiet moment the agent
	// rightly syncs after.
	ts := arrived()
	b := syncBound(ts, agent.DefaultMinSyncInterval, agent.DefaultMaxSyncInterval)
	t.Logf("burst: deletions arrived over %v with %d pauses of %v or more (%d of %v or more): at most %d syncs",
		b.span.Round(time.Millisecond), b.pauses, b.pause, b.long, 3*b.pause, b.limit)
	if got := int(deleted - created); got > b.limit {
		t.Errorf("%d syncs for %d deletions that arrived over %v with %d pauses of %v or more (%d of %v or more), want at most %d",
			got, len(ts), b.span.Round(time.Millisecond), b.pauses, b.pause, b.long, 3*b.pause, b.limit)
	}
}

// watchArrivals starts watching the pods of namespace ns and returns a
// function that waits for n deletions (a minute at most) and returns when
// each arrived.
func watchArrivals(t *testing.T, c kubernetes.Interface, ns string, n int) func() []time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("listing the pods of %s to watch them: %v", ns, err)
	}
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatalf("watching the pods of %s: %v", ns, err)
	}
	done := make(chan []time.Time, 1)
	go func() {
		defer w.Stop()
		var at []time.Time
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				at = append(at, time.Now())
				if len(at) == n {
					break
				}
			}
		}
		done <- at
	}()
	return func() []time.Time {
		defer cancel()
		select {
		case at := <-done:
			if len(at) != n {
				t.Fatalf("the watch of %s saw %d deletions, want %d", ns, len(at), n)
			}
			return at
		case <-time.After(time.Minute):
			t.Fatalf("the watch of %s saw fewer than %d deletions in a minute", ns, n)
			return nil
		}
	}
}

// burstBound is the most syncs a burst may cost the agent, from the
// events' arrival as a watcher saw them.
type burstBound struct {
	span   time.Duration // first to last arrival
	pause  time.Duration // the shortest gap counted as a pause
	pauses int           // gaps between arrivals of at least pause
	long   int           // of those, gaps of at least 3*pause
	limit  int
}

// syncBound applies the debounce rules (docs/operations.md; agent's
// debouncer) to arrivals ts, with the agent's --min-sync-interval min and
// --max-sync-interval max:
//
//   - A sync that does not end a full window follows a pause of at least
//     the quiet time (≥ min): either its first event came that long after
//     the previous sync ended (leading edge, the pause before it), or the
//     events paused that long after its last one (the pause after it). One
//     pause does both only if it is at least 2*min long (the quiet end,
//     the sync, then the quiet time again). The quiet before the burst and
//     after it count as such pauses. Each of these syncs halves the window.
//   - A sync that ends a full window below max doubles it: there are at
//     most log2(max/min) of these (rounded up) plus one per halving.
//   - A sync that ends a full window of max waits max after the previous
//     one: at most span/max + 1 of these.
//   - Plus one for the periodic safety-net resync, which may fall inside.
//
// Gaps count as pauses from min/2 on, and as long pauses from 3*min/2 on,
// not from min and 2*min: two watchers of one API server receive the same
// events a few milliseconds apart, and a loaded machine delays either
// one's delivery.
func syncBound(ts []time.Time, min, max time.Duration) burstBound {
	b := burstBound{pause: min / 2}
	if len(ts) == 0 {
		return b
	}
	b.span = ts[len(ts)-1].Sub(ts[0])
	for i := 1; i < len(ts); i++ {
		switch gap := ts[i].Sub(ts[i-1]); {
		case gap >= 3*b.pause:
			b.long++
			b.pauses++
		case gap >= b.pause:
			b.pauses++
		}
	}
	quietEnded := 2 + b.pauses + b.long
	doublings := int(math.Ceil(math.Log2(float64(max)/float64(min)))) + quietEnded
	atMax := int(b.span/max) + 1
	b.limit = quietEnded + doublings + atMax + 1
	return b
}

// The bound allows what the debounce rules allow and no more than that: a
// dense burst stays within a few syncs a second, events that arrive apart
// may each get a sync of their own.
func TestSyncBound(t *testing.T) {
	from := func(start time.Duration, n int, gap time.Duration) []time.Time {
		ts := make([]time.Time, n)
		for i := range ts {
			ts[i] = time.Unix(0, 0).Add(start + time.Duration(i)*gap)
		}
		return ts
	}
	every := func(n int, gap time.Duration) []time.Time { return from(0, n, gap) }
	const min, max = 20 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name         string
		ts           []time.Time
		pauses, long int
		limit        int
	}{
		// 2 quiet ends (before and after) + 6+2 doublings + 3 windows of
		// max + 1 resync.
		{"1000 events 3ms apart", every(1000, 3*time.Millisecond), 0, 0, 2 + 8 + 3 + 1},
		// A long pause mid-burst: 2 more quiet ends and 2 more doublings;
		// the span is 3.5s.
		{"two dense halves", append(every(500, 3*time.Millisecond), from(2*time.Second, 500, 3*time.Millisecond)...), 1, 1, 4 + 10 + 4 + 1},
		// Pauses too short for a quiet end and a leading edge both.
		{"100 events 20ms apart", every(100, 20*time.Millisecond), 99, 0, 101 + 107 + 2 + 1},
		{"100 events 30ms apart", every(100, 30*time.Millisecond), 99, 99, 200 + 206 + 3 + 1},
		{"none", nil, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := syncBound(tc.ts, min, max)
			if b.pauses != tc.pauses || b.long != tc.long || b.limit != tc.limit {
				t.Errorf("pauses %d (long %d), limit %d; want %d (%d), %d", b.pauses, b.long, b.limit, tc.pauses, tc.long, tc.limit)
			}
			if len(tc.ts) > 0 && b.limit >= len(tc.ts) && b.pauses < len(tc.ts)/2 {
				t.Errorf("a burst of %d events with %d pauses may cost %d syncs: no coalescing asked for", len(tc.ts), b.pauses, b.limit)
			}
		})
	}
}
