// Package podif learns the node's pod-facing interfaces from the kernel,
// over rtnetlink, and follows them as they change: every link of the
// node's network namespace whose other end lives in another network
// namespace (a pod's veth, routed or a bridge port), with the addresses
// that other end holds in its own namespace. Package podguard binds them
// to the local pods and guards each pod's interface; this package only
// reads.
//
// # What is read
//
// One link dump of the node's namespace (RTM_GETLINK). A link is a
// candidate when it is a veth (whose IFLA_LINK is the peer's interface
// index) and the kernel reports its peer's namespace (IFLA_LINK_NETNSID),
// which it does only when that namespace is not the node's; listing it
// gives the peer's namespace an id in the node's, as `ip link` does. A
// veth both ends of which are in the node's namespace is the node's own
// plumbing, not a pod's, and is left out; so is every other kind of link:
// a macvlan or ipvlan pod has no interface of its own in the node's
// namespace, and its pod stays unattributed (see package podguard);
// netkit devices (Cilium) are not read yet, for want of a test. When the
// link is a port of a Linux bridge (IFLA_MASTER names a link of kind
// "bridge"), the bridge's name is kept too.
//
// Then one address dump per peer namespace (RTM_GETADDR with
// IFA_TARGET_NETNSID, both families), not one per interface: the addresses
// of the peer interface, IPv4 and IPv6, link-local and tentative ones
// included (a pod sends from its link-local address while duplicate
// address detection still runs). For IPv4 the interface's own address is
// IFA_LOCAL, which differs from IFA_ADDRESS on point-to-point links.
//
// Both dumps are decoded as they stream in, message by message, so the
// memory a read takes is that of its result, not of the kernel's answer.
// A dump the kernel marks as interrupted (NLM_F_DUMP_INTR: a link came or
// went while it ran) restarts the whole read, a few times at most. A peer
// namespace whose id the kernel refuses (EINVAL: it is gone or being
// destroyed, a pod deleted since the link dump; its veths linger until
// the namespace's cleanup runs) has no pod's interfaces: they are left
// out.
//
// The output is sorted by interface name, each interface's addresses
// sorted and without duplicates: the same kernel state reads the same.
//
// # Following changes
//
// Watch subscribes before its first read, so no change between the read
// and the subscription is lost, to the link group (a veth created,
// removed or renamed; a port joining or leaving a bridge) and to the
// address groups of the node's namespace and, with
// NETLINK_LISTEN_ALL_NSID, of every namespace the node's namespace has an
// id for: the pods' namespaces, which get one as soon as their veth is
// listed or announced. So a pod's link-local address appearing when its
// interface comes up is a notification too. After each burst Watch reads
// again and calls its callback only when the answer changed (its first
// read, once subscribed, is compared with the caller's own): a link flap
// elsewhere on the node costs a read, not a sync; and Watch reads at most
// once every 50 ms, so a pod that churns its addresses (or a flood of
// router advertisements) costs at most 20 reads a second. ENOBUFS
// (notifications lost to a full socket buffer) is answered like a
// notification: read again. Callers read all the same at every sync
// (package agent), as a safety net that costs one link dump and one
// address dump per pod namespace.
//
// Everything runs in the network namespace it is given
// (internal/nfnl.InNetNS), like the rest of nftguard's netlink.
//
// # Where things are
//
//	podif.go  Read, Watch: the pod-facing interfaces as podguard.Interface
package podif
