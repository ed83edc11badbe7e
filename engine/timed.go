package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// TimedElement is an element of a timeout set (Set.Timeout) with the time
// it lives.
type TimedElement struct {
	Set string
	// Key is in nft syntax of the set's key type, e.g.
	// "10.0.0.1 . 192.0.2.7"; single values only.
	Key string
	// Timeout is rounded up to whole milliseconds; it must be > 0.
	Timeout time.Duration
	// Comment, when set, is stored with an element the batch creates
	// (the kernel keeps an existing element's comment when it refreshes
	// its timeout), as nft's `comment`; at most 128 bytes are kept.
	Comment string
}

// TimedState is one element of a timeout set as the kernel holds it.
type TimedState struct {
	Key     string        // as nft prints it
	Timeout time.Duration // the timeout it was last added with
	Expires time.Duration // time left
	Comment string
}

// Timed is what a caller of timeout sets programs against; Engine adds to
// the kernel's sets, Fake keeps them in memory for unit tests.
type Timed interface {
	AddTimed(ctx context.Context, elems []TimedElement) error
	ReadTimed(ctx context.Context, set string) ([]TimedState, error)
}

var (
	_ Timed = (*Engine)(nil)
	_ Timed = (*Fake)(nil)
)

// timedSets is an immutable snapshot of the timeout sets of the last
// successful Sync: AddTimed encodes keys with their declarations and the
// monitor ignores their element events, both without taking the engine's
// mutex (a Sync may hold it for seconds).
type timedSets struct {
	sets map[string]timedSet
}

type timedSet struct {
	head setHead
	decl nftsyntax.SetDecl
}

// has reports whether name (as a netlink attribute, NUL-terminated or
// not) is a timeout set; the conversion in the index does not allocate.
func (t *timedSets) has(name []byte) bool {
	if t == nil {
		return false
	}
	_, ok := t.sets[string(bytes.TrimRight(name, "\x00"))]
	return ok
}

// noteTimed publishes the timeout sets of the compiler's last compile,
// which the kernel now holds; an unchanged list keeps its snapshot.
func (e *Engine) noteTimed() {
	old := e.timed.Load()
	n, same := 0, old != nil
	for name, h := range e.comp.heads {
		if !h.timeout {
			continue
		}
		n++
		if same {
			o, ok := old.sets[name]
			same = ok && o.head == h
		}
	}
	if same && n == len(old.sets) {
		return
	}
	if n == 0 {
		e.timed.Store(nil)
		return
	}
	t := &timedSets{sets: make(map[string]timedSet, n)}
	for name, h := range e.comp.heads {
		if h.timeout {
			t.sets[name] = timedSet{head: h, decl: e.comp.decls[name]}
		}
	}
	e.timed.Store(t)
}

// timedDecl returns the declaration of a timeout set of the last
// successful Sync. A set it does not know is reported as not found (the
// caller cannot tell it from one a concurrent Sync just deleted).
func (e *Engine) timedDecl(t *timedSets, set string) (nftsyntax.SetDecl, error) {
	if t != nil {
		if s, ok := t.sets[set]; ok {
			return s.decl, nil
		}
	}
	return nftsyntax.SetDecl{}, fmt.Errorf("set %q is not a timeout set of table %s: %w", set, e.table,
		&Error{Op: "add elements to set", Object: set, Message: -1, Errno: unix.ENOENT})
}

// timedSock is AddTimed's and ReadTimed's own netlink socket, so that
// they never wait for a Sync, with buffers reused from call to call.
type timedSock struct {
	conn   *netlink.Conn
	rw     nfnl.Transport
	rbuf   []byte
	sndBuf int
	seq    uint32
	m      enc
	keys   []byte // the elements' keys, back to back
	koff   []int  // where each element's key starts in keys
	sets   []string
	ops    []opDesc // ops[i] describes batch message i
	msgs   []rawMsg
}

// timedRecvBuf holds one datagram of answers or of a dump (the kernel
// fills dump datagrams up to 32 KiB).
const timedRecvBuf = 64 << 10

func (e *Engine) timedSocket() (*timedSock, error) {
	if e.ts != nil {
		return e.ts, nil
	}
	c, err := nfnl.Dial(e.nsPath)
	if err != nil {
		return nil, err
	}
	// Errors then quote only the refused message's header, not the
	// whole message.
	if err := c.SetOption(netlink.CapAcknowledge, true); err != nil {
		c.Close()
		return nil, err
	}
	e.ts = &timedSock{conn: c, rw: nfnl.Raw(c), rbuf: make([]byte, timedRecvBuf)}
	e.timedPort.Store(c.PID())
	return e.ts, nil
}

// AddTimed adds elements to timeout sets of the table in one transaction.
// An element already present gets the new timeout (the kernel restarts
// its timer). It is safe to call concurrently with Sync and Monitor: it
// has its own netlink socket and never waits for a Sync, and it does not
// touch what the engine caches (a timeout set's elements are not part of
// the desired state). Keys are encoded with the declarations of the last
// successful Sync; a set that is not a timeout set of it, or one the
// kernel no longer has (a concurrent Sync deleted it), is an error for
// which IsNotFound is true. A key that does not parse is an error naming
// set and key, and then nothing is sent.
func (e *Engine) AddTimed(ctx context.Context, elems []TimedElement) error {
	if len(elems) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	snap := e.timed.Load()
	e.tmu.Lock()
	defer e.tmu.Unlock()
	s, err := e.timedSocket()
	if err != nil {
		return fmt.Errorf("add timed elements to table %s: %w", e.table, err)
	}
	// Every key is encoded before anything is built: a bad one sends
	// nothing.
	s.keys, s.koff, s.sets = s.keys[:0], s.koff[:0], s.sets[:0]
	for _, el := range elems {
		d, err := e.timedDecl(snap, el.Set)
		if err != nil {
			return fmt.Errorf("add timed elements: %w", err)
		}
		if el.Timeout <= 0 {
			return fmt.Errorf("add timed elements: set %s element %q: timeout %v is not positive", el.Set, el.Key, el.Timeout)
		}
		s.koff = append(s.koff, len(s.keys))
		if s.keys, err = nftsyntax.AppendElementKey(s.keys, d, el.Key); err != nil {
			return fmt.Errorf("add timed elements: %w", err)
		}
		if !slices.Contains(s.sets, el.Set) {
			s.sets = append(s.sets, el.Set)
		}
	}
	s.koff = append(s.koff, len(s.keys))
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		// Adding elements without NLM_F_EXCL is idempotent, so a batch
		// whose answer was lost or that met a busy kernel is sent again.
		if err := e.sendTimed(ctx, s, elems); err == nil || !retriable(err) {
			if err != nil {
				return fmt.Errorf("add timed elements to table %s: %w", e.table, err)
			}
			return nil
		} else {
			lastErr = err
		}
	}
	return fmt.Errorf("add timed elements to table %s: %w", e.table, lastErr)
}

// elemComment bounds a comment to what nft accepts (128 bytes with the
// NUL), cut at a character boundary.
func elemComment(c string) string {
	const max = 127
	if len(c) <= max {
		return c
	}
	c = c[:max]
	for len(c) > 0 && !utf8.ValidString(c) {
		c = c[:len(c)-1]
	}
	return c
}

// sendTimed builds the batch of s's encoded keys (one or more NEWSETELEM
// messages per set, elements in caller order within each) and commits it.
func (e *Engine) sendTimed(ctx context.Context, s *timedSock, elems []TimedElement) error {
	s.seq++
	seq0 := s.seq
	s.m.B = s.m.B[:0]
	s.ops = s.ops[:0]
	nfnl.BeginBatch(&s.m, seq0)
	lastOff := -1
	for _, set := range s.sets {
		i := 0
		for i < len(elems) {
			// One message: as many of the set's elements from i on as
			// fit the 16-bit attribute length.
			for i < len(elems) && elems[i].Set != set {
				i++
			}
			if i == len(elems) {
				break
			}
			s.seq++
			lastOff = len(s.m.B)
			off := s.m.Msg(nfnl.MsgType(unix.NFT_MSG_NEWSETELEM), unix.NLM_F_REQUEST|unix.NLM_F_CREATE, s.seq, e.fam, 0)
			s.m.Str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table.Name)
			s.m.Str(unix.NFTA_SET_ELEM_LIST_SET, set)
			n := s.m.Nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
			d := opDesc{verb: "add elements to set", name: set, index: i + 1, text: elems[i].Key}
			count := 0
			for ; i < len(elems) && len(s.m.B)-n < elemChunkBytes; i++ {
				el := &elems[i]
				if el.Set != set {
					continue
				}
				// As nft sends it: the timeout (milliseconds) before the key.
				// The expiration too: the kernel restarts an existing
				// element's timer only when it is given, or when the
				// timeout differs from the element's, so without it a
				// refresh with the same timeout (a heartbeat, a name
				// resolved again) would leave the first expiry in place.
				le := s.m.Nest(unix.NFTA_LIST_ELEM)
				ms := uint64((el.Timeout + time.Millisecond - 1) / time.Millisecond)
				s.m.U64(unix.NFTA_SET_ELEM_TIMEOUT, ms)
				s.m.U64(unix.NFTA_SET_ELEM_EXPIRATION, ms)
				k := s.m.Nest(unix.NFTA_SET_ELEM_KEY)
				s.m.Attr(unix.NFTA_DATA_VALUE, s.keys[s.koff[i]:s.koff[i+1]])
				s.m.EndNest(k)
				if el.Comment != "" {
					s.m.Attr(unix.NFTA_SET_ELEM_USERDATA, nftwire.Comment(nftwire.UdataSetElemComment, elemComment(el.Comment)))
				}
				s.m.EndNest(le)
				count++
			}
			if err := s.m.EndNest(n); err != nil {
				return err
			}
			s.m.EndMsg(off)
			d.count = count
			s.ops = append(s.ops, d)
		}
	}
	nfnl.AckAt(&s.m, lastOff)
	nfnl.EndBatch(&s.m, s.seq+1)
	last := s.seq
	s.seq++ // BATCH_END's
	// The default send buffer (about 200 KiB) takes a few thousand
	// elements; a larger batch raises it, once.
	if size := len(s.m.B) + (64 << 10); len(s.m.B) > 128<<10 && size > s.sndBuf {
		if err := nfnl.ForceBuffers(s.conn, size, 0); err != nil {
			return err
		}
		s.sndBuf = size
	}
	if err := s.rw.Send(s.m.B); err != nil {
		return fmt.Errorf("send batch of %d bytes: %w", len(s.m.B), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.conn.SetReadDeadline(deadline)
	defer s.conn.SetReadDeadline(time.Time{})
	return readAnswer(s.rw, s.rbuf, &s.msgs, seq0, last, s.ops)
}

// readAnswer reads the kernel's answer to a batch of messages seq0+1 up
// to last that asked for one ACK, on the last: an error for every failing
// message, then that ACK (or the last message's error). The first refusal
// is returned as an *Error describing ops[i].
func readAnswer(rw nfnl.Transport, buf []byte, msgs *[]rawMsg, seq0, last uint32, ops []opDesc) error {
	var first *Error
	var firstSeq uint32
	failures := 0
	for done := false; !done; {
		n, err := rw.Recv(buf)
		if errors.Is(err, unix.ENOBUFS) {
			return errUnknownOutcome
		}
		if err != nil {
			return fmt.Errorf("read batch answer: %w (%w)", err, errUnknownOutcome)
		}
		*msgs, err = nfnl.ParseMsgs(buf[:n], (*msgs)[:0])
		if err != nil {
			return err
		}
		for _, r := range *msgs {
			if r.Type != unix.NLMSG_ERROR {
				continue
			}
			if code := nfnl.ErrCode(r.Data); code != 0 {
				failures++
				if i, ok := nfnl.BatchIndex(seq0, last, r.Seq); ok && i < len(ops) {
					if first == nil || r.Seq < firstSeq {
						first, firstSeq = newError(ops[i], i, code), r.Seq
					}
				} else if first == nil {
					first = newError(opDesc{verb: "commit"}, -1, code)
					done = true
				}
			}
			if r.Seq == last {
				done = true
			}
		}
	}
	if first != nil {
		first.More = failures - 1
		return first
	}
	return nil
}

// ReadTimed dumps a timeout set's elements with their timeouts and the
// time they have left, keys as nft prints them: for explain, debugging
// and tests (a set may hold many elements; the agent never reads them on
// its hot path). The set must be a timeout set of the last successful
// Sync; one the kernel does not have is an error for which IsNotFound is
// true.
func (e *Engine) ReadTimed(ctx context.Context, set string) ([]TimedState, error) {
	d, err := e.timedDecl(e.timed.Load(), set)
	if err != nil {
		return nil, fmt.Errorf("read timed elements: %w", err)
	}
	return e.readTimed(ctx, set, d)
}

// ReadTimedAs is ReadTimed for an engine that has not synced the table
// (a reader of an agent's table, such as explain on the node): the set's
// key type (e.g. "ipv4_addr . ipv4_addr") is the caller's.
func (e *Engine) ReadTimedAs(ctx context.Context, set, keyType string) ([]TimedState, error) {
	k, err := nftsyntax.ParseType(keyType)
	if err != nil {
		return nil, fmt.Errorf("read timed elements of set %s: %w", set, err)
	}
	return e.readTimed(ctx, set, nftsyntax.SetDecl{Name: set, Key: k, Timeout: true})
}

func (e *Engine) readTimed(ctx context.Context, set string, d nftsyntax.SetDecl) ([]TimedState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.tmu.Lock()
	defer e.tmu.Unlock()
	s, err := e.timedSocket()
	if err != nil {
		return nil, fmt.Errorf("read timed elements of table %s: %w", e.table, err)
	}
	var elems []nftwire.Elem
	var states []TimedState
	err = nfnl.Restart(5, func() error {
		elems, states = elems[:0], states[:0]
		s.seq++
		var perr error
		err := sendRequest(s.rw, s.rbuf, s.seq, e.fam, unix.NFT_MSG_GETSETELEM, unix.NLM_F_DUMP, func(m *enc) {
			m.Str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table.Name)
			m.Str(unix.NFTA_SET_ELEM_LIST_SET, set)
		}, func(r rawMsg) {
			if perr != nil || len(r.Data) < nfgenHdrLen {
				return
			}
			a, err := nfnl.Attrs(r.Data[nfgenHdrLen:])
			if err != nil {
				perr = err
				return
			}
			nfnl.WalkAttrs(a[unix.NFTA_SET_ELEM_LIST_ELEMENTS], func(_ uint16, b []byte) {
				el, err := parseElem(b)
				if err != nil {
					perr = err
					return
				}
				ea, _ := nfnl.Attrs(b)
				el.Key = append([]byte(nil), el.Key...)
				elems = append(elems, el)
				comment, _, _ := nftwire.ParseComment(ea[unix.NFTA_SET_ELEM_USERDATA], nftwire.UdataSetElemComment)
				states = append(states, TimedState{
					Timeout: time.Duration(nfnl.BE64(ea[unix.NFTA_SET_ELEM_TIMEOUT])) * time.Millisecond,
					Expires: time.Duration(nfnl.BE64(ea[unix.NFTA_SET_ELEM_EXPIRATION])) * time.Millisecond,
					Comment: comment,
				})
			})
		})
		if err != nil {
			return err
		}
		return perr
	})
	if errors.Is(err, unix.ENOENT) {
		err = &Error{Op: "dump elements of set", Object: set, Message: -1, Errno: unix.ENOENT}
	}
	if err != nil {
		return nil, fmt.Errorf("read timed elements of table %s: %w", e.table, err)
	}
	texts, err := nftsyntax.DecodeElements(d, elems)
	if err != nil {
		return nil, fmt.Errorf("read timed elements of set %s: %w", set, err)
	}
	if len(texts) != len(states) {
		return nil, fmt.Errorf("read timed elements of set %s: %d keys decoded from %d elements", set, len(texts), len(states))
	}
	for i := range states {
		states[i].Key = texts[i].Key
	}
	return states, nil
}
