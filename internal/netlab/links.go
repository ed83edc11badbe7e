package netlab

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nsLink is an open namespace and a netlink handle bound to it; netlink
// handles talk to their namespace without moving any thread.
type nsLink struct {
	path string
	ns   netns.NsHandle
	h    *netlink.Handle
}

func (l *Lab) openLink(path string) (*nsLink, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := refuseOrigin(ns, netns.None(), l.origin); err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink handle in %s: %w", path, err)
	}
	return &nsLink{path: path, ns: ns, h: h}, nil
}

func (n *nsLink) close() {
	n.h.Close()
	n.ns.Close()
}

// waitOperUp waits until every veth of the lab is operationally up. The
// kernel applies carrier changes to the operational state asynchronously
// (linkwatch, which waits for the global rtnl lock and can lag a second or
// more while other namespaces are being torn down), and until then IPv6
// treats the link as not ready.
func (l *Lab) waitOperUp(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	l.mu.Lock()
	names := slices.Clone(l.names)
	l.mu.Unlock()
	for _, name := range names {
		nl, err := l.openLink(filepath.Join(NetNSDir, name))
		if err != nil {
			return err
		}
		err = waitVethsUp(nl.h, deadline)
		nl.close()
		if err != nil {
			return fmt.Errorf("in %s: %w", name, err)
		}
	}
	return nil
}

func waitVethsUp(h *netlink.Handle, deadline time.Time) error {
	for {
		links, err := h.LinkList()
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		var down []string
		for _, link := range links {
			if link.Type() == "veth" && link.Attrs().OperState != netlink.OperUp {
				down = append(down, link.Attrs().Name)
			}
		}
		if len(down) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("links %v not operationally up in time", down)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addVeth creates a veth pair whose first end, hostName, lives in a and whose
// second end lives in b, named eth0 unless peerName says otherwise. Both ends
// are up when it returns.
func addVeth(a, b *nsLink, hostName string, peerName ...string) (netlink.Link, netlink.Link, error) {
	peer := "eth0"
	if len(peerName) > 0 {
		peer = peerName[0]
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: hostName},
		PeerName:      peer,
		PeerNamespace: netlink.NsFd(b.ns),
	}
	if err := a.h.LinkAdd(veth); err != nil {
		return nil, nil, fmt.Errorf("add veth %s/%s: %w", hostName, peer, err)
	}
	host, err := a.h.LinkByName(hostName)
	if err != nil {
		return nil, nil, fmt.Errorf("find %s: %w", hostName, err)
	}
	other, err := b.h.LinkByName(peer)
	if err != nil {
		return nil, nil, fmt.Errorf("find %s in %s: %w", peer, b.path, err)
	}
	if err := a.h.LinkSetUp(host); err != nil {
		return nil, nil, fmt.Errorf("set %s up: %w", hostName, err)
	}
	if err := b.h.LinkSetUp(other); err != nil {
		return nil, nil, fmt.Errorf("set %s up: %w", peer, err)
	}
	return host, other, nil
}

// addBridge creates an up bridge with a fixed MAC (a bridge otherwise takes
// its lowest port's MAC, which changes as ports join and leaves stale
// neighbour entries behind) and no multicast snooping (which can swallow
// IPv6 neighbour solicitations before any querier exists).
func addBridge(h *netlink.Handle, name string, id byte) (netlink.Link, error) {
	off := false
	br := &netlink.Bridge{
		LinkAttrs:         netlink.LinkAttrs{Name: name, HardwareAddr: net.HardwareAddr{0x02, 0x6e, 0x67, 0x6c, id, 0x01}},
		MulticastSnooping: &off,
	}
	if err := h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("add bridge %s: %w", name, err)
	}
	link, err := h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find bridge %s: %w", name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("set bridge %s up: %w", name, err)
	}
	return link, nil
}

// addAddr adds an address without duplicate address detection.
func addAddr(h *netlink.Handle, link netlink.Link, p netip.Prefix) error {
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrAdd(link, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", p, link.Attrs().Name, err)
	}
	return nil
}

func addHostRoute(h *netlink.Handle, link netlink.Link, a netip.Addr) error {
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.PrefixFrom(a, a.BitLen())), Scope: netlink.SCOPE_LINK}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("add route %s dev %s: %w", a, link.Attrs().Name, err)
	}
	return nil
}

func addRoute(h *netlink.Handle, link netlink.Link, dst netip.Prefix, via netip.Addr) error {
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(dst), Gw: via.AsSlice()}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("add route %s via %s: %w", dst, via, err)
	}
	return nil
}

// addDefault adds a default route via gw. onlink lets an IPv4 gateway outside
// every local subnet (169.254.1.1 on a /32 pod) be used directly.
func addDefault(h *netlink.Handle, link netlink.Link, gw netip.Addr, onlink bool) error {
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}
	if gw.Is4() {
		r.Dst = &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	} else {
		r.Dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	if onlink {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("add default route via %s dev %s: %w", gw, link.Attrs().Name, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
