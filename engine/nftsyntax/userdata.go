package nftsyntax

import (
	"fmt"
	"unicode/utf8"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// maxComment is the longest comment nft accepts (NFT_USERDATA_MAXLEN
// bounds the whole TLV area).
const maxComment = MaxCommentLen

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

// SetUserData returns NFTA_SET_USERDATA exactly as nft 1.0.6 writes it for
// a named set or map declared with `type` (not `typeof`).
func SetUserData(d SetDecl) []byte {
	var u nftwire.UserData
	u = u.PutU32(nftwire.UdataSetKeyByteorder, d.Key.byteorder())
	if d.Data != nil {
		u = u.PutU32(nftwire.UdataSetDataByteorder, d.Data.byteorder())
	}
	if d.Interval && d.AutoMerge {
		u = u.PutU32(nftwire.UdataSetMergeElements, 1)
	}
	if d.Key.IsConcat() {
		// nft records a concatenation key as an empty concat typeof.
		u = u.Put(nftwire.UdataSetKeyTypeof, typeofConcat(nil))
	}
	if d.Data != nil {
		u = u.PutU32(nftwire.UdataSetDataInterval, 0)
	}
	return u
}

func typeofConcat(subs [][]byte) []byte {
	var inner nftwire.UserData
	for i, s := range subs {
		inner = inner.Put(byte(i), s)
	}
	return nftwire.UserData(nil).PutU32(0, nftwire.ExprKindConcat).Put(1, inner)
}

// typeofField is the typeof user data nft records for an anonymous set
// keyed by the field.
func typeofField(f *field) ([]byte, error) {
	switch f.kind {
	case fieldPayload:
		in := nftwire.UserData(nil).PutU32(0, f.desc).PutU32(1, f.tmpl)
		return nftwire.UserData(nil).PutU32(0, nftwire.ExprKindPayload).Put(1, in), nil
	case fieldMeta:
		in := nftwire.UserData(nil).PutU32(0, uint32(f.meta))
		return nftwire.UserData(nil).PutU32(0, nftwire.ExprKindMeta).Put(1, in), nil
	}
	return nil, fmt.Errorf("%s cannot key an anonymous set", f.name)
}

// anonSetUserData is NFTA_SET_USERDATA as nft writes it for the anonymous
// set or verdict map of a rule keyed by fs.
func anonSetUserData(fs []*field, interval, vmap bool) ([]byte, error) {
	var u nftwire.UserData
	order := uint32(byteorderInvalid)
	if len(fs) == 1 {
		order = fs[0].order
	}
	u = u.PutU32(nftwire.UdataSetKeyByteorder, order)
	if vmap {
		u = u.PutU32(nftwire.UdataSetDataByteorder, byteorderInvalid)
	}
	if interval {
		u = u.PutU32(nftwire.UdataSetMergeElements, 1)
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
		u = u.Put(nftwire.UdataSetKeyTypeof, key)
	} else {
		u = u.Put(nftwire.UdataSetDataTypeof, nftwire.UserData(nil).PutU32(0, nftwire.ExprKindVerdict).Put(1, nil))
		u = u.PutU32(nftwire.UdataSetDataInterval, 0)
	}
	return u, nil
}

// ruleComment is NFTA_RULE_USERDATA for a comment.
func ruleComment(s string) []byte { return nftwire.Comment(nftwire.UdataRuleComment, s) }

// parseRuleComment extracts the comment from rule user data.
func parseRuleComment(b []byte) (string, bool, error) {
	c, ok, err := nftwire.ParseComment(b, nftwire.UdataRuleComment)
	if err != nil {
		return "", false, fmt.Errorf("rule user data: %w", err)
	}
	return c, ok, nil
}
