package nftsyntax

import (
	"github.com/nftguard/nftguard/engine/nftwire"
)

type fieldKind int

const (
	fieldPayload fieldKind = iota
	fieldMeta
	fieldCt
)

// field is one selector a rule can match on (`ip saddr`, `meta mark`), with
// how nft loads it and what dependency nft puts in front of it.
type field struct {
	name string // canonical text as nft lists it
	dt   DataType
	kind fieldKind

	base   nftwire.PayloadBase
	offset uint32
	meta   nftwire.MetaKey
	ct     nftwire.CtKey

	// nfproto / l4proto is the protocol nft checks before loading the
	// field (`meta nfproto ipv4`, `meta l4proto tcp`) in an inet table.
	nfproto byte
	l4proto byte

	// l4nfproto: the l4proto dependency itself needs this nfproto first
	// (nft writes `meta nfproto ipv6 meta l4proto ipv6-icmp` before
	// `icmpv6 type`, but nothing more after an explicit l4proto match).
	l4nfproto byte
	// valueOnly fields are compiled as single-value comparisons only.
	valueOnly bool

	// desc and tmpl identify a payload field in set user data
	// (proto_desc_id and the template index in nft's proto.c).
	desc, tmpl uint32
	// order is the byte order nft records for an anonymous set keyed by
	// this field.
	order uint32
}

// loadLen is how many bytes the load expression reads.
func (f *field) loadLen() uint32 { return f.dt.Len }

const (
	nfprotoIPv4 = 2
	nfprotoIPv6 = 10

	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132

	protoICMPv6 = 58
)

// nft's proto_desc_id values used in set user data.
const (
	descUDP  = 6
	descTCP  = 8
	descSCTP = 10
	descTH   = 11
	descIP   = 12
	descIP6  = 13
)

func payloadField(name string, dt DataType, base nftwire.PayloadBase, off uint32, nfp, l4 byte, desc, tmpl uint32) *field {
	return &field{name: name, dt: dt, kind: fieldPayload, base: base, offset: off,
		nfproto: nfp, l4proto: l4, desc: desc, tmpl: tmpl, order: dt.byteorder()}
}

func metaField(name string, dt DataType, key nftwire.MetaKey, order uint32) *field {
	return &field{name: name, dt: dt, kind: fieldMeta, meta: key, order: order}
}

func ctField(name string, dt DataType, key nftwire.CtKey) *field {
	return &field{name: name, dt: dt, kind: fieldCt, ct: key, order: byteorderHost}
}

const (
	nh = nftwire.PayloadBaseNetworkHeader
	th = nftwire.PayloadBaseTransportHeader
)

// fields is the read-only table of selectors, keyed by canonical name.
var fields = map[string]*field{
	"ip saddr":    payloadField("ip saddr", TypeIPv4Addr, nh, 12, nfprotoIPv4, 0, descIP, 11),
	"ip daddr":    payloadField("ip daddr", TypeIPv4Addr, nh, 16, nfprotoIPv4, 0, descIP, 12),
	"ip protocol": payloadField("ip protocol", TypeInetProto, nh, 9, nfprotoIPv4, 0, descIP, 9),
	"ip6 saddr":   payloadField("ip6 saddr", TypeIPv6Addr, nh, 8, nfprotoIPv6, 0, descIP6, 8),
	"ip6 daddr":   payloadField("ip6 daddr", TypeIPv6Addr, nh, 24, nfprotoIPv6, 0, descIP6, 9),
	"ip6 nexthdr": payloadField("ip6 nexthdr", TypeInetProto, nh, 6, nfprotoIPv6, 0, descIP6, 6),
	"tcp sport":   payloadField("tcp sport", TypeInetService, th, 0, 0, protoTCP, descTCP, 1),
	"tcp dport":   payloadField("tcp dport", TypeInetService, th, 2, 0, protoTCP, descTCP, 2),
	"udp sport":   payloadField("udp sport", TypeInetService, th, 0, 0, protoUDP, descUDP, 1),
	"udp dport":   payloadField("udp dport", TypeInetService, th, 2, 0, protoUDP, descUDP, 2),
	"sctp sport":  payloadField("sctp sport", TypeInetService, th, 0, 0, protoSCTP, descSCTP, 1),
	"sctp dport":  payloadField("sctp dport", TypeInetService, th, 2, 0, protoSCTP, descSCTP, 2),
	"th sport":    payloadField("th sport", TypeInetService, th, 0, 0, 0, descTH, 1),
	"th dport":    payloadField("th dport", TypeInetService, th, 2, 0, 0, descTH, 2),

	// Neighbour discovery matches (see valueOnly).
	"ip6 hoplimit": valueOnly(payloadField("ip6 hoplimit", typeInteger8, nh, 7, nfprotoIPv6, 0, descIP6, 7)),
	"icmpv6 type":  icmpv6Type(),

	"meta l4proto": metaField("meta l4proto", TypeInetProto, nftwire.MetaKeyL4PROTO, byteorderHost),
	"meta nfproto": metaField("meta nfproto", typeNfproto, nftwire.MetaKeyNFPROTO, byteorderHost),
	"meta mark":    metaField("meta mark", TypeMark, nftwire.MetaKeyMARK, byteorderHost),
	"iifname":      metaField("iifname", TypeIfname, nftwire.MetaKeyIIFNAME, byteorderHost),
	"oifname":      metaField("oifname", TypeIfname, nftwire.MetaKeyOIFNAME, byteorderHost),

	"ct state": ctField("ct state", typeCtState, nftwire.CtKeySTATE),
	"ct mark":  ctField("ct mark", TypeMark, nftwire.CtKeyMARK),
}

// valueOnly marks f as matched by single values only.
func valueOnly(f *field) *field { f.valueOnly = true; return f }

// icmpv6Type is `icmpv6 type`: the first byte of the ICMPv6 header, behind
// `meta l4proto ipv6-icmp`, which in an inet table itself needs
// `meta nfproto ipv6`.
func icmpv6Type() *field {
	f := valueOnly(payloadField("icmpv6 type", typeICMPv6Type, th, 0, 0, protoICMPv6, 0, 0))
	f.l4nfproto = nfprotoIPv6
	return f
}

// protoByL4 names the transport protocols whose header fields nft can
// match (ports, or the ICMPv6 type).
var protoByL4 = map[byte]string{protoTCP: "tcp", protoUDP: "udp", protoSCTP: "sctp", protoICMPv6: "icmpv6"}

// fieldForPayload finds the selector a payload load reads, given the
// protocol context established by earlier matches.
func fieldForPayload(p *nftwire.Payload, nfp, l4 byte) *field {
	for _, f := range fields {
		if f.kind != fieldPayload || f.base != p.Base || f.offset != p.Offset || f.dt.Len != p.Len {
			continue
		}
		if p.Base == nh && f.nfproto == nfp {
			return f
		}
		if p.Base == th {
			if name, ok := protoByL4[l4]; ok {
				if f.l4proto == l4 && f.name[:len(name)] == name {
					return f
				}
			} else if f.l4proto == 0 {
				return f
			}
		}
	}
	return nil
}

func fieldForMeta(k nftwire.MetaKey) *field {
	for _, f := range fields {
		if f.kind == fieldMeta && f.meta == k {
			return f
		}
	}
	return nil
}

func fieldForCt(k nftwire.CtKey) *field {
	for _, f := range fields {
		if f.kind == fieldCt && f.ct == k {
			return f
		}
	}
	return nil
}

// prefixField returns the payload field whose load at the same offset was
// shortened to n bytes (nft loads only the prefix bytes of a byte-aligned
// prefix match).
func prefixField(p *nftwire.Payload, nfp byte) *field {
	if p.Base != nh {
		return nil
	}
	for _, f := range fields {
		if f.kind == fieldPayload && f.base == nh && f.offset == p.Offset && f.nfproto == nfp && p.Len < f.dt.Len && f.dt.hasPrefixForm() {
			return f
		}
	}
	return nil
}
