package testns

import (
	"slices"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/kerneltest"
)

// TestSweepStale leaves namespaces behind as a killed run would (an owner
// whose process is gone, a name without an owner) and checks the next
// Create removes them while a live test's namespace survives.
func TestSweepStale(t *testing.T) {
	kerneltest.Require(t)
	live := New(t, "live")
	// pid 1 runs, but not with this start time: the owner is gone.
	stale := []string{Prefix + "1.never-sweep-0", Prefix + "noowner"}
	for _, name := range stale {
		if err := createNamed(name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range stale {
			_ = removeFile(name)
		}
	})
	next := New(t, "next") // Create sweeps first
	left, err := Leftovers(Prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		if slices.Contains(left, name) {
			t.Errorf("stale namespace %s survived the sweep", name)
		}
	}
	for _, ns := range []*NS{live, next} {
		if !slices.Contains(left, ns.Name) {
			t.Errorf("the sweep removed the live namespace %s", ns.Name)
		}
	}
	owner, err := Owner()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(live.Name, Prefix+owner+"-live-") {
		t.Errorf("namespace %s does not carry its owner %s", live.Name, owner)
	}
}
