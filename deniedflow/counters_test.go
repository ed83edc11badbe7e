package deniedflow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/rulecounter"
	"github.com/nftguard/nftguard/tablelayout"
)

// fakeCounters answers Counters with the next of its reads.
type fakeCounters struct {
	reads [][]engine.RuleCounter
	err   error
}

func (f *fakeCounters) Counters(_ context.Context, match func(string) bool) ([]engine.RuleCounter, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []engine.RuleCounter
	for _, rc := range f.reads[0] {
		if match(rc.Chain) {
			out = append(out, rc)
		}
	}
	f.reads = f.reads[1:]
	return out, nil
}

func drop(chain string, handle, packets uint64) engine.RuleCounter {
	c := policy.CommentIsolatedIngress
	if _, egress, _ := policy.DeniedChain(chain); egress {
		c = policy.CommentIsolatedEgress
	}
	return engine.RuleCounter{Chain: chain, Handle: handle, Comment: c, Counters: []engine.Count{{Packets: packets, Bytes: 100 * packets}}}
}

func sharedCounters(chain string, handle, logged, dropped uint64) []engine.RuleCounter {
	return []engine.RuleCounter{
		{Chain: chain, Handle: handle, Comment: tablelayout.CommentDeniedLogged, Counters: []engine.Count{{Packets: logged}}},
		{Chain: chain, Handle: handle + 1, Comment: tablelayout.CommentDeniedDropped, Counters: []engine.Count{{Packets: dropped}}},
	}
}

// The exported totals only grow, by what each kernel rule counted since
// the last read: pods of a namespace add up, a replaced rule (new handle)
// counts from zero, rules that are not the final drop are ignored, a
// namespace without isolated pods loses its series, and the rate-limited
// packets are the shared chains' dropped minus logged, never counted
// twice when one read sees them out of step.
func TestDeniedCountersTotals(t *testing.T) {
	cnp := func(chain string, handle, packets uint64) engine.RuleCounter {
		return engine.RuleCounter{Chain: chain, Handle: handle, Comment: "cnp deny-z ingress[0] Deny z", Counters: []engine.Count{{Packets: packets, Bytes: 100 * packets}}}
	}
	other := engine.RuleCounter{Chain: "np_ing_x_a", Handle: 1, Comment: "pod to itself", Counters: []engine.Count{{Packets: 1000}}}
	f := &fakeCounters{reads: [][]engine.RuleCounter{
		append([]engine.RuleCounter{drop("np_ing_x_a", 5, 3), drop("np_ing_x_b", 7, 4), drop("np_egr_y_a", 9, 1), other,
			// ClusterNetworkPolicy Deny rules: two of x's Admin
			// ingress chain add up, y's Baseline egress its own.
			cnp("cnp_ai_x_a", 30, 2), cnp("cnp_ai_x_a", 31, 1), cnp("cnp_be_y_a", 32, 4),
			{Chain: "np_forward", Handle: 2, Counters: []engine.Count{{Packets: 50}}}}, sharedCounters(tablelayout.ChainDeniedIngress, 20, 2, 7)...),
		// x/b's chain end was replaced (handle 8, from zero); y has no
		// isolated pod any more; one read sees a dropped packet whose log
		// count is not in yet (8 dropped, 2 logged: 6 over, not 5).
		append([]engine.RuleCounter{drop("np_ing_x_a", 5, 10), drop("np_ing_x_b", 8, 2), other, cnp("cnp_ai_x_a", 30, 5), cnp("cnp_ai_x_a", 31, 1)},
			sharedCounters(tablelayout.ChainDeniedIngress, 20, 2, 8)...),
		// and the next read sees it logged: still 6, not 7 or 5.
		append([]engine.RuleCounter{drop("np_ing_x_a", 5, 10), drop("np_ing_x_b", 8, 2), cnp("cnp_ai_x_a", 30, 5), cnp("cnp_ai_x_a", 31, 1)},
			sharedCounters(tablelayout.ChainDeniedIngress, 20, 3, 9)...),
	}}
	var errs []error
	d := newDeniedCounters(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "s"}, []string{"reason"}))
	d.suppressed.WithLabelValues(suppressedRateLimit)
	counts := rulecounter.New()
	counts.Watch(d)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(counts.Collector(f, time.Second, func(err error) { errs = append(errs, err) }))
	expect := func(step string, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nftguard_denied_packets_total", "s"); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	expect("first read", deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="egress",kind="ClusterNetworkPolicy",namespace="y"} 4
nftguard_denied_packets_total{direction="egress",kind="NetworkPolicy",namespace="y"} 1
nftguard_denied_packets_total{direction="ingress",kind="ClusterNetworkPolicy",namespace="x"} 3
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 7
# HELP s 
# TYPE s counter
s{reason="rate_limit"} 5
`)
	// The third read, with the log count of the second's dropped packet
	// in, must show the same totals: still 6.
	second := deniedHelp + `# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="ingress",kind="ClusterNetworkPolicy",namespace="x"} 6
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 16
# HELP s 
# TYPE s counter
s{reason="rate_limit"} 6
`
	expect("second read", second)
	expect("third read", second)
	if got := testutil.ToFloat64(d.bytes.WithLabelValues("x", "ingress", kindNetworkPolicy)); got != 1600 {
		t.Errorf("bytes of x ingress: %v, want 1600", got)
	}
	// A failed read reports the error and keeps the totals.
	f.err = errors.New("netlink gone")
	expect("failed read", deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="ingress",kind="ClusterNetworkPolicy",namespace="x"} 6
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 16
# HELP s 
# TYPE s counter
s{reason="rate_limit"} 6
`)
	if len(errs) != 1 {
		t.Errorf("errors reported: %v", errs)
	}
}

const deniedHelp = "# HELP nftguard_denied_packets_total Packets dropped by policy, from the kernel's counters on each isolated pod chain's final drop (kind NetworkPolicy) and on each ClusterNetworkPolicy Deny rule (kind ClusterNetworkPolicy), by the pod's namespace, direction and policy kind (with --log-denied).\n"

// A rule deleted by a sync adds its last count, also when it was its
// namespace's last isolated pod: the series is exported once more with
// that count, and goes at the scrape after. A shared chain rebuilt adds
// its last rate-limited packets.
func TestDeniedCountersDeleted(t *testing.T) {
	f := &fakeCounters{reads: [][]engine.RuleCounter{
		append([]engine.RuleCounter{drop("np_ing_x_a", 5, 3), drop("np_egr_y_a", 9, 1)}, sharedCounters(tablelayout.ChainDeniedIngress, 20, 2, 7)...),
		{drop("np_ing_x_a", 5, 4)},
		{drop("np_ing_x_a", 5, 4)},
	}}
	d := newDeniedCounters(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "s"}, []string{"reason"}))
	counts := rulecounter.New()
	counts.Watch(d)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(counts.Collector(f, time.Second, func(err error) { t.Error(err) }))
	expect := func(step string, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nftguard_denied_packets_total", "s"); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	expect("first read", deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="egress",kind="NetworkPolicy",namespace="y"} 1
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 3
# HELP s 
# TYPE s counter
s{reason="rate_limit"} 5
`)
	// y/a goes with 6 more drops; the shared chain is rebuilt after 3
	// more packets over the limit.
	counts.Deleted(append([]engine.RuleCounter{drop("np_egr_y_a", 9, 7)}, sharedCounters(tablelayout.ChainDeniedIngress, 20, 4, 12)...), nil)
	expect("after the deletion", deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="egress",kind="NetworkPolicy",namespace="y"} 7
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 4
# HELP s 
# TYPE s counter
s{reason="rate_limit"} 8
`)
	expect("a scrape later", deniedHelp+`# TYPE nftguard_denied_packets_total counter
nftguard_denied_packets_total{direction="ingress",kind="NetworkPolicy",namespace="x"} 4
# HELP s 
# TYPE s counter
s{reason="rate_limit"} 8
`)
}
