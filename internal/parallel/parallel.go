// Package parallel runs the calls of a loop on a few goroutines: the one
// worker pool of the module (manifest decoding, the engine's compile).
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers is how many goroutines n calls handed out batch at a time can
// keep busy: at most GOMAXPROCS, and at most limit when limit > 0.
func Workers(n, batch, limit int) int {
	w := min(runtime.GOMAXPROCS(0), (n+batch-1)/batch)
	if limit > 0 {
		w = min(w, limit)
	}
	return w
}

// For calls fn(w, i) for every i from 0 to n-1 on workers goroutines,
// handing out batch indexes at a time, and returns when all calls have.
// w is the index of the goroutine making the call (0 to workers-1), for
// state a goroutine keeps to itself; fn must otherwise write only what
// index i owns. With fewer than two workers the calls run in order on the
// caller's goroutine, with w 0.
func For(workers, n, batch int, fn func(w, i int)) {
	if workers <= 1 {
		for i := range n {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				start := int(next.Add(int64(batch))) - batch
				if start >= n {
					return
				}
				for i := start; i < min(start+batch, n); i++ {
					fn(w, i)
				}
			}
		})
	}
	wg.Wait()
}
