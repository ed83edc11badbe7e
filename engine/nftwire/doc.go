// Package nftwire is the kernel's side of nftables objects, as nft writes
// them: the expression values and their netlink encoding (AppendExpr) and
// decoding (DecodeExpr), set elements in kernel form (Elem), and the
// libnftnl user-data TLVs that carry comments and set metadata. It knows
// nothing of nft's text syntax (that is nftsyntax, above it) and sends
// nothing (that is the engine, above both).
//
// It is the only package of this module that imports the v0.x
// github.com/google/nftables: see expr.go.
//
//	expr.go      Expr and the expression types nft writes, and their fields
//	encode.go    AppendExpr and Canonical: expressions to netlink attributes
//	decode.go    DecodeExpr: netlink attributes back to expressions
//	elem.go      Family and Elem: set elements in kernel form
//	userdata.go  UserData: the libnftnl TLVs of comments and set metadata
package nftwire
