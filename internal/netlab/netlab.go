// Package netlab builds throw-away network-namespace topologies for tests,
// demos and benchmarks.
//
// A lab is made of named network namespaces (visible to `ip netns list`):
// one "node" per NodeSpec, one "pod" per pod name joined to its node by a veth
// pair, optional "external hosts" hanging off the first node, and, when there
// is more than one node, a "switch" namespace whose bridge joins the nodes'
// uplinks. Every pod and external host runs TCP and UDP echo servers and an
// SCTP INIT recorder on the spec's ports, and the lab measures the full
// connectivity matrix with real sockets.
//
// Addressing is a pure function of the spec (i is the node index, j the
// pod's index on its node, k the external host's index, all from 0):
//
//	pod j on node i      10.(100+i).0.(j+2)        fd00:10:(100+i)::(j+2)
//	routed pod gateway   169.254.1.1 (onlink)      fe80::1 (on every node-side veth)
//	bridged pod gateway  10.(100+i).0.1 on br0     fd00:10:(100+i)::1 on br0
//	node i uplink        10.0.0.(i+1)/24           fd00:10::(i+1)/64   (multi-node only)
//	external host k      172.16.k.2/24             fd00:172:16:k::2/64 (node 0 side: .1, ::1)
//
// Namespaces are named Prefix + lab ID + role, where the lab ID starts with
// the creating process's pid and start time. That lets CleanupStale remove a
// crashed run's leftovers without touching labs of other live processes
// (tests of different packages run in parallel as separate processes).
//
// A lab never operates on the namespace the process started in: every entry
// into a namespace checks the target first, and threads always return to
// where they came from (a thread that cannot is left locked, so it dies).
//
// Close removes everything the lab made. New ties Close to the test's
// cleanup; both constructors also install a SIGINT/SIGTERM handler that closes
// every open lab and then lets the signal kill the process, unless the
// program called CallerHandlesSignals first (the demo, which has processes
// to stop and files to remove too, cancels its work and closes its labs
// itself). Spec.Tag puts a short name into the namespaces' names.
package netlab

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Prefix starts the name of every namespace a lab creates.
const Prefix = "ngl-"

// NetNSDir is where named network namespaces are bind-mounted (as `ip netns` does).
const NetNSDir = "/var/run/netns"

// Proto is a transport protocol the lab serves and probes.
type Proto string

// The protocols a lab understands.
const (
	TCP  Proto = "tcp"
	UDP  Proto = "udp"
	SCTP Proto = "sctp"
)

// Port is one (protocol, port) case of the probe matrix.
type Port struct {
	Proto Proto
	Num   int
}

func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Proto, p.Num) }

// DefaultPorts are the upstream Kubernetes netpol e2e server ports.
var DefaultPorts = []Port{{TCP, 80}, {TCP, 81}, {UDP, 80}, {UDP, 81}, {SCTP, 80}, {SCTP, 81}}

// Family selects IPv4 or IPv6 for probes.
type Family int

// The address families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Spec describes a lab.
type Spec struct {
	Nodes    []NodeSpec
	External []string // external hosts, attached to the first node
	Bridged  bool     // pods join their node through a Linux bridge with br_netfilter
	Ports    []Port   // served in every pod and external host; DefaultPorts if empty
	// Tag, if set, starts the random part of the lab ID, so that `ip netns
	// list` shows whose lab it is (the demo's are "dmo"): lower-case
	// letters and digits, at most 8.
	Tag string

	// inherited, for tests, is written into each namespace as soon as it
	// exists: the settings a host's namespace would pass on to it.
	inherited [][2]string
}

// NodeSpec describes one node and the pods it hosts.
type NodeSpec struct {
	Name string
	Pods []string // "namespace/name", e.g. "x/a"
}

// Limits that keep the address scheme and interface names valid.
const (
	maxNodes       = 100
	maxPodsPerNode = 250
	maxExternal    = 250
)

var (
	nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
	tagRE  = regexp.MustCompile(`^[a-z0-9]{0,8}$`)
	podRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
)

func (s Spec) ports() []Port {
	if len(s.Ports) == 0 {
		return DefaultPorts
	}
	return s.Ports
}

func (s Spec) validate() error {
	if !tagRE.MatchString(s.Tag) {
		return fmt.Errorf("tag %q: want at most 8 lower-case letters and digits", s.Tag)
	}
	if len(s.Nodes) == 0 {
		return fmt.Errorf("spec has no nodes")
	}
	if len(s.Nodes) > maxNodes {
		return fmt.Errorf("spec has %d nodes, at most %d are supported", len(s.Nodes), maxNodes)
	}
	if len(s.External) > maxExternal {
		return fmt.Errorf("spec has %d external hosts, at most %d are supported", len(s.External), maxExternal)
	}
	seen := map[string]string{}
	claim := func(name, what string) error {
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("%s %q clashes with %s of the same name", what, name, prev)
		}
		seen[name] = what
		return nil
	}
	for _, n := range s.Nodes {
		if !nameRE.MatchString(n.Name) {
			return fmt.Errorf("node name %q: want lower-case letters, digits, '-' and '.'", n.Name)
		}
		if err := claim(n.Name, "node"); err != nil {
			return err
		}
		if len(n.Pods) > maxPodsPerNode {
			return fmt.Errorf("node %s has %d pods, at most %d are supported", n.Name, len(n.Pods), maxPodsPerNode)
		}
		for _, p := range n.Pods {
			if !podRE.MatchString(p) {
				return fmt.Errorf("pod name %q on node %s: want \"namespace/name\"", p, n.Name)
			}
			if err := claim(p, "pod"); err != nil {
				return err
			}
		}
	}
	for _, e := range s.External {
		if !nameRE.MatchString(e) {
			return fmt.Errorf("external host name %q: want lower-case letters, digits, '-' and '.'", e)
		}
		if err := claim(e, "external host"); err != nil {
			return err
		}
	}
	return validPorts(s.ports())
}

// Address plan; see the package comment.

func podAddrs(node, idx int) (netip.Addr, netip.Addr) {
	return netip.MustParseAddr(fmt.Sprintf("10.%d.0.%d", 100+node, idx+2)),
		netip.MustParseAddr(fmt.Sprintf("fd00:10:%d::%x", 100+node, idx+2))
}

func podCIDRs(node int) (netip.Prefix, netip.Prefix) {
	return netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/24", 100+node)),
		netip.MustParsePrefix(fmt.Sprintf("fd00:10:%d::/64", 100+node))
}

func bridgeGateways(node int) (netip.Addr, netip.Addr) {
	return netip.MustParseAddr(fmt.Sprintf("10.%d.0.1", 100+node)),
		netip.MustParseAddr(fmt.Sprintf("fd00:10:%d::1", 100+node))
}

var (
	routedGatewayV4 = netip.MustParseAddr("169.254.1.1")
	routedGatewayV6 = netip.MustParseAddr("fe80::1")
)

func uplinkAddrs(node int) (netip.Prefix, netip.Prefix) {
	return netip.MustParsePrefix(fmt.Sprintf("10.0.0.%d/24", node+1)),
		netip.MustParsePrefix(fmt.Sprintf("fd00:10::%x/64", node+1))
}

// externalAddrs returns the node-side and host-side addresses of external host k.
func externalAddrs(k int) (node4, host4, node6, host6 netip.Prefix) {
	return netip.MustParsePrefix(fmt.Sprintf("172.16.%d.1/24", k)),
		netip.MustParsePrefix(fmt.Sprintf("172.16.%d.2/24", k)),
		netip.MustParsePrefix(fmt.Sprintf("fd00:172:16:%d::1/64", k)),
		netip.MustParsePrefix(fmt.Sprintf("fd00:172:16:%d::2/64", k))
}

// nsSuffix turns a lab-level name into the tail of a namespace name.
func nsSuffix(kind, name string) string {
	return kind + "-" + strings.ReplaceAll(name, "/", ".")
}
