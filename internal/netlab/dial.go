package netlab

import (
	"fmt"
	"net"
	"net/netip"
	"time"
)

// DialTCP makes one TCP connection attempt from the lab pod or external
// host from to to, giving up after timeout, and reports whether the
// handshake completed. Unlike Probe it neither retries nor waits for a
// server answer, so a timeout shorter than the first SYN retransmission
// (one second) sends exactly one SYN: what tests that count denied packets
// need. err is reserved for lab failures.
func (l *Lab) DialTCP(from string, to netip.AddrPort, timeout time.Duration) (connected bool, err error) {
	err = l.Run(from, func() error {
		c, err := net.DialTimeout("tcp", to.String(), timeout)
		if err == nil {
			connected = true
			c.Close()
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("dial %s from %s: %w", to, from, err)
	}
	return connected, nil
}
