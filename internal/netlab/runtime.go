package netlab

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Runtime attaches and detaches endpoints while a lab runs, as a kubelet
// starts and stops pods: routed pod namespaces joined to a node at run time,
// and servers in a node's own namespace for host-network pods. Each endpoint
// serves the ports it is given (not the spec's), so a harness can serve
// exactly what a pod's containers would.
//
// Dynamic pods take the addresses that follow the node's spec pods in the
// package's address plan and are never reused after removal: a probe can
// never reach a successor pod at a dead pod's address. Use one Runtime per
// lab; the lab's Close removes whatever is still attached.
type Runtime struct {
	l *Lab

	mu   sync.Mutex
	next map[*Node]int       // next pod index per node
	host map[*Node]*Endpoint // node namespaces serving host-network ports
}

// NewRuntime returns the runtime of a lab. AddPod needs a routed lab:
// bridged pods share one subnet per node, which its allocator does not
// track; ServeNode and Connect work in both.
func NewRuntime(l *Lab) (*Runtime, error) {
	r := &Runtime{l: l, next: map[*Node]int{}, host: map[*Node]*Endpoint{}}
	for _, n := range l.Nodes {
		r.next[n] = len(n.Pods)
	}
	return r, nil
}

func validPorts(ports []Port) error {
	seen := map[Port]bool{}
	for _, p := range ports {
		switch p.Proto {
		case TCP, UDP, SCTP:
		default:
			return fmt.Errorf("port %v: protocol must be tcp, udp or sctp", p)
		}
		if p.Num < 1 || p.Num > 65535 {
			return fmt.Errorf("port %v: number out of range", p)
		}
		if seen[p] {
			return fmt.Errorf("port %v listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// AddPod creates pod name ("namespace/name") on node, routed like the
// spec's pods, with servers on ports. The returned endpoint is not added to
// the lab's Pods (those stay read-only while probes read them).
func (r *Runtime) AddPod(node, name string, ports []Port) (*Endpoint, error) {
	if !podRE.MatchString(name) {
		return nil, fmt.Errorf("add pod %q: want \"namespace/name\"", name)
	}
	if r.l.spec.Bridged {
		return nil, fmt.Errorf("add pod %s: dynamic pods need a routed lab", name)
	}
	if err := validPorts(ports); err != nil {
		return nil, fmt.Errorf("add pod %s: %w", name, err)
	}
	n := r.l.Node(node)
	if n == nil {
		return nil, fmt.Errorf("add pod %s: lab has no node %q", name, node)
	}
	r.mu.Lock()
	j := r.next[n]
	if j >= maxPodsPerNode {
		r.mu.Unlock()
		return nil, fmt.Errorf("add pod %s: node %s has used all %d pod addresses", name, node, maxPodsPerNode)
	}
	r.next[n] = j + 1
	r.mu.Unlock()

	nl, err := r.l.openLink(n.Path)
	if err != nil {
		return nil, err
	}
	defer nl.close()
	pod, err := r.l.buildPod(nl, n, nil, j, name)
	if err != nil {
		return nil, fmt.Errorf("add pod %s on %s: %w", name, node, err)
	}
	if err := r.waitUp(pod); err != nil {
		return nil, errors.Join(err, r.RemovePod(pod))
	}
	pod.srv, err = startServers(r.l, pod, ports)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start servers in %s: %w", name, err), r.RemovePod(pod))
	}
	return pod, nil
}

// waitUp waits until both ends of a new pod's veth are operationally up
// (see waitOperUp), so the first probe does not race link setup.
func (r *Runtime) waitUp(pod *Endpoint) error {
	deadline := time.Now().Add(10 * time.Second)
	for _, path := range []string{pod.Path, pod.Node.Path} {
		nl, err := r.l.openLink(path)
		if err != nil {
			return err
		}
		err = waitVethsUp(nl.h, deadline)
		nl.close()
		if err != nil {
			return fmt.Errorf("pod %s: %w", pod.Name, err)
		}
	}
	return nil
}

// RemovePod stops a dynamic pod's servers and deletes its namespace, which
// deletes its veth pair and with it the node's route to it.
func (r *Runtime) RemovePod(pod *Endpoint) error {
	if pod.srv != nil {
		pod.srv.close()
	}
	l := r.l
	l.mu.Lock()
	i := slices.Index(l.names, pod.NetNS)
	if i < 0 {
		l.mu.Unlock()
		return nil // already gone, or the lab closed
	}
	l.names = slices.Delete(l.names, i, i+1)
	l.mu.Unlock()
	if err := deleteNamed(pod.NetNS); err != nil {
		return fmt.Errorf("remove pod %s: %w", pod.Name, err)
	}
	return nil
}

// ServeNode starts servers on ports in node's own namespace, as the
// containers of a host-network pod listen there, and returns the node as an
// endpoint (its uplink addresses; probes from it leave from the node). A
// node serves at most one such set at a time.
func (r *Runtime) ServeNode(node string, ports []Port) (*Endpoint, error) {
	if err := validPorts(ports); err != nil {
		return nil, fmt.Errorf("serve on node %s: %w", node, err)
	}
	n := r.l.Node(node)
	if n == nil {
		return nil, fmt.Errorf("serve on node %s: lab has no such node", node)
	}
	if !n.IPv4.IsValid() {
		return nil, fmt.Errorf("serve on node %s: a single-node lab has no node address", node)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.host[n] != nil {
		return nil, fmt.Errorf("serve on node %s: already serving", node)
	}
	e := &Endpoint{Name: "node/" + n.Name, Node: n, NetNS: n.NetNS, Path: n.Path, IPv4: n.IPv4, IPv6: n.IPv6}
	srv, err := startServers(r.l, e, ports)
	if err != nil {
		if srv != nil {
			srv.close()
		}
		return nil, fmt.Errorf("serve on node %s: %w", node, err)
	}
	e.srv = srv
	r.host[n] = e
	return e, nil
}

// StopNode stops the servers ServeNode started on a node.
func (r *Runtime) StopNode(e *Endpoint) {
	r.mu.Lock()
	if r.host[e.Node] == e {
		delete(r.host, e.Node)
	}
	r.mu.Unlock()
	if e.srv != nil {
		e.srv.close()
	}
}
