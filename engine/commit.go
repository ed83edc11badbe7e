package engine

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// commit sends the batch in one sendmsg and reads the kernel's answer: an
// error for every failing message, echoes of new rules, and the ACK of the
// last message, which the kernel queues after everything else.
func (e *Engine) commit(b *batch) error {
	last := b.finish()
	size := len(b.m.b)
	rcv := defaultSocketBufSize
	if b.doEcho {
		rcv = max(rcv, 4*size+(4<<20))
	}
	if err := e.setBuffers(size+(1<<20), rcv); err != nil {
		return err
	}
	if e.sendHook != nil {
		e.sendHook(b.m.b)
	}
	if err := sendRaw(e.conn, b.m.b); err != nil {
		return fmt.Errorf("send batch of %d bytes: %w", size, err)
	}
	e.conn.SetReadDeadline(time.Now().Add(time.Minute))
	defer e.conn.SetReadDeadline(time.Time{})
	var first *batchError
	var firstSeq uint32
	failures := 0
	var msgs []rawMsg
	for done := false; !done; {
		n, err := recvRaw(e.conn, e.rbuf)
		if errors.Is(err, unix.ENOBUFS) {
			return errUnknownOutcome
		}
		if err != nil {
			return fmt.Errorf("read batch answer: %w (%w)", err, errUnknownOutcome)
		}
		msgs, err = parseMsgs(e.rbuf[:n], msgs[:0])
		if err != nil {
			return err
		}
		for _, r := range msgs {
			switch {
			case r.typ == unix.NLMSG_ERROR:
				if code := errCode(r.data); code != 0 {
					failures++
					if r.seq > b.seq0 && r.seq <= b.seq {
						if first == nil || r.seq < firstSeq {
							first, firstSeq = &batchError{op: b.ops[r.seq-b.seq0-1], errno: code}, r.seq
						}
					} else if first == nil {
						first = &batchError{op: opDesc{verb: "commit"}, errno: code}
						done = true
					}
				}
				if r.seq == last {
					done = true
				}
			case r.typ == msgType(unix.NFT_MSG_NEWRULE):
				if i := int(r.seq - b.seq0 - 1); r.seq > b.seq0 && i < len(b.echo) && b.echo[i] != nil && len(r.data) > nfgenHdrLen {
					kr := b.echo[i]
					walkAttrs(r.data[nfgenHdrLen:], func(typ uint16, data []byte) {
						if typ == unix.NFTA_RULE_HANDLE {
							kr.handle = be64(data)
						}
					})
				}
			}
		}
	}
	if first != nil {
		first.more = failures - 1
		return first
	}
	return nil
}
