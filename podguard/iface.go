package podguard

import "net/netip"

// Interface is a host-side network interface whose other end is in
// another network namespace: a pod's veth, routed (the pod's route points
// at it) or a port of a bridge. The agent and `nftguard apply` learn them
// from the kernel (package podif); the compiler reads them here, so it
// stays pure.
type Interface struct {
	// Name is the host side's interface name, as the kernel's ingress
	// hook and iifname know it.
	Name string
	// Index is its interface index in the node's network namespace (what
	// a denied-packet record names), 0 when not known.
	Index int
	// Bridge is the bridge the interface is a port of, "" when it is not
	// enslaved to one (routed).
	Bridge string
	// Peer are the addresses the other end holds in its own network
	// namespace (the pod's), IPv4 and IPv6, link-local included.
	Peer []netip.Addr
}
