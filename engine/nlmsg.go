package engine

import (
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// Attribute numbers golang.org/x/sys/unix does not define yet (values from
// the kernel's uapi nf_tables.h, which is stable ABI).
const (
	nftaTableUserdata    = 6
	nftaChainFlags       = 10
	nftaChainUserdata    = 12
	nftaSetDescConcat    = 2
	nftaSetFieldLen      = 1
	nftaSetElemKeyEnd    = 10
	nftSetConcat         = 0x80
	nftMsgDestroyTable   = 26
	nlaFNested           = unix.NLA_F_NESTED
	nfnlBatchGenID       = unix.NFNL_BATCH_GENID
	nfgenHdrLen          = nfnl.NfgenHdrLen
	nftDataVerdict       = unix.NFT_DATA_VERDICT
	elemChunkBytes       = 60 << 10 // NFTA_SET_ELEM_LIST_ELEMENTS has a 16-bit length
	defaultSocketBufSize = 4 << 20
)

// The netfilter-netlink codec, socket and request loop are internal/nfnl's
// (shared with conntrack and flowlog); the engine's encoder and received
// message are its.
type (
	enc    = nfnl.Encoder
	rawMsg = nfnl.Msg
)

// Base chain policies (NF_DROP, NF_ACCEPT in linux/netfilter.h).
const (
	nfDrop   = 0
	nfAccept = 1
)
