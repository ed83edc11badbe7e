package agent

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The debouncer's subject is time, so its tests own the clock: the
// window's decisions are replayed in simulated time (replay), and the
// goroutine around it runs on a fake clock that only the test advances.
// Nothing here reads the wall clock, so the results do not depend on the
// machine's load.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// replayed is what one run of the sync loop did in simulated time.
type replayed struct {
	syncs   int
	tail    time.Duration // from the last trigger to the end of the sync that covered it
	maxWait time.Duration // the longest any trigger waited for its sync to start
	atOnce  []bool        // per sync: it started at its first trigger (the leading edge)
}

// replay runs the sync loop's timing over triggers (ascending times from
// t0) with syncs that cost cost: exactly the decisions waitOnce takes on
// each trigger and each timer, with time given instead of read.
func replay(w *window, triggers []time.Duration, cost time.Duration) replayed {
	var r replayed
	at := func(i int) time.Time { return t0.Add(triggers[i]) }
	now := t0
	for i := 0; i < len(triggers); {
		first := i
		kick := at(i) // a trigger during the previous sync kicks at its end
		if kick.Before(now) {
			kick = now
		}
		i++
		start := kick
		p, wait := w.begin(kick)
		if wait {
			for i < len(triggers) && at(i).Before(p.next()) {
				p.kicked(at(i))
				i++
			}
			start = p.next()
			w.end(p)
		}
		// Everything triggered before the pending reasons are taken is
		// in this sync.
		for i < len(triggers) && !at(i).After(start) {
			i++
		}
		for j := first; j < i; j++ {
			r.maxWait = max(r.maxWait, start.Sub(at(j)))
		}
		r.syncs++
		r.atOnce = append(r.atOnce, !wait)
		now = start.Add(cost)
		w.synced(now)
		if i == len(triggers) {
			r.tail = now.Sub(at(i - 1))
		}
	}
	return r
}

// evenly returns n trigger times gap apart, starting at from.
func evenly(from time.Duration, n int, gap time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = from + time.Duration(i)*gap
	}
	return out
}

func newWindow(min, max time.Duration) *window { return &window{min: min, max: max, size: min} }

// TestWindowLeadingEdge: after a quiet moment a trigger is synced at once,
// not after a debounce delay.
func TestWindowLeadingEdge(t *testing.T) {
	w := newWindow(DefaultMinSyncInterval, DefaultMaxSyncInterval)
	// Three lone triggers, each a quiet moment (twice min) after the
	// previous sync ended.
	r := replay(w, evenly(0, 3, 2*DefaultMinSyncInterval+time.Millisecond), time.Millisecond)
	if r.syncs != 3 || r.maxWait != 0 {
		t.Fatalf("%d syncs, longest wait %v; want 3 syncs, each at its trigger", r.syncs, r.maxWait)
	}
}

// TestWindowBurst: a 1,000-event burst costs a handful of syncs, and its
// last event is not held back for long after the burst.
func TestWindowBurst(t *testing.T) {
	for _, tc := range []struct {
		gap, cost time.Duration
		maxSyncs  int
	}{
		// log2(1 s / 20 ms) ≈ 6 doublings, plus the leading edge, plus
		// one per second-long window.
		{200 * time.Microsecond, 2 * time.Millisecond, 8}, // a fast burst: 0.2 s
		{time.Millisecond, 5 * time.Millisecond, 8},       // 1 s, a namespace of pods deleted
		{2 * time.Millisecond, 5 * time.Millisecond, 9},   // 2 s
		{10 * time.Millisecond, 5 * time.Millisecond, 17}, // 10 s, sparse: under the quiet time of min
	} {
		r := replay(newWindow(DefaultMinSyncInterval, DefaultMaxSyncInterval), evenly(0, 1000, tc.gap), tc.cost)
		t.Logf("1000 triggers %v apart, sync cost %v: %d syncs, last sync ended %v after the last trigger, longest wait %v",
			tc.gap, tc.cost, r.syncs, r.tail, r.maxWait)
		if r.syncs > tc.maxSyncs {
			t.Errorf("gap %v: %d syncs for a 1000-event burst, want at most %d (without coalescing: 1000)", tc.gap, r.syncs, tc.maxSyncs)
		}
		if !r.atOnce[0] {
			t.Errorf("gap %v: the burst's first trigger waited", tc.gap)
		}
		// No trigger waits longer than max; the last one's sync ends
		// at most max and a sync after it.
		if r.maxWait > DefaultMaxSyncInterval {
			t.Errorf("gap %v: a trigger waited %v, want at most max (%v)", tc.gap, r.maxWait, DefaultMaxSyncInterval)
		}
		if r.tail > DefaultMaxSyncInterval+tc.cost {
			t.Errorf("gap %v: last trigger's sync ended %v after it, want at most max + one sync", tc.gap, r.tail)
		}
	}
}

// TestWindowMaxDelay: under a steady stream no trigger waits longer than
// max, although the stream never pauses for the quiet time.
func TestWindowMaxDelay(t *testing.T) {
	const min, max = 20 * time.Millisecond, 200 * time.Millisecond
	r := replay(newWindow(min, max), evenly(0, 2000, 5*time.Millisecond), time.Millisecond)
	if r.maxWait > max {
		t.Fatalf("a trigger waited %v under a steady stream, want at most max (%v)", r.maxWait, max)
	}
	// 10 s of stream: one sync per window of max once it has grown.
	if r.syncs > int(10*time.Second/max)+8 {
		t.Fatalf("%d syncs for a 10 s stream, want about one per %v", r.syncs, max)
	}
}

// TestWindowSerialAfterBurst: once a burst has grown the window, a change
// made a quiet moment after the previous sync (as a user or a controller
// does after seeing the last one enforced) is still synced at once, and
// the window shrinks again.
func TestWindowSerialAfterBurst(t *testing.T) {
	w := newWindow(DefaultMinSyncInterval, DefaultMaxSyncInterval)
	replay(w, evenly(0, 300, 200*time.Microsecond), 2*time.Millisecond)
	if w.size <= DefaultMinSyncInterval {
		t.Fatalf("the burst left the window at %v, want it grown", w.size)
	}
	now := w.lastEnd
	for i := 0; i < 5; i++ {
		// A quiet moment: the quiet time of the largest window.
		now = now.Add(DefaultMaxSyncInterval/8 + time.Millisecond)
		if _, wait := w.begin(now); wait {
			t.Fatalf("change %d after a quiet moment waits (window %v)", i, w.size)
		}
		w.synced(now)
	}
	if w.size != DefaultMinSyncInterval {
		t.Fatalf("window %v after five quiet moments, want back at min", w.size)
	}
}

// TestWindowEnd: a wait ends at the window's end when triggers kept coming
// (the window doubles, up to max), at the quiet time after the last one
// when they paused (it halves, down to min).
func TestWindowEnd(t *testing.T) {
	const min, max = 10 * time.Millisecond, 80 * time.Millisecond
	for _, tc := range []struct {
		name        string
		size        time.Duration
		kicks       []time.Duration // after lastEnd; the first begins the wait
		wantEnd     time.Duration   // after lastEnd
		wantNewSize time.Duration
	}{
		{"paused", 40 * time.Millisecond, []time.Duration{time.Millisecond}, 11 * time.Millisecond, 20 * time.Millisecond},
		// At min the quiet time is the window: it ends first.
		{"at min", min, []time.Duration{time.Millisecond}, 10 * time.Millisecond, 2 * min},
		{"kept coming", 40 * time.Millisecond, evenly(time.Millisecond, 8, 5*time.Millisecond), 40 * time.Millisecond, 80 * time.Millisecond},
		{"kept coming at max", max, evenly(time.Millisecond, 16, 5*time.Millisecond), 80 * time.Millisecond, max},
		{"quiet of a large window", max, []time.Duration{time.Millisecond, 5 * time.Millisecond}, 15 * time.Millisecond, 40 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := window{min: min, max: max, size: tc.size, lastEnd: t0}
			p, wait := w.begin(t0.Add(tc.kicks[0]))
			if !wait {
				t.Fatal("a trigger right after a sync was synced at once")
			}
			for _, k := range tc.kicks[1:] {
				if !t0.Add(k).Before(p.next()) {
					t.Fatalf("kick at %v after the wait ended at %v", k, p.next().Sub(t0))
				}
				p.kicked(t0.Add(k))
			}
			if got := p.next().Sub(t0); got != tc.wantEnd {
				t.Errorf("wait ends %v after the sync, want %v", got, tc.wantEnd)
			}
			w.end(p)
			if w.size != tc.wantNewSize {
				t.Errorf("window %v after the wait, want %v", w.size, tc.wantNewSize)
			}
		})
	}
}

// waitIn runs d.wait in a goroutine and returns its result's channel.
func waitIn(ctx context.Context, d *debouncer) <-chan reason {
	out := make(chan reason, 1)
	go func() { out <- d.wait(ctx) }()
	return out
}

// timerSet polls until the debouncer's goroutine waits on a timer of the
// fake clock, or returns early with what wait returned.
func timerSet(t *testing.T, fc *clocktesting.FakeClock, res <-chan reason) (r reason, returned bool) {
	t.Helper()
	waitFor(t, "the debouncer to wait on its timer or return", func() bool {
		if fc.HasWaiters() {
			return true
		}
		select {
		case r = <-res:
			returned = true
			return true
		default:
			return false
		}
	})
	return r, returned
}

// TestDebouncerLeadingEdge: the goroutine syncs a lone trigger without a
// timer: no time passes on its clock.
func TestDebouncerLeadingEdge(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	d := newDebouncerClock(DefaultMinSyncInterval, DefaultMaxSyncInterval, fc)
	for i := 0; i < 3; i++ {
		d.trigger(reasonChange)
		r, returned := timerSet(t, fc, waitIn(context.Background(), d))
		if !returned {
			t.Fatalf("lone trigger %d waits on a timer, want it synced at once", i)
		}
		if !r.has(reasonChange) {
			t.Fatalf("reasons %b", r)
		}
		d.synced()
		fc.Step(2 * DefaultMinSyncInterval) // a quiet moment
	}
}

// TestDebouncerMergesReasons: what arrives while a sync runs is merged into
// the next one, which waits the quiet time (min) and not a moment less.
func TestDebouncerMergesReasons(t *testing.T) {
	const min = 20 * time.Millisecond
	fc := clocktesting.NewFakeClock(t0)
	d := newDebouncerClock(min, time.Second, fc)
	ctx := context.Background()
	d.trigger(reasonStart)
	if r := d.wait(ctx); r != reasonStart {
		t.Fatalf("reasons %b", r)
	}
	// During the sync:
	d.trigger(reasonChange)
	d.trigger(reasonDrift)
	d.synced()
	res := waitIn(ctx, d)
	if r, returned := timerSet(t, fc, res); returned {
		t.Fatalf("a trigger during a sync was synced at once (%b), want coalesced for min", r)
	}
	fc.Step(min - time.Nanosecond)
	select {
	case r := <-res:
		t.Fatalf("synced (%b) before the quiet time passed", r)
	default:
	}
	fc.Step(time.Nanosecond)
	if r := <-res; !r.has(reasonChange) || !r.has(reasonDrift) {
		t.Fatalf("reasons %b, want change and drift merged", r)
	}
}

// TestDebouncerFollowsWindow: the goroutine ends a wait when the window
// says: a trigger during it pushes the quiet time back.
func TestDebouncerFollowsWindow(t *testing.T) {
	const min = 20 * time.Millisecond
	fc := clocktesting.NewFakeClock(t0)
	d := newDebouncerClock(min, time.Second, fc)
	d.synced()
	d.trigger(reasonChange)
	res := waitIn(context.Background(), d)
	if _, returned := timerSet(t, fc, res); returned {
		t.Fatal("a trigger right after a sync was synced at once")
	}
	fc.Step(min / 2)
	d.trigger(reasonDrift)
	// The kick is taken and the timer moved: the window's due time
	// (min after the sync) passes, the wait ends there.
	waitFor(t, "the kick to be taken", func() bool { return len(d.kick) == 0 })
	fc.Step(min / 2)
	if r := <-res; !r.has(reasonChange) || !r.has(reasonDrift) {
		t.Fatalf("reasons %b", r)
	}
	if d.w.size != 2*min {
		t.Fatalf("window %v after triggers all through it, want doubled", d.w.size)
	}
}

func TestDebouncerStops(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	d := newDebouncerClock(time.Hour, time.Hour, fc)
	ctx, cancel := context.WithCancel(context.Background())
	d.trigger(reasonStart)
	d.wait(ctx)
	d.synced()
	d.trigger(reasonChange)
	res := waitIn(ctx, d)
	timerSet(t, fc, res)
	cancel()
	if r := <-res; r != 0 {
		t.Fatalf("wait returned %b after cancel, want 0", r)
	}
}

// TestDebouncerStaleKick: a kick whose reason an earlier wait already took
// must not end the loop (wait returns 0 only when ctx is done).
func TestDebouncerStaleKick(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	d := newDebouncerClock(DefaultMinSyncInterval, DefaultMaxSyncInterval, fc)
	d.pending.Store(uint32(reasonChange))
	d.kick <- struct{}{}
	if r := d.wait(context.Background()); r != reasonChange {
		t.Fatalf("reasons %b", r)
	}
	d.synced()
	// The trigger's kick lands after its reason was taken.
	d.kick <- struct{}{}
	res := waitIn(context.Background(), d)
	if r, returned := timerSet(t, fc, res); returned {
		t.Fatalf("wait returned %b on a stale kick", r)
	}
	fc.Step(DefaultMaxSyncInterval)
	d.trigger(reasonDrift)
	if r := <-res; r != reasonDrift {
		t.Fatalf("wait returned %b after a stale kick, want the next trigger's reason", r)
	}
}

// TestDebouncerInterruptible: the context of interruptible work ends with
// the next trigger, or at once when a sync is already asked for, and a
// stop releases it.
func TestDebouncerInterruptible(t *testing.T) {
	d := newDebouncerClock(DefaultMinSyncInterval, DefaultMaxSyncInterval, clocktesting.NewFakeClock(t0))
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
