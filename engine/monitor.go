package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// Monitor watches nftables events in the engine's namespace and calls fn
// (from the monitor's goroutine) for every change to our table that another
// process made; the caller re-syncs (the agent debounces). Our own commits
// are recognised by the netlink port id the kernel stamps on their events.
// What cannot be read counts as drift too: a lost event (socket overrun) or
// a malformed message may have been a change to our table, and a needless
// resync costs a read where a skipped change would leave the table wrong.
// It returns when ctx is done.
func (e *Engine) Monitor(ctx context.Context, fn func()) error {
	c, err := nfnl.Dial(e.nsPath)
	if err != nil {
		return fmt.Errorf("monitor table %s: %w", e.table, err)
	}
	defer c.Close()
	if err := nfnl.ForceBuffers(c, 0, 32<<20); err != nil {
		return fmt.Errorf("monitor table %s: %w", e.table, err)
	}
	if err := c.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		return fmt.Errorf("monitor table %s: %w", e.table, err)
	}
	w := eventFilter{fam: e.fam, table: e.table.Name, ownPort: e.conn.PID(), timed: &e.timed, timedPort: &e.timedPort}
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rw, buf := nfnl.Raw(c), make([]byte, 1<<20)
	for {
		n, err := rw.Recv(buf)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			e.drift(fn)
			continue
		}
		if err != nil {
			return fmt.Errorf("monitor table %s: %w", e.table, err)
		}
		if w.drifted(buf[:n]) {
			e.drift(fn)
		}
	}
}

func (e *Engine) drift(fn func()) {
	e.stale.Store(true)
	if fn != nil {
		fn()
	}
}

// eventFilter tells, from one datagram of nftables events, whether our
// table may have been changed by someone else.
type eventFilter struct {
	fam     byte
	table   string
	ownPort uint32 // the engine's socket: its commits are not drift
	// timed names the timeout sets, whose element events (AddTimed's,
	// the kernel's expiries, anyone's) are not drift: their elements are
	// not part of the desired state.
	timed *atomic.Pointer[timedSets]
	// timedPort is AddTimed's socket (0: none yet): it only ever adds
	// elements to timeout sets, and its events may arrive after a Sync
	// removed the set from timed.
	timedPort *atomic.Uint32
	msgs      []rawMsg
}

// drifted reports whether the datagram holds a foreign change to our table,
// or anything it cannot read (which might have been one).
func (w *eventFilter) drifted(datagram []byte) bool {
	var err error
	w.msgs, err = nfnl.ParseMsgs(datagram, w.msgs[:0])
	if err != nil {
		return true
	}
	for _, m := range w.msgs {
		if m.Type>>8 != unix.NFNL_SUBSYS_NFTABLES || m.Type&0xff == unix.NFT_MSG_NEWGEN || m.Pid == w.ownPort {
			continue
		}
		if w.timedPort != nil && m.Pid != 0 && m.Pid == w.timedPort.Load() {
			continue
		}
		if len(m.Data) < nfgenHdrLen {
			return true
		}
		if m.Data[0] != w.fam {
			continue
		}
		// Attribute 1 is the table name in every nf_tables object
		// message (table, chain, rule, set, element list, object).
		a, err := nfnl.Attrs(m.Data[nfgenHdrLen:])
		if err != nil {
			return true
		}
		if nfnl.CStr(a[1]) != w.table {
			continue
		}
		if t := m.Type & 0xff; (t == unix.NFT_MSG_NEWSETELEM || t == unix.NFT_MSG_DELSETELEM) &&
			w.timed != nil && w.timed.Load().has(a[unix.NFTA_SET_ELEM_LIST_SET]) {
			continue
		}
		return true
	}
	return false
}
