package nftsyntax

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// libnftnl user data TLVs: one type byte, one length byte, the value.
// Numbers are u32 in host byte order (little endian on every platform this
// agent runs on).
const (
	udataSetKeyByteorder  = 0
	udataSetDataByteorder = 1
	udataSetMergeElements = 2
	udataSetKeyTypeof     = 3
	udataSetDataTypeof    = 4
	udataSetDataInterval  = 6

	udataRuleComment = 0

	// nft expression kinds recorded in typeof user data (enum expr_types).
	exprKindVerdict = 1
	exprKindPayload = 7
	exprKindMeta    = 9
	exprKindConcat  = 13

	// maxComment is the longest comment nft accepts (NFT_USERDATA_MAXLEN
	// bounds the whole TLV area).
	maxComment = MaxCommentLen
)

// MaxCommentLen is the longest comment, in bytes, that nft accepts on a
// rule, chain or set.
const MaxCommentLen = 128

// ClipComment shortens a comment that is longer than nft accepts, keeping
// its start (where callers put what identifies the object) and marking the
// cut with "...". Comments are for people; a clipped one is better than a
// refused rule.
func ClipComment(s string) string {
	if len(s) <= MaxCommentLen {
		return s
	}
	cut := MaxCommentLen - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

type udata []byte

func (u udata) put(typ byte, v []byte) udata {
	return append(append(u, typ, byte(len(v))), v...)
}

func (u udata) putU32(typ byte, n uint32) udata {
	return u.put(typ, binary.LittleEndian.AppendUint32(nil, n))
}

// SetUserData returns NFTA_SET_USERDATA exactly as nft 1.0.6 writes it for
// a named set or map declared with `type` (not `typeof`).
func SetUserData(d SetDecl) []byte {
	var u udata
	u = u.putU32(udataSetKeyByteorder, d.Key.byteorder())
	if d.Data != nil {
		u = u.putU32(udataSetDataByteorder, d.Data.byteorder())
	}
	if d.Interval && d.AutoMerge {
		u = u.putU32(udataSetMergeElements, 1)
	}
	if d.Key.IsConcat() {
		// nft records a concatenation key as an empty concat typeof.
		u = u.put(udataSetKeyTypeof, typeofConcat(nil))
	}
	if d.Data != nil {
		u = u.putU32(udataSetDataInterval, 0)
	}
	return u
}

func typeofConcat(subs [][]byte) []byte {
	var inner udata
	for i, s := range subs {
		inner = inner.put(byte(i), s)
	}
	return udata(nil).putU32(0, exprKindConcat).put(1, inner)
}

// typeofField is the typeof user data nft records for an anonymous set
// keyed by the field.
func typeofField(f *field) ([]byte, error) {
	switch f.kind {
	case fieldPayload:
		in := udata(nil).putU32(0, f.desc).putU32(1, f.tmpl)
		return udata(nil).putU32(0, exprKindPayload).put(1, in), nil
	case fieldMeta:
		in := udata(nil).putU32(0, uint32(f.meta))
		return udata(nil).putU32(0, exprKindMeta).put(1, in), nil
	}
	return nil, fmt.Errorf("%s cannot key an anonymous set", f.name)
}

// anonSetUserData is NFTA_SET_USERDATA as nft writes it for the anonymous
// set or verdict map of a rule keyed by fs.
func anonSetUserData(fs []*field, interval, vmap bool) ([]byte, error) {
	var u udata
	order := uint32(byteorderInvalid)
	if len(fs) == 1 {
		order = fs[0].order
	}
	u = u.putU32(udataSetKeyByteorder, order)
	if vmap {
		u = u.putU32(udataSetDataByteorder, byteorderInvalid)
	}
	if interval {
		u = u.putU32(udataSetMergeElements, 1)
	}
	if !vmap {
		var key []byte
		if len(fs) == 1 {
			var err error
			if key, err = typeofField(fs[0]); err != nil {
				return nil, err
			}
		} else {
			subs := make([][]byte, len(fs))
			for i, f := range fs {
				s, err := typeofField(f)
				if err != nil {
					return nil, err
				}
				subs[i] = s
			}
			key = typeofConcat(subs)
		}
		u = u.put(udataSetKeyTypeof, key)
	} else {
		u = u.put(udataSetDataTypeof, udata(nil).putU32(0, exprKindVerdict).put(1, nil))
		u = u.putU32(udataSetDataInterval, 0)
	}
	return u, nil
}

// ruleComment is NFTA_RULE_USERDATA for a comment: the comment TLV with the
// string NUL-terminated, as nft stores it.
func ruleComment(s string) []byte {
	return udata(nil).put(udataRuleComment, append([]byte(s), 0))
}

// parseRuleComment extracts the comment from rule user data.
func parseRuleComment(b []byte) (string, bool, error) {
	for len(b) > 0 {
		if len(b) < 2 || len(b) < 2+int(b[1]) {
			return "", false, fmt.Errorf("truncated rule user data")
		}
		typ, v := b[0], b[2:2+int(b[1])]
		b = b[2+int(b[1]):]
		if typ == udataRuleComment {
			if len(v) == 0 || v[len(v)-1] != 0 {
				return "", false, fmt.Errorf("rule comment is not NUL-terminated")
			}
			return string(v[:len(v)-1]), true, nil
		}
	}
	return "", false, nil
}
