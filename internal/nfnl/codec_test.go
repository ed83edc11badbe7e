package nfnl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCodecRoundTrip encodes messages with every attribute kind and parses
// them back: header fields, attribute types and payloads, padding, nesting.
func TestCodecRoundTrip(t *testing.T) {
	type attr struct {
		typ  uint16
		data []byte
	}
	for _, c := range []struct {
		name  string
		build func(e *Encoder)
		want  []attr
	}{
		{"empty", func(e *Encoder) {}, nil},
		{"string pads to 4", func(e *Encoder) { e.Str(1, "nftguard") }, []attr{{1, []byte("nftguard\x00")}}},
		{"empty string", func(e *Encoder) { e.Str(2, "") }, []attr{{2, []byte{0}}}},
		{"u32 big-endian", func(e *Encoder) { e.U32(3, 0x01020304) }, []attr{{3, []byte{1, 2, 3, 4}}}},
		{"u64 big-endian", func(e *Encoder) { e.U64(4, 0x0102030405060708) }, []attr{{4, []byte{1, 2, 3, 4, 5, 6, 7, 8}}}},
		{"odd bytes", func(e *Encoder) { e.Attr(5, []byte{9}); e.Attr(6, []byte{1, 2, 3}) }, []attr{{5, []byte{9}}, {6, []byte{1, 2, 3}}}},
		{"nested", func(e *Encoder) {
			n := e.Nest(7)
			e.Str(1, "a")
			e.U32(2, 7)
			if err := e.EndNest(n); err != nil {
				panic(err)
			}
		}, []attr{{7, func() []byte { var x Encoder; x.Str(1, "a"); x.U32(2, 7); return x.B }()}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e Encoder
			off := e.Msg(MsgType(unix.NFT_MSG_NEWRULE), unix.NLM_F_REQUEST|unix.NLM_F_CREATE, 42, unix.NFPROTO_INET, 0x1234)
			c.build(&e)
			e.EndMsg(off)
			if len(e.B)%4 != 0 {
				t.Fatalf("message of %d bytes is not aligned", len(e.B))
			}
			msgs, err := ParseMsgs(e.B, nil)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("parse: %d messages, %v", len(msgs), err)
			}
			m := msgs[0]
			if m.Type != MsgType(unix.NFT_MSG_NEWRULE) || m.Flags != unix.NLM_F_REQUEST|unix.NLM_F_CREATE || m.Seq != 42 {
				t.Errorf("header %+v", m)
			}
			if len(m.Data) < NfgenHdrLen || m.Data[0] != unix.NFPROTO_INET || m.Data[1] != unix.NFNETLINK_V0 || binary.BigEndian.Uint16(m.Data[2:]) != 0x1234 {
				t.Fatalf("nfgenmsg % x", m.Data[:min(len(m.Data), NfgenHdrLen)])
			}
			var got []attr
			if err := WalkAttrs(m.Data[NfgenHdrLen:], func(typ uint16, data []byte) { got = append(got, attr{typ, data}) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("attributes %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i].typ != c.want[i].typ || !bytes.Equal(got[i].data, c.want[i].data) {
					t.Errorf("attribute %d: %d % x, want %d % x", i, got[i].typ, got[i].data, c.want[i].typ, c.want[i].data)
				}
			}
		})
	}
}

// TestReaders: the typed readers and their behaviour on short input.
func TestReaders(t *testing.T) {
	var e Encoder
	e.Str(1, "t")
	e.U32(2, 5)
	e.U64(3, 1<<40)
	e.Str(1, "last wins")
	m, err := Attrs(e.B)
	if err != nil {
		t.Fatal(err)
	}
	if CStr(m[1]) != "last wins" || BE32(m[2]) != 5 || BE64(m[3]) != 1<<40 {
		t.Errorf("Attrs: %q %d %d", CStr(m[1]), BE32(m[2]), BE64(m[3]))
	}
	l, err := AttrList(e.B)
	if err != nil || len(l) != 4 || CStr(l[0]) != "t" {
		t.Errorf("AttrList: %d entries, %v", len(l), err)
	}
	if BE32([]byte{1}) != 0 || BE64([]byte{1, 2, 3, 4}) != 0 || CStr([]byte("no nul")) != "no nul" {
		t.Error("short or unterminated input")
	}
	for _, bad := range [][]byte{{3, 0, 1, 0}, {200, 0, 1, 0, 0, 0, 0, 0}} {
		if err := WalkAttrs(bad, func(uint16, []byte) {}); err == nil {
			t.Errorf("malformed attribute % x accepted", bad)
		}
	}
	if _, err := ParseMsgs([]byte{200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil); err == nil {
		t.Error("malformed message accepted")
	}
	big := Encoder{}
	n := big.Nest(1)
	big.Attr(2, make([]byte, 70000))
	if err := big.EndNest(n); err == nil {
		t.Error("a nested attribute over 65535 bytes was closed")
	}
	var ack [4]byte
	binary.NativeEndian.PutUint32(ack[:], errno32(unix.ENOENT))
	if ErrCode(ack[:]) != unix.ENOENT || ErrCode(make([]byte, 4)) != 0 || ErrCode(nil) != unix.EPROTO {
		t.Error("ErrCode")
	}
}

// fakeTransport answers each request with the datagrams the next entry of
// answers holds, and records what was sent.
type fakeTransport struct {
	sent    [][]byte
	answers [][][]byte // per request: its datagrams
	queue   [][]byte
}

func (f *fakeTransport) Send(b []byte) error {
	f.sent = append(f.sent, append([]byte(nil), b...))
	if len(f.answers) == 0 {
		return errors.New("no answer scripted")
	}
	f.queue, f.answers = f.answers[0], f.answers[1:]
	return nil
}

func (f *fakeTransport) Recv(buf []byte) (int, error) {
	if len(f.queue) == 0 {
		return 0, errors.New("nothing to receive")
	}
	n := copy(buf, f.queue[0])
	f.queue = f.queue[1:]
	return n, nil
}

// reply encodes one answer message with one string attribute.
func reply(typ, flags uint16, seq uint32, s string) []byte {
	var e Encoder
	off := e.Msg(typ, flags, seq, unix.NFPROTO_INET, 0)
	if s != "" {
		e.Str(1, s)
	}
	e.EndMsg(off)
	return e.B
}

func done(seq uint32, flags uint16) []byte {
	var e Encoder
	off := len(e.B)
	e.B = binary.NativeEndian.AppendUint32(e.B, 0)
	e.B = binary.NativeEndian.AppendUint16(e.B, unix.NLMSG_DONE)
	e.B = binary.NativeEndian.AppendUint16(e.B, flags|unix.NLM_F_MULTI)
	e.B = binary.NativeEndian.AppendUint32(e.B, seq)
	e.B = binary.NativeEndian.AppendUint32(e.B, 0)
	e.B = binary.NativeEndian.AppendUint32(e.B, 0) // done's int payload
	e.EndMsg(off)
	return e.B
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// TestDumpRestart: a dump the kernel flags NLM_F_DUMP_INTR (on any part)
// is read to its end, reported as ErrDumpInterrupted, and Restart reads
// again until a dump is whole; late answers to earlier requests are
// skipped; an error answer is its errno.
func TestDumpRestart(t *testing.T) {
	rt := MsgType(unix.NFT_MSG_NEWTABLE)
	f := &fakeTransport{answers: [][][]byte{
		// First read: the second part is interrupted.
		{cat(reply(rt, unix.NLM_F_MULTI, 1, "a")), cat(reply(rt, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, 1, "b"), done(1, unix.NLM_F_DUMP_INTR))},
		// Second read: a stray answer of seq 1, then a whole dump.
		{cat(reply(rt, unix.NLM_F_MULTI, 1, "stale"), reply(rt, unix.NLM_F_MULTI, 2, "a")), cat(reply(rt, unix.NLM_F_MULTI, 2, "b"), done(2, 0))},
	}}
	buf := make([]byte, 1<<16)
	seq, reads := uint32(0), 0
	var got []string
	err := Restart(3, func() error {
		reads++
		seq++
		got = got[:0]
		var e Encoder
		e.EndMsg(e.Msg(MsgType(unix.NFT_MSG_GETTABLE), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, unix.NFPROTO_UNSPEC, 0))
		return Request(f, buf, e.B, seq, true, func(m Msg) {
			a, _ := Attrs(m.Data[NfgenHdrLen:])
			got = append(got, CStr(a[1]))
		})
	})
	if err != nil || reads != 2 || len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Restart: %d reads, got %q, %v; want 2 reads of [a b]", reads, got, err)
	}
	if len(f.sent) != 2 {
		t.Errorf("%d requests sent", len(f.sent))
	}

	// Always interrupted: Restart gives up with the error.
	f = &fakeTransport{}
	for range 3 {
		f.answers = append(f.answers, [][]byte{cat(reply(rt, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, 1, "x"), done(1, unix.NLM_F_DUMP_INTR))})
	}
	reads = 0
	err = Restart(3, func() error {
		reads++
		return Request(f, buf, []byte{}, 1, true, func(Msg) {})
	})
	if !errors.Is(err, ErrDumpInterrupted) || reads != 3 {
		t.Errorf("always interrupted: %d reads, %v", reads, err)
	}

	// An error answer.
	var ea Encoder
	off := ea.Msg(unix.NLMSG_ERROR, 0, 1, 0, 0)
	ea.B = ea.B[:off+NlmsgHdrLen]
	ea.B = binary.NativeEndian.AppendUint32(ea.B, errno32(unix.ENOENT))
	ea.EndMsg(off)
	f = &fakeTransport{answers: [][][]byte{{ea.B}}}
	if err := Request(f, buf, []byte{}, 1, false, func(Msg) { t.Error("fn called for an error") }); !errors.Is(err, unix.ENOENT) {
		t.Errorf("error answer: %v", err)
	}
}

// TestBatchFraming: a batch is BATCH_BEGIN, the messages, BATCH_END, with
// NLM_F_ACK on the last message only, and answers map back to messages.
func TestBatchFraming(t *testing.T) {
	var e Encoder
	BeginBatch(&e, 10)
	var last int
	for i := range 3 {
		last = e.Msg(MsgType(unix.NFT_MSG_NEWCHAIN), unix.NLM_F_REQUEST, 11+uint32(i), unix.NFPROTO_INET, 0)
		e.Str(1, "t")
		e.EndMsg(last)
	}
	AckAt(&e, last)
	EndBatch(&e, 14)
	msgs, err := ParseMsgs(e.B, nil)
	if err != nil || len(msgs) != 5 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	if msgs[0].Type != unix.NFNL_MSG_BATCH_BEGIN || msgs[4].Type != unix.NFNL_MSG_BATCH_END || msgs[4].Seq != 14 {
		t.Errorf("framing: %+v ... %+v", msgs[0], msgs[4])
	}
	if binary.BigEndian.Uint16(msgs[0].Data[2:]) != unix.NFNL_SUBSYS_NFTABLES {
		t.Error("BATCH_BEGIN does not name the nf_tables subsystem")
	}
	for i, m := range msgs[1:4] {
		if ack := m.Flags&unix.NLM_F_ACK != 0; ack != (i == 2) {
			t.Errorf("message %d: ACK %v", i, ack)
		}
	}
	for _, c := range []struct {
		seq  uint32
		i    int
		ok   bool
		what string
	}{{10, 0, false, "BATCH_BEGIN"}, {11, 0, true, "first"}, {13, 2, true, "last"}, {14, 0, false, "BATCH_END"}, {0, 0, false, "zero"}} {
		if i, ok := BatchIndex(10, 13, c.seq); i != c.i || ok != c.ok {
			t.Errorf("BatchIndex of %s (seq %d) = %d, %v; want %d, %v", c.what, c.seq, i, ok, c.i, c.ok)
		}
	}
}

// errno32 is an NLMSG_ERROR code: the negated errno.
func errno32(e unix.Errno) uint32 {
	v := -int32(e)
	return uint32(v)
}
