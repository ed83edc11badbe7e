package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestDebouncerLeadingEdge: after a quiet moment a trigger is synced at
// once, not after a debounce delay.
func TestDebouncerLeadingEdge(t *testing.T) {
	d := newDebouncer(DefaultMinSyncInterval, DefaultMaxSyncInterval)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		start := time.Now()
		d.trigger(reasonChange)
		if r := d.wait(ctx); !r.has(reasonChange) {
			t.Fatalf("reasons %b", r)
		}
		if got := time.Since(start); got > 5*time.Millisecond {
			t.Fatalf("lone trigger %d synced after %v, want at once", i, got)
		}
		d.synced()
		time.Sleep(2 * DefaultMinSyncInterval) // quiet
	}
}

// burst runs a sync loop (each sync costing cost) against a burst of n
// triggers spaced gap apart, and returns the number of syncs and how long
// after the last trigger the last sync ended.
func burst(t *testing.T, d *debouncer, n int, gap, cost time.Duration) (syncs int, tail time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent, lastAt atomic.Int64
	go func() {
		for i := 0; i < n; i++ {
			d.trigger(reasonChange)
			lastAt.Store(time.Now().UnixNano())
			sent.Add(1)
			time.Sleep(gap)
		}
	}()
	for {
		// Everything sent before the wait returns is in this sync.
		r := d.wait(ctx)
		covered := sent.Load()
		if r == 0 {
			t.Fatal("wait returned nothing")
		}
		syncs++
		time.Sleep(cost)
		d.synced()
		if covered == int64(n) {
			return syncs, time.Since(time.Unix(0, lastAt.Load()))
		}
	}
}

// TestDebouncerBurst: a 1,000-event burst costs a handful of syncs, and its
// last event is not held back for long after the burst.
func TestDebouncerBurst(t *testing.T) {
	for _, tc := range []struct {
		gap, cost time.Duration
	}{
		{200 * time.Microsecond, 2 * time.Millisecond}, // a fast burst: ~0.2-0.5s
		{time.Millisecond, 5 * time.Millisecond},       // ~1-2s, a namespace of pods deleted
		{2 * time.Millisecond, 5 * time.Millisecond},   // ~2-4s
	} {
		d := newDebouncer(DefaultMinSyncInterval, DefaultMaxSyncInterval)
		start := time.Now()
		syncs, tail := burst(t, d, 1000, tc.gap, tc.cost)
		t.Logf("1000 triggers %v apart over %v, sync cost %v: %d syncs, last sync ended %v after the last trigger",
			tc.gap, time.Since(start).Round(time.Millisecond), tc.cost, syncs, tail.Round(time.Millisecond))
		// 7-10 on an idle machine; a loaded scheduler stretches gaps past
		// the quiet time and adds a few. Without coalescing it is 1000.
		if syncs > 20 {
			t.Errorf("%d syncs for a 1000-event burst, want at most 20", syncs)
		}
		// The slack is for a loaded CI machine's scheduler; without the
		// max interval the tail would be the whole burst (seconds).
		if tail > DefaultMaxSyncInterval+time.Second {
			t.Errorf("last trigger waited %v, want at most about max (%v)", tail, DefaultMaxSyncInterval)
		}
	}
}

// TestDebouncerMaxDelay: under a steady stream no trigger waits longer than
// max.
func TestDebouncerMaxDelay(t *testing.T) {
	d := newDebouncer(20*time.Millisecond, 200*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			d.trigger(reasonChange)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for i := 0; i < 8; i++ {
		start := time.Now()
		if r := d.wait(ctx); !r.has(reasonChange) {
			t.Fatalf("reasons %b", r)
		}
		// Without max the steady stream would hold the sync forever; the
		// slack over max is for a loaded machine's scheduler.
		if got := time.Since(start); got > 200*time.Millisecond+time.Second {
			t.Fatalf("sync %d after %v under a steady stream, want at most about max (200ms)", i, got)
		}
		d.synced()
	}
}

// TestDebouncerMergesReasons: what arrives while a sync runs is merged into
// the next one.
func TestDebouncerMergesReasons(t *testing.T) {
	d := newDebouncer(20*time.Millisecond, time.Second)
	ctx := context.Background()
	d.trigger(reasonStart)
	if r := d.wait(ctx); r != reasonStart {
		t.Fatalf("reasons %b", r)
	}
	// During the sync:
	d.trigger(reasonChange)
	d.trigger(reasonDrift)
	d.synced()
	start := time.Now()
	r := d.wait(ctx)
	if !r.has(reasonChange) || !r.has(reasonDrift) {
		t.Fatalf("reasons %b, want change and drift merged", r)
	}
	if got := time.Since(start); got < 15*time.Millisecond {
		t.Fatalf("a trigger during a sync was synced after %v, want coalesced for about min", got)
	}
}

func TestDebouncerStops(t *testing.T) {
	d := newDebouncer(time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	d.trigger(reasonStart)
	d.wait(ctx)
	d.synced()
	d.trigger(reasonChange)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if r := d.wait(ctx); r != 0 {
		t.Fatalf("wait returned %b after cancel, want 0", r)
	}
}

// TestDebouncerSerialAfterBurst: once a burst has grown the window, a
// change made a quiet moment after the previous sync (as a user or a
// controller does after seeing the last one enforced) is still synced at
// once.
func TestDebouncerSerialAfterBurst(t *testing.T) {
	d := newDebouncer(DefaultMinSyncInterval, DefaultMaxSyncInterval)
	burst(t, d, 300, 200*time.Microsecond, 2*time.Millisecond)
	for i := 0; i < 5; i++ {
		// A quiet moment: the quiet time of the largest window.
		time.Sleep(DefaultMaxSyncInterval/8 + 5*time.Millisecond)
		start := time.Now()
		d.trigger(reasonChange)
		d.wait(context.Background())
		if got := time.Since(start); got > 5*time.Millisecond {
			t.Fatalf("change %d after a quiet moment synced after %v, want at once", i, got)
		}
		d.synced()
	}
}

// TestDebouncerStaleKick: a kick whose reason an earlier wait already took
// must not end the loop (wait returns 0 only when ctx is done).
func TestDebouncerStaleKick(t *testing.T) {
	d := newDebouncer(DefaultMinSyncInterval, DefaultMaxSyncInterval)
	d.pending.Store(uint32(reasonChange))
	d.kick <- struct{}{}
	if r := d.wait(context.Background()); r != reasonChange {
		t.Fatalf("reasons %b", r)
	}
	d.synced()
	// The trigger's kick lands after its reason was taken.
	d.kick <- struct{}{}
	go func() { time.Sleep(50 * time.Millisecond); d.trigger(reasonDrift) }()
	if r := d.wait(context.Background()); r != reasonDrift {
		t.Fatalf("wait returned %b after a stale kick, want the next trigger's reason", r)
	}
}

// TestDebouncerInterruptible: the context of interruptible work ends with
// the next trigger, or at once when a sync is already asked for, and a
// stop releases it.
func TestDebouncerInterruptible(t *testing.T) {
	d := newDebouncer(DefaultMinSyncInterval, DefaultMaxSyncInterval)
	bg := context.Background()

	ctx, stop := d.interruptible(bg)
	if ctx.Err() != nil {
		t.Fatal("interrupted with no sync asked for")
	}
	d.trigger(reasonChange)
	if ctx.Err() == nil {
		t.Fatal("a trigger did not interrupt")
	}
	stop()

	// The trigger above is still pending (no wait took it): a new
	// interruptible context ends at once.
	ctx, stop = d.interruptible(bg)
	if ctx.Err() == nil {
		t.Fatal("not interrupted although a sync is asked for")
	}
	stop()
	if r := d.wait(bg); !r.has(reasonChange) {
		t.Fatalf("the interrupting trigger's reason was lost: %b", r)
	}
	d.synced()

	ctx, stop = d.interruptible(bg)
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop did not release the context")
	}
	d.mu.Lock()
	left := d.interrupt != nil
	d.mu.Unlock()
	if left {
		t.Fatal("stop left the interrupt set: a later trigger would cancel a released context")
	}
}
