// Package nftsyntax compiles a documented subset of nft rule syntax into the
// netlink expressions that the nft binary itself would emit, and renders such
// expressions back into text. It is pure: no netlink I/O, no nft binary.
//
// The engine keeps the caller's rules as text, compiles them here, and sends
// the result to the kernel; because the bytecode is what nft writes, `nft list`
// renders our table and `nft -f` of that text reproduces it exactly.
package nftsyntax

import "github.com/nftguard/nftguard/engine/nftwire"

// Family is an nftables table family as the netlink API numbers it
// (unix.NFPROTO_INET, unix.NFPROTO_IPV4, unix.NFPROTO_IPV6).
type Family = nftwire.Family

// DataType is one nft datatype of a set key or map value, as nft names it
// ("ipv4_addr", "ipv6_addr", "inet_proto", "inet_service", "ifname", "mark",
// "verdict").
type DataType struct {
	Name  string
	Magic uint32 // nft's datatype id (TYPE_* in nft's datatype.h)
	Len   uint32 // bytes of one value; ifname is 16; verdict is 0
	// HostOrder is true for types nft stores in host byte order (mark,
	// ifname is a string); it decides the byte-order user data nft reads back.
	HostOrder bool
}

// Type is a set key or map data type: one datatype, or a concatenation of
// several ("ipv4_addr . inet_proto . inet_service").
type Type struct {
	Fields []DataType
}

// SetDecl describes a named set or map so that rules and elements referring
// to it can be compiled and rendered.
type SetDecl struct {
	Name     string
	Key      Type
	Data     *Type // nil for a plain set; verdict or value type for a map
	Interval bool
	Timeout  bool
	// AutoMerge mirrors `auto-merge` on an interval set; nft then records
	// NFTNL_UDATA_SET_MERGE_ELEMENTS in the set's user data.
	AutoMerge bool
}

// AnonSet is an anonymous constant set that a rule carries with it
// (`tcp dport { 80, 443 }`, `ip saddr vmap { ... }`). The rule's lookup
// expression refers to it by SetName "__set%d" and by SetID equal to its index
// in Compiled.AnonSets; the engine renumbers both when it builds a batch.
type AnonSet struct {
	Decl     SetDecl
	Elements []nftwire.Elem
	// Flags is NFTA_SET_FLAGS exactly as nft sends it for this set
	// (NFT_SET_ANONYMOUS|NFT_SET_CONSTANT|...).
	Flags uint32
	// UserData is NFTA_SET_USERDATA exactly as nft writes it for this
	// anonymous set (it records the typeof of the rule's key expression).
	UserData []byte
}

// Compiled is one rule in kernel form.
type Compiled struct {
	Exprs    []nftwire.Expr
	AnonSets []AnonSet
	// UserData is NFTA_RULE_USERDATA exactly as nft writes it (the comment
	// TLV), nil when the rule has no comment.
	UserData []byte
}

// Sets resolves the named sets a rule refers to (`@name`).
type Sets interface {
	LookupSet(name string) (SetDecl, bool)
}
