package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

func TestMergePods(t *testing.T) {
	pod := func(ns, name, ip string) *podset.Pod {
		return &podset.Pod{Namespace: ns, Name: name, IPs: []string{ip}}
	}
	slice := func(ns, name string, pods ...*podset.Pod) *remoteSlice {
		return &remoteSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, pods: pods}
	}
	for _, tc := range []struct {
		name          string
		local, remote []any
		want          []string
	}{
		{"pods mode", []any{pod("y", "a", "1"), pod("x", "b", "2"), pod("x", "a", "3")}, nil, []string{"x/a 3", "x/b 2", "y/a 1"}},
		{"local and remote interleaved", []any{pod("x", "b", "1")},
			[]any{slice("y", "s1", pod("y", "a", "2")), slice("x", "s1", pod("x", "a", "3"), pod("x", "c", "4"))},
			[]string{"x/a 3", "x/b 1", "x/c 4", "y/a 2"}},
		{"a local pod wins over a record", []any{pod("x", "a", "local")},
			[]any{slice("x", "a-first", pod("x", "a", "stale"))}, []string{"x/a local"}},
		{"the lowest slice name wins", nil,
			[]any{slice("x", "s2", pod("x", "a", "from-s2")), slice("x", "s1", pod("x", "a", "from-s1")), slice("x", "s10", pod("x", "a", "from-s10"))},
			[]string{"x/a from-s1"}},
		{"same slice name in two namespaces", nil,
			[]any{slice("y", "s", pod("y", "a", "y")), slice("x", "s", pod("x", "a", "x"))}, []string{"x/a x", "y/a y"}},
		{"empty slices and tombstones", nil, []any{slice("x", "s"), "not a slice"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{}
			for _, p := range mergePods(tc.local, tc.remote) {
				got = append(got, p.Key()+" "+p.IPs[0])
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The transform keeps other nodes' records, one per name, with equal
// labels shared.
func TestSliceTransform(t *testing.T) {
	s := newStripper()
	ps := &peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "peers-1", ResourceVersion: "9"}, Peers: []peerslice.Peer{
		{Name: "b", Node: "n2", IPs: []string{"10.0.0.2"}, Labels: map[string]string{"app": "web"}, Ports: []peerslice.Port{{Name: "dns", Protocol: "UDP", Port: 53}}},
		{Name: "mine", Node: "n1", IPs: []string{"10.0.0.1"}},
		{Name: "a", Node: "n3", IPs: []string{"10.0.0.3"}, Labels: map[string]string{"app": "web"}},
		{Name: "b", Node: "n2", IPs: []string{"10.0.0.99"}},
	}}
	u, err := peerslice.ToUnstructured(ps)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.slice(u, "n1")
	if err != nil {
		t.Fatal(err)
	}
	rs := o.(*remoteSlice)
	var got []string
	for _, p := range rs.pods {
		got = append(got, p.Key()+" "+p.NodeName+" "+strings.Join(p.IPs, ","))
	}
	if want := "x/a n3 10.0.0.3|x/b n2 10.0.0.2"; strings.Join(got, "|") != want {
		t.Fatalf("records %q, want %s", got, want)
	}
	if rs.pods[1].Ports[0] != (podset.Port{Name: "dns", Protocol: "UDP", Number: 53}) || rs.pods[1].UID != "" {
		t.Errorf("record b: %+v", rs.pods[1])
	}
	rs.pods[0].Labels["probe"] = "x"
	if rs.pods[1].Labels["probe"] != "x" {
		t.Error("equal label sets are not shared")
	}
	delete(rs.pods[0].Labels, "probe")
	if rs.Name != "peers-1" || rs.Namespace != "x" || rs.ResourceVersion != "9" {
		t.Errorf("meta %+v", rs.ObjectMeta)
	}
	other := *rs
	if !sameContent(rs, &other) {
		t.Error("a slice is not the same as itself")
	}
	other.pods = rs.pods[:1]
	if sameContent(rs, &other) {
		t.Error("a slice that lost a record is the same")
	}
}

func lease(renew time.Time, seconds int32, annotations map[string]string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "nftguard-controller", Namespace: "kube-system", Annotations: annotations}}
	if !renew.IsZero() {
		l.Spec.RenewTime = &metav1.MicroTime{Time: renew}
	}
	if seconds > 0 {
		l.Spec.LeaseDurationSeconds = &seconds
	}
	return l
}

func TestLeaseVerdict(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "nftguard-controller")
	for _, tc := range []struct {
		name         string
		l            *coordinationv1.Lease
		err          error
		stale, known bool
		since        time.Time
	}{
		{"fresh", lease(now.Add(-10*time.Second), 15, nil), nil, false, true, time.Time{}},
		{"expired", lease(now.Add(-20*time.Second), 15, nil), nil, true, true, now.Add(-5 * time.Second)},
		{"expires now", lease(now.Add(-15*time.Second), 15, nil), nil, true, true, now},
		{"never renewed", lease(time.Time{}, 15, nil), nil, true, true, now},
		{"no duration", lease(now, 0, nil), nil, true, true, now},
		{"missing", nil, notFound, true, true, now},
		{"API server unreachable", nil, errors.New("connection refused"), false, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stale, since, known := leaseVerdict(tc.l, tc.err, now)
			if stale != tc.stale || known != tc.known || !since.Equal(tc.since) {
				t.Errorf("got stale=%v since=%v known=%v, want %v %v %v", stale, since, known, tc.stale, tc.since, tc.known)
			}
		})
	}
}

// The Lease check, on a fake clock: fresh, then not renewed (stale: the
// metric and readiness say so, readiness stays true), then renewed again.
func TestWatchControllerLease(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	var mu sync.Mutex
	current := lease(start, 15, nil)
	get := func(context.Context) (*coordinationv1.Lease, error) {
		mu.Lock()
		defer mu.Unlock()
		if current == nil {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "nftguard-controller")
		}
		return current.DeepCopy(), nil
	}
	m := newMetrics()
	h := &health{}
	h.succeeded(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchControllerLease(ctx, clk, 10*time.Second, DefaultControllerLease, get, m, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	tick := func() {
		t.Helper()
		waitFor("the ticker", clk.HasWaiters)
		clk.Step(10 * time.Second)
	}
	stale := func() float64 { return testutil.ToFloat64(m.peerRecordsStale) }

	// Fresh at start and 10s later (renewed meanwhile).
	mu.Lock()
	current = lease(start.Add(10*time.Second), 15, nil)
	mu.Unlock()
	tick()
	// 20s: renewed at 10s for 15s, so it expired at 25s; at 30s it is stale.
	tick()
	tick()
	waitFor("stale", func() bool { return stale() == 1 })
	ok, body := h.ready()
	if want := "ok; peer records stale since 2026-01-02T03:00:25Z: controller lease not renewed"; !ok || body != want {
		t.Errorf("/readyz %v %q, want true %q", ok, body, want)
	}
	// Renewed: fresh again.
	mu.Lock()
	current = lease(clk.Now(), 15, nil)
	mu.Unlock()
	tick()
	waitFor("fresh", func() bool { return stale() == 0 })
	if ok, body := h.ready(); !ok || body != "ok" {
		t.Errorf("/readyz %v %q after renewal", ok, body)
	}
	// Deleted: stale from when it was found missing.
	mu.Lock()
	current = nil
	mu.Unlock()
	tick()
	waitFor("stale after deletion", func() bool { return stale() == 1 })
	if ok, body := h.ready(); !ok || !strings.Contains(body, "peer records stale since") {
		t.Errorf("/readyz %v %q after the lease was deleted", ok, body)
	}
}

// /readyz with stale records: still ready, said after what else is said;
// a failed sync still makes the node unready.
func TestReadyWithStaleRecords(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stale := "peer records stale since 2026-01-02T03:04:05Z: controller lease not renewed"
	for _, tc := range []struct {
		name  string
		setup func(h *health)
		ok    bool
		body  string
	}{
		{"not synced yet", func(h *health) { h.peersStale(since) }, false, "table not synced yet"},
		{"stale", func(h *health) { h.succeeded(0); h.peersStale(since) }, true, "ok; " + stale},
		{"stale and quarantined", func(h *health) { h.succeeded(2); h.peersStale(since) }, true,
			"ok; 2 object(s) quarantined (the kernel refuses them); " + stale},
		{"stale, then a sync failed", func(h *health) { h.succeeded(0); h.peersStale(since); h.failed(errors.New("boom")) }, false,
			"last sync failed (the table of the last successful sync stays in force): boom"},
		{"fresh again", func(h *health) { h.succeeded(0); h.peersStale(since); h.peersStale(time.Time{}) }, true, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &health{}
			tc.setup(h)
			if ok, body := h.ready(); ok != tc.ok || body != tc.body {
				t.Errorf("ready() = %v %q, want %v %q", ok, body, tc.ok, tc.body)
			}
		})
	}
}

// TestChoosePeerSource: what auto chooses at start, and why (the e2e test
// TestAgentPeerSlices checks the same against a real API server).
func TestChoosePeerSource(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	served := []*metav1.APIResourceList{{GroupVersion: "nftguard.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "peerslices", Namespaced: true, Kind: "PeerSlice"}}}}
	published := map[string]string{annotationPublished: "controller-0"}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "nftguard-controller")
	for _, tc := range []struct {
		name     string
		asked    PeerSource
		served   []*metav1.APIResourceList
		lease    *coordinationv1.Lease
		leaseErr error
		want     PeerSource
		why      string
		problem  bool
	}{
		{"pods asked", PeerSourcePods, served, lease(now, 15, published), nil, PeerSourcePods, "set by --peer-source", false},
		{"slices asked", PeerSourceSlices, served, nil, notFound, PeerSourceSlices, "set by --peer-source", false},
		{"slices asked, not served", PeerSourceSlices, nil, nil, nil, PeerSourceSlices, "are not served: waiting for them", true},
		{"no CRD", PeerSourceAuto, nil, lease(now, 15, published), nil, PeerSourcePods, "are not served", false},
		{"group served without the resource", PeerSourceAuto, []*metav1.APIResourceList{{GroupVersion: "nftguard.io/v1alpha1"}},
			lease(now, 15, published), nil, PeerSourcePods, "are not served", false},
		{"no lease", PeerSourceAuto, served, nil, notFound, PeerSourcePods, "not found", false},
		{"lease expired", PeerSourceAuto, served, lease(now.Add(-16*time.Second), 15, published), nil, PeerSourcePods, "is not renewed (expired 2026-01-02T03:04:04Z)", false},
		{"not published yet", PeerSourceAuto, served, lease(now, 15, nil), nil, PeerSourcePods, "has no nftguard.io/peers-published annotation", false},
		{"fresh and published", PeerSourceAuto, served, lease(now.Add(-5*time.Second), 15, published), nil, PeerSourceSlices, "is fresh and published", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Config{REST: &rest.Config{}, NodeName: "n1", PeerSource: tc.asked, clock: clocktesting.NewFakeClock(now)}.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			disc := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: tc.served}}
			get := func(context.Context) (*coordinationv1.Lease, error) { return tc.lease, tc.leaseErr }
			src, why, problem := choosePeerSource(context.Background(), &cfg, disc, get)
			if src != tc.want || !strings.Contains(why, tc.why) || problem != tc.problem {
				t.Errorf("got %s %q problem=%v, want %s (%q) problem=%v", src, why, problem, tc.want, tc.why, tc.problem)
			}
		})
	}
}
