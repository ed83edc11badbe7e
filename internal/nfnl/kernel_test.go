package nfnl_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestKernelBatch sends batches to the kernel in a test namespace: an
// error answer names the failing message through BatchIndex, the one ACK
// (on the last message) ends the answer, and a committed batch is visible
// to a dump through Request.
func TestKernelBatch(t *testing.T) {
	ns := testns.New(t, "nfnl")
	c, err := nfnl.Dial(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rw, buf := nfnl.Raw(c), make([]byte, 1<<20)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))

	// send frames the tables' messages as one batch from seq0 and returns
	// the index of each message the kernel refused, and whether the ACK
	// of the last one came.
	send := func(seq0 uint32, commit bool, tables ...string) (failed []int, acked bool) {
		t.Helper()
		var e nfnl.Encoder
		nfnl.BeginBatch(&e, seq0)
		seq, last := seq0, 0
		for _, name := range tables {
			seq++
			last = e.Msg(nfnl.MsgType(unix.NFT_MSG_NEWTABLE), unix.NLM_F_REQUEST|unix.NLM_F_CREATE|unix.NLM_F_EXCL, seq, unix.NFPROTO_INET, 0)
			e.Str(unix.NFTA_TABLE_NAME, name)
			e.EndMsg(last)
		}
		nfnl.AckAt(&e, last)
		if commit {
			nfnl.EndBatch(&e, seq+1)
		}
		if err := rw.Send(e.B); err != nil {
			t.Fatal(err)
		}
		for {
			n, err := rw.Recv(buf)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			msgs, err := nfnl.ParseMsgs(buf[:n], nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Type != unix.NLMSG_ERROR {
					continue
				}
				i, ok := nfnl.BatchIndex(seq0, seq, m.Seq)
				if !ok {
					t.Fatalf("answer seq %d is no message of the batch", m.Seq)
				}
				if nfnl.ErrCode(m.Data) != 0 {
					failed = append(failed, i)
				}
				if m.Seq == seq {
					return failed, nfnl.ErrCode(m.Data) == 0
				}
			}
		}
	}

	// A check (no BATCH_END): validated, answered, then aborted.
	if failed, acked := send(100, false, "a", "b"); len(failed) != 0 || !acked {
		t.Fatalf("check batch: failed %v acked %v", failed, acked)
	}
	if got := tableNames(t, rw, buf, 200); len(got) != 0 {
		t.Fatalf("a batch without BATCH_END left tables %v", got)
	}
	if failed, acked := send(300, true, "a", "b"); len(failed) != 0 || !acked {
		t.Fatalf("commit: failed %v acked %v", failed, acked)
	}
	// The second message (index 1) fails: table a exists (NLM_F_EXCL).
	failed, _ := send(400, true, "c", "a", "d")
	if len(failed) != 1 || failed[0] != 1 {
		t.Errorf("failing messages %v, want [1]", failed)
	}
	got := tableNames(t, rw, buf, 500)
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("tables %v after a refused batch, want [a b] (all or nothing)", got)
	}
}

func tableNames(t *testing.T, rw nfnl.Transport, buf []byte, seq uint32) []string {
	t.Helper()
	var e nfnl.Encoder
	e.EndMsg(e.Msg(nfnl.MsgType(unix.NFT_MSG_GETTABLE), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, unix.NFPROTO_INET, 0))
	var names []string
	err := nfnl.Restart(5, func() error {
		names = names[:0]
		return nfnl.Request(rw, buf, e.B, seq, true, func(m nfnl.Msg) {
			a, err := nfnl.Attrs(m.Data[nfnl.NfgenHdrLen:])
			if err != nil {
				t.Error(err)
			}
			names = append(names, nfnl.CStr(a[unix.NFTA_TABLE_NAME]))
		})
	})
	if err != nil && !errors.Is(err, unix.ENOENT) {
		t.Fatal(err)
	}
	return names
}
