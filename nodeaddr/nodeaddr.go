package nodeaddr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/rtnl"
)

// List returns the local routes of the local routing table of the network
// namespace at nsPath ("" for the current one), IPv4 and IPv6, sorted.
func List(nsPath string) ([]netip.Prefix, error) {
	c, err := dial(nsPath, 0)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return list(c)
}

// Watch calls onChange with the node's local prefixes (as List returns
// them) once at the start and again whenever they change, until ctx is
// done (then it returns nil) or the netlink socket fails (an error: the
// caller restarts it, and the first call after a restart tells the state
// that may have changed meanwhile).
func Watch(ctx context.Context, nsPath string, onChange func([]netip.Prefix)) error {
	groups := uint32(unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE)
	w, err := rtnl.OpenWatch(ctx, groups, func(groups uint32) (*netlink.Conn, error) { return dial(nsPath, groups) }, nil)
	if err != nil {
		return err
	}
	defer w.Close()

	cur, err := list(w.Dump)
	if err != nil {
		return err
	}
	onChange(cur)
	for {
		msgs, err := w.Sub.Receive()
		// One change (an address moved) comes as several messages:
		// take what is queued before listing once.
		more, derr := rtnl.Drain(w.Sub)
		err = errors.Join(err, derr)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case errors.Is(err, unix.ENOBUFS):
			// Notifications were lost to a full socket buffer: what
			// they said is unknown, so list again.
		case err != nil:
			return fmt.Errorf("local addresses: receive notifications: %w", err)
		case !relevant(msgs) && !relevant(more):
			// A node with a large routing table (BGP) sees many route
			// changes: only those of the local table cost a list.
			continue
		}
		next, err := list(w.Dump)
		if err != nil {
			return err
		}
		if !slices.Equal(next, cur) {
			cur = next
			onChange(cur)
		}
	}
}

// relevant says whether notifications may change the local prefixes: an
// address added or removed, or a route of the local table.
func relevant(msgs []netlink.Message) bool {
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.RTM_NEWADDR, unix.RTM_DELADDR:
			return true
		case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
			if len(m.Data) >= unix.SizeofRtMsg && m.Data[7] == unix.RTN_LOCAL {
				return true
			}
		}
	}
	return false
}

func dial(nsPath string, groups uint32) (*netlink.Conn, error) {
	c, err := rtnl.Dial(nsPath, groups)
	if err != nil {
		return nil, fmt.Errorf("local addresses: open route netlink socket: %w", err)
	}
	// With strict checking (Linux 4.20+) the kernel dumps only the local
	// table; without it, list filters alone.
	_ = c.SetOption(netlink.GetStrictCheck, true)
	return c, nil
}

// list dumps the routing tables and keeps the local routes of the local
// table. The dump filter on the table is a hint older kernels ignore, so
// each route is checked here.
func list(c *netlink.Conn) ([]netip.Prefix, error) {
	req := make([]byte, unix.SizeofRtMsg)
	req[4] = unix.RT_TABLE_LOCAL // rtm_table: AF_UNSPEC, both families
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETROUTE, Flags: netlink.Request | netlink.Dump},
		Data:   req,
	})
	if err != nil {
		return nil, fmt.Errorf("local addresses: dump routes: %w", err)
	}
	var out []netip.Prefix
	for _, m := range msgs {
		p, ok, err := localRoute(m)
		if err != nil {
			return nil, fmt.Errorf("local addresses: %w", err)
		}
		if ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out), nil
}

// localRoute reads one RTM_NEWROUTE message: its destination prefix, if it
// is a local route of the local table.
func localRoute(m netlink.Message) (netip.Prefix, bool, error) {
	if m.Header.Type != unix.RTM_NEWROUTE || len(m.Data) < unix.SizeofRtMsg {
		return netip.Prefix{}, false, nil
	}
	family, dstLen, table, typ := m.Data[0], int(m.Data[1]), uint32(m.Data[4]), m.Data[7]
	if typ != unix.RTN_LOCAL || (family != unix.AF_INET && family != unix.AF_INET6) {
		return netip.Prefix{}, false, nil
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[unix.SizeofRtMsg:])
	if err != nil {
		return netip.Prefix{}, false, fmt.Errorf("decode route: %w", err)
	}
	var dst netip.Addr
	for ad.Next() {
		switch ad.Type() {
		case unix.RTA_TABLE:
			table = ad.Uint32() // tables above 255 are only here
		case unix.RTA_DST:
			dst, _ = netip.AddrFromSlice(ad.Bytes())
		}
	}
	if err := ad.Err(); err != nil {
		return netip.Prefix{}, false, fmt.Errorf("decode route: %w", err)
	}
	dst = dst.Unmap()
	if table != unix.RT_TABLE_LOCAL || !dst.IsValid() {
		return netip.Prefix{}, false, nil
	}
	p, err := dst.Prefix(dstLen)
	if err != nil {
		return netip.Prefix{}, false, fmt.Errorf("decode route: prefix length %d of %s: %w", dstLen, dst, err)
	}
	return p, true, nil
}
