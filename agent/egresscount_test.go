package agent

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/rulecounter"
)

type fakeCounters struct{ rcs []engine.RuleCounter }

func (f *fakeCounters) Counters(_ context.Context, match func(string) bool) ([]engine.RuleCounter, error) {
	var out []engine.RuleCounter
	for _, rc := range f.rcs {
		if match(rc.Chain) {
			out = append(out, rc)
		}
	}
	return out, nil
}

// The exported counters only grow: a rule replaced under a new handle
// starts again from zero in the kernel and adds from there; other chains
// and rules without a Service comment are not read.
func TestEgressCountersOnlyGrow(t *testing.T) {
	f := &fakeCounters{}
	c := newEgressCounters()
	counts := rulecounter.New()
	counts.Watch(c)
	col := counts.Collector(f, time.Second, nil)
	rc := func(chain string, handle, pk, by uint64, comment string) engine.RuleCounter {
		return engine.RuleCounter{Chain: chain, Handle: handle, Comment: comment, Counters: []engine.Count{{Packets: pk, Bytes: by}}}
	}
	steps := []struct {
		rcs       []engine.RuleCounter
		pk, bytes float64
	}{
		{[]engine.RuleCounter{rc("eg_cnt_x_web", 5, 10, 1000, "x/web"), rc("np_denied_egress", 7, 99, 99, "x/web")}, 10, 1000},
		{[]engine.RuleCounter{rc("eg_cnt_x_web", 5, 12, 1200, "x/web")}, 12, 1200},
		// replaced: a new handle from zero
		{[]engine.RuleCounter{rc("eg_cnt_x_web", 9, 3, 300, "x/web"), rc("eg_cnt_x_web", 8, 50, 50, ""),
			rc("eg_hold", 2, 7, 700, "Service address not usable here"), rc("eg_hold", 3, 4, 400, "pod address not known yet")}, 15, 1500},
	}
	for i, s := range steps {
		f.rcs = s.rcs
		ch := make(chan prometheus.Metric, 100)
		col.Collect(ch)
		if got := testutil.ToFloat64(c.packets.WithLabelValues("x", "web")); got != s.pk {
			t.Errorf("step %d: packets %v, want %v", i, got, s.pk)
		}
		if got := testutil.ToFloat64(c.bytes.WithLabelValues("x", "web")); got != s.bytes {
			t.Errorf("step %d: bytes %v, want %v", i, got, s.bytes)
		}
	}
	if h, g := testutil.ToFloat64(c.dropped.WithLabelValues("held")), testutil.ToFloat64(c.dropped.WithLabelValues("pod_start_guard")); h != 7 || g != 4 {
		t.Errorf("dropped held %v, guard %v; want 7 and 4", h, g)
	}
	// The hold is lifted: its rule's last count (10, 3 since the read)
	// is added by the sync that deletes it, and the Service's rule goes
	// with its last 4 packets.
	counts.Deleted([]engine.RuleCounter{rc("eg_hold", 2, 10, 1000, "Service address not usable here"), rc("eg_cnt_x_web", 9, 7, 700, "x/web")}, nil)
	if h := testutil.ToFloat64(c.dropped.WithLabelValues("held")); h != 10 {
		t.Errorf("dropped held after the hold was lifted: %v, want 10", h)
	}
	if got := testutil.ToFloat64(c.packets.WithLabelValues("x", "web")); got != 19 {
		t.Errorf("packets after the Service's rule went: %v, want 19", got)
	}
}
