package netlab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Probe timing: short, because a denied cell costs a full timeout.
const (
	tcpTimeout   = time.Second
	udpAttempts  = 3
	udpWait      = 350 * time.Millisecond
	sctpAttempts = 2
	sctpWait     = 500 * time.Millisecond
)

// MaxParallelProbes bounds the probes (and so the OS threads locked into
// pod namespaces) that Reachability runs at once.
const MaxParallelProbes = 64

// Probe reports whether from can reach to on port over family f. from and to
// are pod names ("x/a") or external host names. Denied means the connection
// or datagram did not get through; err is reserved for lab failures.
func (l *Lab) Probe(ctx context.Context, from, to string, port Port, f Family) (allowed bool, err error) {
	src, dst := l.Endpoint(from), l.Endpoint(to)
	if src == nil {
		return false, fmt.Errorf("probe: no pod or external host %q", from)
	}
	if dst == nil {
		return false, fmt.Errorf("probe: no pod or external host %q", to)
	}
	target := netip.AddrPortFrom(dst.Addr(f), uint16(port.Num))
	switch port.Proto {
	case TCP:
		err = l.in(src.Path, func() error {
			d := net.Dialer{Timeout: tcpTimeout}
			c, err := d.DialContext(ctx, "tcp", target.String())
			if err == nil {
				allowed = true
				c.Close()
			}
			return nil
		})
	case UDP:
		err = l.in(src.Path, func() error {
			allowed = probeUDP(ctx, target)
			return nil
		})
	case SCTP:
		allowed, err = probeSCTP(ctx, src, dst, target)
	default:
		return false, fmt.Errorf("probe: unknown protocol %q", port.Proto)
	}
	if err == nil && !allowed {
		err = ctx.Err() // a cancelled probe measured nothing
	}
	if err != nil {
		return false, fmt.Errorf("probe %s -> %s %v %v: %w", from, to, port, f, err)
	}
	return allowed, nil
}

// probeUDP sends a nonce and waits for the echo, a few times. Run it inside
// the source namespace.
func probeUDP(ctx context.Context, target netip.AddrPort) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", target.String())
	if err != nil {
		return false
	}
	defer c.Close()
	nonce := make([]byte, 16)
	rand.Read(nonce)
	buf := make([]byte, 64)
	for range udpAttempts {
		if ctx.Err() != nil {
			return false
		}
		if _, err := c.Write(nonce); err != nil {
			// An ICMP error from the previous attempt surfaces here;
			// the attempt still counts.
			time.Sleep(udpWait)
			continue
		}
		deadline := time.Now().Add(udpWait)
		c.SetReadDeadline(deadline)
		for {
			n, err := c.Read(buf)
			if err != nil {
				break
			}
			if bytes.Equal(buf[:n], nonce) {
				return true
			}
		}
		// A refused port answers at once; wait out the slot so retries
		// are spaced the same either way.
		time.Sleep(time.Until(deadline))
	}
	return false
}

// probeSCTP sends INITs from src's raw socket and waits for dst's raw socket
// to see one.
func probeSCTP(ctx context.Context, src, dst *Endpoint, target netip.AddrPort) (bool, error) {
	if src.srv == nil || dst.srv == nil {
		return false, errors.New("servers not running")
	}
	var r [6]byte
	rand.Read(r[:])
	tag := binary.BigEndian.Uint32(r[:4]) | 1 // an initiate tag must not be 0
	srcPort := 1024 + binary.BigEndian.Uint16(r[4:])%60000
	fam := IPv4
	if target.Addr().Is6() {
		fam = IPv6
	}
	from := src.Addr(fam)
	got, cancel := dst.srv.sctp.expect(tag, from, target.Port())
	defer cancel()
	pkt := sctpInit(srcPort, target.Port(), tag)
	for range sctpAttempts {
		// A send error (no route, rejected by a local rule) is a denial.
		src.srv.sctp.send(from, target.Addr(), pkt)
		t := time.NewTimer(sctpWait)
		select {
		case <-got:
			t.Stop()
			return true, nil
		case <-ctx.Done():
			t.Stop()
			return false, nil // reported by Probe
		case <-t.C:
		}
	}
	return false, nil
}

// Reachability probes every pod to every pod and external host (the
// diagonal included: a pod probes its own address) on each port, over family
// f, MaxParallelProbes at a time. No ports means the spec's ports.
func (l *Lab) Reachability(ctx context.Context, f Family, ports ...Port) (*Matrix, error) {
	m := l.NewExpected(f, false, ports...)
	type job struct {
		from, to string
		port     Port
	}
	var jobs []job
	for _, p := range m.Ports {
		for _, from := range m.From {
			for _, to := range m.To {
				jobs = append(jobs, job{from, to, p})
			}
		}
	}
	sem := make(chan struct{}, MaxParallelProbes)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ok, err := l.Probe(ctx, j.from, j.to, j.port, f)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			m.set(j.port, j.from, j.to, ok)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return m, err
	}
	return m, nil
}

// NewExpected returns a matrix over the lab's pods (rows) and pods plus
// external hosts (columns) whose every cell is set to allowed. No ports means the
// spec's ports. Adjust it with the Expect methods.
func (l *Lab) NewExpected(f Family, allowed bool, ports ...Port) *Matrix {
	if len(ports) == 0 {
		ports = l.spec.ports()
	}
	var from, to []string
	for _, p := range l.Pods {
		from = append(from, p.Name)
		to = append(to, p.Name)
	}
	for _, e := range l.External {
		to = append(to, e.Name)
	}
	return NewMatrix(f, from, to, ports, allowed)
}
