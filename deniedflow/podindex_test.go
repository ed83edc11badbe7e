package deniedflow

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/podset"
)

// The address index follows adds, updates and deletes of the store it
// indexes, in canonical address form, and leaves out pods whose address
// is not theirs.
func TestPodAddrIndex(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podAddrIndex: podAddrs})
	// The pod cache holds records, as the transform makes them.
	pod := func(ns, name string, phase corev1.PodPhase, host bool, ips ...string) *podset.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		p.Status.Phase, p.Spec.HostNetwork = phase, host
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		return podset.FromAPI(p)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(idx.Add(pod("x", "a", corev1.PodRunning, false, "10.0.0.1", "fd00:0:0::0001")))
	must(idx.Add(pod("x", "host", corev1.PodRunning, true, "10.0.0.9")))
	must(idx.Add(pod("x", "done", corev1.PodSucceeded, false, "10.0.0.2")))
	must(idx.Add(pod("y", "bad", corev1.PodRunning, false, "not-an-ip")))
	check := func(step, addr, want string) {
		t.Helper()
		if got := podByAddr(idx, netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %s resolves to %q, want %q", step, addr, got, want)
		}
	}
	check("start", "10.0.0.1", "x/a")
	check("start", "::ffff:10.0.0.1", "x/a")
	check("start", "fd00::1", "x/a")
	check("start", "10.0.0.9", "")
	check("start", "10.0.0.2", "")
	// The address moves to a new pod while the old one is still listed:
	// the answer is the first by key, whatever the order of events.
	must(idx.Add(pod("w", "new", corev1.PodPending, false, "10.0.0.1")))
	check("two pods", "10.0.0.1", "w/new")
	must(idx.Update(pod("x", "a", corev1.PodFailed, false, "10.0.0.1")))
	check("old pod failed", "10.0.0.1", "w/new")
	check("old pod failed", "fd00::1", "")
	must(idx.Delete(pod("w", "new", corev1.PodPending, false, "10.0.0.1")))
	check("deleted", "10.0.0.1", "")
}
