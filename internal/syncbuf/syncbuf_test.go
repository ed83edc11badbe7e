package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Concurrent writers and a reader (run with -race): every write lands
// whole.
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("ab\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); strings.Count(got, "ab\n") != 400 || len(got) != 1200 {
		t.Errorf("got %d bytes, %d whole writes; want 1200, 400", len(got), strings.Count(got, "ab\n"))
	}
}
