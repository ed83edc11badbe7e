package peerslice

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/podset"
)

// Published tells whether a pod has a record. The compilers select neither
// a pod without an address, nor a finished pod (its address is given back),
// nor a host-network pod (its traffic is its node's) as a peer, so such a
// pod is left out and a reader's table is the same as from the Pod itself.
func Published(p *podset.Pod) bool {
	return len(p.IPs) > 0 && !p.Finished && !p.HostNetwork
}

// FromPod is a pod's record. Of its named ports it keeps those referenced
// says some policy refers to, in their order: a port name resolves to its
// first match, which cutting other names does not change.
func FromPod(p *podset.Pod, referenced func(name string) bool) Peer {
	out := Peer{Name: p.Name, Node: p.NodeName, IPs: p.IPs, Labels: p.Labels}
	for _, port := range p.Ports {
		if !referenced(port.Name) {
			continue
		}
		q := Port{Name: port.Name, Port: port.Number}
		if port.Protocol != corev1.ProtocolTCP {
			q.Protocol = string(port.Protocol)
		}
		out.Ports = append(out.Ports, q)
	}
	return out
}

// ToPod is the pod record a reader compiles from a record of namespace.
// It refers to the record's slices and map: they must not change.
func ToPod(namespace string, p *Peer) *podset.Pod {
	out := &podset.Pod{Namespace: namespace, Name: p.Name, NodeName: p.Node, IPs: p.IPs, Labels: p.Labels}
	if len(p.Ports) > 0 {
		out.Ports = make([]podset.Port, len(p.Ports))
		for i, q := range p.Ports {
			proto := corev1.Protocol(q.Protocol)
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out.Ports[i] = podset.Port{Name: q.Name, Protocol: proto, Number: q.Port}
		}
	}
	return out
}

// Size is about the bytes a record takes in a slice's JSON: what slices
// are sized by. Exact for plain ASCII strings.
func Size(p *Peer) int {
	// {"name":"","ips":[]}
	n := 20 + len(p.Name)
	if p.Node != "" {
		n += 10 + len(p.Node) // ,"node":""
	}
	for _, ip := range p.IPs {
		n += 3 + len(ip) // "",
	}
	if len(p.Labels) > 0 {
		n += 12 // ,"labels":{}
		for k, v := range p.Labels {
			n += 6 + len(k) + len(v) // "":"",
		}
	}
	if len(p.Ports) > 0 {
		n += 11 // ,"ports":[]
		for _, q := range p.Ports {
			n += 20 + len(q.Name) + len(strconv.Itoa(int(q.Port))) // {"name":"","port":},
			if q.Protocol != "" {
				n += 14 + len(q.Protocol) // ,"protocol":""
			}
		}
	}
	return n
}
