package nftwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ErrUnknownExpr is wrapped by DecodeExpr for an expression name it cannot
// decode. What that means is the caller's to say: the engine replaces such
// a rule in its own table, doctor reports it in foreign ones.
var ErrUnknownExpr = errors.New("unknown expression")

// DecodeExpr decodes one kernel expression from its name and data
// (NFTA_EXPR_NAME and NFTA_EXPR_DATA) into its google/nftables value.
func DecodeExpr(fam Family, name string, data []byte) (Expr, error) {
	switch name {
	case "notrack":
		return &expr.Notrack{}, nil // it has no data
	case "byteorder":
		return decodeByteorder(data)
	}
	e := emptyExpr(name)
	if e == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownExpr, name)
	}
	if err := expr.Unmarshal(byte(fam), data, e); err != nil {
		return nil, fmt.Errorf("decode %s: %w", name, err)
	}
	// A verdict is an immediate that loads the verdict register.
	if imm, ok := e.(*expr.Immediate); ok && imm.Register == unix.NFT_REG_VERDICT && len(imm.Data) == 0 {
		v := &expr.Verdict{}
		if err := expr.Unmarshal(byte(fam), data, v); err != nil {
			return nil, fmt.Errorf("decode verdict: %w", err)
		}
		return v, nil
	}
	return e, nil
}

// emptyExpr maps a kernel expression name to an empty value to decode into.
// Names missing here, or whose decoder google/nftables lacks, are unknown.
func emptyExpr(name string) Expr {
	switch name {
	case "bitwise":
		return &expr.Bitwise{}
	case "cmp":
		return &expr.Cmp{}
	case "connlimit":
		return &expr.Connlimit{}
	case "counter":
		return &expr.Counter{}
	case "ct":
		return &expr.Ct{}
	case "dup":
		return &expr.Dup{}
	case "dynset":
		return &expr.Dynset{}
	case "exthdr":
		return &expr.Exthdr{}
	case "fib":
		return &expr.Fib{}
	case "flow_offload":
		return &expr.FlowOffload{}
	case "hash":
		return &expr.Hash{}
	case "immediate":
		return &expr.Immediate{}
	case "limit":
		return &expr.Limit{}
	case "log":
		return &expr.Log{}
	case "lookup":
		return &expr.Lookup{}
	case "masq":
		return &expr.Masq{}
	case "match":
		return &expr.Match{}
	case "meta":
		return &expr.Meta{}
	case "nat":
		return &expr.NAT{}
	case "numgen":
		return &expr.Numgen{}
	case "objref":
		return &expr.Objref{}
	case "payload":
		return &expr.Payload{}
	case "queue":
		return &expr.Queue{}
	case "quota":
		return &expr.Quota{}
	case "range":
		return &expr.Range{}
	case "redir":
		return &expr.Redir{}
	case "reject":
		return &expr.Reject{}
	case "rt":
		return &expr.Rt{}
	case "socket":
		return &expr.Socket{}
	case "synproxy":
		return &expr.SynProxy{}
	case "target":
		return &expr.Target{}
	case "tproxy":
		return &expr.TProxy{}
	}
	return nil
}

// decodeByteorder decodes a byteorder expression, which google/nftables
// v0.3.0 encodes but does not decode (nft puts one before each lookup into
// an interval set of marks): SREG, DREG, OP, LEN and SIZE, each a big-endian
// u32, all of which the kernel dumps. Anything else is an error rather than
// a guess.
func decodeByteorder(data []byte) (Expr, error) {
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return nil, fmt.Errorf("decode byteorder: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	want := []uint16{unix.NFTA_BYTEORDER_SREG, unix.NFTA_BYTEORDER_DREG, unix.NFTA_BYTEORDER_OP, unix.NFTA_BYTEORDER_LEN, unix.NFTA_BYTEORDER_SIZE}
	got := map[uint16]uint32{}
	for ad.Next() {
		got[ad.Type()] = ad.Uint32()
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("decode byteorder: %w", err)
	}
	for _, typ := range want {
		if _, ok := got[typ]; !ok {
			return nil, fmt.Errorf("decode byteorder: attribute %d missing", typ)
		}
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("decode byteorder: unexpected attributes")
	}
	return &expr.Byteorder{
		SourceRegister: got[unix.NFTA_BYTEORDER_SREG], DestRegister: got[unix.NFTA_BYTEORDER_DREG],
		Op: expr.ByteorderOp(got[unix.NFTA_BYTEORDER_OP]), Len: got[unix.NFTA_BYTEORDER_LEN], Size: got[unix.NFTA_BYTEORDER_SIZE],
	}, nil
}
