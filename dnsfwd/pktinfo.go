package dnsfwd

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// The interface a UDP query came in on is the kernel's IP_PKTINFO (IPv4)
// or IPV6_PKTINFO (IPv6) control message: for a query the table
// redirected (DNAT in prerouting) on a routed node it is the host side of
// the sending pod's veth, in both families. On a bridged node (through
// br_netfilter) it is the same for every pod: the bridge for IPv4, and for
// IPv6 the device of the forwarder's address (seen in the lab: br0 and
// the node's uplink), so there only the data path tells pods apart. TCP
// has no such message, and needs none: a connection's handshake
// completes only for the address's owner.

// recvPktinfo asks the kernel for the input interface of each datagram.
func recvPktinfo(u *net.UDPConn, v6 bool) error {
	rc, err := u.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("dns forwarder: ask for the input interface of queries: %w", err)
	}
	return nil
}

// inputIfindex is the interface index in a datagram's control messages,
// 0 if there is none.
func inputIfindex(oob []byte) int {
	if len(oob) == 0 {
		return 0
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo: int ipi_ifindex first, host order.
			return int(int32(binary.NativeEndian.Uint32(m.Data[:4])))
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo: 16 bytes of address, then the index.
			return int(binary.NativeEndian.Uint32(m.Data[16:20]))
		}
	}
	return 0
}
