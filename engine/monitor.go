package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Monitor watches nftables events in the engine's namespace and calls fn
// (from the monitor's goroutine) for every change to our table that another
// process made. Our own commits are recognised by the netlink port id the
// kernel stamps on their events. A lost event (socket overrun) counts as
// drift too. It returns when ctx is done.
func (e *Engine) Monitor(ctx context.Context, fn func()) error {
	c, err := dialIn(e.nsPath)
	if err != nil {
		return fmt.Errorf("monitor table %s: %w", e.table, err)
	}
	defer c.Close()
	if err := forceBuffers(c, 0, 32<<20); err != nil {
		return fmt.Errorf("monitor table %s: %w", e.table, err)
	}
	if err := c.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		return fmt.Errorf("monitor table %s: %w", e.table, err)
	}
	own := e.conn.PID()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 1<<20)
	var msgs []rawMsg
	for {
		n, err := recvRaw(c, buf)
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
		msgs, _ = parseMsgs(buf[:n], msgs[:0])
		for _, m := range msgs {
			if m.typ>>8 != unix.NFNL_SUBSYS_NFTABLES || m.typ&0xff == unix.NFT_MSG_NEWGEN || m.pid == own || len(m.data) < nfgenHdrLen {
				continue
			}
			if m.data[0] != e.fam {
				continue
			}
			// Attribute 1 is the table name in every nf_tables object
			// message (table, chain, rule, set, element list, object).
			a, err := attrs(m.data[nfgenHdrLen:])
			if err != nil || cstr(a[1]) != e.table.Name {
				continue
			}
			e.drift(fn)
		}
	}
}

func (e *Engine) drift(fn func()) {
	e.drifts.Add(1)
	e.stale.Store(true)
	if fn != nil {
		fn()
	}
}

// Drifts counts changes to our table made by others since New.
func (e *Engine) Drifts() uint64 { return e.drifts.Load() }

// Run monitors the table and, after each burst of foreign changes (waiting
// debounce for it to settle), re-syncs the last desired state given to
// Sync. Errors of those repairs go to onError (may be nil). It returns when
// ctx is done.
func (e *Engine) Run(ctx context.Context, debounce time.Duration, onError func(error)) error {
	kick := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- e.Monitor(ctx, func() {
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			return <-errc
		case err := <-errc:
			return err
		case <-kick:
		}
		t := time.NewTimer(debounce)
	settle:
		for {
			select {
			case <-kick:
				t.Reset(debounce)
			case <-t.C:
				break settle
			case <-ctx.Done():
				t.Stop()
				return <-errc
			}
		}
		e.mu.Lock()
		d := e.last
		e.mu.Unlock()
		if d == nil {
			continue
		}
		if _, err := e.Sync(ctx, d); err != nil && onError != nil {
			onError(fmt.Errorf("repair drift: %w", err))
		}
	}
}
