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
// Prometheus counters only grow: engine.Growth adds only what each rule
// counted since the last scrape. What a rule counted between the last
// scrape and its deletion is not seen.
type egressCounters struct {
	src     counterReader
	onError func(error)

	mu      sync.Mutex
	growth  engine.Growth
	packets *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	dropped *prometheus.CounterVec
}

func newEgressCounters(src counterReader, onError func(error)) *egressCounters {
	labels := []string{"namespace", "service"}
	c := &egressCounters{src: src, onError: onError,
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

// Collect implements prometheus.Collector: it reads the kernel, then
// exports; a failed read keeps the last values (the next read adds what
// was counted meanwhile).
func (c *egressCounters) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rcs, err := c.src.Counters(ctx, func(chain string) bool {
		return chain == egress.ChainHold || strings.HasPrefix(chain, egress.CountChainPrefix)
	})
	if err != nil {
		if c.onError != nil {
			c.onError(err)
		}
	} else {
		c.update(rcs)
	}
	c.packets.Collect(ch)
	c.bytes.Collect(ch)
	c.dropped.Collect(ch)
}

func (c *egressCounters) update(rcs []engine.RuleCounter) {
	c.growth.Read(rcs, func(rc *engine.RuleCounter, grown engine.Count) {
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
	})
}
