package agent

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podguard"
)

// guardCounters exports the packets the pod guards dropped (package
// podguard: a source that is not the pod's own) from the counters of the
// guards' drop rules: the rulecounter.View of nftguard_forged_packets_total.
// Package rulecounter reads them at each scrape and adds a deleted rule's
// final count at the sync that deletes it (the pod gone), so none is
// lost.
type guardCounters struct{ dropped *prometheus.CounterVec }

func newGuardCounters() *guardCounters {
	return &guardCounters{dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nftguard_forged_packets_total",
		Help: "Packets a pod sent with a source that is not its own, dropped on its interface, by the pod's namespace (\"\" for an interface that is no one pod's, and for the fallback of pods without one).",
	}, []string{"namespace"})}
}

// Describe implements prometheus.Collector.
func (c *guardCounters) Describe(ch chan<- *prometheus.Desc) { c.dropped.Describe(ch) }

// Collect implements prometheus.Collector: rulecounter calls it after
// reading the kernel.
func (c *guardCounters) Collect(ch chan<- prometheus.Metric) { c.dropped.Collect(ch) }

// Chain implements rulecounter.View: the guard chains and the fallback.
func (c *guardCounters) Chain(name string) bool {
	return strings.HasPrefix(name, "pg_") || strings.HasPrefix(name, "pgif_")
}

// Count implements rulecounter.View.
func (c *guardCounters) Count(rc *engine.RuleCounter, grown engine.Count, _ bool) {
	if grown.Packets == 0 || rc.Chain == podguard.ForgedChain {
		return // the shared log chain counts nothing of its own
	}
	ns := ""
	if rest, ok := strings.CutPrefix(rc.Comment, podguard.ForgedCommentPrefix); ok {
		ns, _, _ = strings.Cut(rest, "/")
	}
	c.dropped.WithLabelValues(ns).Add(float64(grown.Packets))
}

// End implements rulecounter.View: the series stay.
func (c *guardCounters) End(bool) {}
