package engine

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
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
	// The repair loop a caller writes (the agent's, without its
	// debounce): each drift the monitor reports is counted and re-synced.
	var drifts atomic.Uint64
	kick := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- e.Monitor(ctx, func() {
			drifts.Add(1)
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				if _, err := e.Sync(ctx, d); err != nil && ctx.Err() == nil {
					t.Errorf("repair drift: %v", err)
				}
			}
		}
	}()
	waitMonitors(t, ns, 1)
	// Our own syncs are not drift.
	if _, err := e.Sync(ctx, textDesired(21)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := drifts.Load(); n != 0 {
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
		before := drifts.Load()
		start := time.Now()
		ns.MustExec(t, cmd+"\n", "nft", "-f", "-")
		for {
			if drifts.Load() > before && sameK(want, readBack(t, ns)) == nil {
				t.Logf("%q repaired in %v", cmd, time.Since(start))
				break
			}
			if time.Since(start) > time.Minute { // a hang guard, not a bound
				t.Fatalf("%q not repaired: %v", cmd, sameK(want, readBack(t, ns)))
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

// TestMonitorUnreadableIsDrift: a datagram the monitor cannot read, or an
// event for our family it cannot parse, counts as drift (a resync), never
// as nothing; events of our own socket, of other tables and of other
// families do not.
func TestMonitorUnreadableIsDrift(t *testing.T) {
	w := eventFilter{fam: unix.NFPROTO_INET, table: "nftguard", ownPort: 42}
	event := func(typ uint16, port uint32, fam byte, attrs []byte) []byte {
		var m enc
		off := m.Msg(nfnl.MsgType(typ), 0, 1, fam, 0)
		m.B = append(m.B, attrs...)
		m.EndMsg(off)
		binary.NativeEndian.PutUint32(m.B[off+12:], port)
		return m.B
	}
	table := func(name string) []byte {
		var m enc
		m.Str(unix.NFTA_TABLE_NAME, name)
		return m.B
	}
	ours := event(unix.NFT_MSG_DELCHAIN, 7, unix.NFPROTO_INET, table("nftguard"))
	truncated := append([]byte(nil), ours...)
	binary.NativeEndian.PutUint32(truncated, uint32(len(ours)+16)) // longer than the datagram
	badAttrs := event(unix.NFT_MSG_DELCHAIN, 7, unix.NFPROTO_INET, []byte{3, 0, 1, 0})
	noHeader := ours[: nfnl.NlmsgHdrLen+2 : nfnl.NlmsgHdrLen+2]
	binary.NativeEndian.PutUint32(noHeader, uint32(len(noHeader)))
	for _, c := range []struct {
		name     string
		datagram []byte
		want     bool
	}{
		{"foreign change to our table", ours, true},
		{"malformed netlink header", truncated, true},
		{"malformed attributes", badAttrs, true},
		{"no nfgenmsg", noHeader, true},
		{"our own commit", event(unix.NFT_MSG_DELCHAIN, 42, unix.NFPROTO_INET, table("nftguard")), false},
		{"another table", event(unix.NFT_MSG_DELCHAIN, 7, unix.NFPROTO_INET, table("other")), false},
		{"another family", event(unix.NFT_MSG_DELCHAIN, 7, unix.NFPROTO_IPV4, table("nftguard")), false},
		{"new generation", event(unix.NFT_MSG_NEWGEN, 7, unix.NFPROTO_INET, nil), false},
	} {
		if got := w.drifted(c.datagram); got != c.want {
			t.Errorf("%s: drift %v, want %v", c.name, got, c.want)
		}
	}
}

// waitMonitors waits until n netfilter netlink sockets of the namespace
// have joined the nftables event group (NFNLGRP_NFTABLES), as a Monitor
// does before it reads: from then on it sees every change. The kernel
// lists each socket in /proc/net/netlink with its protocol and the bitmap
// of its first 32 groups.
func waitMonitors(t *testing.T, ns *testns.NS, n int) {
	t.Helper()
	joined := func() int {
		count := 0
		for _, line := range strings.Split(ns.MustExec(t, "", "cat", "/proc/net/netlink"), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[1] != strconv.Itoa(unix.NETLINK_NETFILTER) {
				continue
			}
			if groups, err := strconv.ParseUint(f[3], 16, 32); err == nil && groups&(1<<(unix.NFNLGRP_NFTABLES-1)) != 0 {
				count++
			}
		}
		return count
	}
	for deadline := time.Now().Add(time.Minute); joined() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d monitors joined the nftables event group", joined(), n)
		}
	}
}
