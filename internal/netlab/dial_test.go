package netlab

import (
	"net/netip"
	"testing"
	"time"
)

// TestDialTCP: one attempt reaches a pod's server (IPv4 and IPv6), is
// refused where no server listens, and an unknown pod is a lab error, not
// a refusal.
func TestDialTCP(t *testing.T) {
	t.Parallel()
	l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1", Pods: []string{"x/a", "x/b"}}}, Ports: []Port{{TCP, 80}}})
	b := l.Endpoint("x/b")
	for _, c := range []struct {
		to   netip.AddrPort
		want bool
	}{
		{netip.AddrPortFrom(b.IPv4, 80), true},
		{netip.AddrPortFrom(b.IPv6, 80), true},
		{netip.AddrPortFrom(b.IPv4, 82), false},
	} {
		got, err := l.DialTCP("x/a", c.to, 400*time.Millisecond)
		if err != nil || got != c.want {
			t.Errorf("x/a -> %s: connected=%v err=%v, want %v", c.to, got, err, c.want)
		}
	}
	if _, err := l.DialTCP("nope", netip.AddrPortFrom(b.IPv4, 80), 400*time.Millisecond); err == nil {
		t.Error("a dial from an unknown pod succeeded")
	}
}
