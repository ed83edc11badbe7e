package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/testns"
)

// timedDesired is a table with the DNS forwarder's shape: timeout sets of
// (pod, destination) pairs and of protocols, used by rules, next to an
// ordinary set with elements, and a timeout set no rule uses.
func timedDesired(subjects ...string) *Desired {
	var subj []Element
	for _, s := range subjects {
		subj = append(subj, Element{Key: s})
	}
	return &Desired{
		Sets: []Set{
			{Name: "dns4", Type: "ipv4_addr . ipv4_addr", Timeout: true, Comment: "fqdn answers"},
			{Name: "dns6", Type: "ipv6_addr . ipv6_addr", Timeout: true},
			{Name: "alive", Type: "inet_proto", Timeout: true},
			{Name: "spare", Type: "ipv4_addr", Timeout: true},
			{Name: "subj4", Type: "ipv4_addr", Elements: subj},
		},
		Chains: []Chain{
			{Name: "forward", Type: "filter", Hook: "forward", Priority: 0, Policy: "accept", Rules: []Rule{
				{Rule: "ip saddr . ip daddr @dns4 accept"},
				{Rule: "ip6 saddr . ip6 daddr @dns6 accept"},
				{Rule: "ip saddr @subj4 meta l4proto @alive drop"},
			}},
		},
	}
}

func timedKeys(states []TimedState) string {
	var ks []string
	for _, s := range states {
		ks = append(ks, s.Key)
	}
	return strings.Join(ks, ",")
}

func mustReadTimed(t testing.TB, e *Engine, set string) []TimedState {
	t.Helper()
	st, err := e.ReadTimed(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTimeoutSetKeepsElements: Sync creates timeout sets but never touches
// their elements: a later Sync, a restarted engine (start-up read and
// diff) and a fresh read all keep what AddTimed added; a changed
// declaration recreates the set (empty) and a set no longer desired goes.
func TestTimeoutSetKeepsElements(t *testing.T) {
	ns := testns.New(t, "s9e-keep")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	d := timedDesired("10.0.0.1")
	if _, err := e.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	elems := []TimedElement{
		{Set: "dns4", Key: "10.0.0.1 . 192.0.2.7", Timeout: 100 * time.Second},
		{Set: "dns4", Key: "10.0.0.2 . 192.0.2.8", Timeout: 100 * time.Second},
		{Set: "dns6", Key: "fd00::1 . 2001:db8::7", Timeout: 100 * time.Second},
		{Set: "alive", Key: "udp", Timeout: 100 * time.Second},
	}
	if err := e.AddTimed(ctx, elems); err != nil {
		t.Fatal(err)
	}
	check := func(what string, e *Engine) {
		t.Helper()
		if got := timedKeys(mustReadTimed(t, e, "dns4")); got != "10.0.0.1 . 192.0.2.7,10.0.0.2 . 192.0.2.8" && got != "10.0.0.2 . 192.0.2.8,10.0.0.1 . 192.0.2.7" {
			t.Errorf("%s: dns4 holds %q", what, got)
		}
		if got := timedKeys(mustReadTimed(t, e, "dns6")); got != "fd00::1 . 2001:db8::7" {
			t.Errorf("%s: dns6 holds %q", what, got)
		}
		if got := timedKeys(mustReadTimed(t, e, "alive")); got != "udp" {
			t.Errorf("%s: alive holds %q", what, got)
		}
	}
	check("after AddTimed", e)
	list := ns.MustExec(t, "", "nft", "list", "set", "inet", "nftguard", "dns4")
	if !strings.Contains(list, "flags timeout") || !strings.Contains(list, "10.0.0.1 . 192.0.2.7 timeout 1m40s expires") {
		t.Errorf("nft lists dns4 as:\n%s", list)
	}

	// Another Sync that changes the table elsewhere.
	st, err := e.Sync(ctx, timedDesired("10.0.0.1", "10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Operations != 1 {
		t.Errorf("sync of one new element: %+v", st)
	}
	check("after a Sync", e)

	// A fresh read equals the compiled table (no elements on either side).
	want, err := compile(e.fam, timedDesired("10.0.0.1", "10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sameK(want, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}

	// A restarted agent: a new engine diffs what it finds.
	e2 := newTestEngine(t, ns)
	st, err = e2.Sync(ctx, timedDesired("10.0.0.1", "10.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Full || st.Messages != 0 {
		t.Errorf("restart sync: %+v, want no change", st)
	}
	check("after a restart", e2)
	// ... and one that finds an older table diffs it too.
	e3 := newTestEngine(t, ns)
	if st, err = e3.Sync(ctx, timedDesired("10.0.0.1")); err != nil || st.Full {
		t.Fatalf("restart sync with a change: %+v %v", st, err)
	}
	check("after a restart with a change", e3)

	// A changed declaration (here its comment) recreates the set.
	d2 := timedDesired("10.0.0.1")
	d2.Sets[0].Comment = "fqdn answers v2"
	if _, err := e3.Sync(ctx, d2); err != nil {
		t.Fatal(err)
	}
	if got := mustReadTimed(t, e3, "dns4"); len(got) != 0 {
		t.Errorf("recreated dns4 holds %v", got)
	}
	if got := timedKeys(mustReadTimed(t, e3, "dns6")); got != "fd00::1 . 2001:db8::7" {
		t.Errorf("dns6 lost its elements when dns4 was recreated: %q", got)
	}

	// A set no longer desired goes; adding to it is "not found".
	d3 := timedDesired("10.0.0.1")
	d3.Sets = d3.Sets[1:]
	d3.Chains[0].Rules = d3.Chains[0].Rules[1:]
	if _, err := e3.Sync(ctx, d3); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Exec("", "nft", "list", "set", "inet", "nftguard", "dns4"); err == nil {
		t.Error("dns4 still exists")
	}
	err = e3.AddTimed(ctx, elems[:1])
	if !IsNotFound(err) || !strings.Contains(err.Error(), `"dns4"`) {
		t.Errorf("AddTimed to a removed set: %v", err)
	}

	// Render's script loads into the same kernel state.
	ns2 := testns.New(t, "s9e-keepr")
	script, err := Render(Table{Name: "nftguard"}, d)
	if err != nil {
		t.Fatal(err)
	}
	ns2.MustExec(t, script, "nft", "-f", "-")
	if err := sameK(mustCompile(t, d), readBack(t, ns2)); err != nil {
		t.Fatalf("nft -f of Render differs: %v\n%s", err, script)
	}
}

// TestAddTimedRefreshes: re-adding an element restarts its timer with the
// new timeout, longer or shorter; timeouts round up to milliseconds.
func TestAddTimedRefreshes(t *testing.T) {
	ns := testns.New(t, "s9e-refresh")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if _, err := e.Sync(ctx, timedDesired()); err != nil {
		t.Fatal(err)
	}
	key := "10.0.0.1 . 192.0.2.7"
	for _, to := range []time.Duration{10 * time.Second, 100 * time.Second, 2 * time.Second} {
		if err := e.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: key, Timeout: to}}); err != nil {
			t.Fatal(err)
		}
		got := mustReadTimed(t, e, "dns4")
		if len(got) != 1 || got[0].Key != key || got[0].Timeout != to {
			t.Fatalf("after adding with %v: %+v, want timeout %v", to, got, to)
		}
		if got[0].Expires > to || got[0].Expires < to-time.Second {
			t.Errorf("after adding with %v: expires in %v", to, got[0].Expires)
		}
	}
	// The same timeout again restarts the timer too (a heartbeat, a
	// name resolved again): the kernel does so only when the expiration
	// is sent along.
	if err := e.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: key, Timeout: 3 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if err := e.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: key, Timeout: 3 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	if got := mustReadTimed(t, e, "dns4"); len(got) != 1 || got[0].Expires < 2500*time.Millisecond {
		t.Errorf("re-added with the same 3 s timeout 1.2 s later: %+v, want it to expire in 3 s again", got)
	}
	// The kernel keeps timeouts in jiffies (4 ms at HZ=250), so a
	// rounded-up 1.5 ms reads back as at least 2 ms and one jiffy at most.
	if err := e.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: key, Timeout: 1500 * time.Microsecond}}); err != nil {
		t.Fatal(err)
	}
	if got := mustReadTimed(t, e, "dns4"); len(got) == 1 && (got[0].Timeout < 2*time.Millisecond || got[0].Timeout > 10*time.Millisecond) {
		t.Errorf("1.5 ms reads back as %v", got[0].Timeout)
	}
}

// TestTimedExpire: an element leaves its set when its timeout passes; a
// longer-lived one stays.
func TestTimedExpire(t *testing.T) {
	ns := testns.New(t, "s9e-expire")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if _, err := e.Sync(ctx, timedDesired()); err != nil {
		t.Fatal(err)
	}
	if err := e.AddTimed(ctx, []TimedElement{
		{Set: "dns4", Key: "10.0.0.1 . 192.0.2.1", Timeout: 300 * time.Millisecond},
		{Set: "dns4", Key: "10.0.0.1 . 192.0.2.2", Timeout: time.Minute},
	}); err != nil {
		t.Fatal(err)
	}
	if n := len(mustReadTimed(t, e, "dns4")); n != 2 {
		t.Fatalf("%d elements, want 2", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := timedKeys(mustReadTimed(t, e, "dns4"))
		if got == "10.0.0.1 . 192.0.2.2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s the set holds %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAddTimedErrors: a set that is not a timeout set of the last Sync,
// a key that does not parse or a timeout that is not positive is refused
// before anything is sent; a set someone deleted is "not found".
func TestAddTimedErrors(t *testing.T) {
	ns := testns.New(t, "s9e-errors")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if err := e.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: "10.0.0.1 . 192.0.2.1", Timeout: time.Second}}); !IsNotFound(err) {
		t.Errorf("AddTimed before any Sync: %v", err)
	}
	if _, err := e.Sync(ctx, timedDesired("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	good := TimedElement{Set: "dns4", Key: "10.0.0.1 . 192.0.2.1", Timeout: time.Second}
	for _, c := range []struct {
		name     string
		el       TimedElement
		want     []string
		notFound bool
	}{
		{"unknown set", TimedElement{Set: "nope", Key: "10.0.0.1", Timeout: time.Second}, []string{`"nope"`, "not a timeout set"}, true},
		{"not a timeout set", TimedElement{Set: "subj4", Key: "10.0.0.2", Timeout: time.Second}, []string{`"subj4"`, "not a timeout set"}, true},
		{"one field of two", TimedElement{Set: "dns4", Key: "10.0.0.1", Timeout: time.Second}, []string{"dns4", `"10.0.0.1"`}, false},
		{"bad address", TimedElement{Set: "dns4", Key: "10.0.0.1 . 192.0.2.300", Timeout: time.Second}, []string{"dns4", `"10.0.0.1 . 192.0.2.300"`}, false},
		{"a prefix", TimedElement{Set: "dns4", Key: "10.0.0.1 . 192.0.2.0/24", Timeout: time.Second}, []string{"dns4", "192.0.2.0/24"}, false},
		{"ipv6 in ipv4", TimedElement{Set: "dns4", Key: "10.0.0.1 . fd00::1", Timeout: time.Second}, []string{"dns4", "fd00::1"}, false},
		{"zero timeout", TimedElement{Set: "dns4", Key: "10.0.0.1 . 192.0.2.9", Timeout: 0}, []string{"dns4", "not positive"}, false},
	} {
		err := e.AddTimed(ctx, []TimedElement{good, c.el})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
		if IsNotFound(err) != c.notFound {
			t.Errorf("%s: IsNotFound(%v) = %v", c.name, err, !c.notFound)
		}
	}
	if got := mustReadTimed(t, e, "dns4"); len(got) != 0 {
		t.Errorf("refused calls added %v", got)
	}
	// Deleted behind the engine's back (no rule uses spare).
	ns.MustExec(t, "", "nft", "delete", "set", "inet", "nftguard", "spare")
	err := e.AddTimed(ctx, []TimedElement{good, {Set: "spare", Key: "10.0.0.1", Timeout: time.Second}})
	var ke *Error
	if !IsNotFound(err) || !errors.As(err, &ke) || ke.Object != "spare" {
		t.Errorf("AddTimed to a set the kernel lacks: %v", err)
	}
	if got := mustReadTimed(t, e, "dns4"); len(got) != 0 {
		t.Errorf("a failed batch added %v", got)
	}
	if _, err := e.ReadTimed(ctx, "spare"); !IsNotFound(err) {
		t.Errorf("ReadTimed of a set the kernel lacks: %v", err)
	}
}

// TestAddTimedLarge: 10,000 elements go in one call (several messages,
// a raised send buffer) and all arrive.
func TestAddTimedLarge(t *testing.T) {
	ns := testns.New(t, "s9e-large")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if _, err := e.Sync(ctx, timedDesired()); err != nil {
		t.Fatal(err)
	}
	els := make([]TimedElement, 10000)
	for i := range els {
		els[i] = TimedElement{Set: "dns4", Key: fmt.Sprintf("10.0.%d.%d . 192.0.2.1", i/250, i%250), Timeout: time.Minute}
	}
	els = append(els, TimedElement{Set: "alive", Key: "tcp", Timeout: time.Minute})
	start := time.Now()
	if err := e.AddTimed(ctx, els); err != nil {
		t.Fatal(err)
	}
	t.Logf("10,001 elements in %v", time.Since(start))
	if n := len(mustReadTimed(t, e, "dns4")); n != 10000 {
		t.Errorf("dns4 holds %d elements, want 10000", n)
	}
	if got := timedKeys(mustReadTimed(t, e, "alive")); got != "tcp" {
		t.Errorf("alive holds %q", got)
	}
}

// countDrift runs e's monitor, counting the drifts it reports.
func countDrift(t *testing.T, ctx context.Context, e *Engine) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	done := make(chan error, 1)
	go func() { done <- e.Monitor(ctx, func() { n.Add(1) }) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("monitor: %v", err)
		}
	})
	return &n
}

// TestMonitorIgnoresTimed: AddTimed's elements and the kernel's expiries
// of them are not drift, while a foreign rule change still is. A second
// engine that knows no timeout sets proves the events were there.
func TestMonitorIgnoresTimed(t *testing.T) {
	ns := testns.New(t, "s9e-monitor")
	ctx, cancel := context.WithCancel(context.Background())
	e := newTestEngine(t, ns)
	if _, err := e.Sync(ctx, timedDesired("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	blind := newTestEngine(t, ns) // never synced: knows no timeout set
	drift, seen := countDrift(t, ctx, e), countDrift(t, ctx, blind)
	defer cancel()
	waitMonitors(t, ns, 2)
	var els []TimedElement
	for i := range 20 {
		els = append(els, TimedElement{Set: "dns4", Key: fmt.Sprintf("10.0.0.%d . 192.0.2.1", i), Timeout: 200 * time.Millisecond})
	}
	if err := e.AddTimed(ctx, els); err != nil {
		t.Fatal(err)
	}
	if err := e.AddTimed(ctx, els[:5]); err != nil { // a refresh
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the blind monitor to see the additions", func() bool { return seen.Load() > 0 })
	// The elements expire, and the kernel's garbage collector (every
	// second for a hash set) removes them. (6.18 sends no event for
	// that; TestTimedEventFilter covers one with port id 0.)
	waitFor(t, 5*time.Second, "the expiries", func() bool { return len(mustReadTimed(t, e, "dns4")) == 0 })
	time.Sleep(2 * time.Second)
	if n := drift.Load(); n != 0 {
		t.Errorf("%d drifts reported for AddTimed and expiries", n)
	}
	// Someone else's element in a timeout set is not drift either; a
	// foreign rule is.
	ns.MustExec(t, "", "nft", "add", "element", "inet", "nftguard", "dns4", "{ 10.9.9.9 . 192.0.2.9 timeout 1s }")
	time.Sleep(200 * time.Millisecond)
	if n := drift.Load(); n != 0 {
		t.Errorf("%d drifts reported for a foreign timed element", n)
	}
	ns.MustExec(t, "", "nft", "add", "rule", "inet", "nftguard", "forward", "accept")
	waitFor(t, 2*time.Second, "drift for a foreign rule", func() bool { return drift.Load() > 0 })
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAddTimedConcurrentSync: AddTimed in a loop while Syncs add and
// remove the set and the monitor runs (run with -race): the only errors
// are "not found", and both sides make progress.
func TestAddTimedConcurrentSync(t *testing.T) {
	ns := testns.New(t, "s9e-race")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newTestEngine(t, ns)
	with := timedDesired("10.0.0.1")
	without := timedDesired("10.0.0.1")
	without.Sets = without.Sets[1:]
	without.Chains[0].Rules = without.Chains[0].Rules[1:]
	if _, err := e.Sync(ctx, with); err != nil {
		t.Fatal(err)
	}
	drift := countDrift(t, ctx, e)
	var adds, notFound, syncs atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			els := make([]TimedElement, 10)
			for i := 0; time.Now().Before(stop); i++ {
				for j := range els {
					els[j] = TimedElement{Set: "dns4", Key: fmt.Sprintf("10.%d.%d.%d . 192.0.2.1", w, i%250, j), Timeout: time.Minute}
				}
				err := e.AddTimed(ctx, els)
				switch {
				case err == nil:
					adds.Add(1)
				case IsNotFound(err):
					notFound.Add(1)
				default:
					t.Errorf("AddTimed: %v", err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(stop); i++ {
			d := with
			if i%2 == 0 {
				d = without
			}
			if _, err := e.Sync(ctx, d); err != nil {
				t.Errorf("Sync: %v", err)
				return
			}
			syncs.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	wg.Wait()
	t.Logf("%d AddTimed calls succeeded, %d not found, %d syncs, %d drifts", adds.Load(), notFound.Load(), syncs.Load(), drift.Load())
	if adds.Load() == 0 || notFound.Load() == 0 || syncs.Load() < 10 {
		t.Errorf("no interleaving: %d adds, %d not found, %d syncs", adds.Load(), notFound.Load(), syncs.Load())
	}
	if n := drift.Load(); n != 0 {
		t.Errorf("%d drifts reported", n)
	}
	if _, err := e.Sync(ctx, with); err != nil {
		t.Fatal(err)
	}
	if err := sameK(mustCompile(t, with), readBack(t, ns)); err != nil {
		t.Fatal(err)
	}
}

// TestTimedEventFilter: element events of a timeout set are not drift;
// those of other sets and any other change to the table still are.
func TestTimedEventFilter(t *testing.T) {
	var snap atomic.Pointer[timedSets]
	snap.Store(&timedSets{sets: map[string]timedSet{"dns4": {}}})
	w := eventFilter{fam: unix.NFPROTO_INET, table: "nftguard", ownPort: 42, timed: &snap}
	event := func(typ uint16, port uint32, set string) []byte {
		var m enc
		off := m.Msg(nfnl.MsgType(typ), 0, 1, unix.NFPROTO_INET, 0)
		m.Str(unix.NFTA_SET_ELEM_LIST_TABLE, "nftguard")
		m.Str(unix.NFTA_SET_ELEM_LIST_SET, set)
		m.EndMsg(off)
		binary.NativeEndian.PutUint32(m.B[off+12:], port)
		return m.B
	}
	for _, c := range []struct {
		name     string
		datagram []byte
		want     bool
	}{
		{"new element of a timeout set", event(unix.NFT_MSG_NEWSETELEM, 7, "dns4"), false},
		{"expiry (port 0)", event(unix.NFT_MSG_DELSETELEM, 0, "dns4"), false},
		{"element of another set", event(unix.NFT_MSG_NEWSETELEM, 7, "subj4"), true},
		{"the timeout set itself deleted", event(unix.NFT_MSG_DELSET, 7, "dns4"), true},
		{"both in one datagram", append(event(unix.NFT_MSG_NEWSETELEM, 7, "dns4"), event(unix.NFT_MSG_DELSETELEM, 0, "subj4")...), true},
	} {
		if got := w.drifted(c.datagram); got != c.want {
			t.Errorf("%s: drift %v, want %v", c.name, got, c.want)
		}
	}
	snap.Store(nil)
	if !w.drifted(event(unix.NFT_MSG_NEWSETELEM, 7, "dns4")) {
		t.Error("without timeout sets an element event is drift")
	}
	// AddTimed's own socket: its late events (the set already gone from
	// the snapshot) are not drift; the kernel's port 0 still is.
	var port atomic.Uint32
	w.timedPort = &port
	if !w.drifted(event(unix.NFT_MSG_DELSETELEM, 0, "dns4")) {
		t.Error("with no AddTimed socket yet, a port 0 event is not drift")
	}
	port.Store(9)
	if w.drifted(event(unix.NFT_MSG_NEWSETELEM, 9, "dns4")) {
		t.Error("AddTimed's event after the set left the snapshot is drift")
	}
	if !w.drifted(event(unix.NFT_MSG_DELSETELEM, 0, "dns4")) {
		t.Error("a port 0 event for a set that is not a timeout set is not drift")
	}
}

// TestTimeoutSetValidate: a timeout set with desired elements, a timeout
// map or interval set is refused naming the set; Render declares it.
func TestTimeoutSetValidate(t *testing.T) {
	for _, s := range []Set{
		{Name: "t1", Type: "ipv4_addr", Timeout: true, Elements: []Element{{Key: "10.0.0.1"}}},
		{Name: "t2", Type: "ipv4_addr", Map: "verdict", Timeout: true},
		{Name: "t3", Type: "ipv4_addr", Interval: true, Timeout: true},
	} {
		_, err := compile(unix.NFPROTO_INET, &Desired{Sets: []Set{s}})
		if err == nil || !strings.Contains(err.Error(), `"`+s.Name+`"`) || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("%+v: %v", s, err)
		}
	}
	out, err := Render(Table{Name: "nftguard"}, timedDesired())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "set dns4 {\n\t\ttype ipv4_addr . ipv4_addr\n\t\tflags timeout\n") {
		t.Errorf("render:\n%s", out)
	}
}

// TestFakeTimed: the Fake validates as the engine does, refreshes
// timeouts, prints keys as nft does, expires elements and drops them with
// their set.
func TestFakeTimed(t *testing.T) {
	ctx := context.Background()
	f, err := NewFake(Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: "10.0.0.1 . 192.0.2.1", Timeout: time.Second}}); !IsNotFound(err) {
		t.Errorf("before Sync: %v", err)
	}
	if _, err := f.Sync(ctx, timedDesired()); err != nil {
		t.Fatal(err)
	}
	if err := f.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: "10.0.0.1 . 192.0.2.300", Timeout: time.Second}}); err == nil || !strings.Contains(err.Error(), "192.0.2.300") {
		t.Errorf("bad key: %v", err)
	}
	if err := f.AddTimed(ctx, []TimedElement{{Set: "subj4", Key: "10.0.0.1", Timeout: time.Second}}); !IsNotFound(err) {
		t.Errorf("not a timeout set: %v", err)
	}
	if err := f.AddTimed(ctx, []TimedElement{
		{Set: "dns6", Key: "fd00:0::1 . 2001:db8::7", Timeout: time.Minute},
		{Set: "alive", Key: "17", Timeout: 30 * time.Millisecond},
		{Set: "dns6", Key: "fd00::1 . 2001:db8::7", Timeout: 10 * time.Second},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadTimed(ctx, "dns6")
	if err != nil || len(got) != 1 || got[0].Key != "fd00::1 . 2001:db8::7" || got[0].Timeout != 10*time.Second || got[0].Expires > 10*time.Second {
		t.Errorf("dns6: %+v %v", got, err)
	}
	if got, _ := f.ReadTimed(ctx, "alive"); len(got) != 1 || got[0].Key != "udp" {
		t.Errorf("alive: %+v", got)
	}
	time.Sleep(50 * time.Millisecond)
	if got, _ := f.ReadTimed(ctx, "alive"); len(got) != 0 {
		t.Errorf("alive after expiry: %+v", got)
	}
	d := timedDesired()
	d.Sets = d.Sets[2:]
	d.Chains[0].Rules = d.Chains[0].Rules[2:]
	if _, err := f.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sync(ctx, timedDesired()); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.ReadTimed(ctx, "dns6"); len(got) != 0 {
		t.Errorf("dns6 kept elements across its removal: %+v", got)
	}
}

// BenchmarkAddTimed measures one AddTimed call of n elements (new keys
// each time, as a forwarder adds answers) into a table like the agent's.
func BenchmarkAddTimed(b *testing.B) {
	ns := testns.New(b, "s9e-bench")
	ctx := context.Background()
	e := newTestEngine(b, ns)
	if _, err := e.Sync(ctx, timedDesired("10.0.0.1")); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("elements=%d", n), func(b *testing.B) {
			// Keys are prepared up front: formatting them is the
			// caller's cost, not AddTimed's.
			const rounds = 256
			batches := make([][]TimedElement, rounds)
			for r := range batches {
				batches[r] = make([]TimedElement, n)
				for i := range batches[r] {
					batches[r][i] = TimedElement{Set: "dns4", Key: fmt.Sprintf("10.%d.%d.%d . 192.0.2.%d", n, r, i%250, i/250), Timeout: 30 * time.Second}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := e.AddTimed(ctx, batches[i%rounds]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAddTimedComment: an element's comment is stored as nft stores one
// (nft lists it), read back by ReadTimed, and kept when a later batch
// refreshes the element's timeout with another comment; a long comment is
// cut to nft's 127 bytes.
func TestAddTimedComment(t *testing.T) {
	ns := testns.New(t, "s9e-comment")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if _, err := e.Sync(ctx, timedDesired()); err != nil {
		t.Fatal(err)
	}
	key := "10.0.0.1 . 192.0.2.7"
	long := strings.Repeat("a", 200)
	if err := e.AddTimed(ctx, []TimedElement{
		{Set: "dns4", Key: key, Timeout: time.Minute, Comment: "api.stripe.com"},
		{Set: "dns4", Key: "10.0.0.1 . 192.0.2.8", Timeout: time.Minute, Comment: long},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.AddTimed(ctx, []TimedElement{{Set: "dns4", Key: key, Timeout: 2 * time.Minute, Comment: "other.example"}}); err != nil {
		t.Fatal(err)
	}
	got := mustReadTimed(t, e, "dns4")
	comments := map[string]string{}
	for _, s := range got {
		comments[s.Key] = s.Comment
	}
	if comments[key] != "api.stripe.com" || comments["10.0.0.1 . 192.0.2.8"] != long[:127] {
		t.Errorf("comments read back: %+v", got)
	}
	out := ns.MustExec(t, "", "nft", "list", "set", "inet", "nftguard", "dns4")
	if !strings.Contains(out, `comment "api.stripe.com"`) {
		t.Errorf("nft does not list the comment:\n%s", out)
	}
}
