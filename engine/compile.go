package engine

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
)

var hooks = map[string]uint32{
	"prerouting":  unix.NF_INET_PRE_ROUTING,
	"input":       unix.NF_INET_LOCAL_IN,
	"forward":     unix.NF_INET_FORWARD,
	"output":      unix.NF_INET_LOCAL_OUT,
	"postrouting": unix.NF_INET_POST_ROUTING,
}

// libnftnl user data TLV types for comments.
const (
	udataChainComment = 0
	udataSetComment   = 7
)

func commentTLV(typ byte, c string) []byte {
	return append([]byte{typ, byte(len(c) + 1)}, append([]byte(c), 0)...)
}

// setDecls resolves @name references while compiling rules.
type setDecls map[string]nftsyntax.SetDecl

func (s setDecls) LookupSet(name string) (nftsyntax.SetDecl, bool) {
	d, ok := s[name]
	return d, ok
}

// compile turns the caller's text model into kernel form via nftsyntax. An
// error names the object (chain and rule number, set and element).
func compile(fam byte, d *Desired) (*kTable, error) {
	t := newKTable()
	decls := setDecls{}
	for _, s := range d.Sets {
		if _, dup := decls[s.Name]; dup {
			return nil, fmt.Errorf("set %q declared twice", s.Name)
		}
		decl, err := nftsyntax.ParseSetDecl(s.Name, s.Type, s.Map, s.Interval)
		if err != nil {
			return nil, fmt.Errorf("set %q: %w", s.Name, err)
		}
		decls[s.Name] = decl
		ud := nftsyntax.SetUserData(decl)
		if s.Comment != "" {
			ud = append(ud, commentTLV(udataSetComment, s.Comment)...)
		}
		ks := setFromDecl(decl, false, ud)
		ks.flags = nftsyntax.SetFlags(decl)
		texts := make([]nftsyntax.ElementText, len(s.Elements))
		for i, el := range s.Elements {
			texts[i] = nftsyntax.ElementText{Key: el.Key, Value: el.Value}
		}
		elems, err := nftsyntax.EncodeElements(decl, texts)
		if err != nil {
			return nil, fmt.Errorf("set %q: %w", s.Name, err)
		}
		ks.elemText = map[string]string{}
		for i, el := range elems {
			id := ks.add(el)
			if len(elems) == len(texts) {
				ks.elemText[id] = texts[i].Key
			}
		}
		t.addSet(ks)
	}
	for _, c := range d.Chains {
		if _, dup := t.chains[c.Name]; dup {
			return nil, fmt.Errorf("chain %q declared twice", c.Name)
		}
		kc := &kChain{name: c.Name}
		if c.Hook != "" {
			h, ok := hooks[c.Hook]
			if !ok {
				return nil, fmt.Errorf("chain %q: unknown hook %q", c.Name, c.Hook)
			}
			kc.base, kc.hook, kc.prio, kc.typ = true, h, c.Priority, c.Type
			if kc.typ == "" {
				kc.typ = "filter"
			}
			switch c.Policy {
			case "", "accept":
				kc.policy = nfAccept
			case "drop":
				kc.policy = nfDrop
			default:
				return nil, fmt.Errorf("chain %q: unknown policy %q", c.Name, c.Policy)
			}
		}
		if c.Comment != "" {
			kc.userdata = commentTLV(udataChainComment, c.Comment)
		}
		for i, r := range c.Rules {
			text := r.Rule
			if r.Comment != "" {
				text += " comment " + strconv.Quote(r.Comment)
			}
			cr, err := nftsyntax.CompileRule(nftsyntax.Family(fam), text, decls)
			if err != nil {
				return nil, fmt.Errorf("chain %q rule %d (%q): %w", c.Name, i+1, r.Rule, err)
			}
			kr := &kRule{exprs: cr.Exprs, userdata: cr.UserData, text: r.Rule, index: i + 1}
			for _, as := range cr.AnonSets {
				kr.anon = append(kr.anon, anonSet(as))
			}
			kc.rules = append(kc.rules, kr)
		}
		t.addChain(kc)
	}
	if err := t.prepare(fam); err != nil {
		return nil, err
	}
	return t, nil
}

func anonSet(as nftsyntax.AnonSet) *kSet {
	s := &kSet{
		name:     as.Decl.Name,
		flags:    as.Flags,
		keyType:  as.Decl.Key.Magic(),
		keyLen:   as.Decl.Key.Len(),
		userdata: as.UserData,
		elems:    map[string]nftsyntax.Elem{},
	}
	if s.flags&nftSetConcat != 0 {
		for _, f := range as.Decl.Key.Fields {
			s.fieldLens = append(s.fieldLens, f.Len)
		}
	}
	if as.Decl.Data != nil {
		s.dataType = as.Decl.Data.WireDataType()
		if s.dataType != nftDataVerdict {
			s.dataLen = as.Decl.Data.Len()
		}
	}
	for _, el := range as.Elements {
		s.add(el)
	}
	return s
}

// Sync makes the table equal d in one atomic transaction carrying only the
// difference (the first sync of an Engine replaces the whole table).
func (e *Engine) Sync(ctx context.Context, d *Desired) (Stats, error) {
	want, err := compile(e.fam, d)
	if err != nil {
		return Stats{}, fmt.Errorf("sync table %s: %w", e.table, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last = d
	return e.syncK(ctx, want)
}
