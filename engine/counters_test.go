package engine

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/testns"
)

// TestCounters: the counters of a rule that drops real packets read back
// with the packets and bytes the kernel counted; a sync that reads the
// kernel's table (after the counters moved) finds nothing to change and
// keeps the rule (same handle, same values); the chain filter is honoured.
func TestCounters(t *testing.T) {
	ns := testns.New(t, "engcount")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	d := &Desired{Chains: []Chain{{
		Name: "out", Type: "filter", Hook: "output", Priority: 0,
		Rules: []Rule{
			{Rule: "udp dport 9 counter drop", Comment: "denied"},
			{Rule: "tcp dport 9 drop"},
			{Rule: "udp dport 7 counter counter accept"},
		},
	}, {Name: "idle", Rules: []Rule{{Rule: "counter drop"}}}}}
	if _, err := e.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	const sent, payload = 7, 10
	err := ns.Run(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		conn, err := net.Dial("udp4", "127.0.0.1:9")
		if err != nil {
			return err
		}
		defer conn.Close()
		for range sent {
			// A packet dropped on output fails the send with EPERM.
			if _, err := conn.Write(make([]byte, payload)); err != nil && !errors.Is(err, unix.EPERM) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	byChain := func(rcs []RuleCounter) map[string][]RuleCounter {
		m := map[string][]RuleCounter{}
		for _, rc := range rcs {
			m[rc.Chain] = append(m[rc.Chain], rc)
		}
		return m
	}
	got, err := e.Counters(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := byChain(got)
	if len(got) != 3 || len(m["out"]) != 2 || len(m["idle"]) != 1 {
		t.Fatalf("counters: want 2 rules of out and 1 of idle, got %+v", got)
	}
	drop := m["out"][0]
	wantBytes := uint64(sent * (20 + 8 + payload)) // IPv4 + UDP headers + payload
	if drop.Comment != "denied" || len(drop.Counters) != 1 || drop.Counters[0] != (Count{Packets: sent, Bytes: wantBytes}) {
		t.Fatalf("drop rule: want comment denied and %d packets / %d bytes, got %+v", sent, wantBytes, drop)
	}
	if two := m["out"][1]; len(two.Counters) != 2 || two.Counters[0] != (Count{}) || two.Comment != "" {
		t.Fatalf("rule with two counters: got %+v", two)
	}
	if idle := m["idle"][0]; idle.Counters[0] != (Count{}) {
		t.Fatalf("idle chain counted: %+v", idle)
	}

	// A sync that reads the table back compares the rules without their
	// counter values: nothing to do, nothing replaced.
	e.stale.Store(true)
	st, err := e.Sync(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Read || st.Operations != 0 {
		t.Fatalf("sync after counting: want a read and 0 operations, got %+v", st)
	}
	again, err := e.Counters(ctx, func(c string) bool { return c == "out" })
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].Handle != drop.Handle || again[0].Counters[0] != drop.Counters[0] {
		t.Fatalf("after the sync: want the same rule (handle %d) with the same counts, got %+v", drop.Handle, again)
	}

	if err := e.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if none, err := e.Counters(ctx, nil); err != nil || none != nil {
		t.Fatalf("no table: want nil, nil; got %+v, %v", none, err)
	}
}
