package engine

import (
	"context"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/testns"
)

// TestDriftRepaired: deleting our table, a chain, a rule or an element with
// nft is noticed and repaired within 1 s; our own syncs are not drift.
func TestDriftRepaired(t *testing.T) {
	ns := testns.New(t, "engdrift")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newTestEngine(t, ns)
	d := textDesired(20)
	if _, err := e.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	want, err := compile(e.fam, d)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, 20*time.Millisecond, func(err error) { t.Log(err) }) }()
	time.Sleep(100 * time.Millisecond)
	// Our own syncs are not drift.
	if _, err := e.Sync(ctx, textDesired(21)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := e.Drifts(); n != 0 {
		t.Fatalf("own syncs counted as %d drifts", n)
	}
	// A foreign table is not drift either.
	ns.MustExec(t, "add table inet other\nadd chain inet other c\n", "nft", "-f", "-")
	for _, cmd := range []string{
		"delete element inet nftguard allowed { 10.0.0.1 }",
		"delete rule inet nftguard pod-a handle " + handleOf(t, ns, "pod-a"),
		"flush chain inet nftguard forward\ndelete chain inet nftguard forward",
		"add rule inet nftguard input drop",
		"delete table inet nftguard",
	} {
		before := e.Drifts()
		start := time.Now()
		ns.MustExec(t, cmd+"\n", "nft", "-f", "-")
		for {
			if e.Drifts() > before && sameK(want, readBack(t, ns)) == nil {
				t.Logf("%q repaired in %v", cmd, time.Since(start))
				break
			}
			if time.Since(start) > time.Second {
				t.Fatalf("%q not repaired within 1s: %v", cmd, sameK(want, readBack(t, ns)))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func handleOf(t *testing.T, ns *testns.NS, chain string) string {
	k := readBack(t, ns)
	r := k.chains[chain].rules[0]
	return formatUint(r.handle)
}

func formatUint(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}
