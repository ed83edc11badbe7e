package dnsfwd

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/fqdn"
)

// Reasons a query is refused, dropped or answered with an error instead
// of being relayed (label values of nftguard_dns_queries_refused_total).
const (
	RefusedNotSubject  = "not_subject"  // the source is no subject pod of the current Table
	RefusedPodLimit    = "pod_limit"    // the pod has Limits.PodInFlight queries in flight
	RefusedGlobalLimit = "global_limit" // Limits.InFlight queries are in flight and as many wait
	// The fair shares of Limits.InFlight (see admission.go).
	RefusedNamespaceShare = "namespace_share" // the pod's namespace holds its share
	RefusedPodShare       = "pod_share"       // the pod holds its share within its namespace's
	RefusedStartingPool   = "starting_pool"   // the starting pods' pool (Limits.StartingInFlight), or one source's share of it, is taken
	RefusedQueueTimeout   = "queue_timeout"   // a query within its share waited Limits.QueueWait for a slot
	RefusedConnLimit      = "conn_limit"      // a TCP connection over Limits.PodConns or Limits.Conns (closed)
	RefusedMalformed      = "malformed"       // not a DNS query (dropped, or FORMERR)
	RefusedOpcode         = "opcode"          // not a standard query (NOTIMP)
	RefusedUpstream       = "upstream"        // no server, or it failed or timed out (SERVFAIL)
)

// Reasons an answer added nothing (label values of
// nftguard_dns_answers_ignored_total), besides fqdn's Ignored values.
const (
	IgnoredCommitFailed = "commit_failed" // the elements could not be added; the pod is answered anyway
	IgnoredUnparsable   = "unparsable"    // the upstream reply could not be parsed, or answers another question (relayed as it is)
	IgnoredPodLimit     = "pod_limit"     // the pod holds its share of elements (Limits.PodElements at most); the pod is answered anyway
	IgnoredNodeLimit    = "node_limit"    // the node holds Limits.NodeElements elements; the pod is answered anyway
)

// Metrics are the forwarder's Prometheus collectors.
type Metrics struct {
	AnswersCommitted prometheus.Counter
	AnswersIgnored   *prometheus.CounterVec // reason
	ElementsAdded    prometheus.Counter
	ElementsCounted  prometheus.Gauge
	AddrsIgnored     *prometheus.CounterVec // reason: over_limit, no_pod_address
	QueriesRefused   *prometheus.CounterVec // reason
	QueriesQueued    prometheus.Counter
	Latency          *prometheus.HistogramVec
	HeartbeatErrors  prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg (none
// if reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		AnswersCommitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_dns_answers_committed_total",
			Help: "Answers whose elements were added to the domain rules' sets before the pod got them.",
		}),
		AnswersIgnored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_dns_answers_ignored_total",
			Help: "Answers relayed that added no element, by reason (no_match is the common case: a name no rule of the pod names).",
		}, []string{"reason"}),
		ElementsAdded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_dns_elements_added_total",
			Help: "Elements (pod . address, with the answer's TTL) added or refreshed in the domain rules' sets.",
		}),
		ElementsCounted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_dns_elements_counted",
			Help: "Elements the forwarder counts against Limits.PodElements and Limits.NodeElements: distinct pod and address pairs per set that may still be in the kernel (an expired one until the next prune, at most a second after a commit that did not fit), including those an agent before it left.",
		}),
		AddrsIgnored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_dns_addresses_ignored_total",
			Help: "Addresses in matching answers that added no element, by reason (over_limit: beyond the per-answer bound; no_pod_address: a family the pod has no address of; pod_limit: the pod holds its share of elements; node_limit: the node holds Limits.NodeElements).",
		}, []string{"reason"}),
		QueriesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_dns_queries_refused_total",
			Help: "Queries not relayed, by reason (not_subject, pod_limit, pod_share, namespace_share, starting_pool, queue_timeout, global_limit, conn_limit, malformed, opcode, upstream).",
		}, []string{"reason"}),
		QueriesQueued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_dns_queries_queued_total",
			Help: "Queries within their pod's and namespace's share that waited for a slot because all of Limits.InFlight were taken.",
		}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nftguard_dns_forward_duration_seconds",
			Help: "From a query received to its reply written, including the upstream exchange and the commit, by transport (udp, tcp).",
			Buckets: []float64{50e-6, 100e-6, 200e-6, 300e-6, 400e-6, 500e-6, 750e-6,
				0.001, 0.0015, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"transport"}),
		HeartbeatErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_dns_heartbeat_errors_total",
			Help: "Heartbeat refreshes that failed (the redirect expires HeartbeatTTL after the last success).",
		}),
	}
	// Export every reason from the start, so rate() sees zeros.
	for _, r := range []string{fqdn.IgnoredNotResponse, fqdn.IgnoredRcode, fqdn.IgnoredTruncated, fqdn.IgnoredQuestion,
		fqdn.IgnoredQtype, fqdn.IgnoredNotSubject, fqdn.IgnoredNoMatch, fqdn.IgnoredChain, fqdn.IgnoredNoAddress,
		IgnoredCommitFailed, IgnoredUnparsable, IgnoredPodLimit, IgnoredNodeLimit} {
		m.AnswersIgnored.WithLabelValues(r)
	}
	for _, r := range []string{RefusedNotSubject, RefusedPodLimit, RefusedGlobalLimit, RefusedNamespaceShare, RefusedPodShare,
		RefusedStartingPool, RefusedQueueTimeout, RefusedConnLimit, RefusedMalformed, RefusedOpcode, RefusedUpstream} {
		m.QueriesRefused.WithLabelValues(r)
	}
	for _, r := range []string{addrsOverLimit, addrsNoPodAddr, addrsPodLimit, addrsNodeLimit} {
		m.AddrsIgnored.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.AnswersCommitted, m.AnswersIgnored, m.ElementsAdded, m.ElementsCounted, m.AddrsIgnored, m.QueriesRefused, m.QueriesQueued, m.Latency, m.HeartbeatErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register DNS forwarder metrics: %w", err)
		}
	}
	return m, nil
}

const (
	addrsOverLimit = "over_limit"
	addrsNoPodAddr = "no_pod_address"
	addrsPodLimit  = "pod_limit"
	addrsNodeLimit = "node_limit"
)
