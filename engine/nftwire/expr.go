package nftwire

import "github.com/google/nftables/expr"

// The expression values are google/nftables' (v0.x): the compiler builds
// them, AppendExpr and DecodeExpr write and read them. They are named here,
// as aliases, so that this package is the one place that imports the v0.x
// module: nftsyntax, the engine and doctor name nftwire.Cmp, never expr.Cmp,
// and an upgrade or a replacement of google/nftables changes this package
// only (TestOnlyNftwireImportsGoogleNftables holds the repository to it).

// Expr is one nftables expression.
type Expr = expr.Any

// Expression types.
type (
	Bitwise              = expr.Bitwise
	Byteorder            = expr.Byteorder
	ByteorderOp          = expr.ByteorderOp
	Cmp                  = expr.Cmp
	CmpOp                = expr.CmpOp
	Connlimit            = expr.Connlimit
	Counter              = expr.Counter
	Ct                   = expr.Ct
	CtKey                = expr.CtKey
	Dup                  = expr.Dup
	Dynset               = expr.Dynset
	Exthdr               = expr.Exthdr
	Fib                  = expr.Fib
	FlowOffload          = expr.FlowOffload
	Hash                 = expr.Hash
	Immediate            = expr.Immediate
	Limit                = expr.Limit
	LimitTime            = expr.LimitTime
	Log                  = expr.Log
	Lookup               = expr.Lookup
	Masq                 = expr.Masq
	Match                = expr.Match
	Meta                 = expr.Meta
	MetaKey              = expr.MetaKey
	NAT                  = expr.NAT
	Notrack              = expr.Notrack
	Numgen               = expr.Numgen
	Objref               = expr.Objref
	Payload              = expr.Payload
	PayloadBase          = expr.PayloadBase
	Queue                = expr.Queue
	Quota                = expr.Quota
	Range                = expr.Range
	Redir                = expr.Redir
	Reject               = expr.Reject
	Rt                   = expr.Rt
	Socket               = expr.Socket
	SynProxy             = expr.SynProxy
	TProxy               = expr.TProxy
	Target               = expr.Target
	Verdict              = expr.Verdict
	VerdictKind          = expr.VerdictKind
	LimitType            = expr.LimitType
	NATType              = expr.NATType
	PayloadOperationType = expr.PayloadOperationType
)

// Constants of the expression types' fields.
const (
	ByteorderHton              = expr.ByteorderHton
	CmpOpEq                    = expr.CmpOpEq
	CmpOpGt                    = expr.CmpOpGt
	CmpOpGte                   = expr.CmpOpGte
	CmpOpLt                    = expr.CmpOpLt
	CmpOpLte                   = expr.CmpOpLte
	CmpOpNeq                   = expr.CmpOpNeq
	CsumTypeInet               = expr.CsumTypeInet
	CtKeyMARK                  = expr.CtKeyMARK
	CtKeySTATE                 = expr.CtKeySTATE
	LimitTimeDay               = expr.LimitTimeDay
	LimitTimeHour              = expr.LimitTimeHour
	LimitTimeMinute            = expr.LimitTimeMinute
	LimitTimeSecond            = expr.LimitTimeSecond
	LimitTimeWeek              = expr.LimitTimeWeek
	LogLevelWarning            = expr.LogLevelWarning
	LimitTypePkts              = expr.LimitTypePkts
	MetaKeyIIFNAME             = expr.MetaKeyIIFNAME
	MetaKeyL4PROTO             = expr.MetaKeyL4PROTO
	MetaKeyMARK                = expr.MetaKeyMARK
	MetaKeyNFPROTO             = expr.MetaKeyNFPROTO
	MetaKeyOIFNAME             = expr.MetaKeyOIFNAME
	NATTypeDestNAT             = expr.NATTypeDestNAT
	NATTypeSourceNAT           = expr.NATTypeSourceNAT
	PayloadBaseNetworkHeader   = expr.PayloadBaseNetworkHeader
	PayloadBaseTransportHeader = expr.PayloadBaseTransportHeader
	PayloadLoad                = expr.PayloadLoad
	PayloadWrite               = expr.PayloadWrite
	VerdictAccept              = expr.VerdictAccept
	VerdictContinue            = expr.VerdictContinue
	VerdictDrop                = expr.VerdictDrop
	VerdictGoto                = expr.VerdictGoto
	VerdictJump                = expr.VerdictJump
	VerdictQueue               = expr.VerdictQueue
	VerdictReturn              = expr.VerdictReturn
)
