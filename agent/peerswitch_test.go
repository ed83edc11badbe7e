package agent

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestWatchForSlices: auto that chose Pods asks again at every tick and
// stops (to restart) at the first answer that says slices; it asks nothing
// between ticks, and gives up when its context ends.
func TestWatchForSlices(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	var asked atomic.Int32
	answers := []PeerSource{PeerSourcePods, PeerSourcePods, PeerSourceSlices}
	choose := func(context.Context) (PeerSource, string) {
		n := asked.Add(1)
		return answers[n-1], "test"
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan bool, 1)
	go func() { done <- watchForSlices(context.Background(), fc, 30*time.Second, choose, log) }()
	for i := 1; i <= 3; i++ {
		for !fc.HasWaiters() {
			time.Sleep(time.Millisecond) // the watcher reaches its ticker
		}
		fc.Step(30 * time.Second)
		for asked.Load() < int32(i) {
			time.Sleep(time.Millisecond)
		}
	}
	if !<-done {
		t.Fatal("watchForSlices returned false after an answer of slices")
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("asked %d times, want 3", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- watchForSlices(ctx, fc, 30*time.Second, func(context.Context) (PeerSource, string) { return PeerSourcePods, "" }, log)
	}()
	cancel()
	if <-done {
		t.Error("watchForSlices reported slices after its context ended")
	}
}
