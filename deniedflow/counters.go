package deniedflow

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/policy"
)

// Denied packets and bytes from the kernel's counters. With
// --log-denied every isolated pod chain's final drop counts (see
// policy/logdenied.go), and the two shared np_denied_* chains count what
// they logged and what they dropped. The agent reads those counters when
// it is scraped, with engine.Counters, and turns them into
//
//	nftguard_denied_packets_total{namespace, direction, kind}
//	nftguard_denied_bytes_total{namespace, direction, kind}
//	nftguard_denied_log_suppressed_total{reason="rate_limit"}
//
// Why labels per namespace and not per pod: a node's pods come and go by
// the thousand, and a series per pod would grow the scrape without bound;
// namespaces are few and an operator's question ("who is being denied?")
// starts there, the records and `nftguard flows` name the pod. kind is
// "NetworkPolicy" for the isolated pod chains' final drops and
// "ClusterNetworkPolicy" for the Deny rules (and fail-closed rules) of the
// Admin and Baseline tier chains, which count with --log-denied too
// (clusterpolicy/layout.go). A packet is dropped by one rule only, so the
// two kinds never count one packet twice.
//
// Why reading at scrape time: the values are exact when scraped (no poll
// interval behind), and a node that is not scraped pays nothing.
//
// Kernel counters restart at zero whenever a rule is created (a new pod,
// a policy change that rebuilds the chain's end, a repaired drift), while
// Prometheus counters must only grow. So each rule's last value is kept
// by chain and handle (a replaced rule has a new handle) and only what it
// counted since is added. What a rule counted between the last scrape and
// its deletion is not seen: the price of not reading on every change.

// The kind label: of the counters of NetworkPolicy pod chains, and of the
// ClusterNetworkPolicy tier chains.
const (
	kindNetworkPolicy        = "NetworkPolicy"
	kindClusterNetworkPolicy = "ClusterNetworkPolicy"
)

// suppressedRateLimit is the reason of denied packets the kernel's limit
// kept from being logged.
const suppressedRateLimit = "rate_limit"

// CounterReader is what the collector needs of the engine.
type CounterReader interface {
	Counters(ctx context.Context, match func(chain string) bool) ([]engine.RuleCounter, error)
}

type seriesKey struct{ namespace, direction, kind string }

// deniedCounters is a prometheus.Collector that reads the kernel's drop
// counters on every collect.
type deniedCounters struct {
	src     CounterReader
	timeout time.Duration
	onError func(error)

	mu         sync.Mutex
	growth     engine.Growth
	lastShared map[[2]engine.RuleID]uint64 // rate-limited packets exported, per shared chain's pair of rules
	series     map[seriesKey]bool          // the label sets exported so far
	packets    *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	suppressed *prometheus.CounterVec // shared with the log reader (reason label)
}

func newDeniedCounters(src CounterReader, suppressed *prometheus.CounterVec, onError func(error)) *deniedCounters {
	labels := []string{"namespace", "direction", "kind"}
	return &deniedCounters{
		src: src, timeout: 5 * time.Second, onError: onError,
		lastShared: map[[2]engine.RuleID]uint64{}, series: map[seriesKey]bool{}, suppressed: suppressed,
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_denied_packets_total",
			Help: "Packets dropped by policy, from the kernel's counters on each isolated pod chain's final drop (kind NetworkPolicy) and on each ClusterNetworkPolicy Deny rule (kind ClusterNetworkPolicy), by the pod's namespace, direction and policy kind (with --log-denied).",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_denied_bytes_total",
			Help: "Bytes of the packets counted in nftguard_denied_packets_total (layer 3 and up).",
		}, labels),
	}
}

// Describe implements prometheus.Collector.
func (d *deniedCounters) Describe(ch chan<- *prometheus.Desc) {
	d.packets.Describe(ch)
	d.bytes.Describe(ch)
	d.suppressed.Describe(ch)
}

// Collect implements prometheus.Collector: it reads the kernel, then
// exports.
func (d *deniedCounters) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	if rcs, err := d.src.Counters(ctx, countedChain); err != nil {
		// The last values stay exported: a failed read loses nothing,
		// the next one adds what was counted meanwhile.
		if d.onError != nil {
			d.onError(err)
		}
	} else {
		d.update(rcs)
	}
	d.packets.Collect(ch)
	d.bytes.Collect(ch)
	d.suppressed.Collect(ch)
}

// countedChain selects the chains whose counters the collector reads.
func countedChain(c string) bool {
	if c == policy.ChainDeniedIngress || c == policy.ChainDeniedEgress {
		return true
	}
	if _, _, ok := policy.DeniedChain(c); ok {
		return true
	}
	_, _, _, ok := clusterpolicy.DeniedChain(c)
	return ok
}

// deniedSeries returns the series a rule's counter adds to, if it counts
// denied packets: an isolated pod chain's final drop, or any counted rule
// of a tier chain (with --log-denied only its drops carry counters).
func deniedSeries(rc *engine.RuleCounter) (seriesKey, bool) {
	k := seriesKey{direction: "ingress", kind: kindNetworkPolicy}
	var egress, ok bool
	if k.namespace, egress, ok = policy.DeniedChain(rc.Chain); ok {
		if rc.Comment != policy.CommentIsolatedIngress && rc.Comment != policy.CommentIsolatedEgress {
			return k, false
		}
	} else if k.namespace, _, egress, ok = clusterpolicy.DeniedChain(rc.Chain); ok {
		k.kind = kindClusterNetworkPolicy
	} else {
		return k, false
	}
	if egress {
		k.direction = "egress"
	}
	return k, true
}

// update adds what each rule counted since the last read. d.mu is held.
func (d *deniedCounters) update(rcs []engine.RuleCounter) {
	live := map[seriesKey]bool{}
	shared := map[string]*sharedRead{}
	d.growth.Read(rcs, func(rc *engine.RuleCounter, grown engine.Count) {
		id, now := rc.ID(), rc.Counters[0]
		if rc.Chain == policy.ChainDeniedIngress || rc.Chain == policy.ChainDeniedEgress {
			sr := shared[rc.Chain]
			if sr == nil {
				sr = &sharedRead{}
				shared[rc.Chain] = sr
			}
			switch rc.Comment {
			case policy.CommentDeniedLogged:
				sr.logged, sr.loggedID = now.Packets, id
			case policy.CommentDeniedDropped:
				sr.dropped, sr.droppedID = now.Packets, id
			}
			return
		}
		k, ok := deniedSeries(rc)
		if !ok {
			return
		}
		live[k] = true
		d.series[k] = true
		d.packets.WithLabelValues(k.namespace, k.direction, k.kind).Add(float64(grown.Packets))
		d.bytes.WithLabelValues(k.namespace, k.direction, k.kind).Add(float64(grown.Bytes))
	})
	// Every packet a shared chain dropped and did not log was over the
	// limit. The two rules are read one after the other while packets
	// flow, so one read may see a packet in the drop count that the log
	// count missed; exporting only the growth of the largest difference
	// seen (per pair of rules) never counts a packet twice.
	nextShared := map[[2]engine.RuleID]uint64{}
	for _, sr := range shared {
		pair := [2]engine.RuleID{sr.loggedID, sr.droppedID}
		over := max(sub(sr.dropped, sr.logged), d.lastShared[pair])
		nextShared[pair] = over
		d.suppressed.WithLabelValues(suppressedRateLimit).Add(float64(over - d.lastShared[pair]))
	}
	// A namespace without isolated pods on the node any more keeps no
	// series: the label sets stay bounded by the namespaces present.
	for k := range d.series {
		if !live[k] {
			d.packets.DeleteLabelValues(k.namespace, k.direction, k.kind)
			d.bytes.DeleteLabelValues(k.namespace, k.direction, k.kind)
			delete(d.series, k)
		}
	}
	d.lastShared = nextShared
}

// sharedRead is one read of a shared denied chain's two counters.
type sharedRead struct {
	logged, dropped     uint64
	loggedID, droppedID engine.RuleID
}

// sub is a - b, or 0 when a kernel value went backwards (it never does for
// one handle; this keeps a Prometheus counter from ever decreasing).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
