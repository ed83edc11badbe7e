package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/nftguard/nftguard/internal/kerneltest"
)

// Lab is a live topology. Its exported fields are read-only.
type Lab struct {
	ID       string // per-lab part of every namespace name
	Nodes    []*Node
	Pods     []*Endpoint // in spec order, node by node
	External []*Endpoint
	Switch   string // netns name of the switch joining the nodes; "" with one node

	spec   Spec
	origin netns.NsHandle // the namespace the lab was created from; never entered

	mu      sync.Mutex
	closed  bool
	names   []string // namespaces created, in creation order
	servers []*servers
}

// Node is a node namespace.
type Node struct {
	Name       string
	NetNS      string       // namespace name, as `ip netns list` shows it
	Path       string       // /var/run/netns/NAME, for `nftguard --netns`
	IPv4, IPv6 netip.Addr   // uplink on the switch subnet; invalid with one node
	PodCIDRv4  netip.Prefix // pods' addresses are allocated from these
	PodCIDRv6  netip.Prefix
	Bridge     string // name of the pods' bridge inside the node ("" when routed)
	Pods       []*Endpoint

	index int
}

// Endpoint is a pod or an external host: a namespace with one interface,
// eth0, and servers on the spec's ports.
type Endpoint struct {
	Name       string // "x/a" for pods, the spec name for external hosts
	External   bool
	Node       *Node  // the node its veth is attached to
	HostVeth   string // name of the veth end inside Node
	NetNS      string
	Path       string
	IPv4, IPv6 netip.Addr

	srv *servers
}

// Addr returns the endpoint's address in family f.
func (e *Endpoint) Addr(f Family) netip.Addr {
	if f == IPv6 {
		return e.IPv6
	}
	return e.IPv4
}

// New creates a lab for a test and removes it when the test ends, whether it
// passes or fails. Setup errors fail the test; without the kerneltest
// switch it skips.
func New(t testing.TB, spec Spec) *Lab {
	t.Helper()
	kerneltest.Require(t)
	l, err := Create(spec)
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("netlab: %v", err)
		}
	})
	return l
}

// Create builds a lab outside of tests (demos, benchmarks); the caller must
// Close it. It first removes stale namespaces of crashed runs and makes sure
// a SIGINT or SIGTERM removes the lab too.
func Create(spec Spec) (l *Lab, err error) {
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("invalid spec: %w", err)
	}
	if err := CleanupStale(); err != nil {
		return nil, err
	}
	id, err := newLabID(spec.Tag)
	if err != nil {
		return nil, fmt.Errorf("make lab id: %w", err)
	}
	l = &Lab{ID: id, spec: spec}
	err = onLockedThread(func(here netns.NsHandle) error {
		origin, err := netns.Get() // a handle of its own: here is closed on return
		l.origin = origin
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open origin network namespace: %w", err)
	}
	register(l)
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
			l = nil
		}
	}()
	if err := l.build(); err != nil {
		return l, fmt.Errorf("lab %s: %w", id, err)
	}
	return l, nil
}

// Close stops the servers and deletes every namespace of the lab; deleting a
// namespace deletes the veths in it. It is safe to call more than once.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	servers, names := l.servers, l.names
	l.mu.Unlock()
	unregister(l)

	var errs []error
	// Sockets pin their namespace: close them before the namespaces go.
	for _, s := range servers {
		s.close()
	}
	for i := len(names) - 1; i >= 0; i-- {
		if err := deleteNamed(names[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if l.origin.IsOpen() {
		l.origin.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close lab %s: %w", l.ID, err)
	}
	return nil
}

// Run runs fn on a locked OS thread inside one of the lab's namespaces, named
// as in the spec (a node, "x/a" for a pod, an external host, "switch") or by
// its full namespace name. It refuses the namespace the lab was created from.
func (l *Lab) Run(name string, fn func() error) error {
	path, err := l.PathOf(name)
	if err != nil {
		return err
	}
	return runIn(path, l.origin, fn)
}

// PathOf returns the netns path of a lab namespace named as for Run.
func (l *Lab) PathOf(name string) (string, error) {
	if n := l.Node(name); n != nil {
		return n.Path, nil
	}
	if e := l.Endpoint(name); e != nil {
		return e.Path, nil
	}
	if name == "switch" && l.Switch != "" {
		return filepath.Join(NetNSDir, l.Switch), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.names {
		if n == name {
			return filepath.Join(NetNSDir, n), nil
		}
	}
	return "", fmt.Errorf("lab %s has no namespace %q", l.ID, name)
}

// Node returns the node named name, or nil.
func (l *Lab) Node(name string) *Node {
	for _, n := range l.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Endpoint returns the pod or external host named name, or nil.
func (l *Lab) Endpoint(name string) *Endpoint {
	for _, e := range l.Pods {
		if e.Name == name {
			return e
		}
	}
	for _, e := range l.External {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// Ports returns the ports every endpoint serves.
func (l *Lab) Ports() []Port { return append([]Port(nil), l.spec.ports()...) }

// newNamespace creates and records a namespace named Prefix+ID+"-"+suffix.
func (l *Lab) newNamespace(suffix string) (name, path string, err error) {
	name = Prefix + l.ID + "-" + suffix
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return "", "", fmt.Errorf("lab %s is closed", l.ID)
	}
	if err := createNamed(name); err != nil {
		return "", "", err
	}
	l.mu.Lock()
	if l.closed { // closed by a signal meanwhile
		l.mu.Unlock()
		return "", "", errors.Join(fmt.Errorf("lab %s is closed", l.ID), deleteNamed(name))
	}
	l.names = append(l.names, name)
	l.mu.Unlock()
	path = filepath.Join(NetNSDir, name)
	if len(l.spec.inherited) > 0 {
		err := l.in(path, func() error {
			for _, kv := range l.spec.inherited {
				if err := writeSysctl(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return "", "", err
		}
	}
	return name, path, nil
}

// in runs fn inside the lab namespace at path.
func (l *Lab) in(path string, fn func() error) error {
	return runIn(path, l.origin, fn)
}
