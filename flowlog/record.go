package flowlog

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/podguard"
	"github.com/nftguard/nftguard/tablelayout"
)

// Direction is the side of the policy that denied a packet.
type Direction string

// The directions, as the log prefixes of package tablelayout name them; a
// record with any other prefix was not logged by nftguard's table.
const (
	Ingress Direction = "ingress"
	Egress  Direction = "egress"
	// Forged is a packet whose source is not an address of the pod whose
	// interface it entered by (package podguard), or, on a node with pods
	// it cannot attribute, of no pod at all.
	Forged  Direction = "forged"
	Unknown Direction = ""
)

// directionOf recovers the direction from a record's prefix.
func directionOf(prefix string) Direction {
	switch prefix {
	case tablelayout.LogPrefixIngress:
		return Ingress
	case tablelayout.LogPrefixEgress:
		return Egress
	case podguard.ForgedPrefix:
		return Forged
	}
	return Unknown
}

// Record is one denied packet as the kernel logged it, and, once resolved
// (see Resolve), the pods and policies it concerns.
type Record struct {
	Time      time.Time `json:"time"`
	Group     uint16    `json:"group"`
	Prefix    string    `json:"prefix"`
	Direction Direction `json:"direction,omitempty"`
	// InIfindex and OutIfindex are the interfaces the packet came in on
	// and would have left by (0 when the kernel did not say).
	InIfindex  uint32 `json:"inIfindex,omitempty"`
	OutIfindex uint32 `json:"outIfindex,omitempty"`

	Family   int        `json:"family"` // 4 or 6
	Src      netip.Addr `json:"src"`
	Dst      netip.Addr `json:"dst"`
	Protocol uint8      `json:"protocol"` // IP protocol number (the IPv6 upper-layer header)
	// SrcPort and DstPort are set for TCP, UDP, UDP-Lite, SCTP and DCCP
	// when the payload held them (not for a later fragment).
	SrcPort uint16 `json:"srcPort,omitempty"`
	DstPort uint16 `json:"dstPort,omitempty"`
	// ICMPType and ICMPCode are set for ICMP and ICMPv6 (HasICMP).
	HasICMP  bool  `json:"icmp,omitempty"`
	ICMPType uint8 `json:"icmpType,omitempty"`
	ICMPCode uint8 `json:"icmpCode,omitempty"`
	// Length is the packet's length from its IP header.
	Length int `json:"length"`

	// Filled by Resolve: the pods at either end ("namespace/name", ""
	// when the address is no known pod's), the pod whose chain denied
	// the packet, the policies isolating it in this direction, and the
	// decision in words.
	SrcPod   string   `json:"srcPod,omitempty"`
	DstPod   string   `json:"dstPod,omitempty"`
	Pod      string   `json:"pod,omitempty"`
	Policies []string `json:"policies,omitempty"`
	// ClusterRule is the ClusterNetworkPolicy rule that denied the
	// packet, when the Resolver knows one (see ClusterDenier); Policies
	// is then empty.
	ClusterRule *ClusterRule `json:"clusterRule,omitempty"`
	Decision    string       `json:"decision,omitempty"`
}

// ProtocolName is the protocol as nft and Kubernetes spell it, or its
// number.
func (r *Record) ProtocolName() string {
	if n, ok := nfnl.ProtocolName(r.Protocol); ok {
		return n
	}
	return strconv.Itoa(int(r.Protocol))
}

// hasPorts tells whether the protocol carries 16-bit ports first in its
// header.
func hasPorts(proto uint8) bool {
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_UDPLITE, unix.IPPROTO_SCTP, unix.IPPROTO_DCCP:
		return true
	}
	return false
}

// nfnetlink_log's message and attribute numbers (linux/netfilter/
// nfnetlink_log.h; golang.org/x/sys does not carry them).
const (
	subsysULOG     = 4
	msgPacket      = 0
	msgConfig      = 1
	attrPacketHdr  = 1
	attrTimestamp  = 3
	attrIfIndexIn  = 4
	attrIfIndexOut = 5
	attrPayload    = 9
	attrPrefix     = 10

	cfgAttrCmd      = 1
	cfgAttrMode     = 2
	cfgAttrNLBufSiz = 3
	cfgAttrTimeout  = 4
	cfgAttrQThresh  = 5

	cfgCmdBind = 1
	copyPacket = 2
)

// decodeMessage decodes the body of an NFULNL_MSG_PACKET message (the
// nfgenmsg header and its attributes) into a record. Fields the message
// lacks stay zero; a payload too short for its headers gives the
// addresses it did hold and no error, because the kernel copies only the
// configured range and a truncated record is still worth showing.
func decodeMessage(b []byte) (Record, error) {
	var r Record
	if len(b) < 4 {
		return r, fmt.Errorf("nflog message of %d bytes has no nfgenmsg header", len(b))
	}
	af := b[0]
	r.Group = binary.BigEndian.Uint16(b[2:4])
	var payload []byte
	for a := b[4:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a[0:2]))
		typ := binary.NativeEndian.Uint16(a[2:4]) & 0x3fff // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
		if l < 4 || l > len(a) {
			return r, fmt.Errorf("nflog attribute %d: length %d of %d bytes left", typ, l, len(a))
		}
		v := a[4:l]
		switch typ {
		case attrPrefix:
			r.Prefix = nfnl.CStr(v)
		case attrIfIndexIn:
			if len(v) >= 4 {
				r.InIfindex = binary.BigEndian.Uint32(v)
			}
		case attrIfIndexOut:
			if len(v) >= 4 {
				r.OutIfindex = binary.BigEndian.Uint32(v)
			}
		case attrTimestamp:
			if len(v) >= 16 {
				sec, usec := binary.BigEndian.Uint64(v[0:8]), binary.BigEndian.Uint64(v[8:16])
				r.Time = time.Unix(int64(sec), int64(usec)*1000)
			}
		case attrPayload:
			payload = v
		}
		n := (l + 3) &^ 3
		if n > len(a) {
			break
		}
		a = a[n:]
	}
	r.Direction = directionOf(r.Prefix)
	switch af {
	case unix.AF_INET:
		r.Family = 4
		parseIPv4(&r, payload)
	case unix.AF_INET6:
		r.Family = 6
		parseIPv6(&r, payload)
	}
	return r, nil
}

// parseIPv4 reads addresses, protocol and the transport header of an IPv4
// packet. A fragment other than the first carries no transport header.
func parseIPv4(r *Record, p []byte) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return
	}
	ihl := int(p[0]&0x0f) * 4
	r.Length = int(binary.BigEndian.Uint16(p[2:4]))
	r.Protocol = p[9]
	r.Src = netip.AddrFrom4([4]byte(p[12:16]))
	r.Dst = netip.AddrFrom4([4]byte(p[16:20]))
	if ihl < 20 || ihl > len(p) || binary.BigEndian.Uint16(p[6:8])&0x1fff != 0 {
		return
	}
	parseTransport(r, p[ihl:], unix.IPPROTO_ICMP)
}

// parseIPv6 reads addresses and walks the extension headers to the
// upper-layer header, as far as the copied payload reaches.
func parseIPv6(r *Record, p []byte) {
	if len(p) < 40 || p[0]>>4 != 6 {
		return
	}
	r.Length = 40 + int(binary.BigEndian.Uint16(p[4:6]))
	r.Src = netip.AddrFrom16([16]byte(p[8:24]))
	r.Dst = netip.AddrFrom16([16]byte(p[24:40]))
	next, rest := p[6], p[40:]
	// At most a handful of extension headers: a bound keeps a crafted
	// chain from costing more than it is worth.
	for range 8 {
		switch next {
		case unix.IPPROTO_HOPOPTS, unix.IPPROTO_ROUTING, unix.IPPROTO_DSTOPTS, unix.IPPROTO_FRAGMENT, unix.IPPROTO_AH:
		default:
			r.Protocol = next
			parseTransport(r, rest, unix.IPPROTO_ICMPV6)
			return
		}
		// Every extension header is at least 8 bytes, its next header
		// first; where the copy ends the last one read is the protocol.
		if len(rest) < 8 {
			r.Protocol = next
			return
		}
		n := 8 // a fragment header
		switch next {
		case unix.IPPROTO_HOPOPTS, unix.IPPROTO_ROUTING, unix.IPPROTO_DSTOPTS:
			n = (int(rest[1]) + 1) * 8
		case unix.IPPROTO_AH:
			n = (int(rest[1]) + 2) * 4
		case unix.IPPROTO_FRAGMENT:
			if binary.BigEndian.Uint16(rest[2:4])>>3 != 0 {
				// A later fragment carries no upper-layer header.
				r.Protocol = rest[0]
				return
			}
		}
		if n > len(rest) {
			r.Protocol = next
			return
		}
		next, rest = rest[0], rest[n:]
	}
	r.Protocol = next
}

// parseTransport reads ports or the ICMP type and code; icmp is the ICMP
// protocol of the packet's family.
func parseTransport(r *Record, t []byte, icmp uint8) {
	switch {
	case hasPorts(r.Protocol) && len(t) >= 4:
		r.SrcPort = binary.BigEndian.Uint16(t[0:2])
		r.DstPort = binary.BigEndian.Uint16(t[2:4])
	case r.Protocol == icmp && len(t) >= 2:
		r.HasICMP = true
		r.ICMPType, r.ICMPCode = t[0], t[1]
	}
}
