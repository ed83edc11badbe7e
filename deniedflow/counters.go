package deniedflow

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/tablelayout"
)

// Denied packets and bytes from the kernel's counters. With
// --log-denied every isolated pod chain's final drop counts (see
// tablelayout/logdenied.go), and the two shared np_denied_* chains count what
// they logged and what they dropped. The agent turns those counters into
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
// The counts are read and kept by package rulecounter, the one collector
// of every kernel-counter metric: live rules at each scrape, and each
// deleted rule's final count at the sync that deletes it, so no count is
// lost to a rule's deletion (a new pod, a policy change that rebuilds the
// chain's end, a pod gone). deniedCounters is its View for these metrics.
// A namespace's series goes when the namespace has no counting rule any
// more, but not before it was exported once with its last count.

// The kind label: of the counters of NetworkPolicy pod chains, and of the
// ClusterNetworkPolicy tier chains.
const (
	kindNetworkPolicy        = "NetworkPolicy"
	kindClusterNetworkPolicy = "ClusterNetworkPolicy"
)

// suppressedRateLimit is the reason of denied packets the kernel's limit
// kept from being logged.
const suppressedRateLimit = "rate_limit"

type seriesKey struct{ namespace, direction, kind string }

// deniedCounters is the rulecounter.View of the denied-packet metrics.
type deniedCounters struct {
	lastShared map[[2]engine.RuleID]uint64 // rate-limited packets exported, per shared chain's pair of rules
	series     map[seriesKey]bool          // the label sets exported so far
	live       map[seriesKey]bool          // the series with a live rule in this read
	final      map[seriesKey]bool          // the series a deletion added to since the last read
	shared     map[string]*sharedRead      // this round's shared chains' counters
	packets    *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	suppressed *prometheus.CounterVec // shared with the log reader (reason label)
}

func newDeniedCounters(suppressed *prometheus.CounterVec) *deniedCounters {
	labels := []string{"namespace", "direction", "kind"}
	return &deniedCounters{
		lastShared: map[[2]engine.RuleID]uint64{}, series: map[seriesKey]bool{}, suppressed: suppressed,
		live: map[seriesKey]bool{}, final: map[seriesKey]bool{}, shared: map[string]*sharedRead{},
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

// Collect implements prometheus.Collector: rulecounter calls it after
// reading the kernel.
func (d *deniedCounters) Collect(ch chan<- prometheus.Metric) {
	d.packets.Collect(ch)
	d.bytes.Collect(ch)
	d.suppressed.Collect(ch)
}

// Chain implements rulecounter.View.
func (d *deniedCounters) Chain(c string) bool { return countedChain(c) }

// countedChain selects the chains whose counters the collector reads.
func countedChain(c string) bool {
	if c == tablelayout.ChainDeniedIngress || c == tablelayout.ChainDeniedEgress {
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

// Count implements rulecounter.View.
func (d *deniedCounters) Count(rc *engine.RuleCounter, grown engine.Count, deleted bool) {
	if rc.Chain == tablelayout.ChainDeniedIngress || rc.Chain == tablelayout.ChainDeniedEgress {
		sr := d.shared[rc.Chain]
		if sr == nil {
			sr = &sharedRead{}
			d.shared[rc.Chain] = sr
		}
		id, now := rc.ID(), rc.Counters[0]
		switch rc.Comment {
		case tablelayout.CommentDeniedLogged:
			sr.logged, sr.loggedID = now.Packets, id
		case tablelayout.CommentDeniedDropped:
			sr.dropped, sr.droppedID = now.Packets, id
		}
		return
	}
	k, ok := deniedSeries(rc)
	if !ok {
		return
	}
	if deleted {
		d.final[k] = true
	} else {
		d.live[k] = true
	}
	d.series[k] = true
	d.packets.WithLabelValues(k.namespace, k.direction, k.kind).Add(float64(grown.Packets))
	d.bytes.WithLabelValues(k.namespace, k.direction, k.kind).Add(float64(grown.Bytes))
}

// End implements rulecounter.View.
func (d *deniedCounters) End(read bool) {
	// Every packet a shared chain dropped and did not log was over the
	// limit. The two rules are read one after the other while packets
	// flow, so one read may see a packet in the drop count that the log
	// count missed; exporting only the growth of the largest difference
	// seen (per pair of rules) never counts a packet twice. A pair of
	// which one rule is missing (skipped, or deleted alone) is not
	// counted this round.
	nextShared := map[[2]engine.RuleID]uint64{}
	for _, sr := range d.shared {
		if sr.loggedID.Handle == 0 || sr.droppedID.Handle == 0 {
			continue
		}
		pair := [2]engine.RuleID{sr.loggedID, sr.droppedID}
		over := max(sub(sr.dropped, sr.logged), d.lastShared[pair])
		d.suppressed.WithLabelValues(suppressedRateLimit).Add(float64(over - d.lastShared[pair]))
		if read {
			nextShared[pair] = over
		} else {
			delete(d.lastShared, pair) // deleted: its rules are gone
		}
	}
	clear(d.shared)
	if !read {
		return
	}
	d.lastShared = nextShared
	// A namespace without isolated pods on the node any more keeps no
	// series: the label sets stay bounded by the namespaces present. A
	// series that a deletion added to stays for this export, so its last
	// count is seen.
	for k := range d.series {
		if !d.live[k] && !d.final[k] {
			d.packets.DeleteLabelValues(k.namespace, k.direction, k.kind)
			d.bytes.DeleteLabelValues(k.namespace, k.direction, k.kind)
			delete(d.series, k)
		}
	}
	clear(d.live)
	clear(d.final)
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
