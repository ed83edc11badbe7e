package agent

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nftguard/nftguard/peerslice"
)

// TestWatchPeerSource: auto asks again at every tick and stops (to restart)
// at the first answer that names another source; it asks nothing between
// ticks, and gives up when its context ends.
func TestWatchPeerSource(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	var asked atomic.Int32
	answers := []PeerSource{PeerSourcePods, PeerSourcePods, PeerSourceSlices}
	choose := func(context.Context) (PeerSource, string) {
		n := asked.Add(1)
		return answers[n-1], "test"
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan bool, 1)
	go func() { done <- watchPeerSource(context.Background(), fc, 30*time.Second, PeerSourcePods, choose, log) }()
	for i := 1; i <= 3; i++ {
		for !fc.HasWaiters() {
			time.Sleep(time.Millisecond) // the watcher reaches its ticker
		}
		fc.Step(30 * time.Second)
		for asked.Load() < int32(i) {
			time.Sleep(time.Millisecond)
		}
	}
	if !<-done {
		t.Fatal("watchPeerSource returned false after an answer of slices")
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("asked %d times, want 3", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- watchPeerSource(ctx, fc, 30*time.Second, PeerSourcePods, func(context.Context) (PeerSource, string) { return PeerSourcePods, "" }, log)
	}()
	cancel()
	if <-done {
		t.Error("watchPeerSource reported a change after its context ended")
	}
}

// TestAutoAgain: reading Pods, auto moves to slices once they are served
// and published; reading slices, only their CRD gone moves it back, never a
// stale Lease.
func TestAutoAgain(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	cfg := &Config{PeerSource: PeerSourceAuto, ControllerLease: DefaultControllerLease, clock: fc}
	served := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: peerslice.Group + "/" + peerslice.Version, APIResources: []metav1.APIResource{{Name: peerslice.Resource}},
	}}}}
	gone := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	renew := metav1.NewMicroTime(fc.Now())
	fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{peerslice.AnnotationPublished: "c"}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: ptrTo[int32](15)}}
	old := metav1.NewMicroTime(fc.Now().Add(-time.Hour))
	stale := fresh.DeepCopy()
	stale.Spec.RenewTime = &old
	lease := func(l *coordinationv1.Lease) leaseGetter {
		return func(context.Context) (*coordinationv1.Lease, error) { return l, nil }
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		current PeerSource
		disc    *fakediscovery.FakeDiscovery
		lease   *coordinationv1.Lease
		want    PeerSource
	}{
		{"pods, slices published", PeerSourcePods, served, fresh, PeerSourceSlices},
		{"pods, Lease stale", PeerSourcePods, served, stale, PeerSourcePods},
		{"pods, not served", PeerSourcePods, gone, fresh, PeerSourcePods},
		{"slices, Lease stale", PeerSourceSlices, served, stale, PeerSourceSlices},
		{"slices, no longer served", PeerSourceSlices, gone, fresh, PeerSourcePods},
	} {
		if got, why := autoAgain(cfg, tc.current, tc.disc, lease(tc.lease))(ctx); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, why, tc.want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
