package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problemevents"
)

// Values of the kind label of nftguard_errors_total (label values, not
// errors).
const (
	errorKindSync        = "sync"          // engine.Sync failed (the table is unchanged)
	errorKindMonitor     = "monitor"       // the drift monitor failed and is restarted
	errorKindConntrack   = "conntrack"     // stale egress translations could not be cleared
	errorKindDeniedLog   = "denied_log"    // the denied-packet log could not be read (the table is unaffected)
	errorKindServiceCIDR = "service_cidr"  // ServiceCIDR objects could not be watched (--service-cidr alone is used)
	errorKindDNS         = "dns_forwarder" // the DNS forwarder of domainNames rules could not start or stopped (DNS goes to the cluster DNS directly)
	errorKindCounters    = "rule_counters" // the kernel's rule counters could not be read at a scrape, or a deleted rule's final count not decoded (the metrics keep their values)

	// Counted by package problemevents.
	errorKindEvent         = problemevents.ErrorKindEvent         // a Kubernetes Event could not be created
	errorKindInvalidObject = problemevents.ErrorKindInvalidObject // an object was newly found uncompilable
	errorKindQuarantined   = problemevents.ErrorKindQuarantined   // an object was newly held back because the kernel refuses it
	errorKindOverBudget    = problemevents.ErrorKindOverBudget    // a NetworkPolicy newly failed closed because it is over budget
)

// metrics lives in its own registry: the process has no global state, and a
// test can run several agents side by side.
type metrics struct {
	reg registry

	syncs            *prometheus.CounterVec
	syncDuration     *prometheus.HistogramVec
	compileSeconds   prometheus.Histogram
	operations       prometheus.Histogram
	tableObjects     *prometheus.GaugeVec
	invalidObjects   *prometheus.GaugeVec
	driftDetected    prometheus.Counter
	driftRepairs     prometheus.Counter
	errors           *prometheus.CounterVec
	lastSuccess      prometheus.Gauge
	informerEvents   *prometheus.CounterVec
	conntrackCleared prometheus.Counter
	quarantined      *prometheus.GaugeVec
	overBudget       *prometheus.GaugeVec
	budgetEstimate   *prometheus.GaugeVec
	checks           prometheus.Counter
	localPods        prometheus.Gauge
	nodeWithoutPods  prometheus.Gauge
	eventToKernel    *prometheus.HistogramVec
	peerSource       *prometheus.GaugeVec
	peerRecordsStale prometheus.Gauge
}

// registry is where the agent and its subsystems register their
// collectors and what /metrics serves.
type registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

func newMetrics() *metrics { return newMetricsOn(prometheus.NewRegistry()) }

// newMetricsOn registers the sync metrics on reg, which every other
// collector of the agent is registered on too (a test records them).
func newMetricsOn(reg registry) *metrics {
	m := &metrics{
		reg: reg,
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_syncs_total", Help: "Syncs of the table, by result (success, error).",
		}, []string{"result"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nftguard_sync_duration_seconds",
			Help:    "Wall time of engine syncs (read, diff, one netlink transaction), by mode (full, incremental).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"mode"}),
		compileSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nftguard_compile_duration_seconds",
			Help:    "Time to compile the desired table from the informer caches.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		operations: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nftguard_sync_operations",
			Help:    "Objects added, deleted or changed per successful sync (each set element counts).",
			Buckets: append([]float64{0}, prometheus.ExponentialBuckets(1, 4, 10)...),
		}),
		tableObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_table_objects", Help: "Size of the table after the last successful sync, by kind (chains, rules, sets, elements).",
		}, []string{"kind"}),
		invalidObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_invalid_objects", Help: "API objects left out of the table at the last compile, by kind.",
		}, []string{"kind"}),
		driftDetected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_drift_detected_total", Help: "Changes to our table made by other processes, seen by the netlink monitor.",
		}),
		driftRepairs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_drift_repairs_total", Help: "Successful syncs that repaired drift.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_errors_total", Help: "Errors by kind (sync, monitor, event, invalid_object, conntrack, quarantined, denied_log, service_cidr, over_budget).",
		}, []string{"kind"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_last_sync_success_timestamp_seconds", Help: "Unix time of the last successful sync.",
		}),
		informerEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_informer_events_total", Help: "Relevant add, update and delete events, by resource.",
		}, []string{"resource"}),
		conntrackCleared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_conntrack_cleared_total", Help: "Conntrack entries deleted because their egress translation became stale.",
		}),
		quarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_quarantined_objects",
			Help: "Objects held back because the kernel refuses the table with them (1 per object; retried when they change).",
		}, []string{"kind", "namespace", "name"}),
		overBudget: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_objects_over_budget",
			Help: "NetworkPolicies enforced in their fail-closed form (their pods isolated, no allows) because they are over budget on this node, by the budget they exceed (object or node): 1 per object.",
		}, []string{"kind", "namespace", "name", "budget"}),
		budgetEstimate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_budget_estimate",
			Help: "Estimated cost of the NetworkPolicies of the last compile that fit their own budget, by dimension (rules, elements).",
		}, []string{"dimension"}),
		checks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_sync_checks_total",
			Help: "Check-only batches (validated by the kernel, never applied) sent to find the objects a refused sync held.",
		}),
		localPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_local_pods", Help: "Pods scheduled to this agent's --node-name.",
		}),
		nodeWithoutPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_node_without_pods",
			Help: "1 when no pod has been scheduled to --node-name for over a minute: a wrong node name enforces nothing.",
		}),
		eventToKernel: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nftguard_event_to_kernel_seconds",
			Help:    "From an informer delivering a change to the end of the sync that put it in the kernel, by object kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"kind"}),
		peerSource: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_peer_source",
			Help: "Where the pods of other nodes come from (--peer-source; auto restarts in place to read slices once they are published): 1 for the source in use (pods: every Pod watched; slices: the controller's PeerSlices), 0 for the other.",
		}, []string{"source"}),
		peerRecordsStale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_peer_records_stale",
			Help: "1 while the PeerSlice records are stale (slices mode: the controller's Lease is missing or not renewed); the last records stay enforced. Always 0 in pods mode.",
		}),
	}
	m.reg.MustRegister(m.peerSource, m.peerRecordsStale, m.conntrackCleared, m.quarantined, m.overBudget, m.budgetEstimate, m.checks, m.localPods, m.nodeWithoutPods, m.eventToKernel, m.syncs, m.syncDuration, m.compileSeconds, m.operations, m.tableObjects,
		m.invalidObjects, m.driftDetected, m.driftRepairs, m.errors, m.lastSuccess, m.informerEvents,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Export every error kind from the start, so alerts on rate() see zeros.
	for _, k := range []string{errorKindSync, errorKindMonitor, errorKindEvent, errorKindInvalidObject, errorKindConntrack, errorKindQuarantined, errorKindDeniedLog, errorKindServiceCIDR, errorKindOverBudget, errorKindDNS, errorKindCounters} {
		m.errors.WithLabelValues(k)
	}
	m.setPeerSource(PeerSourcePods)
	for _, r := range []string{"success", "error"} {
		m.syncs.WithLabelValues(r)
	}
	return m
}

// observeTable records the size of the table just synced.
func (m *metrics) observeTable(d *engine.Desired) {
	var rules, elems int
	for _, c := range d.Chains {
		rules += len(c.Rules)
	}
	for _, s := range d.Sets {
		elems += len(s.Elements)
	}
	m.tableObjects.WithLabelValues("chains").Set(float64(len(d.Chains)))
	m.tableObjects.WithLabelValues("rules").Set(float64(rules))
	m.tableObjects.WithLabelValues("sets").Set(float64(len(d.Sets)))
	m.tableObjects.WithLabelValues("elements").Set(float64(elems))
}

// setPeerSource exports the source in use.
func (m *metrics) setPeerSource(src PeerSource) {
	for _, s := range []PeerSource{PeerSourcePods, PeerSourceSlices} {
		v := 0.0
		if s == src {
			v = 1
		}
		m.peerSource.WithLabelValues(string(s)).Set(v)
	}
}
