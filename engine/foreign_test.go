package engine

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/testns"
)

const foreignNft = `table ip f4 {
	set s4 { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 192.168.1.1 } }
	map m4 { type ipv4_addr : verdict; elements = { 1.2.3.4 : drop } }
	chain inp { type filter hook input priority -5; policy accept; ip saddr @s4 counter accept; ip daddr vmap @m4; }
}
table ip6 f6 {
	set s6 { type ipv6_addr; elements = { fd00::1 } }
	chain outp { type filter hook output priority 5; ip6 daddr @s6 drop; }
}
table inet finet {
	map ports { type inet_service : ipv4_addr; elements = { 80 : 10.0.0.1 } }
	chain fw4 { type filter hook forward priority 0; tcp dport { 22, 80 } accept; }
}
table bridge fbr {
	set macs { type ether_addr; elements = { 00:11:22:33:44:55 } }
	chain fw { type filter hook forward priority 0; ether saddr @macs drop; }
}
table netdev fnd {
	chain c { counter; }
}
table inet writer {
	chain c { }
}
`

var generated = regexp.MustCompile(`(?m)^# (Generated|Completed).*\n`)

func foreignSnapshot(t *testing.T, ns *testns.NS) string {
	t.Helper()
	var b strings.Builder
	for _, tbl := range []string{"ip f4", "ip6 f6", "inet finet", "bridge fbr", "netdev fnd", "ip filter", "ip mangle"} {
		b.WriteString(ns.MustExec(t, "", "nft", append([]string{"--debug=netlink", "list", "table"}, strings.Fields(tbl)...)...))
	}
	b.WriteString(generated.ReplaceAllString(ns.MustExec(t, "", "iptables-legacy-save"), ""))
	b.WriteString(generated.ReplaceAllString(ns.MustExec(t, "", "iptables-nft-save"), ""))
	return b.String()
}

// randomTable is a kernel-form table of random shape.
func randomTable(t testing.TB, rnd *rand.Rand) *kernelTable {
	k := bigTable(t, 1+rnd.Intn(5), rnd.Intn(300), rnd.Intn(300))
	for _, c := range k.chains {
		rnd.Shuffle(len(c.rules), func(i, j int) { c.rules[i], c.rules[j] = c.rules[j], c.rules[i] })
	}
	return k
}

// TestForeignStateUntouched: other tools' state in the namespace survives
// many randomized syncs byte for byte, every message we send names our
// table, and a concurrent foreign writer loses nothing.
func TestForeignStateUntouched(t *testing.T) {
	n := 200
	if *long {
		n = 1000
	}
	ns := testns.New(t, "engforeign")
	for _, args := range [][]string{
		{"iptables-nft", "-A", "INPUT", "-m", "mark", "--mark", "0x8000/0x8000", "-j", "DROP"},
		{"iptables-nft", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-m", "comment", "--comment", "ssh in", "-j", "ACCEPT"},
		{"iptables-nft", "-A", "INPUT", "-m", "recent", "--name", "r1", "--set"},
		{"iptables-nft", "-A", "FORWARD", "-m", "hashlimit", "--hashlimit-above", "10/sec", "--hashlimit-name", "h1", "-j", "DROP"},
		{"iptables-nft", "-t", "mangle", "-A", "PREROUTING", "-j", "MARK", "--set-mark", "0x10"},
		{"iptables-legacy", "-A", "INPUT", "-s", "1.2.3.4", "-j", "DROP"},
		{"iptables-legacy", "-A", "OUTPUT", "-m", "comment", "--comment", "legacy", "-j", "ACCEPT"},
	} {
		ns.MustExec(t, "", args[0], args[1:]...)
	}
	ns.MustExec(t, foreignNft, "nft", "-f", "-")
	before := foreignSnapshot(t, ns)

	var mu sync.Mutex
	var batches [][]byte
	e := newTestEngine(t, ns, withSendHook(func(b []byte) {
		mu.Lock()
		batches = append(batches, append([]byte(nil), b...))
		mu.Unlock()
	}))

	// The foreign writer: adds rules with unique comments, deletes every
	// third again by handle, all through nft in the same namespace.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var added, deleted []string
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := fmt.Sprintf("w%d", i)
			if _, err := ns.Exec("", "nft", "add", "rule", "inet", "writer", "c", "counter", "comment", c); err != nil {
				t.Error(err)
				return
			}
			added = append(added, c)
			if i%3 == 0 {
				out, _ := ns.Exec("", "nft", "-a", "list", "chain", "inet", "writer", "c")
				m := regexp.MustCompile(`comment "` + c + `" # handle (\d+)`).FindStringSubmatch(out)
				if m != nil {
					if _, err := ns.Exec("", "nft", "delete", "rule", "inet", "writer", "c", "handle", m[1]); err != nil {
						t.Error(err)
						return
					}
					deleted = append(deleted, c)
				}
			}
		}
	}()

	rnd := rand.New(rand.NewSource(1))
	ctx := context.Background()
	var last *kernelTable
	for i := 0; i < n; i++ {
		last = randomTable(t, rnd)
		if _, err := e.syncTable(ctx, last); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		if i%50 == 49 {
			if err := sameK(last, readBack(t, ns)); err != nil {
				t.Fatalf("after sync %d: %v", i, err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := sameK(last, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}

	// Nothing of the writer's is lost.
	out := ns.MustExec(t, "", "nft", "list", "chain", "inet", "writer", "c")
	gone := map[string]bool{}
	for _, c := range deleted {
		gone[c] = true
	}
	for _, c := range added {
		has := strings.Contains(out, `comment "`+c+`"`)
		if has == gone[c] {
			t.Errorf("writer rule %s: present=%v, deleted=%v", c, has, gone[c])
		}
	}
	t.Logf("%d syncs, %d batches; foreign writer added %d rules and deleted %d meanwhile", n, len(batches), len(added), len(deleted))

	if after := foreignSnapshot(t, ns); after != before {
		t.Fatalf("foreign state changed:\n--- before\n%s\n--- after\n%s", before, after)
	}
	// Every message we sent names our table (attribute 1 of every
	// nf_tables object message) in our family.
	msgs := 0
	for _, b := range batches {
		ms, err := nfnl.ParseMsgs(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Type == unix.NFNL_MSG_BATCH_BEGIN || m.Type == unix.NFNL_MSG_BATCH_END {
				continue
			}
			msgs++
			a, err := nfnl.Attrs(m.Data[nfgenHdrLen:])
			if err != nil || nfnl.CStr(a[1]) != "nftguard" || m.Data[0] != unix.NFPROTO_INET {
				t.Fatalf("message type %#x names table %q family %d", m.Type, nfnl.CStr(a[1]), m.Data[0])
			}
		}
	}
	t.Logf("checked %d messages: all name inet nftguard", msgs)
}
