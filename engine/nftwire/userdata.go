package nftwire

import (
	"encoding/binary"
	"fmt"
)

// libnftnl user data is a list of TLVs: one type byte, one length byte, the
// value. Numbers are u32 in host byte order (little endian on every
// platform this agent runs on). The type numbers depend on what carries
// the user data (a set, a rule, a chain).
const (
	// NFTA_SET_USERDATA (enum nftnl_udata_set_types).
	UdataSetKeyByteorder  = 0
	UdataSetDataByteorder = 1
	UdataSetMergeElements = 2
	UdataSetKeyTypeof     = 3
	UdataSetDataTypeof    = 4
	UdataSetDataInterval  = 6
	UdataSetComment       = 7

	// NFTA_RULE_USERDATA (enum nftnl_udata_rule_types).
	UdataRuleComment = 0
	// UdataSetElemComment is a set element's comment
	// (NFTNL_UDATA_SET_ELEM_COMMENT).
	UdataSetElemComment = 0

	// NFTA_CHAIN_USERDATA (enum nftnl_udata_chain_types).
	UdataChainComment = 0
)

// nft expression kinds recorded in typeof user data (enum expr_types).
const (
	ExprKindVerdict = 1
	ExprKindPayload = 7
	ExprKindMeta    = 9
	ExprKindConcat  = 13
)

// MaxUserData is NFT_USERDATA_MAXLEN, the kernel's bound on the whole
// user data of one object.
const MaxUserData = 256

// UserData is a TLV list under construction.
type UserData []byte

// Put appends one TLV; v must fit the one-byte length.
func (u UserData) Put(typ byte, v []byte) UserData {
	return append(append(u, typ, byte(len(v))), v...)
}

// PutU32 appends a TLV holding n in host byte order.
func (u UserData) PutU32(typ byte, n uint32) UserData {
	return u.Put(typ, binary.LittleEndian.AppendUint32(nil, n))
}

// Comment returns the user data of an object whose only TLV is a comment of
// TLV type typ (UdataRuleComment, UdataChainComment, UdataSetComment):
// the string NUL-terminated, as nft stores it.
func Comment(typ byte, s string) []byte {
	return UserData(nil).Put(typ, append([]byte(s), 0))
}

// ParseComment finds the comment TLV of type typ in user data.
func ParseComment(b []byte, typ byte) (string, bool, error) {
	for len(b) > 0 {
		if len(b) < 2 || len(b) < 2+int(b[1]) {
			return "", false, fmt.Errorf("truncated")
		}
		t, v := b[0], b[2:2+int(b[1])]
		b = b[2+int(b[1]):]
		if t == typ {
			if len(v) == 0 || v[len(v)-1] != 0 {
				return "", false, fmt.Errorf("comment is not NUL-terminated")
			}
			return string(v[:len(v)-1]), true, nil
		}
	}
	return "", false, nil
}
