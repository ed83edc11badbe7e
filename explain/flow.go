package explain

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrBadInput marks flows that cannot be judged because they name something
// that does not exist or cannot be parsed (the CLI's exit code 2).
var ErrBadInput = errors.New("bad input")

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// Flow is one connection attempt.
type Flow struct {
	From, To string // "namespace/pod" or an IP address
	Protocol corev1.Protocol
	Port     int32
	// Family picks the pods' addresses, 4 or 6, for a flow between two
	// pods; 0 means IPv4 when both pods have one. A flow with an IP
	// address endpoint always uses that address's family.
	Family int
}

// ProtocolICMPv6 is no Kubernetes protocol: a flow of it carries an ICMPv6
// type where others carry a port ("icmpv6/135"), so that explain can say
// what happens to neighbour discovery (see Explain).
const ProtocolICMPv6 corev1.Protocol = "ICMPv6"

// ParsePort reads "tcp/80", "UDP/53", "sctp/9000", or "icmpv6/135" (an
// ICMPv6 type, 0 to 255).
func ParsePort(s string) (corev1.Protocol, int32, error) {
	proto, num, ok := strings.Cut(s, "/")
	if !ok {
		return "", 0, badInput("port %q: want PROTO/PORT, e.g. tcp/80", s)
	}
	var p corev1.Protocol
	switch strings.ToUpper(proto) {
	case "TCP":
		p = corev1.ProtocolTCP
	case "UDP":
		p = corev1.ProtocolUDP
	case "SCTP":
		p = corev1.ProtocolSCTP
	case "ICMPV6":
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > 255 {
			return "", 0, badInput("port %q: an ICMPv6 type must be a number from 0 to 255", s)
		}
		return ProtocolICMPv6, int32(n), nil
	default:
		return "", 0, badInput("port %q: protocol must be tcp, udp or sctp", s)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, badInput("port %q: port must be a number from 1 to 65535", s)
	}
	return p, int32(n), nil
}

// Endpoint is one side of a flow, resolved against the cluster.
type Endpoint struct {
	Pod  string     // namespace/name; empty for an address that is no pod
	Addr netip.Addr // the address the flow uses
	// Node is the node of a pod, or the node an address belongs to.
	Node        string
	HostNetwork bool
	pod         *pod
	// externalIP: the address is only a Node's ExternalIP, which need not
	// be configured on the node, so it is not taken for the node's own.
	externalIP bool
}

// onNodeOf reports whether e is an address of node itself: one of its
// addresses other than an ExternalIP, or a hostNetwork pod of it.
func (e Endpoint) onNodeOf(node string) bool {
	return (e.pod == nil || e.HostNetwork) && node != "" && e.Node == node && !e.externalIP
}

func (e Endpoint) String() string {
	if e.Pod != "" {
		return fmt.Sprintf("%s (%s)", e.Pod, e.Addr)
	}
	if e.Node != "" {
		return fmt.Sprintf("%s (node %s)", e.Addr, e.Node)
	}
	return e.Addr.String()
}

// resolve finds a pod by name or address. An address of a live pod is that
// pod, so naming a pod by its IP gives the same verdict as by its name.
func (c *Cluster) resolve(s string) (Endpoint, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		if p, ok := c.byAddr[a]; ok {
			return c.podEndpoint(p, a), nil
		}
		return Endpoint{Addr: a, Node: c.nodeOf[a], externalIP: c.external[a]}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return Endpoint{}, badInput("%q is neither NAMESPACE/POD nor an IP address", s)
	}
	p, ok := c.pods[s]
	if !ok {
		if c.gone[s] {
			return Endpoint{}, badInput("pod %s has terminated", s)
		}
		return Endpoint{}, badInput("unknown pod %s", s)
	}
	if len(p.addrs) == 0 {
		return Endpoint{}, badInput("pod %s has no IP address yet", s)
	}
	return c.podEndpoint(p, netip.Addr{}), nil
}

func (c *Cluster) podEndpoint(p *pod, a netip.Addr) Endpoint {
	return Endpoint{Pod: p.key, Addr: a, Node: p.obj.NodeName, HostNetwork: p.hostNetwork, pod: p}
}

// pickAddrs chooses the addresses of pod endpoints in the flow's family.
func pickAddrs(from, to *Endpoint, family int) error {
	switch {
	case from.Addr.IsValid() && to.Addr.IsValid():
		if from.Addr.Is4() != to.Addr.Is4() {
			return badInput("%s and %s are not of the same IP family", from.Addr, to.Addr)
		}
		return nil
	case from.Addr.IsValid():
		family = familyOf(from.Addr)
	case to.Addr.IsValid():
		family = familyOf(to.Addr)
	case family == 0:
		family = 4
		if !hasFamily(from.pod, 4) || !hasFamily(to.pod, 4) {
			family = 6
		}
	}
	for _, e := range []*Endpoint{from, to} {
		if e.Addr.IsValid() {
			continue
		}
		for _, a := range e.pod.addrs {
			if familyOf(a) == family {
				e.Addr = a
				break
			}
		}
		if !e.Addr.IsValid() {
			return badInput("pod %s has no IPv%d address", e.Pod, family)
		}
	}
	return nil
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

func hasFamily(p *pod, f int) bool {
	for _, a := range p.addrs {
		if familyOf(a) == f {
			return true
		}
	}
	return false
}
