package engine

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// RuleCounter is the value of the counter statements of one rule of our
// table, as the kernel has them now.
//
// Counter values are state the kernel keeps, not configuration: the diff
// never compares them (rulekey.go zeroes them), so a counting rule is never
// rewritten because it counted. They start at zero when the rule is
// created, and a rule that is replaced (its text changed, or drift was
// repaired) starts again from zero under a new handle; a reader that turns
// them into monotonic totals therefore keys them by chain and handle
// (package rulecounter).
type RuleCounter struct {
	Chain   string
	Handle  uint64
	Comment string // the rule's comment, "" if none
	// Counters are the rule's counter statements in rule order: most
	// rules have one; a rule without any is not reported.
	Counters []Count
}

// Count is one counter statement's value.
type Count struct{ Packets, Bytes uint64 }

// Counters reads the counters of the rules in the chains of our table for
// which match returns true (every chain when match is nil). It reads the
// rules only, chain by chain, without touching the kernel's values (it
// never resets them) and without the engine's cache: the values change
// with every packet, so they are never cached. A table that does not exist
// has no counters: nil, nil.
func (e *Engine) Counters(ctx context.Context, match func(chain string) bool) ([]RuleCounter, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []RuleCounter
	err := nfnl.Restart(11, func() (err error) {
		out, err = e.readCounters(ctx, match)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read counters of table %s: %w", e.table, err)
	}
	return out, nil
}

func (e *Engine) readCounters(ctx context.Context, match func(string) bool) ([]RuleCounter, error) {
	name := e.table.Name
	msgs, err := e.request(unix.NFT_MSG_GETCHAIN, unix.NLM_F_DUMP, func(m *enc) { m.Str(unix.NFTA_CHAIN_TABLE, name) })
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dump chains: %w", err)
	}
	var chains []string
	for _, r := range msgs {
		c, tbl, err := parseChain(r.Data[nfgenHdrLen:])
		if err != nil {
			return nil, fmt.Errorf("decode chain: %w", err)
		}
		if tbl == name && r.Data[0] == e.fam && (match == nil || match(c.name)) {
			chains = append(chains, c.name)
		}
	}
	var out []RuleCounter
	// One dump per chain, as read does: a table-wide rule dump is
	// quadratic when the kernel resumes it.
	for _, cname := range chains {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var derr error
		err := e.requestEach(unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, func(m *enc) {
			m.Str(unix.NFTA_RULE_TABLE, name)
			m.Str(unix.NFTA_RULE_CHAIN, cname)
		}, func(r rawMsg) {
			if derr != nil || len(r.Data) < nfgenHdrLen || r.Data[0] != e.fam {
				return
			}
			rc, ok, err := parseRuleCounter(r.Data[nfgenHdrLen:], name, cname)
			if err != nil {
				derr = err
				return
			}
			if ok {
				out = append(out, rc)
			}
		})
		if errors.Is(err, unix.ENOENT) {
			// The chain went away between the two dumps: it has
			// no rules to count any more.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dump rules of chain %q: %w", cname, err)
		}
		if derr != nil {
			return nil, fmt.Errorf("decode rule of chain %q: %w", cname, derr)
		}
	}
	return out, nil
}

// parseRuleCounter reads the counters of one rule message; ok is false for
// a rule of another table or chain (any chain when chain is ""), or one
// without a counter.
func parseRuleCounter(b []byte, table, chain string) (rc RuleCounter, ok bool, err error) {
	a, err := nfnl.Attrs(b)
	if err != nil {
		return rc, false, err
	}
	if chain == "" {
		chain = nfnl.CStr(a[unix.NFTA_RULE_CHAIN])
	}
	if nfnl.CStr(a[unix.NFTA_RULE_TABLE]) != table || nfnl.CStr(a[unix.NFTA_RULE_CHAIN]) != chain {
		return rc, false, nil
	}
	// Only the counter expressions are decoded: a rule with an
	// expression this build cannot decode still reports its counters.
	var cerr error
	err = nfnl.WalkAttrs(a[unix.NFTA_RULE_EXPRESSIONS], func(typ uint16, data []byte) {
		if cerr != nil || typ != unix.NFTA_LIST_ELEM {
			return
		}
		ea, err := nfnl.Attrs(data)
		if err != nil {
			cerr = err
			return
		}
		if nfnl.CStr(ea[unix.NFTA_EXPR_NAME]) != "counter" {
			return
		}
		x, err := nftwire.DecodeExpr(0, "counter", ea[unix.NFTA_EXPR_DATA])
		if err != nil {
			cerr = err
			return
		}
		if c, isCounter := x.(*nftwire.Counter); isCounter {
			rc.Counters = append(rc.Counters, Count{Packets: c.Packets, Bytes: c.Bytes})
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil || len(rc.Counters) == 0 {
		return rc, false, err
	}
	rc.Chain, rc.Handle = chain, nfnl.BE64(a[unix.NFTA_RULE_HANDLE])
	if ud := a[unix.NFTA_RULE_USERDATA]; len(ud) > 0 {
		// A comment that is not readable is reported as none: the
		// counter is still the rule's.
		if c, found, err := nftwire.ParseComment(ud, nftwire.UdataRuleComment); err == nil && found {
			rc.Comment = c
		}
	}
	return rc, true, nil
}

// WithDeletedCounters has every Sync report the counters of the rules it
// deletes, as they were when the transaction committed: fn is called once
// per committed batch that deleted counting rules, with the engine's lock
// held (fn must not call the engine), before the Sync returns. err, when
// not nil, says some deleted rules' echoes could not be read (their counts
// are not in rcs); the batch is in force all the same.
//
// The kernel echoes a deleted rule (NLM_F_ECHO on NFT_MSG_DELRULE) after
// it has switched to the new generation of the table, reading the rule's
// per-CPU counters then: a packet that entered the old generation on
// another CPU and reaches the counter after that read is the only one not
// reported, at most one per other CPU at the instant of the commit. A
// reader that adds these final values to what it read from Counters
// before therefore loses no count to a rule's deletion (package
// rulecounter does).
//
// The first Sync of an Engine that replaces a table left by an earlier
// run as a whole deletes that table without echoes: its counts are the
// earlier run's. A batch whose answer cannot be read to its end (the
// receive buffer overrun, which the engine sizes for the echoes it asks
// for) is retried from a fresh read, and the echoes it lost are lost.
// Only rules that may count are echoed (with a counter statement, or not
// decodable); a chain flushed for one of them echoes all its rules.
func WithDeletedCounters(fn func(rcs []RuleCounter, err error)) Option {
	return func(e *Engine) { e.onDeleted = fn }
}

// RuleID names one kernel rule for as long as it lives: a rule replaced
// is a new rule under a new handle.
type RuleID struct {
	Chain  string
	Handle uint64
}

// ID is the rule's RuleID.
func (rc *RuleCounter) ID() RuleID { return RuleID{rc.Chain, rc.Handle} }
