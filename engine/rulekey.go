package engine

import (
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// decodeExpr decodes one NFTA_LIST_ELEM payload (name + data). An
// expression it cannot decode makes the rule undecodable, which the diff
// treats as drift to replace.
func decodeExpr(fam byte, b []byte) (nftwire.Expr, error) {
	name, data, err := exprAttrs(b)
	if err != nil {
		return nil, err
	}
	return nftwire.DecodeExpr(nftwire.Family(fam), name, data)
}

// exprAttrs splits one NFTA_LIST_ELEM payload into the expression's name
// and its undecoded data.
func exprAttrs(b []byte) (string, []byte, error) {
	a, err := nfnl.Attrs(b)
	if err != nil {
		return "", nil, err
	}
	return nfnl.CStr(a[unix.NFTA_EXPR_NAME]), a[unix.NFTA_EXPR_DATA], nil
}

// decodeExprs decodes NFTA_RULE_EXPRESSIONS.
func decodeExprs(fam byte, b []byte) ([]nftwire.Expr, error) {
	var out []nftwire.Expr
	var derr error
	err := nfnl.WalkAttrs(b, func(typ uint16, data []byte) {
		if derr != nil || typ != unix.NFTA_LIST_ELEM {
			return
		}
		e, err := decodeExpr(fam, data)
		if err != nil {
			derr = err
			return
		}
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// anonResolver names an anonymous set a lookup refers to by its content.
type anonResolver func(name string, id uint32) (string, bool)

// ruleKey computes the canonical form of a rule: every expression
// re-marshalled after a decode (so both sides pass the same lossy codec),
// each inside its NFTA_LIST_ELEM header as a rule carries it, with what the
// kernel reports differently from what we send normalised: counter values,
// set ids, and anonymous set names (replaced by their content). It also
// returns the named sets the rule refers to.
//
// own says the expressions come from the engine's compiler rather than from
// a kernel dump: those of the types nftwire.Canonical accepts are already in
// canonical form and skip the decode. For such a rule ruleKey also reports
// wireLen: when every expression's canonical form is the very encoding the
// rule is sent with, key[:wireLen] is the rule's NFTA_RULE_EXPRESSIONS
// payload and the batch copies it instead of encoding the rule again (0
// otherwise).
func ruleKey(fam byte, exprs []nftwire.Expr, userdata []byte, anon anonResolver, memo exprMemo, own bool) (key string, wireLen int, refs []string, err error) {
	if own && allCanonical(exprs) {
		return ownRuleKey(fam, exprs, userdata, anon)
	}
	kb := make([]byte, 0, 64*len(exprs)+len(userdata)+8)
	wireOK := own
	for _, e := range exprs {
		le := len(kb)
		kb = append(kb, 0, 0, 0, 0)
		if own && nftwire.Canonical(e) {
			var same bool
			if kb, same, err = appendOwnExpr(kb, fam, e, anon, &refs); err != nil {
				return "", 0, nil, err
			}
			wireOK = wireOK && same
			endListElem(kb, le)
			continue
		}
		b, err := nftwire.AppendExpr(kb, nftwire.Family(fam), e)
		if err != nil {
			return "", 0, nil, err
		}
		enc := b[le+4:]
		plain := memo != nil && !needsNorm(e)
		if plain {
			if k, ok := memo[string(enc)]; ok {
				if k != string(enc) {
					wireOK = false
				}
				kb = append(b[:le+4], k...)
				endListElem(kb, le)
				continue
			}
		}
		c, err := decodeExpr(fam, enc)
		if err != nil {
			return "", 0, nil, err
		}
		switch x := c.(type) {
		case *nftwire.Counter:
			x.Bytes, x.Packets = 0, 0
		case *nftwire.Lookup:
			name, err := normSetRef(x.SetName, x.SetID, anon, &refs)
			if err != nil {
				return "", 0, nil, err
			}
			x.SetName, x.SetID = name, 0
		case *nftwire.Dynset:
			name, err := normSetRef(x.SetName, x.SetID, anon, &refs)
			if err != nil {
				return "", 0, nil, err
			}
			x.SetName, x.SetID = name, 0
		case *nftwire.Quota:
			x.Consumed = 0
		case *nftwire.Log:
			normLog(x)
		}
		k, err := nftwire.AppendExpr(nil, nftwire.Family(fam), c)
		if err != nil {
			return "", 0, nil, err
		}
		if plain {
			memo.put(string(enc), string(k))
		}
		if string(k) != string(enc) {
			wireOK = false
		}
		kb = append(b[:le+4], k...)
		endListElem(kb, le)
	}
	key, wireLen = sealKey(kb, wireOK, userdata)
	return key, wireLen, refs, nil
}

// normLog drops the level the kernel reports for a log statement that has
// no group when it is the kernel's default (warning): nft sends no level for
// `log` or `log prefix "..."` (nor does the compiler), the kernel fills in
// warning and dumps it, so without this a rule loaded by `nft -f`, or our
// own read back by a fresh engine, would never equal its compile and be
// rewritten. A group log (NFLOG) has no level, so nothing is dumped for it.
func normLog(x *nftwire.Log) {
	const group, level = 1 << unix.NFTA_LOG_GROUP, 1 << unix.NFTA_LOG_LEVEL
	if x.Key&group == 0 && x.Key&level != 0 && x.Level == nftwire.LogLevelWarning {
		x.Key &^= level
		x.Level = 0
	}
}

func allCanonical(exprs []nftwire.Expr) bool {
	for _, e := range exprs {
		if !nftwire.Canonical(e) {
			return false
		}
	}
	return true
}

// ownRuleKey is ruleKey for the engine's own rule whose expressions are
// all canonical: the key is their encoding with only counters and set
// references normalised, so nothing is decoded, and it is built in a
// buffer on the stack, leaving the key itself as the one allocation.
func ownRuleKey(fam byte, exprs []nftwire.Expr, userdata []byte, anon anonResolver) (key string, wireLen int, refs []string, err error) {
	var buf [1024]byte
	kb := buf[:0]
	wireOK := true
	for _, e := range exprs {
		le := len(kb)
		kb = append(kb, 0, 0, 0, 0)
		var same bool
		if kb, same, err = appendOwnExpr(kb, fam, e, anon, &refs); err != nil {
			return "", 0, nil, err
		}
		wireOK = wireOK && same
		endListElem(kb, le)
	}
	key, wireLen = sealKey(kb, wireOK, userdata)
	return key, wireLen, refs, nil
}

// sealKey ends a rule key with the rule's user data; wireLen is where the
// expressions end when they are the wire encoding (wireOK), else 0.
func sealKey(kb []byte, wireOK bool, userdata []byte) (key string, wireLen int) {
	if wireOK {
		wireLen = len(kb)
	}
	kb = append(kb, "\x00ud:"...)
	kb = append(kb, userdata...)
	return string(kb), wireLen
}

// appendOwnExpr appends the key form of a canonical expression of the
// engine's own: its encoding, with counters zeroed and set references
// normalised; same tells whether that is the very encoding it is sent
// with.
func appendOwnExpr(kb []byte, fam byte, e nftwire.Expr, anon anonResolver, refs *[]string) (out []byte, same bool, err error) {
	c, same := e, true
	switch x := e.(type) {
	case *nftwire.Counter:
		if x.Bytes != 0 || x.Packets != 0 {
			c, same = &nftwire.Counter{}, false
		}
	case *nftwire.Lookup:
		name, err := normSetRef(x.SetName, x.SetID, anon, refs)
		if err != nil {
			return kb, false, err
		}
		if name != x.SetName || x.SetID != 0 {
			n := *x
			n.SetName, n.SetID = name, 0
			c, same = &n, false
		}
	}
	out, err = nftwire.AppendExpr(kb, nftwire.Family(fam), c)
	return out, same, err
}

// endListElem writes the header of the NFTA_LIST_ELEM that starts at off
// and runs to the end of b.
func endListElem(b []byte, off int) {
	binary.NativeEndian.PutUint16(b[off:], uint16(len(b)-off))
	binary.NativeEndian.PutUint16(b[off+2:], unix.NFTA_LIST_ELEM|nlaFNested)
}

// exprMemo remembers the canonical form of expressions by their encoding:
// most expressions recur in many rules (payload loads, protocol matches,
// verdicts), and the decode/re-encode round trip dominates compiling.
type exprMemo map[string]string

// memoMax bounds an exprMemo; it starts over when full.
const memoMax = 1 << 16

func (m exprMemo) put(enc, canon string) {
	if len(m) >= memoMax {
		clear(m)
	}
	m[enc] = canon
}

// needsNorm reports whether an expression's canonical form depends on more
// than its encoding (counter values, set references).
func needsNorm(e nftwire.Expr) bool {
	switch e.(type) {
	case *nftwire.Counter, *nftwire.Lookup, *nftwire.Dynset, *nftwire.Quota:
		return true
	}
	return false
}

func normSetRef(name string, id uint32, anon anonResolver, refs *[]string) (string, error) {
	if isAnonName(name) {
		k, ok := anon(name, id)
		if !ok {
			return "", fmt.Errorf("rule refers to unknown anonymous set %q", name)
		}
		return "anon:" + k, nil
	}
	*refs = append(*refs, name)
	return name, nil
}

// isAnonName reports whether a set name is an anonymous set's: nft names
// anonymous sets "__set%d" and anonymous maps (vmap { ... }) "__map%d".
func isAnonName(name string) bool {
	return strings.HasPrefix(name, "__set") || strings.HasPrefix(name, "__map")
}

// anonName is the name pattern an anonymous set is sent with (the kernel
// fills in the number).
func anonName(name string) string {
	if strings.HasPrefix(name, "__map") {
		return "__map%d"
	}
	return "__set%d"
}

// jumpTargets lists the chains a rule jumps or goes to (directly or through
// its anonymous verdict maps).
func jumpTargets(r *kernelRule) []string {
	var out []string
	for _, e := range r.exprs {
		if v, ok := e.(*nftwire.Verdict); ok && v.Chain != "" {
			out = append(out, v.Chain)
		}
	}
	for _, s := range r.anon {
		for _, el := range s.elems {
			if el.Verdict != nil && el.Verdict.Chain != "" {
				out = append(out, el.Verdict.Chain)
			}
		}
	}
	return out
}
