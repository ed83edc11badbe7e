package deniedflow

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/rulecounter"
	"github.com/nftguard/nftguard/tablelayout"
)

// JournalSize is how many recent denied-packet records the agent keeps in
// memory.
const JournalSize = 1024

// Metrics are the counters of the denied-packet log and, read from the
// kernel at each scrape, of denied packets (counters.go).
type Metrics struct {
	records    prometheus.Counter
	suppressed *prometheus.CounterVec
}

// Reasons of nftguard_denied_log_suppressed_total.
const (
	suppressedRing   = "ring_overflow"  // pushed out of the journal unread
	suppressedSocket = "socket_overrun" // lost by the kernel on a full socket (at least one each)
)

// NewMetrics registers the metrics on reg. The kernel's drop counters are
// exported through counts (nil: not exported), which the caller registers
// as a collector after this.
func NewMetrics(reg prometheus.Registerer, counts *rulecounter.Totals) (*Metrics, error) {
	m := &Metrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_denied_log_records_total",
			Help: "Denied packets logged by the kernel and read by the agent (rate-limited in the kernel per node and direction).",
		}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_denied_log_suppressed_total",
			Help: "Denied packets not logged or records not kept, by reason (rate_limit: over the kernel's log limit; ring_overflow: pushed out of the in-memory journal; socket_overrun: lost on a full socket).",
		}, []string{"reason"}),
	}
	cs := []prometheus.Collector{m.records, m.suppressed}
	if counts != nil {
		// The kernel counters' view exports the suppressed counters
		// itself, after reading the kernel, so a scrape sees rate_limit
		// up to date.
		cs = []prometheus.Collector{m.records}
		counts.Watch(newDeniedCounters(m.suppressed))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register denied-log metrics: %w", err)
		}
	}
	for _, r := range []string{suppressedRateLimit, suppressedRing, suppressedSocket} {
		m.suppressed.WithLabelValues(r)
	}
	return m, nil
}

// Run reads the group of l in the namespace netns until ctx ends: each
// record is resolved with res, logged on log at Info as "denied", added to
// journal and counted in m. It fails at once if the group cannot be bound
// (another reader has it: see flowlog.ErrGroupBusy).
func Run(ctx context.Context, l tablelayout.LogDenied, netns string, res flowlog.Resolver,
	log *slog.Logger, m *Metrics, journal *flowlog.Journal) error {
	r, err := flowlog.Open(flowlog.Config{Group: l.Group, NetNS: netns})
	if err != nil {
		return fmt.Errorf("log denied packets: %w", err)
	}
	defer r.Close()
	var lost uint64
	return r.Run(ctx, func(rec flowlog.Record) {
		flowlog.Resolve(&rec, res)
		m.records.Inc()
		_, overBefore := journal.Counts()
		journal.Add(rec)
		if _, over := journal.Counts(); over > overBefore {
			m.suppressed.WithLabelValues(suppressedRing).Add(float64(over - overBefore))
		}
		if n := r.Lost(); n > lost {
			m.suppressed.WithLabelValues(suppressedSocket).Add(float64(n - lost))
			lost = n
		}
		log.Info("denied", recordAttrs(&rec)...)
	})
}

// recordAttrs are a record's slog attributes.
func recordAttrs(r *flowlog.Record) []any {
	attrs := []any{
		slog.String("direction", string(r.Direction)),
		slog.String("protocol", r.ProtocolName()),
		slog.String("src", r.Src.String()), slog.String("dst", r.Dst.String()),
	}
	if r.HasICMP {
		attrs = append(attrs, slog.Int("icmpType", int(r.ICMPType)), slog.Int("icmpCode", int(r.ICMPCode)))
	} else if r.SrcPort != 0 || r.DstPort != 0 {
		attrs = append(attrs, slog.Int("srcPort", int(r.SrcPort)), slog.Int("dstPort", int(r.DstPort)))
	}
	if r.SrcPod != "" {
		attrs = append(attrs, slog.String("srcPod", r.SrcPod))
	}
	if r.DstPod != "" {
		attrs = append(attrs, slog.String("dstPod", r.DstPod))
	}
	if len(r.Policies) > 0 {
		attrs = append(attrs, slog.String("policies", strings.Join(r.Policies, ",")))
	}
	if c := r.ClusterRule; c != nil {
		attrs = append(attrs, slog.Group("clusterNetworkPolicy", slog.String("name", c.Policy), slog.String("tier", c.Tier),
			slog.Int("priority", int(c.Priority)), slog.String("rule", c.Direction+"["+strconv.Itoa(c.Index)+"]"), slog.String("ruleName", c.Name)))
	}
	return append(attrs, slog.String("decision", r.Decision))
}
