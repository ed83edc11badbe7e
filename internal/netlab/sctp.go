package netlab

import (
	"encoding/binary"
	"hash/crc32"
)

// SCTP is probed without kernel SCTP support (many kernels, this project's
// CI included, lack CONFIG_IP_SCTP): the client sends a hand-made INIT over a
// raw IP socket and the server side records INITs arriving on its own raw
// socket. That exercises exactly what a firewall sees: the first packet of
// an association.

const (
	ipprotoSCTP   = 132
	sctpChunkInit = 1
	sctpHeaderLen = 12
	sctpInitLen   = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpInit returns an SCTP packet holding one INIT chunk. The initiate tag
// doubles as the probe's nonce.
func sctpInit(srcPort, dstPort uint16, tag uint32) []byte {
	b := make([]byte, sctpHeaderLen+sctpInitLen)
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], dstPort)
	// b[4:8]: verification tag, 0 in an INIT; b[8:12]: checksum, below.
	c := b[sctpHeaderLen:]
	c[0] = sctpChunkInit
	binary.BigEndian.PutUint16(c[2:], sctpInitLen)
	binary.BigEndian.PutUint32(c[4:], tag)    // initiate tag
	binary.BigEndian.PutUint32(c[8:], 65536)  // advertised receiver window
	binary.BigEndian.PutUint16(c[12:], 1)     // outbound streams
	binary.BigEndian.PutUint16(c[14:], 1)     // inbound streams
	binary.BigEndian.PutUint32(c[16:], tag^1) // initial TSN
	// RFC 9260 appendix A: CRC32c over the packet with a zero checksum
	// field, stored least significant byte first (as Linux does).
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, castagnoli))
	return b
}

// parseSCTPInit extracts the destination port and initiate tag from an SCTP
// packet (without IP header) if it starts with a well-formed INIT chunk
// carrying a valid checksum.
func parseSCTPInit(b []byte) (dstPort uint16, tag uint32, ok bool) {
	if len(b) < sctpHeaderLen+sctpInitLen || b[sctpHeaderLen] != sctpChunkInit {
		return 0, 0, false
	}
	sum := binary.LittleEndian.Uint32(b[8:])
	var zero [4]byte
	crc := crc32.Update(0, castagnoli, b[:8])
	crc = crc32.Update(crc, castagnoli, zero[:])
	crc = crc32.Update(crc, castagnoli, b[12:])
	if crc != sum {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[sctpHeaderLen+4:]), true
}

// stripIPv4Header removes the IPv4 header that AF_INET raw sockets deliver
// (AF_INET6 raw sockets deliver the payload alone).
func stripIPv4Header(b []byte) ([]byte, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return nil, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl {
		return nil, false
	}
	return b[ihl:], true
}
