package rulecounter

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/engine"
)

// Reader reads the live rules' counters (engine.Engine).
type Reader interface {
	Counters(ctx context.Context, match func(chain string) bool) ([]engine.RuleCounter, error)
}

// View is one set of metrics built on rule counters. Its methods other
// than Describe and Collect are called by Totals with its lock held, one
// at a time.
type View interface {
	// Describe and Collect export the view's metrics; Collect is
	// called after the kernel was read.
	prometheus.Collector
	// Chain says whether the view counts the rules of a chain.
	Chain(name string) bool
	// Count adds what rule rc counted since it was last read: grown,
	// never negative. deleted says the rule is gone (rc holds its final
	// values); else it is live and was just read.
	Count(rc *engine.RuleCounter, grown engine.Count, deleted bool)
	// End closes one round of Count calls: one read of every live
	// rule of the view's chains (read), or one sync's deletions.
	End(read bool)
}

// Totals folds reads of live rules and the final values of deleted ones
// into the views' metrics. The zero value is not usable; use New.
type Totals struct {
	views []View

	readMu sync.Mutex // one read of the kernel at a time

	mu   sync.Mutex                     // guards what follows and the views' state
	last map[engine.RuleID]engine.Count // each live rule's value when last read
	// dead are the rules folded as deleted since the last read was
	// added: that read may still hold them.
	dead map[engine.RuleID]bool
	// errs are the deletions that could not be read since the last
	// scrape, reported by it.
	errs []error
}

// New returns Totals without views.
func New() *Totals {
	return &Totals{last: map[engine.RuleID]engine.Count{}, dead: map[engine.RuleID]bool{}}
}

// Watch adds a view. Views are added before the first sync that could
// delete their rules and before the Collector is registered.
func (t *Totals) Watch(v View) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.views = append(t.views, v)
}

// viewOf is the view that counts a chain, nil if none.
func (t *Totals) viewOf(chain string) View {
	for _, v := range t.views {
		if v.Chain(chain) {
			return v
		}
	}
	return nil
}

// sum is a rule's counter statements added up.
func sum(rc *engine.RuleCounter) engine.Count {
	var c engine.Count
	for _, v := range rc.Counters {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
	}
	return c
}

// since is what now counted beyond prev, never negative (a kernel value
// never goes back for one handle; this keeps a Prometheus counter from
// ever decreasing if it did).
func since(now, prev engine.Count) engine.Count {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return engine.Count{Packets: sub(now.Packets, prev.Packets), Bytes: sub(now.Bytes, prev.Bytes)}
}

// Deleted is engine.WithDeletedCounters' function: it adds each deleted
// rule's final value less what was already added. It is called with the
// engine's lock held and never calls the engine.
func (t *Totals) Deleted(rcs []engine.RuleCounter, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.errs = append(t.errs, err)
	}
	touched := map[View]bool{}
	for i := range rcs {
		rc := &rcs[i]
		v := t.viewOf(rc.Chain)
		if v == nil || len(rc.Counters) == 0 {
			continue
		}
		id := rc.ID()
		grown := since(sum(rc), t.last[id])
		delete(t.last, id)
		t.dead[id] = true
		v.Count(rc, grown, true)
		touched[v] = true
	}
	for _, v := range t.views {
		if touched[v] {
			v.End(false)
		}
	}
}

// read adds one read of the live rules.
func (t *Totals) read(rcs []engine.RuleCounter) {
	next := make(map[engine.RuleID]engine.Count, len(rcs))
	for i := range rcs {
		rc := &rcs[i]
		v := t.viewOf(rc.Chain)
		id := rc.ID()
		if v == nil || len(rc.Counters) == 0 || t.dead[id] {
			continue
		}
		now := sum(rc)
		next[id] = now
		v.Count(rc, since(now, t.last[id]), false)
	}
	// Rules not read are gone: deleted by a sync (already folded) or by
	// someone else (what they counted since the last read is lost).
	t.last = next
	clear(t.dead)
	for _, v := range t.views {
		v.End(true)
	}
}

// Collector is the Prometheus collector of every view: each scrape reads
// the kernel through src (within timeout), adds what was counted, then
// exports. A failed read keeps the last values and goes to onError (the
// next read adds what was counted meanwhile), as does a deletion whose
// counts could not be read.
func (t *Totals) Collector(src Reader, timeout time.Duration, onError func(error)) prometheus.Collector {
	return &collector{t: t, src: src, timeout: timeout, onError: onError}
}

type collector struct {
	t       *Totals
	src     Reader
	timeout time.Duration
	onError func(error)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.t.mu.Lock()
	views := append([]View(nil), c.t.views...)
	c.t.mu.Unlock()
	for _, v := range views {
		v.Describe(ch)
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	t := c.t
	t.readMu.Lock()
	defer t.readMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Read without t.mu: a sync reporting deletions meanwhile holds the
	// engine's lock and then takes t.mu.
	rcs, err := c.src.Counters(ctx, func(chain string) bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.viewOf(chain) != nil
	})
	t.mu.Lock()
	if err == nil {
		t.read(rcs)
	}
	errs := t.errs
	t.errs = nil
	views := append([]View(nil), t.views...)
	t.mu.Unlock()
	if c.onError != nil {
		if err != nil {
			c.onError(err)
		}
		for _, e := range errs {
			c.onError(e)
		}
	}
	for _, v := range views {
		v.Collect(ch)
	}
}
