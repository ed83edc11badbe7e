package engine

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"

	"github.com/nftguard/nftguard/engine/nftwire"
)

var hooks = map[string]uint32{
	"prerouting":  unix.NF_INET_PRE_ROUTING,
	"input":       unix.NF_INET_LOCAL_IN,
	"forward":     unix.NF_INET_FORWARD,
	"output":      unix.NF_INET_LOCAL_OUT,
	"postrouting": unix.NF_INET_POST_ROUTING,
}

// setDecls resolves @name references while compiling rules.
type setDecls map[string]nftsyntax.SetDecl

func (s setDecls) LookupSet(name string) (nftsyntax.SetDecl, bool) {
	d, ok := s[name]
	return d, ok
}

func anonSet(as nftsyntax.AnonSet) *kSet {
	s := &kSet{
		name:     as.Decl.Name,
		flags:    as.Flags,
		keyType:  as.Decl.Key.Magic(),
		keyLen:   as.Decl.Key.Len(),
		userdata: as.UserData,
		elems:    map[string]nftwire.Elem{},
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
// difference (the first sync of an Engine replaces the whole table). Only
// the parts of d that changed since the last Sync are compiled again.
func (e *Engine) Sync(ctx context.Context, d *Desired) (Stats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, err := e.comp.compile(d)
	if err != nil {
		return Stats{}, fmt.Errorf("sync table %s: %w", e.table, err)
	}
	e.last = d
	return e.syncK(ctx, want)
}
