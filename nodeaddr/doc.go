// Package nodeaddr learns which addresses a node holds, over rtnetlink, and
// follows them as they change: the local routes of the kernel's local
// routing table (table 255, type local), which is what the kernel itself
// consults to decide that a packet is for this node. Every address on an
// interface has one (kube-vip's load-balancer address on the leader,
// including its /32 on lo in routing-table modes), and so does a local
// route added on its own (AnyIP, "ip route add local ... table local").
//
// Watch subscribes to the address and route groups before it lists, so no
// change between the list and the subscription is lost, and lists the
// whole local table again after each burst of notifications: the table is
// small, and a fresh list cannot drift from the kernel the way a state
// kept from increments could after an overrun socket buffer (ENOBUFS is
// answered by listing again). It runs in
// the network namespace it is given, like the rest of nftguard's netlink
// (internal/nfnl.InNetNS).
//
// # Where things are
//
//	nodeaddr.go  List, Watch: the local table's local routes as prefixes
package nodeaddr
