package podif

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/rtnl"
	"github.com/nftguard/nftguard/podguard"
)

// attempts bounds how often a read restarts because the kernel's state
// changed under it (a dump interrupted, a pod's namespace gone): a node
// whose links churn that fast is still read, or the caller is told.
const attempts = 4

// readGap is the least time between two of Watch's reads: notifications
// that arrive sooner wait and are answered by one read. A pod that churns
// addresses in its namespace (or receives a flood of router
// advertisements) then costs the node at most one read per gap, not one
// per notification.
const readGap = 50 * time.Millisecond

// errChanged marks a read that saw the kernel's state change under it and
// is worth doing again.
var errChanged = errors.New("changed while read")

// Read returns the pod-facing interfaces of the network namespace at
// nsPath ("" for the current one): its veths whose peer is
// in another namespace, each with the addresses the peer holds there,
// sorted by name (see the package documentation).
func Read(nsPath string) ([]podguard.Interface, error) {
	c, err := dial(nsPath, 0)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return read(c)
}

// PollWithoutNSID is how often Watch reads again when it cannot hear the
// pods' namespaces (see Watch).
const PollWithoutNSID = 2 * time.Second

// Watch calls onChange after each burst of link or address notifications
// that changed what Read returns, until ctx is done (then it returns nil)
// or the netlink socket or a read fails (an error: the caller restarts
// it). last is what the caller read before: the first read, made once
// Watch has subscribed, is compared with it, so a change between the
// caller's read and the subscription is reported, and no change is not.
// onChange is told that something changed, not what: the caller reads
// again.
//
// Hearing the pods' namespaces needs CAP_NET_BROADCAST besides
// CAP_NET_ADMIN (the kernel's check of NETLINK_LISTEN_ALL_NSID), which the
// DaemonSet does not grant. Without it Watch hears the node's namespace
// only and also reads again every PollWithoutNSID, so a change inside a
// pod's namespace is found within that time; degraded, if not nil, is
// told once why.
func Watch(ctx context.Context, nsPath string, last []podguard.Interface, onChange func(), degraded func(error)) error {
	groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR)
	// The pods' address changes (a link-local address appearing when the
	// pod's interface comes up) happen in their namespaces; this option
	// delivers them too, for every namespace the node's has an id for.
	poll := false
	listenAll := func(sub *netlink.Conn) error {
		if err := sub.SetOption(netlink.ListenAllNSID, true); err != nil {
			if !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("pod interfaces: listen to the pods' namespaces: %w", err)
			}
			poll = true
			if degraded != nil {
				degraded(err)
			}
		}
		return nil
	}
	w, err := rtnl.OpenWatch(ctx, groups, func(groups uint32) (*netlink.Conn, error) { return dial(nsPath, groups) }, listenAll)
	if err != nil {
		return err
	}
	defer w.Close()
	sub := w.Sub

	cur, err := read(w.Dump)
	if err != nil {
		return err
	}
	lastRead := time.Now()
	if !Equal(cur, last) {
		onChange()
	}
	for {
		if poll {
			if err := sub.SetReadDeadline(time.Now().Add(PollWithoutNSID)); err != nil {
				return fmt.Errorf("pod interfaces: %w", err)
			}
		}
		_, err := sub.Receive()
		var timeout interface{ Timeout() bool }
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case errors.Is(err, unix.ENOBUFS):
			// Notifications were lost to a full socket buffer: what
			// they said is unknown, so read again.
		case poll && errors.As(err, &timeout) && timeout.Timeout():
			// Time to look inside the pods' namespaces again.
		case err != nil:
			return fmt.Errorf("pod interfaces: receive notifications: %w", err)
		}
		if wait := readGap - time.Since(lastRead); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		// A pod's start is several notifications (the veth, its peer
		// moved, addresses): take what is queued before reading once.
		if _, err := rtnl.Drain(sub); err != nil && !errors.Is(err, unix.ENOBUFS) {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("pod interfaces: receive notifications: %w", err)
		}
		next, err := read(w.Dump)
		if err != nil {
			return err
		}
		lastRead = time.Now()
		if !Equal(next, cur) {
			cur = next
			onChange()
		}
	}
}

// Equal says whether two reads found the same interfaces.
func Equal(a, b []podguard.Interface) bool {
	return slices.EqualFunc(a, b, func(x, y podguard.Interface) bool {
		return x.Name == y.Name && x.Bridge == y.Bridge && slices.Equal(x.Peer, y.Peer)
	})
}

func dial(nsPath string, groups uint32) (*netlink.Conn, error) {
	c, err := rtnl.Dial(nsPath, groups)
	if err != nil {
		return nil, fmt.Errorf("pod interfaces: open route netlink socket: %w", err)
	}
	// IFA_TARGET_NETNSID is honoured only under strict checking
	// (Linux 4.20+); without it the kernel would dump the node's own
	// addresses as if they were the pod's.
	if err := c.SetOption(netlink.GetStrictCheck, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("pod interfaces: strict netlink checking (Linux 4.20 or later): %w", err)
	}
	return c, nil
}

// read reads the interfaces, again when the kernel's state changed under
// it.
func read(c *netlink.Conn) ([]podguard.Interface, error) {
	var err error
	for range attempts {
		var out []podguard.Interface
		out, err = readOnce(c)
		if !errors.Is(err, errChanged) {
			return out, err
		}
	}
	return nil, fmt.Errorf("pod interfaces: %d reads in a row: %w", attempts, err)
}

// link is what the link dump keeps of one link.
type link struct {
	index  int32
	name   string
	kind   string
	master int32
	// peer is the other end's interface index in the namespace nsid,
	// when hasNSID.
	peer    int32
	nsid    int32
	hasNSID bool
}

// readOnce is one link dump and one address dump per peer namespace.
func readOnce(c *netlink.Conn) ([]podguard.Interface, error) {
	links := map[int32]link{}
	req := make([]byte, unix.SizeofIfInfomsg) // AF_UNSPEC: every link
	err := dumpEach(c, unix.RTM_GETLINK, req, func(m netlink.Message) error {
		if m.Header.Type != unix.RTM_NEWLINK {
			return nil
		}
		l, err := decodeLink(m.Data)
		if err != nil {
			return err
		}
		links[l.index] = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod interfaces: dump links: %w", err)
	}

	// One address dump per peer namespace, whatever the number of veths
	// that lead there.
	byNS := map[int32]map[int32]int{} // nsid → peer index → position in out
	var out []podguard.Interface
	for _, l := range links {
		if !l.hasNSID || l.kind != "veth" || l.peer <= 0 {
			continue
		}
		ifc := podguard.Interface{Name: l.name, Index: int(l.index)}
		if m, ok := links[l.master]; ok && l.master != 0 && m.kind == "bridge" {
			ifc.Bridge = m.name
		}
		if byNS[l.nsid] == nil {
			byNS[l.nsid] = map[int32]int{}
		}
		byNS[l.nsid][l.peer] = len(out)
		out = append(out, ifc)
	}
	for _, nsid := range slices.Sorted(maps.Keys(byNS)) {
		peers := byNS[nsid]
		err := dumpEach(c, unix.RTM_GETADDR, addrRequest(nsid), func(m netlink.Message) error {
			if m.Header.Type != unix.RTM_NEWADDR {
				return nil
			}
			index, a, err := decodeAddr(m.Data)
			if err != nil {
				return err
			}
			if i, ok := peers[index]; ok && a.IsValid() {
				out[i].Peer = append(out[i].Peer, a)
			}
			return nil
		})
		// The kernel refuses the id of a namespace that is gone or
		// being destroyed (a pod deleted since the link dump): its
		// veths go with it, and until they are gone they are nobody's.
		if errors.Is(err, unix.EINVAL) {
			for _, i := range peers {
				out[i].Name = ""
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pod interfaces: dump addresses of peer namespace id %d: %w", nsid, err)
		}
	}
	out = slices.DeleteFunc(out, func(ifc podguard.Interface) bool { return ifc.Name == "" })
	for i := range out {
		slices.SortFunc(out[i].Peer, netip.Addr.Compare)
		out[i].Peer = slices.Compact(out[i].Peer)
	}
	slices.SortFunc(out, func(a, b podguard.Interface) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// dumpEach sends a dump request and hands each message of the answer to
// fn as it is received, so the answer is never held whole. A dump the
// kernel marks inconsistent is errChanged.
func dumpEach(c *netlink.Conn, typ netlink.HeaderType, data []byte, fn func(netlink.Message) error) error {
	if _, err := c.Send(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Dump},
		Data:   data,
	}); err != nil {
		return err
	}
	var ferr error
	interrupted := false
	// The iterator reads the rest of the dump off the socket even when
	// the loop stops early, so the next dump starts clean.
	for m, err := range c.ReceiveIter() {
		if err != nil {
			return err
		}
		if m.Header.Flags&netlink.DumpInterrupted != 0 {
			interrupted = true
		}
		if ferr == nil {
			ferr = fn(m)
		}
	}
	if interrupted {
		return errChanged
	}
	return ferr
}

// addrRequest asks for every address, both families, of the namespace
// nsid (as the node's namespace numbers it).
func addrRequest(nsid int32) []byte {
	req := make([]byte, unix.SizeofIfAddrmsg, unix.SizeofIfAddrmsg+8)
	ae := netlink.NewAttributeEncoder()
	ae.Int32(unix.IFA_TARGET_NETNSID, nsid)
	attrs, err := ae.Encode()
	if err != nil {
		// An int32 attribute always encodes.
		panic(err)
	}
	return append(req, attrs...)
}

// decodeLink reads one RTM_NEWLINK message.
func decodeLink(b []byte) (link, error) {
	if len(b) < unix.SizeofIfInfomsg {
		return link{}, fmt.Errorf("decode link: message of %d bytes", len(b))
	}
	l := link{index: int32(binary.NativeEndian.Uint32(b[4:8]))}
	ad, err := netlink.NewAttributeDecoder(b[unix.SizeofIfInfomsg:])
	if err != nil {
		return link{}, fmt.Errorf("decode link %d: %w", l.index, err)
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.IFLA_IFNAME:
			l.name = ad.String()
		case unix.IFLA_LINK:
			l.peer = ad.Int32()
		case unix.IFLA_MASTER:
			l.master = ad.Int32()
		case unix.IFLA_LINK_NETNSID:
			l.nsid, l.hasNSID = ad.Int32(), true
		case unix.IFLA_LINKINFO:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					if nad.Type() == unix.IFLA_INFO_KIND {
						l.kind = nad.String()
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return link{}, fmt.Errorf("decode link %d: %w", l.index, err)
	}
	// A peer in a namespace the node's has no id for (the kernel could
	// not allocate one) is reported with a negative id: unknown.
	if l.nsid < 0 {
		l.hasNSID = false
	}
	return l, nil
}

// decodeAddr reads one RTM_NEWADDR message: the interface index and the
// interface's own address.
func decodeAddr(b []byte) (int32, netip.Addr, error) {
	if len(b) < unix.SizeofIfAddrmsg {
		return 0, netip.Addr{}, fmt.Errorf("decode address: message of %d bytes", len(b))
	}
	index := int32(binary.NativeEndian.Uint32(b[4:8]))
	a, err := rtnl.OwnAddr(b[unix.SizeofIfAddrmsg:])
	if err != nil {
		return 0, netip.Addr{}, fmt.Errorf("decode address of interface %d: %w", index, err)
	}
	return index, a, nil
}
