package engine

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// request sends one request and collects its replies: every message of a
// dump (until NLMSG_DONE) or the single answer of a get. Errors come back as
// unix.Errno.
func (e *Engine) request(typ uint16, flags uint16, build func(*enc)) ([]rawMsg, error) {
	var out []rawMsg
	err := e.requestEach(typ, flags, build, func(r rawMsg) {
		r.Data = append([]byte(nil), r.Data...)
		out = append(out, r)
	})
	return out, err
}

// requestEach is request handing each reply to fn as it is read; r.Data is
// valid only during the call.
func (e *Engine) requestEach(typ uint16, flags uint16, build func(*enc), fn func(r rawMsg)) error {
	return sendRequest(e.rw, e.rbuf, e.nextSeq(), e.fam, typ, flags, build, fn)
}

// sendRequest builds one request in family fam (build adds its
// attributes), sends it and hands fn each reply, as nfnl.Request.
func sendRequest(rw nfnl.Transport, buf []byte, seq uint32, fam byte, typ, flags uint16, build func(*enc), fn func(r rawMsg)) error {
	var m enc
	off := m.Msg(nfnl.MsgType(typ), unix.NLM_F_REQUEST|flags, seq, fam, 0)
	if build != nil {
		build(&m)
	}
	m.EndMsg(off)
	return nfnl.Request(rw, buf, m.B, seq, flags&unix.NLM_F_DUMP != 0, fn)
}

// requester sends one request, in a family it was made for, and collects
// its replies: Engine.request for our table, List's for any table.
type requester func(typ, flags uint16, build func(*enc)) ([]rawMsg, error)

// read dumps our table (and only it: every request names it) into kernel
// form. It returns nil, nil when the table does not exist. Chains, sets,
// elements and rules are decoded by the functions below, which List shares
// to read any table.
func (e *Engine) read() (*kernelTable, error) {
	var t *kernelTable
	err := nfnl.Restart(11, func() (err error) {
		t, err = e.readOnce()
		return err
	})
	return t, err
}

func (e *Engine) readOnce() (*kernelTable, error) {
	name := e.table.Name
	_, err := e.request(unix.NFT_MSG_GETTABLE, 0, func(m *enc) { m.Str(unix.NFTA_TABLE_NAME, name) })
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get table: %w", err)
	}
	t := newKernelTable()

	err = dumpChains(e.request, func(m *enc) { m.Str(unix.NFTA_CHAIN_TABLE, name) }, func(fam byte, tbl string, c *kernelChain) error {
		if tbl == name && fam == e.fam {
			t.addChain(c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	anon := map[string]*kernelSet{}
	err = dumpSets(e.request, func(m *enc) { m.Str(unix.NFTA_SET_TABLE, name) }, func(fam byte, tbl string, s *kernelSet) error {
		if tbl != name || fam != e.fam {
			return nil
		}
		// A timeout set's elements are dynamic (Set.Timeout): there may
		// be a hundred thousand, and they are never diffed.
		if !dynamicElems(s) {
			if err := readElems(e.request, name, s); err != nil {
				return err
			}
		}
		if s.flags&unix.NFT_SET_ANONYMOUS != 0 {
			anon[s.name] = s
		} else {
			t.addSet(s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	anonKeys := map[string]string{}
	for n, s := range anon {
		anonKeys[n] = s.contentKey()
	}
	resolve := func(n string, _ uint32) (string, bool) {
		k, ok := anonKeys[n]
		return k, ok
	}

	memo := exprMemo{}
	for _, cname := range t.chainOrder {
		c := t.chains[cname]
		err := dumpRules(e.request, e.fam, name, cname, func(a map[uint16][]byte) {
			kr := &kernelRule{handle: nfnl.BE64(a[unix.NFTA_RULE_HANDLE]), userdata: a[unix.NFTA_RULE_USERDATA]}
			// An undecodable rule keeps key "": it matches nothing and is
			// replaced, never guessed at.
			if exprs, err := decodeExprs(e.fam, a[unix.NFTA_RULE_EXPRESSIONS]); err == nil {
				if k, _, refs, err := ruleKey(e.fam, exprs, kr.userdata, resolve, memo, false); err == nil {
					kr.key, kr.refs, kr.jumps = k, refs, readJumps(exprs, anon)
				}
			}
			c.rules = append(c.rules, kr)
		})
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// dynamicElems reports whether a set's elements are not the engine's to
// read or diff: those of a timeout set come from AddTimed and expire in
// the kernel.
func dynamicElems(s *kernelSet) bool { return s.flags&unix.NFT_SET_TIMEOUT != 0 }

// dumpChains dumps chains (of the table build names; every table's when
// build is nil) and hands fn each one with its family and table; an error
// of fn ends the dump with it.
func dumpChains(req requester, build func(*enc), fn func(fam byte, table string, c *kernelChain) error) error {
	return dumpObjects(req, unix.NFT_MSG_GETCHAIN, "chain", build, parseChain, fn)
}

// dumpSets is dumpChains for sets; fn may send requests of its own (the
// reply is read whole before fn is called).
func dumpSets(req requester, build func(*enc), fn func(fam byte, table string, s *kernelSet) error) error {
	return dumpObjects(req, unix.NFT_MSG_GETSET, "set", build, parseSet, fn)
}

func dumpObjects[T any](req requester, typ uint16, what string, build func(*enc), parse func([]byte) (T, string, error), fn func(fam byte, table string, o T) error) error {
	msgs, err := req(typ, unix.NLM_F_DUMP, build)
	if err != nil {
		return fmt.Errorf("dump %ss: %w", what, err)
	}
	for _, r := range msgs {
		o, tbl, err := parse(r.Data[nfgenHdrLen:])
		if err != nil {
			return fmt.Errorf("decode %s: %w", what, err)
		}
		if err := fn(r.Data[0], tbl, o); err != nil {
			return err
		}
	}
	return nil
}

// dumpRules dumps the rules of one chain, in order, handing fn each rule's
// attributes (which alias the reply: fn keeps copies or nothing of them).
// One dump per chain: the kernel resumes a dump by skipping what it already
// sent, so one table-wide rule dump is quadratic.
func dumpRules(req requester, fam byte, table, chain string, fn func(a map[uint16][]byte)) error {
	msgs, err := req(unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, func(m *enc) {
		m.Str(unix.NFTA_RULE_TABLE, table)
		m.Str(unix.NFTA_RULE_CHAIN, chain)
	})
	if err != nil {
		return fmt.Errorf("dump rules of chain %q: %w", chain, err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.Data[nfgenHdrLen:])
		if err != nil {
			return fmt.Errorf("decode rule of chain %q: %w", chain, err)
		}
		if nfnl.CStr(a[unix.NFTA_RULE_TABLE]) != table || nfnl.CStr(a[unix.NFTA_RULE_CHAIN]) != chain || r.Data[0] != fam {
			continue
		}
		fn(a)
	}
	return nil
}

// readJumps lists the chains a kernel rule jumps or goes to, directly or
// through its anonymous verdict maps.
func readJumps(exprs []nftwire.Expr, anon map[string]*kernelSet) []string {
	var out []string
	for _, x := range exprs {
		switch x := x.(type) {
		case *nftwire.Verdict:
			if x.Chain != "" {
				out = append(out, x.Chain)
			}
		case *nftwire.Lookup:
			if s, ok := anon[x.SetName]; ok {
				for _, el := range s.elems {
					if el.Verdict != nil && el.Verdict.Chain != "" {
						out = append(out, el.Verdict.Chain)
					}
				}
			}
		}
	}
	return out
}

func parseChain(b []byte) (*kernelChain, string, error) {
	a, err := nfnl.Attrs(b)
	if err != nil {
		return nil, "", err
	}
	c := &kernelChain{name: nfnl.CStr(a[unix.NFTA_CHAIN_NAME]), userdata: a[nftaChainUserdata]}
	if h, ok := a[unix.NFTA_CHAIN_HOOK]; ok {
		ha, err := nfnl.Attrs(h)
		if err != nil {
			return nil, "", err
		}
		c.base = true
		c.hook = nfnl.BE32(ha[unix.NFTA_HOOK_HOOKNUM])
		c.prio = int32(nfnl.BE32(ha[unix.NFTA_HOOK_PRIORITY]))
		// An ingress chain's device: the kernel reports NFTA_HOOK_DEV
		// when the chain has one device (with NFTA_HOOK_DEVS beside it).
		if d, ok := ha[unix.NFTA_HOOK_DEV]; ok {
			c.dev = nfnl.CStr(d)
		}
		c.typ = nfnl.CStr(a[unix.NFTA_CHAIN_TYPE])
		// The kernel reports every base chain's policy; were it ever
		// absent, the chain would accept (the kernel's default).
		c.policy = nfAccept
		if p, ok := a[unix.NFTA_CHAIN_POLICY]; ok {
			c.policy = nfnl.BE32(p)
		}
	}
	return c, nfnl.CStr(a[unix.NFTA_CHAIN_TABLE]), nil
}

func parseSet(b []byte) (*kernelSet, string, error) {
	a, err := nfnl.Attrs(b)
	if err != nil {
		return nil, "", err
	}
	s := &kernelSet{
		name:     nfnl.CStr(a[unix.NFTA_SET_NAME]),
		flags:    nfnl.BE32(a[unix.NFTA_SET_FLAGS]),
		keyType:  nfnl.BE32(a[unix.NFTA_SET_KEY_TYPE]),
		keyLen:   nfnl.BE32(a[unix.NFTA_SET_KEY_LEN]),
		dataType: nfnl.BE32(a[unix.NFTA_SET_DATA_TYPE]),
		dataLen:  nfnl.BE32(a[unix.NFTA_SET_DATA_LEN]),
		userdata: a[unix.NFTA_SET_USERDATA],
		elems:    map[string]nftwire.Elem{},
	}
	if s.dataType == nftDataVerdict {
		s.dataLen = 0 // the kernel reports sizeof(struct nft_verdict)
	}
	if d, ok := a[unix.NFTA_SET_DESC]; ok {
		da, err := nfnl.Attrs(d)
		if err != nil {
			return nil, "", err
		}
		if cc, ok := da[nftaSetDescConcat]; ok {
			nfnl.WalkAttrs(cc, func(typ uint16, f []byte) {
				fa, _ := nfnl.Attrs(f)
				s.fieldLens = append(s.fieldLens, nfnl.BE32(fa[nftaSetFieldLen]))
			})
		}
	}
	return s, nfnl.CStr(a[unix.NFTA_SET_TABLE]), nil
}

// readElems dumps a set's elements. A hash set's dump walks the kernel's
// rhashtable, and a walk that meets a resize (which the kernel defers to a
// worker after a large insert) can miss elements without any sign: measured
// here, a dump right after adding 100,000 elements returned 90,062-99,274.
// So hash sets are dumped until two dumps in a row agree on the count.
func readElems(req requester, table string, s *kernelSet) error {
	if s.flags&unix.NFT_SET_INTERVAL != 0 {
		return dumpElems(req, table, s) // rbtree and pipapo have no deferred resize
	}
	prev := -1
	for attempt := 0; attempt < 8; attempt++ {
		clear(s.elems)
		if err := dumpElems(req, table, s); err != nil {
			return err
		}
		if len(s.elems) == prev {
			return nil
		}
		prev = len(s.elems)
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
		}
	}
	return fmt.Errorf("dump elements of set %q: %w", s.name, nfnl.ErrDumpInterrupted)
}

func dumpElems(req requester, table string, s *kernelSet) error {
	msgs, err := req(unix.NFT_MSG_GETSETELEM, unix.NLM_F_DUMP, func(m *enc) {
		m.Str(unix.NFTA_SET_ELEM_LIST_TABLE, table)
		m.Str(unix.NFTA_SET_ELEM_LIST_SET, s.name)
	})
	if err != nil {
		return fmt.Errorf("dump elements of set %q: %w", s.name, err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.Data[nfgenHdrLen:])
		if err != nil {
			return err
		}
		var perr error
		nfnl.WalkAttrs(a[unix.NFTA_SET_ELEM_LIST_ELEMENTS], func(_ uint16, b []byte) {
			el, err := parseElem(b)
			if err != nil {
				perr = err
				return
			}
			s.elems[elemID(el)] = el
		})
		if perr != nil {
			return fmt.Errorf("decode element of set %q: %w", s.name, perr)
		}
	}
	return nil
}

func parseElem(b []byte) (nftwire.Elem, error) {
	var el nftwire.Elem
	a, err := nfnl.Attrs(b)
	if err != nil {
		return el, err
	}
	value := func(typ uint16) []byte {
		v, ok := a[typ]
		if !ok {
			return nil
		}
		va, _ := nfnl.Attrs(v)
		return va[unix.NFTA_DATA_VALUE]
	}
	el.Key = value(unix.NFTA_SET_ELEM_KEY)
	el.KeyEnd = value(nftaSetElemKeyEnd)
	el.UserData = a[unix.NFTA_SET_ELEM_USERDATA]
	el.IntervalEnd = nfnl.BE32(a[unix.NFTA_SET_ELEM_FLAGS])&unix.NFT_SET_ELEM_INTERVAL_END != 0
	if d, ok := a[unix.NFTA_SET_ELEM_DATA]; ok {
		da, err := nfnl.Attrs(d)
		if err != nil {
			return el, err
		}
		if v, ok := da[unix.NFTA_DATA_VERDICT]; ok {
			va, err := nfnl.Attrs(v)
			if err != nil {
				return el, err
			}
			el.Verdict = &nftwire.Verdict{
				Kind:  nftwire.VerdictKind(int32(nfnl.BE32(va[unix.NFTA_VERDICT_CODE]))),
				Chain: nfnl.CStr(va[unix.NFTA_VERDICT_CHAIN]),
			}
		} else {
			el.Data = da[unix.NFTA_DATA_VALUE]
		}
	}
	return el, nil
}
