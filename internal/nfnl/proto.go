package nfnl

import "golang.org/x/sys/unix"

// ProtocolName names an IP protocol number (of a conntrack tuple or a
// logged packet) as nft's and Kubernetes' keywords spell it, for the
// protocols pod traffic is made of; ok is false for any other number,
// which each caller prints in its own way.
func ProtocolName(p uint8) (name string, ok bool) {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp", true
	case unix.IPPROTO_UDP:
		return "udp", true
	case unix.IPPROTO_SCTP:
		return "sctp", true
	case unix.IPPROTO_ICMP:
		return "icmp", true
	case unix.IPPROTO_ICMPV6:
		return "icmpv6", true
	case unix.IPPROTO_UDPLITE:
		return "udplite", true
	case unix.IPPROTO_DCCP:
		return "dccp", true
	}
	return "", false
}
