package engine

import (
	"context"
	"errors"
	"fmt"
)

// Check reports whether the kernel would accept the Sync of d, and changes
// nothing either way. It sends the batch a Sync would send (the difference
// between the kernel's copy of our table and d) without NFNL_MSG_BATCH_END:
// the kernel runs every message through the same validation as a commit,
// reports each failure, and then aborts the transaction, as `nft -c` does.
// A caller that must find which part of its input the kernel refuses (the
// agent bisecting over API objects) asks Check, so searching never changes
// what is enforced; only the final Sync does. A refusal is an *Error, as
// from Sync.
//
// Check compiles d with a compiler of its own: the Sync compiler's
// incremental state describes the table last synced, and checking some
// other table must not move it. A check therefore costs a full compile.
func (e *Engine) Check(ctx context.Context, d *Desired) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	want, err := newCompiler(e.fam).compile(d)
	if err != nil {
		return fmt.Errorf("check table %s: %w", e.table, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for attempt := 0; ; attempt++ {
		err = e.checkOnce(want)
		// Races with other writers say nothing about d: try again.
		if err == nil || !retriable(err) || attempt == 3 || ctx.Err() != nil {
			break
		}
		e.cache = nil
	}
	if err != nil {
		return fmt.Errorf("check table %s: %w", e.table, err)
	}
	return nil
}

// checkOnce builds the batch as syncOnce does and sends it check-only.
func (e *Engine) checkOnce(want *kernelTable) error {
	if e.stale.Swap(false) {
		e.cache = nil
	}
	cur, full := e.cache, false
	if cur == nil {
		read, err := e.read()
		if err != nil {
			return err
		}
		cur = read
		switch {
		case !e.started && cur != nil:
			// The first Sync replaces a table the model cannot express;
			// check that same batch.
			why, err := e.needsReplace()
			if err != nil {
				return err
			}
			if why != "" {
				cur, full = nil, true
			}
		case e.started && cur != nil:
			// What the kernel holds now is what the next Sync would read:
			// keep it, so a bisection reads the table once, not per check.
			e.cache = cur
		}
	}
	var b *batch
	for {
		b = newBatch(e.fam, e.table.Name, e.nextSeq(), false, batchSizeHint(cur, want))
		b.checkOnly = true
		if full {
			b.delTable()
		}
		_, err := diff(b, cur, want)
		var nh *needHandlesError
		if !errors.As(err, &nh) {
			if err != nil {
				return err
			}
			break
		}
		for _, name := range nh.chains {
			if err := e.fillHandles(cur.chains[name]); err != nil {
				return err
			}
		}
	}
	if b.empty() {
		return nil
	}
	return e.commit(b)
}
