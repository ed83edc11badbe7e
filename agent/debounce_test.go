package agent

import (
	"context"
	"testing"
	"time"
)

func TestDebouncerCoalescesBurst(t *testing.T) {
	// The quiet time is long against the gaps in the burst, so a loaded
	// machine stretching a 2ms sleep cannot split the burst.
	d := newDebouncer(300*time.Millisecond, 5*time.Second)
	ctx := context.Background()
	start := time.Now()
	go func() {
		for i := 0; i < 10; i++ {
			d.trigger(reasonChange)
			time.Sleep(2 * time.Millisecond)
		}
		d.trigger(reasonDrift)
	}()
	r := d.wait(ctx)
	if !r.has(reasonChange) || !r.has(reasonDrift) {
		t.Fatalf("reasons %b, want change and drift merged", r)
	}
	// The sync is due 300ms after the burst's last event, not before.
	if got := time.Since(start); got < 300*time.Millisecond || got > 4*time.Second {
		t.Fatalf("sync after %v, want once the burst is quiet for 300ms", got)
	}
}

func TestDebouncerMaxDelay(t *testing.T) {
	d := newDebouncer(100*time.Millisecond, 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// A stream with gaps shorter than min never goes quiet.
		for ctx.Err() == nil {
			d.trigger(reasonChange)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	if r := d.wait(ctx); !r.has(reasonChange) {
		t.Fatalf("reasons %b", r)
	}
	if got := time.Since(start); got > 600*time.Millisecond {
		t.Fatalf("sync after %v under a steady stream, want about max (300ms)", got)
	}
}

func TestDebouncerStops(t *testing.T) {
	d := newDebouncer(time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	d.trigger(reasonStart)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if r := d.wait(ctx); r != 0 {
		t.Fatalf("wait returned %b after cancel, want 0", r)
	}
}
