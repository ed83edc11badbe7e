package agent

import (
	"context"
	"sync/atomic"
	"time"
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

// debouncer coalesces triggers: a sync is due MinSyncInterval after the
// latest trigger, but never later than MaxSyncInterval after the first
// trigger of a burst, so a steady stream of events cannot starve syncs.
type debouncer struct {
	min, max time.Duration
	kick     chan struct{} // capacity 1: a pending kick is enough
	pending  atomic.Uint32 // reasons since the last wait returned
}

func newDebouncer(min, max time.Duration) *debouncer {
	return &debouncer{min: min, max: max, kick: make(chan struct{}, 1)}
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
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// wait blocks until a sync is due and returns the merged reasons, or
// returns 0 when ctx is done.
func (d *debouncer) wait(ctx context.Context) reason {
	select {
	case <-ctx.Done():
		return 0
	case <-d.kick:
	}
	quiet := time.NewTimer(d.min)
	defer quiet.Stop()
	deadline := time.NewTimer(d.max)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-d.kick:
			quiet.Reset(d.min)
			continue
		case <-quiet.C:
		case <-deadline.C:
		}
		// Drain a kick that raced with the timer: its reason is taken
		// below, so it must not cause an empty second sync.
		select {
		case <-d.kick:
		default:
		}
		return reason(d.pending.Swap(0))
	}
}
