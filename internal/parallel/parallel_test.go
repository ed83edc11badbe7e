package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

func TestWorkers(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, c := range []struct{ n, batch, limit, want int }{
		{0, 1, 0, 0},
		{1, 1, 0, 1},
		{1000, 1, 0, procs},
		{1000, 1, 1, 1},
		{64, 64, 0, 1}, // one batch
		{65, 64, 0, min(procs, 2)},
		{1000, 1, procs + 5, procs},
	} {
		if got := Workers(c.n, c.batch, c.limit); got != c.want {
			t.Errorf("Workers(%d, %d, %d) = %d, want %d", c.n, c.batch, c.limit, got, c.want)
		}
	}
}

// Every index is called exactly once, by a worker in range, whatever the
// batch and the number of workers; one worker calls in order.
func TestFor(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 5} {
		for _, batch := range []int{1, 3, 64} {
			for _, n := range []int{0, 1, 7, 200} {
				calls := make([]atomic.Int32, n)
				var order []int
				var bad atomic.Bool
				For(workers, n, batch, func(w, i int) {
					if w < 0 || w >= max(workers, 1) {
						bad.Store(true)
					}
					calls[i].Add(1)
					if workers <= 1 {
						order = append(order, i)
					}
				})
				if bad.Load() {
					t.Errorf("workers %d, batch %d, n %d: a worker index out of range", workers, batch, n)
				}
				for i := range calls {
					if c := calls[i].Load(); c != 1 {
						t.Errorf("workers %d, batch %d, n %d: index %d called %d times", workers, batch, n, i, c)
					}
				}
				for i, got := range order {
					if got != i {
						t.Fatalf("one worker: call %d was index %d, want in order", i, got)
					}
				}
			}
		}
	}
}
