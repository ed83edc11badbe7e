package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// Engine owns one nftables table in one network namespace.
type Engine struct {
	table  Table
	fam    byte
	nsPath string

	mu    sync.Mutex // serialises syncs; guards everything below
	conn  *netlink.Conn
	rw    nfnl.Transport // e.conn's datagrams, for requests and batches
	seq   uint32
	rbuf  []byte
	cache *kernelTable // our table as the kernel has it; nil when unknown
	// started is false until the first successful sync, which replaces a
	// table left by an earlier run instead of trusting it.
	started   bool
	sndBuf    int
	rcvBuf    int
	sendHook  func([]byte)
	echoLimit int
	comp      *compiler
	// onDeleted receives the final counters of the rules a commit
	// deleted (WithDeletedCounters); nil: deletions are not echoed.
	onDeleted func([]RuleCounter, error)

	// stale is set by the monitor: someone else changed our table, so the
	// cache must not be trusted.
	stale atomic.Bool

	// timed is the timeout sets of the last successful Sync (nil: none);
	// AddTimed, ReadTimed and Monitor read it without e.mu.
	timed atomic.Pointer[timedSets]
	tmu   sync.Mutex // serialises AddTimed and ReadTimed; guards ts
	ts    *timedSock // their own socket, opened on first use
	// timedPort is ts's netlink port id, for the monitor.
	timedPort atomic.Uint32
}

// Option configures New.
type Option func(*Engine)

// WithNetNS makes the engine program the table inside the network namespace
// bound at path (e.g. /var/run/netns/n1).
func WithNetNS(path string) Option { return func(e *Engine) { e.nsPath = path } }

// withSendHook lets tests record every batch the engine sends.
func withSendHook(fn func([]byte)) Option { return func(e *Engine) { e.sendHook = fn } }

// New opens a netlink connection (inside the namespace, if given) for the
// table. It does not touch the kernel's rules.
func New(t Table, opts ...Option) (*Engine, error) {
	fam, err := t.family()
	if err != nil {
		return nil, err
	}
	e := &Engine{table: t, fam: fam, rbuf: make([]byte, 1<<20), echoLimit: echoMaxRules, comp: newCompiler(fam)}
	for _, o := range opts {
		o(e)
	}
	e.conn, err = nfnl.Dial(e.nsPath)
	if err != nil {
		return nil, fmt.Errorf("engine for table %s: %w", t, err)
	}
	e.rw = nfnl.Raw(e.conn)
	if err := e.conn.SetOption(netlink.CapAcknowledge, true); err != nil {
		e.conn.Close()
		return nil, fmt.Errorf("engine for table %s: %w", t, err)
	}
	if err := e.setBuffers(defaultSocketBufSize, defaultSocketBufSize); err != nil {
		e.conn.Close()
		return nil, fmt.Errorf("engine for table %s: %w", t, err)
	}
	return e, nil
}

// Close releases the netlink connection; the table stays.
func (e *Engine) Close() error {
	e.tmu.Lock()
	if e.ts != nil {
		e.ts.conn.Close()
		e.ts = nil
	}
	e.tmu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn.Close()
}

func (e *Engine) nextSeq() uint32 {
	e.seq++
	return e.seq
}

func (e *Engine) setBuffers(snd, rcv int) error {
	if snd <= e.sndBuf {
		snd = 0
	}
	if rcv <= e.rcvBuf {
		rcv = 0
	}
	if snd == 0 && rcv == 0 {
		return nil
	}
	if err := nfnl.ForceBuffers(e.conn, snd, rcv); err != nil {
		return err
	}
	e.sndBuf = max(e.sndBuf, snd)
	e.rcvBuf = max(e.rcvBuf, rcv)
	return nil
}

// Stats describes one Sync.
type Stats struct {
	Messages   int           // netlink messages in the batch (without begin/end)
	Operations int           // objects added, deleted or changed (each element counts)
	Bytes      int           // size of the batch
	Read       bool          // the kernel's copy was dumped (no valid cache)
	Full       bool          // the table was replaced as a whole
	Attempts   int           // batches sent (retries after races add to it)
	Duration   time.Duration // wall time of the whole Sync
}

// retriable errors come from races with other writers or a lost answer,
// not from our objects: Sync and AddTimed send the batch again. (The dump
// and cache errors can only come from Sync, which reads.)
func retriable(err error) bool {
	return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EAGAIN) ||
		errors.Is(err, unix.EINTR) || errors.Is(err, unix.ERESTART) ||
		errors.Is(err, errUnknownOutcome) || errors.Is(err, nfnl.ErrDumpInterrupted) ||
		errors.Is(err, errStaleCache)
}

// syncTable makes the kernel's table equal want.
func (e *Engine) syncTable(ctx context.Context, want *kernelTable) (Stats, error) {
	start := time.Now()
	var st Stats
	var lastErr error
	for attempt := 0; attempt < 6; attempt++ {
		if err := ctx.Err(); err != nil {
			// The compiler may have moved on from what the cache
			// describes; start from a fresh read next time.
			e.cache = nil
			return st, err
		}
		if attempt > 0 {
			time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
		}
		fresh, err := e.syncOnce(want, &st)
		st.Duration = time.Since(start)
		if err == nil {
			return st, nil
		}
		lastErr = err
		// A failed batch applied nothing, but our cache may be what made
		// it fail (someone changed our table): retry from a fresh read.
		e.cache = nil
		if !retriable(err) && fresh {
			break
		}
	}
	return st, fmt.Errorf("sync table %s: %w", e.table, lastErr)
}

func (e *Engine) syncOnce(want *kernelTable, st *Stats) (fresh bool, err error) {
	if e.stale.Swap(false) {
		e.cache = nil
	}
	cur := e.cache
	full := false
	if !e.started {
		// Start-up: diff against what an earlier run (or an earlier
		// one-shot apply) left, so only the difference is sent; a table
		// holding what the model cannot express is replaced in the same
		// transaction that writes the new content.
		cur, err = e.read()
		if err != nil {
			return true, err
		}
		fresh, st.Read = true, true
		if cur != nil {
			why, err := e.needsReplace()
			if err != nil {
				return true, err
			}
			if why != "" {
				cur, full = nil, true
			}
		}
	} else if cur == nil {
		cur, err = e.read()
		if err != nil {
			return true, err
		}
		fresh = true
		st.Read = true
	}

	echo := countNewRules(cur, want) <= e.echoLimit
	var b *batch
	var next *kernelTable
	for {
		b = newBatch(e.fam, e.table.Name, e.nextSeq(), echo, batchSizeHint(cur, want))
		b.delEcho = e.onDeleted != nil
		if full {
			b.delTable()
			st.Full = true
		}
		next, err = diff(b, cur, want)
		var nh *needHandlesError
		if !errors.As(err, &nh) {
			break
		}
		for _, name := range nh.chains {
			if err := e.fillHandles(cur.chains[name]); err != nil {
				return fresh, err
			}
		}
	}
	if err != nil {
		return fresh, err
	}
	next.mirrors = want
	if b.empty() {
		e.cache, e.started = next, true
		return fresh, nil
	}
	st.Attempts++
	st.Messages, st.Operations, st.Bytes = len(b.ops), b.opCount, len(b.m.B)
	if err := e.commit(b); err != nil {
		return fresh, err
	}
	e.started = true
	if !echo {
		// The new rules' handles are read when a later diff needs them.
		for _, name := range changedChains(cur, want) {
			c := next.chains[name]
			for _, r := range c.rules {
				if r.handle == 0 {
					c.noHandles = true
					break
				}
			}
		}
	}
	e.cache = next
	return fresh, nil
}

// fillHandles reads the kernel handles of a cached chain's rules, which a
// batch added without echoing them. The kernel's chain must be the one
// the batch wrote, rule by rule (same number of rules, each with the same
// number of expressions and the same user data); anything else means
// someone else changed it, and the table is read again as a whole.
func (e *Engine) fillHandles(c *kernelChain) error {
	handles := make([]uint64, 0, len(c.rules))
	stale := false
	err := e.requestEach(unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, func(m *enc) {
		m.Str(unix.NFTA_RULE_TABLE, e.table.Name)
		m.Str(unix.NFTA_RULE_CHAIN, c.name)
	}, func(r rawMsg) {
		if stale || len(r.Data) < nfgenHdrLen || r.Data[0] != e.fam {
			return
		}
		var table, chain, ud []byte
		var handle uint64
		nexprs := 0
		nfnl.WalkAttrs(r.Data[nfgenHdrLen:], func(typ uint16, data []byte) {
			switch typ {
			case unix.NFTA_RULE_TABLE:
				table = data
			case unix.NFTA_RULE_CHAIN:
				chain = data
			case unix.NFTA_RULE_HANDLE:
				handle = nfnl.BE64(data)
			case unix.NFTA_RULE_USERDATA:
				ud = data
			case unix.NFTA_RULE_EXPRESSIONS:
				nfnl.WalkAttrs(data, func(uint16, []byte) { nexprs++ })
			}
		})
		if string(bytes.TrimRight(table, "\x00")) != e.table.Name || string(bytes.TrimRight(chain, "\x00")) != c.name {
			return
		}
		i := len(handles)
		if i >= len(c.rules) || len(c.rules[i].exprs) != nexprs || !bytes.Equal(c.rules[i].userdata, ud) || handle == 0 {
			stale = true
			return
		}
		handles = append(handles, handle)
	})
	if err != nil {
		return fmt.Errorf("dump rules of chain %q: %w", c.name, err)
	}
	if stale || len(handles) != len(c.rules) {
		return errStaleCache
	}
	for i, r := range c.rules {
		r.handle = handles[i]
	}
	c.noHandles = false
	return nil
}

// echoMaxRules is the most new rules a batch has the kernel echo (with
// their handles): building and reading 50k echoes costs a quarter of a
// second, while most syncs never touch most of the rules again.
const echoMaxRules = 2000

// countNewRules bounds how many rules a batch will add, to decide whether
// the kernel should echo their handles or we re-read afterwards.
func countNewRules(cur, want *kernelTable) int {
	n := 0
	for _, name := range changedChains(cur, want) {
		w := want.chains[name]
		d := len(w.rules)
		if cur != nil {
			if c, ok := cur.chains[name]; ok {
				d -= len(c.rules)
				d = max(d, 0)
				if d == 0 {
					d = 1 // a changed rule is not counted exactly; stay cheap
				}
			}
		}
		n += d
	}
	return n
}

// changedChains are the chains of want that may differ from cur's.
func changedChains(cur, want *kernelTable) []string {
	if q := quickDelta(cur, want); q != nil {
		return q.chains
	}
	return want.chainOrder
}

// batchSizeHint estimates the size of a batch that turns cur into want
// and creates chains or sets: the rules of new chains (their keys hold
// their encoded expressions) and the elements of new sets. A change to
// existing chains and sets starts small and grows.
func batchSizeHint(cur, want *kernelTable) int {
	n := 4096
	for _, name := range changedChains(cur, want) {
		if cur != nil && cur.chains[name] != nil {
			continue
		}
		for _, r := range want.chains[name].rules {
			n += len(r.key) + 64 + len(name)
		}
	}
	sets := want.setOrder
	if q := quickDelta(cur, want); q != nil {
		sets = q.sets
	}
	for _, name := range sets {
		s := want.sets[name]
		if cur != nil && cur.sets[name] != nil {
			continue
		}
		n += len(s.elems) * (int(2*s.keyLen+s.dataLen) + 24)
	}
	return n
}

// Delete removes the table in one transaction; a missing table is not an
// error.
func (e *Engine) Delete(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := newBatch(e.fam, e.table.Name, e.nextSeq(), false, 0)
	b.delTable()
	err := e.commit(b)
	e.cache = nil
	e.timed.Store(nil)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete table %s: %w", e.table, err)
	}
	return nil
}

// Sync makes the table equal d in one atomic transaction carrying only the
// difference (the first sync of an Engine replaces the whole table). Only
// the parts of d that changed since the last Sync are compiled again.
func (e *Engine) Sync(ctx context.Context, d *Desired) (Stats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, err := e.comp.compile(d)
	if err != nil {
		return Stats{}, fmt.Errorf("sync table %s: %w", e.table, err)
	}
	st, err := e.syncTable(ctx, want)
	if err == nil {
		e.noteTimed()
	}
	return st, err
}
