package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// reason says why a sync was asked for; several are merged into one sync.
type reason uint32

const (
	reasonStart  reason = 1 << iota // the caches have synced
	reasonChange                    // an informer saw a relevant change
	reasonDrift                     // someone else changed our table
	reasonResync                    // the periodic safety-net resync
	reasonRetry                     // the previous sync failed
)

func (r reason) has(x reason) bool { return r&x != 0 }

// debouncer decides when the sync loop syncs. It is leading-edge: a change
// that arrives after a quiet moment is synced at once, because nftguard's
// verdicts live in the kernel and a change is enforced only once it is
// there. Changes that arrive while a sync runs, or soon after it, are
// coalesced. The loop keeps a window, min at first, and a quiet time,
// max(min, window/8):
//
//   - A trigger that comes at least the quiet time after the previous sync
//     ended is synced at once (a quiet moment), and the window halves
//     (never below min).
//   - A trigger that comes while a sync runs or sooner after it waits until
//     a window after the previous sync's end, or until the triggers pause
//     for the quiet time. If they kept coming all through the window (a
//     dense burst), the window doubles, up to max; if they paused, it
//     halves. A burst of n events therefore costs about log2(max / min) +
//     (burst length / max) syncs, not n, and its last event waits about the
//     quiet time past the burst's end.
//   - No trigger ever waits longer than max: the window never exceeds it.
//
// The price of the leading edge is one extra sync per burst (its first
// event is synced alone); a stream of changes each made right after the
// previous one was enforced (less than min apart) waits min per change;
// the gain is that a change after a quiet moment waits for nothing.
type debouncer struct {
	clock   clock.Clock
	kick    chan struct{} // capacity 1: a pending kick is enough
	pending atomic.Uint32 // reasons since the last wait returned

	// interrupt, while set (interruptible), is cancelled by the next
	// trigger.
	mu        sync.Mutex
	interrupt context.CancelFunc

	// Only the sync loop's goroutine uses it.
	w window
}

// newDebouncer returns a debouncer on the wall clock.
func newDebouncer(min, max time.Duration) *debouncer {
	return newDebouncerClock(min, max, clock.RealClock{})
}

// newDebouncerClock returns a debouncer that reads time from c (a test's
// fake clock: the debouncer's subject is time, so its tests drive it).
func newDebouncerClock(min, max time.Duration, c clock.Clock) *debouncer {
	return &debouncer{clock: c, w: window{min: min, max: max, size: min}, kick: make(chan struct{}, 1)}
}

// trigger asks for a sync; it never blocks, so informer handlers and the
// netlink monitor can call it from their own goroutines.
func (d *debouncer) trigger(r reason) {
	for {
		old := d.pending.Load()
		if d.pending.CompareAndSwap(old, old|uint32(r)) {
			break
		}
	}
	d.mu.Lock()
	if d.interrupt != nil {
		d.interrupt()
	}
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// interruptible returns a context that is cancelled as soon as a sync is
// asked for: at once if one already is, or by the next trigger; stop ends
// that and releases the context. The sync loop does work that can wait
// behind it (clearing conntrack), so that a change waiting for the kernel
// (a pod-start guard) does not wait for that work. Only the sync loop's
// goroutine calls it, one at a time.
func (d *debouncer) interruptible(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	d.mu.Lock()
	d.interrupt = cancel
	d.mu.Unlock()
	// After interrupt is set: a trigger that recorded its reason before
	// saw no interrupt, and is seen here.
	if d.pending.Load() != 0 {
		cancel()
	}
	return ctx, func() {
		d.mu.Lock()
		d.interrupt = nil
		d.mu.Unlock()
		cancel()
	}
}

// synced tells the debouncer that a sync (successful or not) just ended.
func (d *debouncer) synced() { d.w.synced(d.clock.Now()) }

// wait blocks until a sync is due and returns the merged reasons, or
// returns 0 when ctx is done (and only then).
func (d *debouncer) wait(ctx context.Context) reason {
	for {
		if r := d.waitOnce(ctx); r != 0 || ctx.Err() != nil {
			return r
		}
		// A stale kick: its trigger's reason was taken by the previous
		// sync (trigger records the reason before it kicks). Wait on.
	}
}

func (d *debouncer) waitOnce(ctx context.Context) reason {
	select {
	case <-ctx.Done():
		return 0
	case <-d.kick:
	}
	now := d.clock.Now()
	p, ok := d.w.begin(now)
	if !ok {
		return reason(d.pending.Swap(0))
	}
	t := d.clock.NewTimer(p.next().Sub(now))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-d.kick:
			now = d.clock.Now()
			p.kicked(now)
		case <-t.C():
			now = d.clock.Now()
		}
		if now.Before(p.next()) {
			t.Reset(p.next().Sub(now))
			continue
		}
		d.w.end(p)
		// Drain a kick that raced with the timer: its reason is taken
		// below, so it must not cause an empty second sync.
		select {
		case <-d.kick:
		default:
		}
		return reason(d.pending.Swap(0))
	}
}

// window is the debouncer's timing, pure: it is told the time, never reads
// it, so its tests replay bursts in simulated time.
type window struct {
	min, max time.Duration
	size     time.Duration // the current coalescing window
	lastEnd  time.Time     // end of the previous sync (zero: none yet)
}

func (w *window) synced(now time.Time) { w.lastEnd = now }

// quiet is how long the triggers must pause for a wait to end early: at
// least min, longer while the window is large (a dense burst's small
// stalls do not split it).
func (w *window) quiet() time.Duration { return max(w.min, w.size/8) }

// pause is one wait for a sync that did not start at once.
type pause struct {
	due      time.Time     // a window after the previous sync's end
	quietAt  time.Time     // the quiet time after the latest trigger
	quietFor time.Duration // fixed when the wait begins
}

// next is when the wait ends unless another trigger comes first.
func (p *pause) next() time.Time {
	if p.due.Before(p.quietAt) {
		return p.due
	}
	return p.quietAt
}

// kicked records a trigger at now.
func (p *pause) kicked(now time.Time) { p.quietAt = now.Add(p.quietFor) }

// begin is the first trigger of a wait, at now. ok false: sync at once (a
// quiet moment; the window halves). Otherwise the wait ends at p.next(),
// pushed back by each trigger (p.kicked), and end must be called then.
func (w *window) begin(now time.Time) (p pause, ok bool) {
	if w.lastEnd.IsZero() || now.Sub(w.lastEnd) >= w.quiet() {
		w.size = max(w.size/2, w.min)
		return pause{}, false
	}
	q := w.quiet()
	return pause{due: w.lastEnd.Add(w.size), quietAt: now.Add(q), quietFor: q}, true
}

// end closes a wait that reached p.next(): if the triggers paused for the
// quiet time, not a dense stream, the window halves; if they came all
// through the window, a burst, it doubles (up to max).
func (w *window) end(p pause) {
	if p.due.Before(p.quietAt) {
		w.size = min(2*w.size, w.max)
		return
	}
	w.size = max(w.size/2, w.min)
}

// arrivals records when the informers delivered changes, by object kind,
// until the sync that includes them ends (nftguard_event_to_kernel_seconds).
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Time
	n  int
}

// maxArrivals bounds the memory a long failure (no sync ends) can take;
// later arrivals are not measured.
const maxArrivals = 100_000

func (a *arrivals) add(kind string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n >= maxArrivals {
		return
	}
	if a.at == nil {
		a.at = map[string][]time.Time{}
	}
	a.at[kind] = append(a.at[kind], t)
	a.n++
}

// take returns and forgets what arrived so far. The sync loop takes them
// before it reads the caches: the informers update their cache before they
// deliver, so every change taken is in the sync that follows.
func (a *arrivals) take() map[string][]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.at
	a.at, a.n = nil, 0
	return out
}

// putBack returns arrivals of a failed sync, to be measured by the sync that
// finally applies them.
func (a *arrivals) putBack(old map[string][]time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, ts := range old {
		if a.n+len(ts) > maxArrivals {
			continue
		}
		if a.at == nil {
			a.at = map[string][]time.Time{}
		}
		a.at[k] = append(ts, a.at[k]...)
		a.n += len(ts)
	}
}
