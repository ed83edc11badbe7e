package engine

import (
	"context"
	"math/rand"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/testns"
)

const killEnv = "NFTGUARD_ENGINE_KILL_CHILD_NETNS"

func killStates(t testing.TB) [2]*kernelTable {
	a := bigTable(t, 20, 4000, 5000)
	b := bigTable(t, 30, 6000, 3000)
	for _, c := range b.chains {
		for i, j := 0, len(c.rules)-1; i < j; i, j = i+1, j-1 {
			c.rules[i], c.rules[j] = c.rules[j], c.rules[i]
		}
	}
	b.prepare(unix.NFPROTO_INET)
	return [2]*kernelTable{a, b}
}

// TestKillChildHelper is the child of TestKillNine: it syncs the two states
// alternately until killed. Without the environment variable it does
// nothing.
func TestKillChildHelper(t *testing.T) {
	path := os.Getenv(killEnv)
	if path == "" {
		return
	}
	e, err := New(Table{Name: "nftguard"}, WithNetNS(path))
	if err != nil {
		t.Fatal(err)
	}
	states := killStates(t)
	for i := 0; ; i++ {
		if _, err := e.syncTable(context.Background(), states[i%2]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillNine kills a syncing child at random moments: the table is always
// exactly the old or the new state, and a fresh engine converges in one sync.
func TestKillNine(t *testing.T) {
	n := 20
	if *long {
		n = 100
	}
	ns := testns.New(t, "engkill")
	states := killStates(t)
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	seen := [3]int{}
	for i := 0; i < n; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChildHelper$")
		cmd.Env = append(os.Environ(), killEnv+"="+ns.Path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+rnd.Intn(900)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		got := readBack(t, ns)
		switch {
		case got == nil:
			seen[2]++
		case sameK(states[0], got) == nil:
			seen[0]++
		case sameK(states[1], got) == nil:
			seen[1]++
		default:
			t.Fatalf("kill %d: table is neither state: %v / %v", i, sameK(states[0], got), sameK(states[1], got))
		}
		e := newTestEngine(t, ns)
		st, err := e.syncTable(context.Background(), states[i%2])
		if err != nil || st.Attempts > 1 { // 0 when the kill left the wanted state
			t.Fatalf("fresh engine: %+v %v", st, err)
		}
		if err := sameK(states[i%2], readBack(t, ns)); err != nil {
			t.Fatalf("fresh engine did not converge: %v", err)
		}
		e.Close()
	}
	t.Logf("%d kills: state A %d times, state B %d times, no table %d times", n, seen[0], seen[1], seen[2])
}
