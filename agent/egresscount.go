package agent

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/engine"
)

// egressCounters exports each egress Service's translated traffic from the
// kernel's counters in its counting chain (egress.CountChainPrefix) and
// eg_hold's drops: the rulecounter.View of these metrics. Package
// rulecounter reads them at each scrape (exact when scraped, free when
// not) and adds each deleted rule's final count at the sync that deletes
// it (a Service's last translated pod gone, a changed restriction, a hold
// or a pod-start guard lifted), so none is lost.
type egressCounters struct {
	packets *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	dropped *prometheus.CounterVec
}

func newEgressCounters() *egressCounters {
	labels := []string{"namespace", "service"}
	c := &egressCounters{
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_egress_translated_packets_total",
			Help: "Packets this node translated to an egress Service's load-balancer address (counted before translation, every packet of a flow), by Service.",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_egress_translated_bytes_total",
			Help: "Bytes (layer 3 and up) of the packets in nftguard_egress_translated_packets_total.",
		}, labels),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_egress_dropped_packets_total",
			Help: "Packets leaving the cluster that egress dropped, by reason: held (their Service's address cannot be used on this node) or pod_start_guard (from a pod address not known yet while a claimed pod waits for its address).",
		}, []string{"reason"}),
	}
	// Both reasons from the start, so that rate() sees zeros.
	for _, r := range dropReasons {
		c.dropped.WithLabelValues(r)
	}
	return c
}

// dropReasons maps eg_hold's dropping rules to the reason label.
var dropReasons = map[string]string{egress.CommentHeld: "held", egress.CommentGuard: "pod_start_guard"}

// Describe implements prometheus.Collector.
func (c *egressCounters) Describe(ch chan<- *prometheus.Desc) {
	c.packets.Describe(ch)
	c.bytes.Describe(ch)
	c.dropped.Describe(ch)
}

// Collect implements prometheus.Collector: rulecounter calls it after
// reading the kernel.
func (c *egressCounters) Collect(ch chan<- prometheus.Metric) {
	c.packets.Collect(ch)
	c.bytes.Collect(ch)
	c.dropped.Collect(ch)
}

// Chain implements rulecounter.View.
func (c *egressCounters) Chain(name string) bool {
	return name == egress.ChainHold || strings.HasPrefix(name, egress.CountChainPrefix)
}

// Count implements rulecounter.View.
func (c *egressCounters) Count(rc *engine.RuleCounter, grown engine.Count, _ bool) {
	if rc.Chain == egress.ChainHold {
		if reason, ok := dropReasons[rc.Comment]; ok {
			c.dropped.WithLabelValues(reason).Add(float64(grown.Packets))
		}
		return
	}
	if ns, name, ok := strings.Cut(rc.Comment, "/"); ok {
		c.packets.WithLabelValues(ns, name).Add(float64(grown.Packets))
		c.bytes.WithLabelValues(ns, name).Add(float64(grown.Bytes))
	}
}

// End implements rulecounter.View: the Service series stay (as before).
func (c *egressCounters) End(bool) {}
