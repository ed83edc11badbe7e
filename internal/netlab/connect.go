package netlab

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"
)

// ConnectResult is what `agnhost connect` reports: nothing on success,
// otherwise one line on stderr that starts with a fixed word (TIMEOUT,
// REFUSED, OTHER, UNKNOWN) and exit status 1.
type ConnectResult struct {
	Stderr string
	Exit   int
}

// OK reports a successful connection.
func (c ConnectResult) OK() bool { return c.Exit == 0 }

func connectFail(format string, args ...any) ConnectResult {
	return ConnectResult{Stderr: fmt.Sprintf(format, args...), Exit: 1}
}

// Connect makes one connection attempt from endpoint from to target with
// the outcome reported the way `agnhost connect --protocol=P --timeout=T`
// reports it (Kubernetes' e2e probe; conformance suites compare its words):
//
//   - tcp: a handshake; TIMEOUT when unanswered within timeout, REFUSED on
//     a reset, OTHER for anything else.
//   - udp: one datagram, then a read with the deadline; success needs a
//     reply (the lab's UDP servers echo). TIMEOUT when nothing comes back,
//     REFUSED on an ICMP port unreachable, UNKNOWN otherwise.
//   - sctp: without kernel SCTP (see sctp.go) a hand-made INIT is sent from
//     from's raw socket, and success means it reached to's raw socket on a
//     port to serves; anything else within timeout is TIMEOUT. to may be nil
//     (an address no lab endpoint owns), which can only time out.
//
// Sockets are opened inside from's namespace. err is reserved for lab
// failures (a namespace that cannot be entered), never for a verdict.
func (r *Runtime) Connect(ctx context.Context, from, to *Endpoint, proto Proto, target netip.AddrPort, timeout time.Duration) (ConnectResult, error) {
	if from == nil {
		return ConnectResult{}, errors.New("connect: no source endpoint")
	}
	if timeout <= 0 {
		return connectFail("UNKNOWN: timeout must be positive\n"), nil
	}
	var res ConnectResult
	var err error
	switch proto {
	case TCP:
		err = r.l.in(from.Path, func() error {
			res = connectTCP(ctx, target, timeout)
			return nil
		})
	case UDP:
		err = r.l.in(from.Path, func() error {
			res = connectUDP(ctx, target, timeout)
			return nil
		})
	case SCTP:
		res, err = connectSCTP(ctx, from, to, target, timeout)
	default:
		return connectFail("Unsupported protocol\n%s", proto), nil
	}
	if err != nil {
		return ConnectResult{}, fmt.Errorf("connect %s -> %v %s: %w", from.Name, target, proto, err)
	}
	return res, nil
}

func connectTCP(ctx context.Context, target netip.AddrPort, timeout time.Duration) ConnectResult {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", target.String())
	if err == nil {
		c.Close()
		return ConnectResult{}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		if opErr.Timeout() {
			return connectFail("TIMEOUT\n")
		}
		var se *os.SyscallError
		if errors.As(opErr.Err, &se) && se.Err == syscall.ECONNREFUSED {
			return connectFail("REFUSED\n")
		}
	}
	return connectFail("OTHER: %v\n", err)
}

func connectUDP(ctx context.Context, target netip.AddrPort, timeout time.Duration) ConnectResult {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", target.String())
	if err != nil {
		return connectFail("OTHER: %v\n", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return connectFail("OTHER: %v\n", err)
	}
	if _, err := c.Write([]byte("hostname\n")); err != nil {
		return udpFailure(err)
	}
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	if err != nil {
		return udpFailure(err)
	}
	if n == 0 {
		return connectFail("OTHER: No data received from the server. Cannot guarantee the server received the request.\n")
	}
	return ConnectResult{}
}

func udpFailure(err error) ConnectResult {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return connectFail("TIMEOUT: %v\n", err)
	case strings.Contains(err.Error(), "connection refused"):
		return connectFail("REFUSED: %v\n", err)
	default:
		return connectFail("UNKNOWN: %v\n", err)
	}
}

// connectSCTP sends INITs at the start and halfway through the timeout (one
// lost packet must not turn an allowed association into a TIMEOUT) and
// waits for to's raw socket to record one.
func connectSCTP(ctx context.Context, from, to *Endpoint, target netip.AddrPort, timeout time.Duration) (ConnectResult, error) {
	if from.srv == nil || from.srv.sctp == nil {
		return ConnectResult{}, fmt.Errorf("source %s runs no servers", from.Name)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tag := binary.BigEndian.Uint32(rnd[:4]) | 1 // an initiate tag must not be 0
	srcPort := 1024 + binary.BigEndian.Uint16(rnd[4:])%60000
	fam := IPv4
	if target.Addr().Is6() {
		fam = IPv6
	}
	got := make(<-chan struct{}) // never closes: nobody can see the INIT
	if to != nil && to.srv != nil && to.srv.sctp != nil {
		var cancel func()
		got, cancel = to.srv.sctp.expect(tag, from.Addr(fam), target.Port())
		defer cancel()
	}
	pkt := sctpInit(srcPort, target.Port(), tag)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	resend := time.NewTimer(timeout / 2)
	defer resend.Stop()
	// The INIT leaves from the address the receiver expects: a node has
	// several, and the one routing would pick need not be its own
	// endpoint address. A send error (no route, refused by a local rule)
	// is a lost INIT.
	src := from.Addr(fam)
	from.srv.sctp.send(src, target.Addr(), pkt)
	for {
		select {
		case <-got:
			return ConnectResult{}, nil
		case <-resend.C:
			from.srv.sctp.send(src, target.Addr(), pkt)
		case <-deadline.C:
			return connectFail("TIMEOUT\n"), nil
		case <-ctx.Done():
			return ConnectResult{}, ctx.Err()
		}
	}
}
