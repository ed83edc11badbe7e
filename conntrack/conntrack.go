package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/rtnl"
)

// Stats counts what ClearStale did.
type Stats struct {
	Seen    int // source-NATed conntrack entries read, IPv4 and IPv6 (all entries before Linux 5.15)
	Deleted int // entries deleted because their translation is stale
}

// Option refines ClearStale.
type Option func(*env)

// WithCIDRs tells ClearStale the cluster (pod) CIDRs and the service CIDRs,
// the same ones the egress compiler got: only entries whose original source
// is in a cluster CIDR are pod traffic, and entries whose destination is in
// either are never translated by the egress chain, so neither is touched.
// Without it, every source is considered a possible pod and only the node's
// own addresses count as internal destinations.
func WithCIDRs(cluster, service []netip.Prefix) Option {
	return func(e *env) {
		e.cluster = append(e.cluster, cluster...)
		e.internal = append(append(e.internal, cluster...), service...)
	}
}

// WithPrevious tells ClearStale the bindings it was last called with, and
// those of any sync since whose cleaning did not run (the agent lets a
// change waiting for the kernel go first): an entry translated to an
// address that is still the node's (a load-balancer address kube-vip keeps
// announcing here) but that P was bound to in one of them and is not now
// (annotation removed, Service deleted, pod held) was our translation, and
// is deleted.
func WithPrevious(previous ...map[netip.Addr]Binding) Option {
	return func(e *env) {
		if e.previous == nil {
			e.previous = map[netip.Addr][]netip.Addr{}
		}
		for _, m := range previous {
			for a, b := range m {
				e.previous[a.Unmap()] = append(e.previous[a.Unmap()], b.To.Unmap())
			}
		}
	}
}

// ClearStale deletes the conntrack entries in the network namespace at
// netnsPath ("" for the current one) whose source translation no longer
// matches bindings (pod address → egress address, as just synced); see the
// package documentation for the rules. It returns how many entries it read
// and deleted. An entry that disappears before it is deleted is not an
// error.
func ClearStale(ctx context.Context, netnsPath string, bindings map[netip.Addr]Binding, opts ...Option) (Stats, error) {
	var st Stats
	if err := ctx.Err(); err != nil {
		return st, err
	}
	v := env{bindings: make(map[netip.Addr]Binding, len(bindings))}
	for a, b := range bindings {
		v.bindings[a.Unmap()] = b
	}
	for _, o := range opts {
		o(&v)
	}

	// Both sockets are created inside the namespace (nfnl.InNetNS, which
	// says why no descriptor of it outlives the call) and stay there for
	// their whole life. ti-mo/conntrack would also enter it itself
	// (netlink.Config.NetNS), but then the namespace file has to stay open
	// for as long as the library might use the descriptor: one way for
	// the whole module is easier to trust.
	var rt *netlink.Conn
	var c *ct.Conn
	err := nfnl.InNetNS(netnsPath, func() error {
		var err error
		if rt, err = netlink.Dial(unix.NETLINK_ROUTE, nil); err != nil {
			return fmt.Errorf("read node addresses: open route netlink socket: %w", err)
		}
		if c, err = ct.Dial(nil); err != nil {
			return fmt.Errorf("open netlink socket: %w", err)
		}
		return nil
	})
	if rt != nil {
		defer rt.Close()
	}
	if err != nil {
		if c != nil {
			c.Close()
		}
		return st, fmt.Errorf("conntrack: %w", err)
	}

	local, err := localAddrs(rt)
	if err != nil {
		return st, fmt.Errorf("conntrack: read node addresses: %w", err)
	}
	v.local = local

	// The library's calls take no context: closing the socket is what
	// interrupts a dump or a delete blocked in the kernel.
	var once sync.Once
	closeConn := func() { once.Do(func() { c.Close() }) }
	defer closeConn()
	stop := context.AfterFunc(ctx, closeConn)
	defer stop()
	fail := func(what string, err error) (Stats, error) {
		if ctx.Err() != nil {
			return st, fmt.Errorf("conntrack: %s: %w", what, ctx.Err())
		}
		return st, fmt.Errorf("conntrack: %s: %w", what, err)
	}

	// Only source-NATed entries can be stale; the kernel filters on the
	// status bit from Linux 5.15 and ignores the filter before, which
	// decide copes with (it checks the tuples itself). This keeps the dump
	// small on a node tracking many untranslated connections.
	flows, err := c.DumpFilter(ct.NewFilter().Status(ct.StatusSrcNAT), nil)
	if err != nil {
		return fail("dump entries", err)
	}
	st.Seen = len(flows)
	for _, f := range flows {
		e := entry{Src: f.TupleOrig.IP.SourceAddress, Dst: f.TupleReply.IP.SourceAddress, NAT: f.TupleReply.IP.DestinationAddress}
		if !decide(e, v).remove() {
			continue
		}
		// The tuples (and zone) identify the entry; the other attributes of
		// the dump are not needed to delete it. The reply tuple is sent
		// too although the kernel looks the entry up by the original one:
		// the library picks the message's address family from both, and
		// sends IPv6 deletes as IPv4 (rejected) without it.
		err := c.Delete(ct.Flow{TupleOrig: f.TupleOrig, TupleReply: f.TupleReply, Zone: f.Zone})
		switch {
		case err == nil:
			st.Deleted++
		case errors.Is(err, unix.ENOENT):
			// Gone already (timed out or closed since the dump).
		default:
			return fail(fmt.Sprintf("delete %s %s -> %s (translated to %s)",
				protoName(f.TupleOrig.Proto.Protocol), e.Src, f.TupleOrig.IP.DestinationAddress, e.NAT), err)
		}
	}
	return st, nil
}

func protoName(p uint8) string {
	if n, ok := nfnl.ProtocolName(p); ok {
		return n
	}
	return fmt.Sprintf("proto %d", p)
}

// localAddrs returns every address assigned to an interface of the
// namespace (IPv4 and IPv6), read with an RTM_GETADDR dump: these are the
// addresses a masquerade or another tool's SNAT on this node translates to.
func localAddrs(c *netlink.Conn) (map[netip.Addr]bool, error) {
	// An all-zero ifaddrmsg: family AF_UNSPEC dumps IPv4 and IPv6.
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETADDR, Flags: netlink.Request | netlink.Dump},
		Data:   make([]byte, unix.SizeofIfAddrmsg),
	})
	if err != nil {
		return nil, fmt.Errorf("dump addresses: %w", err)
	}
	out := map[netip.Addr]bool{}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWADDR || len(m.Data) < unix.SizeofIfAddrmsg {
			continue
		}
		a, err := rtnl.OwnAddr(m.Data[unix.SizeofIfAddrmsg:])
		if err != nil {
			return nil, fmt.Errorf("decode address: %w", err)
		}
		if a.IsValid() {
			out[a] = true
		}
	}
	return out, nil
}
