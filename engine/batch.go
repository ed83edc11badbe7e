package engine

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// opDesc names the object one batch message acts on, so a kernel error can
// be reported against it. It is formatted only when an error occurs.
type opDesc struct {
	verb  string // "add rule to chain", "delete set", ...
	name  string // chain or set name
	index int    // rule number (1-based) or first element number
	count int    // number of elements in the message
	text  string // rule text or first element text
}

func (d opDesc) String() string {
	var sb strings.Builder
	sb.WriteString(d.verb)
	if d.name != "" {
		fmt.Fprintf(&sb, " %q", d.name)
	}
	switch {
	case d.count > 0:
		fmt.Fprintf(&sb, " (elements %d-%d", d.index, d.index+d.count-1)
		if d.text != "" {
			fmt.Fprintf(&sb, ", first %s", d.text)
		}
		sb.WriteString(")")
	case d.index > 0 && d.text != "":
		fmt.Fprintf(&sb, " (rule %d: %q)", d.index, d.text)
	case d.index > 0:
		fmt.Fprintf(&sb, " (rule %d)", d.index)
	case d.text != "":
		fmt.Fprintf(&sb, " (%s)", d.text)
	}
	return sb.String()
}

// batch is one nfnetlink transaction: BATCH_BEGIN, our messages, BATCH_END,
// encoded into one buffer for one sendmsg.
type batch struct {
	fam   byte
	table string
	m     enc
	seq0  uint32
	seq   uint32
	ops   []opDesc // ops[seq-seq0-1] describes message seq
	// echo[i] is, for an echoed NEWRULE message ops[i], the rule whose
	// kernel handle the echo reports (nil for other messages).
	echo   []*kernelRule
	doEcho bool
	// delEcho has the kernel echo every deleted rule that may count
	// (with its counters' last values: see counters.go's DeletedCounters);
	// delEchoBytes bounds the size of those echoes, for the socket's
	// receive buffer.
	delEcho      bool
	delEchoBytes int
	lastOff      int
	setID        uint32
	opCount      int // objects acted on (elements count one each)
	// checkOnly leaves out BATCH_END: the kernel validates every message,
	// then aborts the transaction (see Engine.Check).
	checkOnly bool
}

// newBatch starts a batch; sizeHint is the expected size of the encoded
// batch (a 50k-rule batch is 24 MB: growing it by appending would copy it
// several times over).
func newBatch(fam byte, table string, seq uint32, echo bool, sizeHint int) *batch {
	b := &batch{fam: fam, table: table, seq0: seq, seq: seq, doEcho: echo, lastOff: -1}
	b.m.B = make([]byte, 0, max(sizeHint, 4096))
	nfnl.BeginBatch(&b.m, seq)
	return b
}

func (b *batch) begin(typ, flags uint16, d opDesc) int {
	b.seq++
	b.ops = append(b.ops, d)
	b.opCount++
	b.lastOff = len(b.m.B)
	return b.m.Msg(nfnl.MsgType(typ), unix.NLM_F_REQUEST|flags, b.seq, b.fam, 0)
}

func (b *batch) empty() bool { return len(b.ops) == 0 }

// finish appends BATCH_END and asks for an ACK on the last real message
// only: errors are reported for any failing message anyway, and the one ACK
// tells us the kernel has answered everything.
func (b *batch) finish() (lastSeq uint32) {
	if b.lastOff >= 0 {
		nfnl.AckAt(&b.m, b.lastOff)
	}
	if b.checkOnly {
		return b.seq
	}
	nfnl.EndBatch(&b.m, b.seq+1)
	return b.seq
}

func (b *batch) addTable() {
	off := b.begin(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, opDesc{verb: "add table"})
	b.m.Str(unix.NFTA_TABLE_NAME, b.table)
	b.m.EndMsg(off)
}

func (b *batch) delTable() {
	off := b.begin(unix.NFT_MSG_DELTABLE, 0, opDesc{verb: "delete table"})
	b.m.Str(unix.NFTA_TABLE_NAME, b.table)
	b.m.EndMsg(off)
}

// addChain creates a chain, or with update set changes an existing base
// chain's policy in place.
func (b *batch) addChain(c *kernelChain, update bool) {
	verb, flags := "add chain", uint16(unix.NLM_F_CREATE)
	if update {
		verb, flags = "update chain", 0
	}
	off := b.begin(unix.NFT_MSG_NEWCHAIN, flags, opDesc{verb: verb, name: c.name})
	b.m.Str(unix.NFTA_CHAIN_TABLE, b.table)
	b.m.Str(unix.NFTA_CHAIN_NAME, c.name)
	if c.base {
		if !update {
			h := b.m.Nest(unix.NFTA_CHAIN_HOOK)
			b.m.U32(unix.NFTA_HOOK_HOOKNUM, c.hook)
			b.m.U32(unix.NFTA_HOOK_PRIORITY, uint32(c.prio))
			if c.dev != "" {
				b.m.Str(unix.NFTA_HOOK_DEV, c.dev)
			}
			b.m.EndNest(h)
			b.m.Str(unix.NFTA_CHAIN_TYPE, c.typ)
		}
		b.m.U32(unix.NFTA_CHAIN_POLICY, c.policy)
	}
	if len(c.userdata) > 0 && !update {
		b.m.Attr(nftaChainUserdata, c.userdata)
	}
	b.m.EndMsg(off)
}

func (b *batch) delChain(name string) {
	off := b.begin(unix.NFT_MSG_DELCHAIN, 0, opDesc{verb: "delete chain", name: name})
	b.m.Str(unix.NFTA_CHAIN_TABLE, b.table)
	b.m.Str(unix.NFTA_CHAIN_NAME, name)
	b.m.EndMsg(off)
}

// flushChain deletes every rule of a chain with one message.
func (b *batch) flushChain(c *kernelChain) {
	name := c.name
	off := b.begin(unix.NFT_MSG_DELRULE, b.echoDeleted(c.rules...), opDesc{verb: "flush chain", name: name})
	b.m.Str(unix.NFTA_RULE_TABLE, b.table)
	b.m.Str(unix.NFTA_RULE_CHAIN, name)
	b.m.EndMsg(off)
}

func (b *batch) delRule(chain string, r *kernelRule) {
	off := b.begin(unix.NFT_MSG_DELRULE, b.echoDeleted(r), opDesc{verb: "delete rule from chain", name: chain})
	b.m.Str(unix.NFTA_RULE_TABLE, b.table)
	b.m.Str(unix.NFTA_RULE_CHAIN, chain)
	b.m.U64(unix.NFTA_RULE_HANDLE, r.handle)
	b.m.EndMsg(off)
}

// echoDeleted is the flags of a message deleting rules: NLM_F_ECHO when
// the batch reports deleted counters and one of the rules may count. The
// kernel then sends, once the transaction has committed, each deleted
// rule as it was at that moment, its counters' final values included.
func (b *batch) echoDeleted(rules ...*kernelRule) uint16 {
	if !b.delEcho {
		return 0
	}
	n := 0
	for _, r := range rules {
		if mayCount(r) {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	// A rule's echo is its expressions (key holds them encoded, or
	// close to it) plus the table, chain, handle, comment and headers.
	for _, r := range rules {
		b.delEchoBytes += len(r.key) + len(r.userdata) + 256
	}
	return unix.NLM_F_ECHO
}

// mayCount says whether a rule has a counter statement, or might have one
// (a rule the engine could not decode).
func mayCount(r *kernelRule) bool {
	if r.key == "" {
		return true
	}
	if r.exprs == nil {
		// Read back from the kernel: the key holds the expressions
		// as the kernel sent them, each named by a NUL-terminated
		// attribute. A false match costs one echo, no more.
		return strings.Contains(r.key, "counter\x00")
	}
	for _, x := range r.exprs {
		if _, ok := x.(*nftwire.Counter); ok {
			return true
		}
	}
	return false
}

// addRule inserts r before the rule with handle before, or appends it to
// the chain when before is 0. Inserting each new rule before the next kept
// rule keeps runs of new rules in order without knowing their handles.
func (b *batch) addRule(chain string, r *kernelRule, before uint64) error {
	// The anonymous sets travel first, renumbered to ids unique in this
	// batch; the rule's lookups refer to them by those ids.
	ids := make([]uint32, len(r.anon))
	for i, as := range r.anon {
		b.setID++
		ids[i] = b.setID
		// Named as nft names them: "__set%d" for sets, "__map%d" for
		// maps (the kernel fills in the number).
		s := *as
		s.name = anonName(as.name)
		d := opDesc{verb: "add anonymous set for rule in chain", name: chain, index: r.index, text: r.text}
		b.addSet(&s, ids[i], d)
		if err := b.elems(unix.NFT_MSG_NEWSETELEM, &s, ids[i], as.list(), nil, d); err != nil {
			return err
		}
	}
	flags := uint16(unix.NLM_F_CREATE)
	if before == 0 {
		flags |= unix.NLM_F_APPEND
	}
	if b.doEcho {
		flags |= unix.NLM_F_ECHO
	}
	off := b.begin(unix.NFT_MSG_NEWRULE, flags, opDesc{verb: "add rule to chain", name: chain, index: r.index, text: r.text})
	if b.doEcho {
		for len(b.echo) < len(b.ops)-1 {
			b.echo = append(b.echo, nil)
		}
		b.echo = append(b.echo, r)
	}
	b.m.Str(unix.NFTA_RULE_TABLE, b.table)
	b.m.Str(unix.NFTA_RULE_CHAIN, chain)
	if before != 0 {
		b.m.U64(unix.NFTA_RULE_POSITION, before)
	}
	n := b.m.Nest(unix.NFTA_RULE_EXPRESSIONS)
	if r.wireLen > 0 {
		// Encoded once, when the rule's key was computed.
		b.m.B = append(b.m.B, r.key[:r.wireLen]...)
	} else if err := b.ruleExprs(r, ids); err != nil {
		return fmt.Errorf("chain %q rule %d: %w", chain, r.index, err)
	}
	if err := b.m.EndNest(n); err != nil {
		return fmt.Errorf("chain %q rule %d: %w", chain, r.index, err)
	}
	if len(r.userdata) > 0 {
		b.m.Attr(unix.NFTA_RULE_USERDATA, r.userdata)
	}
	b.m.EndMsg(off)
	return nil
}

// ruleExprs encodes a rule's expressions, its lookups renumbered to the
// anonymous sets' ids in this batch.
func (b *batch) ruleExprs(r *kernelRule, ids []uint32) error {
	for _, e := range r.exprs {
		if l, ok := e.(*nftwire.Lookup); ok && isAnonName(l.SetName) && int(l.SetID) < len(ids) {
			c := *l
			c.SetName, c.SetID = anonName(r.anon[l.SetID].name), ids[l.SetID]
			e = &c
		}
		if d, ok := e.(*nftwire.Dynset); ok && isAnonName(d.SetName) && int(d.SetID) < len(ids) {
			c := *d
			c.SetName, c.SetID = anonName(r.anon[d.SetID].name), ids[d.SetID]
			e = &c
		}
		le := b.m.Nest(unix.NFTA_LIST_ELEM)
		var err error
		if b.m.B, err = nftwire.AppendExpr(b.m.B, nftwire.Family(b.fam), e); err != nil {
			return err
		}
		b.m.EndNest(le)
	}
	return nil
}

func (b *batch) addSet(s *kernelSet, id uint32, d opDesc) {
	off := b.begin(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, d)
	b.m.Str(unix.NFTA_SET_TABLE, b.table)
	b.m.Str(unix.NFTA_SET_NAME, s.name)
	b.m.U32(unix.NFTA_SET_FLAGS, s.flags)
	b.m.U32(unix.NFTA_SET_KEY_TYPE, s.keyType)
	b.m.U32(unix.NFTA_SET_KEY_LEN, s.keyLen)
	if s.flags&unix.NFT_SET_MAP != 0 {
		b.m.U32(unix.NFTA_SET_DATA_TYPE, s.dataType)
		b.m.U32(unix.NFTA_SET_DATA_LEN, s.dataLen)
	}
	if len(s.fieldLens) > 0 {
		dn := b.m.Nest(unix.NFTA_SET_DESC)
		cn := b.m.Nest(nftaSetDescConcat)
		for _, l := range s.fieldLens {
			fn := b.m.Nest(unix.NFTA_LIST_ELEM)
			b.m.U32(nftaSetFieldLen, l)
			b.m.EndNest(fn)
		}
		b.m.EndNest(cn)
		b.m.EndNest(dn)
	}
	b.m.U32(unix.NFTA_SET_ID, id)
	if len(s.userdata) > 0 {
		b.m.Attr(unix.NFTA_SET_USERDATA, s.userdata)
	}
	b.m.EndMsg(off)
}

func (b *batch) delSet(name string) {
	off := b.begin(unix.NFT_MSG_DELSET, 0, opDesc{verb: "delete set", name: name})
	b.m.Str(unix.NFTA_SET_TABLE, b.table)
	b.m.Str(unix.NFTA_SET_NAME, name)
	b.m.EndMsg(off)
}

// elems adds or deletes elements, split over as many messages as the
// 16-bit attribute length needs (all still in this one batch).
func (b *batch) elems(typ uint16, s *kernelSet, id uint32, elems []nftwire.Elem, texts []string, d opDesc) error {
	verb := "add elements to set"
	if typ == unix.NFT_MSG_DELSETELEM {
		verb = "delete elements from set"
	}
	if d.verb == "" {
		d = opDesc{verb: verb, name: s.name}
	}
	for i, el := range elems {
		if uint32(len(el.Key)) != s.keyLen || (el.KeyEnd != nil && uint32(len(el.KeyEnd)) != s.keyLen) {
			return fmt.Errorf("%s: element %d%s: key is %d bytes, set key is %d", d, i+1, textAt(texts, i), len(el.Key), s.keyLen)
		}
		if s.flags&unix.NFT_SET_MAP == 0 {
			continue
		}
		switch {
		case typ == delSetElem:
			// A deletion names the key; the value is not checked.
		case el.IntervalEnd:
			// The end of an interval (and the zero sentinel) carries no
			// value, in nft's encoding too.
			if len(el.Data) != 0 || el.Verdict != nil {
				return fmt.Errorf("%s: element %d%s: an interval end carries no value", d, i+1, textAt(texts, i))
			}
		case s.dataType == nftDataVerdict:
			if el.Verdict == nil {
				return fmt.Errorf("%s: element %d%s: verdict map entry has no verdict", d, i+1, textAt(texts, i))
			}
		case uint32(len(el.Data)) != s.dataLen:
			return fmt.Errorf("%s: element %d%s: value is %d bytes, map value is %d", d, i+1, textAt(texts, i), len(el.Data), s.dataLen)
		}
	}
	for start := 0; start < len(elems); {
		md := d
		md.index, md.text = start+1, textAt(texts, start)
		off := b.begin(typ, unix.NLM_F_CREATE, md)
		b.m.Str(unix.NFTA_SET_ELEM_LIST_TABLE, b.table)
		b.m.Str(unix.NFTA_SET_ELEM_LIST_SET, s.name)
		if id != 0 {
			b.m.U32(unix.NFTA_SET_ELEM_LIST_SET_ID, id)
		}
		n := b.m.Nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		i := start
		for ; i < len(elems) && len(b.m.B)-n < elemChunkBytes; i++ {
			b.elem(elems[i])
		}
		if err := b.m.EndNest(n); err != nil {
			return err
		}
		b.m.EndMsg(off)
		b.ops[len(b.ops)-1].count = i - start
		b.opCount += i - start - 1
		start = i
	}
	return nil
}

func textAt(texts []string, i int) string {
	if i < len(texts) && texts[i] != "" {
		return " " + fmt.Sprintf("%q", texts[i])
	}
	return ""
}

func (b *batch) elem(el nftwire.Elem) {
	le := b.m.Nest(unix.NFTA_LIST_ELEM)
	k := b.m.Nest(unix.NFTA_SET_ELEM_KEY)
	b.m.Attr(unix.NFTA_DATA_VALUE, el.Key)
	b.m.EndNest(k)
	if el.KeyEnd != nil {
		k := b.m.Nest(nftaSetElemKeyEnd)
		b.m.Attr(unix.NFTA_DATA_VALUE, el.KeyEnd)
		b.m.EndNest(k)
	}
	if el.IntervalEnd {
		b.m.U32(unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
	}
	if len(el.UserData) > 0 {
		b.m.Attr(unix.NFTA_SET_ELEM_USERDATA, el.UserData)
	}
	switch {
	case el.Verdict != nil:
		d := b.m.Nest(unix.NFTA_SET_ELEM_DATA)
		v := b.m.Nest(unix.NFTA_DATA_VERDICT)
		b.m.U32(unix.NFTA_VERDICT_CODE, uint32(int32(el.Verdict.Kind)))
		if el.Verdict.Chain != "" {
			b.m.Str(unix.NFTA_VERDICT_CHAIN, el.Verdict.Chain)
		}
		b.m.EndNest(v)
		b.m.EndNest(d)
	case el.Data != nil:
		d := b.m.Nest(unix.NFTA_SET_ELEM_DATA)
		b.m.Attr(unix.NFTA_DATA_VALUE, el.Data)
		b.m.EndNest(d)
	}
	b.m.EndNest(le)
}

// errUnknownOutcome means the kernel's answer was lost; the caller must
// re-read the table before trusting its cache.
var errUnknownOutcome = errors.New("lost the kernel's answer to the batch")

const (
	newSetElem = unix.NFT_MSG_NEWSETELEM
	delSetElem = unix.NFT_MSG_DELSETELEM
)
