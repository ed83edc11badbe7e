package agent

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestClearConntrackDeferred: a change that asks for a sync while the
// conntrack cleaning is due makes the cleaning wait for the next sync (the
// change, a pod-start guard say, goes to the kernel first); the next
// cleaning is not interruptible, so a stream of changes cannot put it off
// for ever, and it clears for the bindings it skipped too.
func TestClearConntrackDeferred(t *testing.T) {
	ns := testns.New(t, "s9kct")
	m := newMetrics()
	asks := 0
	s := &syncer{cfg: &Config{NetNS: ns.Path}, m: m, log: slog.New(slog.DiscardHandler),
		// A sync is always asked for: every interruptible cleaning is
		// interrupted at once.
		interruptible: func(ctx context.Context) (context.Context, func()) {
			asks++
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, cancel
		}}
	pod := netip.MustParseAddr("10.100.0.2")
	b1 := map[netip.Addr]egress.Binding{pod: {To: netip.MustParseAddr("203.0.113.7"), Service: "x/web"}}
	b2 := map[netip.Addr]egress.Binding{}

	deferred, err := s.clearConntrack(context.Background(), compose.Input{}, b1)
	if err != nil || !deferred {
		t.Fatalf("first cleaning: deferred %v, err %v; want deferred", deferred, err)
	}
	if len(s.owed) != 1 || !maps.Equal(s.owed[0], b1) || s.cleared != nil {
		t.Fatalf("after the deferral: owed %v, cleared %v; want b1 owed, nothing cleared", s.owed, s.cleared)
	}

	// The next one runs although a sync is asked for again.
	deferred, err = s.clearConntrack(context.Background(), compose.Input{}, b2)
	if err != nil || deferred {
		t.Fatalf("second cleaning: deferred %v, err %v; want it run", deferred, err)
	}
	if asks != 1 {
		t.Errorf("the cleaning after a deferred one asked to be interruptible (%d asks)", asks)
	}
	if len(s.owed) != 0 || s.cleared == nil || len(s.cleared) != 0 {
		t.Errorf("after the cleaning: owed %v, cleared %v; want nothing owed, b2 cleared", s.owed, s.cleared)
	}
	if v := testutil.ToFloat64(m.errors.WithLabelValues(errorKindConntrack)); v != 0 {
		t.Errorf("conntrack errors counted: %v", v)
	}

	// Unchanged bindings with nothing owed: no cleaning at all, so not
	// even interruptible.
	if deferred, err = s.clearConntrack(context.Background(), compose.Input{}, b2); err != nil || deferred || asks != 1 {
		t.Errorf("unchanged bindings: deferred %v, err %v, asks %d; want nothing done", deferred, err, asks)
	}
}
