package agent

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/engine"
)

// counterReader is what the egress counters need of the engine.
type counterReader interface {
	Counters(ctx context.Context, match func(chain string) bool) ([]engine.RuleCounter, error)
}

// egressCounters exports each egress Service's translated traffic from the
// kernel's counters in its counting chain (egress.CountChainPrefix), read
// at each scrape: exact when scraped, free when not.
//
// Kernel counters restart at zero when a rule is created (a Service's
// first translated pod, a changed restriction, a repaired drift), while
// Prometheus counters only grow: each rule's last value is kept by chain
// and handle, and only what it counted since is added. What a rule counted
// between the last scrape and its deletion is not seen.
type egressCounters struct {
	src     counterReader
	onError func(error)

	mu      sync.Mutex
	last    map[ruleID]engine.Count
	packets *prometheus.CounterVec
	bytes   *prometheus.CounterVec
}

type ruleID struct {
	chain  string
	handle uint64
}

func newEgressCounters(src counterReader, onError func(error)) *egressCounters {
	labels := []string{"namespace", "service"}
	return &egressCounters{src: src, onError: onError, last: map[ruleID]engine.Count{},
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_egress_translated_packets_total",
			Help: "Packets this node translated to an egress Service's load-balancer address (counted before translation, every packet of a flow), by Service.",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_egress_translated_bytes_total",
			Help: "Bytes (layer 3 and up) of the packets in nftguard_egress_translated_packets_total.",
		}, labels),
	}
}

// Describe implements prometheus.Collector.
func (c *egressCounters) Describe(ch chan<- *prometheus.Desc) {
	c.packets.Describe(ch)
	c.bytes.Describe(ch)
}

// Collect implements prometheus.Collector: it reads the kernel, then
// exports; a failed read keeps the last values (the next read adds what
// was counted meanwhile).
func (c *egressCounters) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rcs, err := c.src.Counters(ctx, func(chain string) bool { return strings.HasPrefix(chain, egress.CountChainPrefix) })
	if err != nil {
		if c.onError != nil {
			c.onError(err)
		}
	} else {
		c.update(rcs)
	}
	c.packets.Collect(ch)
	c.bytes.Collect(ch)
}

func (c *egressCounters) update(rcs []engine.RuleCounter) {
	seen := make(map[ruleID]engine.Count, len(rcs))
	for _, rc := range rcs {
		ns, name, ok := strings.Cut(rc.Comment, "/")
		if !ok || len(rc.Counters) == 0 {
			continue // a return rule, or not ours
		}
		id := ruleID{rc.Chain, rc.Handle}
		var now engine.Count
		for _, v := range rc.Counters {
			now.Packets += v.Packets
			now.Bytes += v.Bytes
		}
		prev := c.last[id]
		if now.Packets >= prev.Packets && now.Bytes >= prev.Bytes {
			c.packets.WithLabelValues(ns, name).Add(float64(now.Packets - prev.Packets))
			c.bytes.WithLabelValues(ns, name).Add(float64(now.Bytes - prev.Bytes))
		}
		seen[id] = now
	}
	c.last = seen // rules that are gone are forgotten
}
