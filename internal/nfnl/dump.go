package nfnl

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// Request sends one request message (req, with sequence number seq) and
// hands fn each reply to it: every message of a dump until NLMSG_DONE, or
// the single answer of a get. Replies with another sequence number (late
// answers to an earlier request) are dropped. An error reply comes back as
// its unix.Errno. A dump the kernel flagged NLM_F_DUMP_INTR is read to its
// end and then reported as ErrDumpInterrupted: what fn saw mixes two
// generations of the ruleset. buf is the receive buffer; m.Data is valid
// only during fn.
func Request(t Transport, buf []byte, req []byte, seq uint32, dump bool, fn func(m Msg)) error {
	if err := t.Send(req); err != nil {
		return err
	}
	intr := false
	var msgs []Msg
	for {
		n, err := t.Recv(buf)
		if err != nil {
			return err
		}
		msgs, err = ParseMsgs(buf[:n], msgs[:0])
		if err != nil {
			return err
		}
		for _, r := range msgs {
			if r.Seq != seq {
				continue
			}
			if r.Flags&unix.NLM_F_DUMP_INTR != 0 {
				intr = true
			}
			switch r.Type {
			case unix.NLMSG_DONE:
				if intr {
					return ErrDumpInterrupted
				}
				return nil
			case unix.NLMSG_ERROR:
				if code := ErrCode(r.Data); code != 0 {
					return code
				}
				if !dump {
					return nil
				}
			default:
				fn(r)
				if !dump {
					return nil
				}
			}
		}
	}
}

// Restart runs read, a read of one or more dumps that must come from one
// generation of the ruleset, again while it fails with ErrDumpInterrupted,
// at most attempts times in all; it returns read's last error. Restarting
// the whole read rather than one dump is what makes the dumps of a table,
// its chains, sets and rules agree with each other.
func Restart(attempts int, read func() error) error {
	var err error
	for range max(attempts, 1) {
		if err = read(); !errors.Is(err, ErrDumpInterrupted) {
			return err
		}
	}
	return err
}

// BeginBatch starts an nfnetlink transaction for the nf_tables subsystem:
// the messages after it, up to EndBatch, are applied all or none.
func BeginBatch(e *Encoder, seq uint32) {
	e.EndMsg(e.Msg(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, seq, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES))
}

// EndBatch ends the transaction: the kernel commits it. A batch sent
// without it is validated message by message and then aborted (a check).
func EndBatch(e *Encoder, seq uint32) {
	e.EndMsg(e.Msg(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, seq, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES))
}

// AckAt sets NLM_F_ACK on the message that starts at off in e. A batch
// asks for one ACK, on its last message: the kernel answers the messages
// in order, so that ACK (or the last message's error) is the end of the
// answer, and failures of any message are reported without asking.
func AckAt(e *Encoder, off int) {
	flags := binary.NativeEndian.Uint16(e.B[off+6:])
	binary.NativeEndian.PutUint16(e.B[off+6:], flags|unix.NLM_F_ACK)
}

// BatchIndex maps the sequence number of an answer to the batch message it
// answers, for a batch whose messages carry seq0+1 up to last (BATCH_BEGIN
// has seq0): the index of that message, or false for an answer to none of
// them (an error about the batch as a whole, or a stray message).
func BatchIndex(seq0, last, seq uint32) (int, bool) {
	if seq <= seq0 || seq > last {
		return 0, false
	}
	return int(seq - seq0 - 1), true
}
