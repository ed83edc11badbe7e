package testns

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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

// TestSweepStaleBusy leaves a stale namespace that the sweep cannot remove
// (a mount stacked on another, as when a later bind mount of Dir hides a
// killed run's mounts): the sweep leaves it and creating a namespace still
// works, instead of failing every test after it.
func TestSweepStaleBusy(t *testing.T) {
	kerneltest.Require(t)
	name := Prefix + "1.never-busy-0"
	path := filepath.Join(Dir, name)
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := unix.Mount("nftguard-test", path, "tmpfs", 0, "size=4k"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for range 2 {
			_ = unix.Unmount(path, unix.MNT_DETACH)
		}
		// Each later sweep peels one mount: the leftover may be gone.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove %s: %v", path, err)
		}
	})
	if err := SweepStale(Prefix); err != nil {
		t.Fatalf("sweep failed on a busy leftover: %v", err)
	}
	left, err := Leftovers(Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(left, name) {
		t.Fatalf("the busy leftover %s is gone: the test did not make it busy", name)
	}
	New(t, "afterbusy")
}
