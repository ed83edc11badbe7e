package engine

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// commit sends the batch in one sendmsg and reads the kernel's answer: an
// error for every failing message, echoes of new rules and of deleted
// rules (with their final counters), and the ACK of the last message,
// which the kernel queues after everything else. The deleted rules'
// counters go to the engine's WithDeletedCounters function once the
// batch has committed.
func (e *Engine) commit(b *batch) error {
	last := b.finish()
	size := len(b.m.B)
	rcv := defaultSocketBufSize
	if b.doEcho {
		rcv = max(rcv, 4*size+(4<<20))
	}
	if b.delEchoBytes > 0 {
		// Losing an echo (ENOBUFS) would lose the counts it carries:
		// room for all of them, twice over (the kernel charges a
		// message's buffer, not its length).
		rcv = max(rcv, 2*b.delEchoBytes+(4<<20))
	}
	if err := e.setBuffers(size+(1<<20), rcv); err != nil {
		return err
	}
	if e.sendHook != nil {
		e.sendHook(b.m.B)
	}
	if err := e.rw.Send(b.m.B); err != nil {
		return fmt.Errorf("send batch of %d bytes: %w", size, err)
	}
	e.conn.SetReadDeadline(time.Now().Add(time.Minute))
	defer e.conn.SetReadDeadline(time.Time{})
	var first *Error
	var firstSeq uint32
	failures := 0
	var msgs []rawMsg
	var deleted []RuleCounter
	var derr error
	for done := false; !done; {
		n, err := e.rw.Recv(e.rbuf)
		if errors.Is(err, unix.ENOBUFS) {
			return errUnknownOutcome
		}
		if err != nil {
			return fmt.Errorf("read batch answer: %w (%w)", err, errUnknownOutcome)
		}
		msgs, err = nfnl.ParseMsgs(e.rbuf[:n], msgs[:0])
		if err != nil {
			return err
		}
		for _, r := range msgs {
			switch {
			case r.Type == unix.NLMSG_ERROR:
				if code := nfnl.ErrCode(r.Data); code != 0 {
					failures++
					if i, ok := nfnl.BatchIndex(b.seq0, b.seq, r.Seq); ok {
						if first == nil || r.Seq < firstSeq {
							first, firstSeq = newError(b.ops[i], i, code), r.Seq
						}
					} else if first == nil {
						first = newError(opDesc{verb: "commit"}, -1, code)
						done = true
					}
				}
				if r.Seq == last {
					done = true
				}
			case r.Type == nfnl.MsgType(unix.NFT_MSG_NEWRULE):
				if i, ok := nfnl.BatchIndex(b.seq0, b.seq, r.Seq); ok && i < len(b.echo) && b.echo[i] != nil && len(r.Data) > nfgenHdrLen {
					kr := b.echo[i]
					nfnl.WalkAttrs(r.Data[nfgenHdrLen:], func(typ uint16, data []byte) {
						if typ == unix.NFTA_RULE_HANDLE {
							kr.handle = nfnl.BE64(data)
						}
					})
				}
			case r.Type == nfnl.MsgType(unix.NFT_MSG_DELRULE):
				// Sent only when the transaction committed.
				if len(r.Data) <= nfgenHdrLen || r.Data[0] != e.fam || derr != nil {
					continue
				}
				rc, ok, err := parseRuleCounter(r.Data[nfgenHdrLen:], e.table.Name, "")
				if err != nil {
					derr = fmt.Errorf("decode deleted rule: %w", err)
				} else if ok {
					deleted = append(deleted, rc)
				}
			}
		}
	}
	if first != nil {
		first.More = failures - 1
		return first
	}
	// The batch is in force whatever derr is: a count that could not
	// be read is not the table's state, so it is the sink's to report,
	// not a failed sync.
	if (len(deleted) > 0 || derr != nil) && e.onDeleted != nil {
		e.onDeleted(deleted, derr)
	}
	return nil
}
