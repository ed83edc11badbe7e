package netlab

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestCleanupStale leaves a namespace behind as a crashed run would (an
// owner that no longer exists) and checks CleanupStale removes it while a
// live lab survives.
func TestCleanupStale(t *testing.T) {
	live := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1"}}})
	// pid 1 is running but with another start time, so this owner is gone.
	id, err := newLabID("")
	if err != nil {
		t.Fatal(err)
	}
	_, random, _ := strings.Cut(id, "-")
	stale := []string{Prefix + "1.never-" + random + "-node-n1", Prefix + "garbage-" + random}
	for _, name := range stale {
		if err := createNamed(name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Their owners are gone: the sweep removes them if the test
		// failed before CleanupStale did.
		if err := testns.SweepStale(Prefix); err != nil {
			t.Error(err)
		}
	})
	if err := CleanupStale(); err != nil {
		t.Fatal(err)
	}
	left, err := Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		if slices.Contains(left, name) {
			t.Errorf("stale namespace %s survived CleanupStale", name)
		}
	}
	if !slices.Contains(left, live.Nodes[0].NetNS) {
		t.Errorf("CleanupStale removed live namespace %s", live.Nodes[0].NetNS)
	}
}

// TestSignalCleanup runs a lab in a child process, sends it SIGTERM, and
// checks the lab's namespaces are gone and the child died of the signal.
func TestSignalCleanup(t *testing.T) {
	kerneltest.Require(t) // the child creates a lab with Create
	if os.Getenv("NETLAB_SIGNAL_CHILD") == "1" {
		l, err := Create(Spec{Nodes: []NodeSpec{{Name: "n1", Pods: []string{"x/a"}}}})
		if err != nil {
			os.Stdout.WriteString("ERROR " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("READY " + l.ID + "\n")
		time.Sleep(time.Minute)
		os.Exit(3) // never reached when the handler works
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalCleanup$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NETLAB_SIGNAL_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	line = strings.TrimSpace(line)
	id, ok := strings.CutPrefix(line, "READY ")
	if !ok {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q", line)
	}
	if _, err := os.Stat(filepath.Join(NetNSDir, Prefix+id+"-node-n1")); err != nil {
		t.Fatalf("child lab not there: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child did not die of SIGTERM: %v", err)
	}
	assertGone(t, id)
}
