package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"github.com/vishvananda/netlink"
)

// build creates the topology described by l.spec, then starts the servers.
func (l *Lab) build() error {
	ports := l.spec.ports()
	multi := len(l.spec.Nodes) > 1
	for i, ns := range l.spec.Nodes {
		node, err := l.buildNode(i, ns)
		if err != nil {
			return fmt.Errorf("create node %s: %w", ns.Name, err)
		}
		l.Nodes = append(l.Nodes, node)
	}
	for k, name := range l.spec.External {
		ext, err := l.buildExternal(k, name)
		if err != nil {
			return fmt.Errorf("create external host %s: %w", name, err)
		}
		l.External = append(l.External, ext)
	}
	if multi {
		if err := l.buildSwitch(); err != nil {
			return fmt.Errorf("create switch: %w", err)
		}
	}
	if err := l.waitOperUp(10 * time.Second); err != nil {
		return err
	}
	for _, e := range append(append([]*Endpoint(nil), l.Pods...), l.External...) {
		s, err := startServers(l, e, ports)
		if err != nil {
			return fmt.Errorf("start servers in %s: %w", e.Name, err)
		}
		e.srv = s
	}
	return nil
}

// Sysctls every namespace gets: no duplicate address detection, so IPv6
// addresses work the moment they are added instead of after a second or two;
// no reverse-path filter (a lab's routes are its own; hosts differ: systemd
// sets 2), since a new namespace takes its IPv4 settings from the host's.
var baseSysctls = [][2]string{
	{"net/ipv6/conf/all/accept_dad", "0"},
	{"net/ipv6/conf/default/accept_dad", "0"},
	{"net/ipv4/conf/all/rp_filter", "0"},
	{"net/ipv4/conf/default/rp_filter", "0"},
}

// Nodes route; pods, external hosts and the switch do not. Both are written,
// never left to the kernel: a new namespace copies the IPv4 settings of the
// host's namespace (net.core.devconf_inherit_init_net 0, the default; IPv6
// starts from the kernel's defaults unless it is 1), so on a host that
// forwards (Docker, podman, a kubelet) a pod would forward too.
var (
	nodeSysctls = [][2]string{
		{"net/ipv4/ip_forward", "1"},
		{"net/ipv6/conf/all/forwarding", "1"},
		{"net/ipv6/conf/default/forwarding", "1"},
	}
	hostSysctls = [][2]string{
		{"net/ipv4/ip_forward", "0"},
		{"net/ipv6/conf/all/forwarding", "0"},
		{"net/ipv6/conf/default/forwarding", "0"},
	}
)

// prepare sets sysctls inside the namespace at path and brings lo up (a pod
// reaching its own address goes through lo).
func (l *Lab) prepare(path string, sysctls ...[][2]string) error {
	err := l.in(path, func() error {
		for _, set := range sysctls {
			for _, kv := range set {
				if err := writeSysctl(kv[0], kv[1]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	nl, err := l.openLink(path)
	if err != nil {
		return err
	}
	defer nl.close()
	lo, err := nl.h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := nl.h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

func (l *Lab) buildNode(i int, spec NodeSpec) (*Node, error) {
	name, path, err := l.newNamespace(nsSuffix("node", spec.Name))
	if err != nil {
		return nil, err
	}
	node := &Node{Name: spec.Name, NetNS: name, Path: path, index: i}
	node.PodCIDRv4, node.PodCIDRv6 = podCIDRs(i)
	if len(l.spec.Nodes) > 1 {
		a4, a6 := uplinkAddrs(i)
		node.IPv4, node.IPv6 = a4.Addr(), a6.Addr()
	}
	sysctls := [][][2]string{baseSysctls, nodeSysctls}
	if l.spec.Bridged {
		if err := ensureBrNetfilter(); err != nil {
			return nil, err
		}
		sysctls = append(sysctls, [][2]string{
			{"net/bridge/bridge-nf-call-iptables", "1"},
			{"net/bridge/bridge-nf-call-ip6tables", "1"},
		})
	}
	if err := l.prepare(path, sysctls...); err != nil {
		return nil, err
	}
	nl, err := l.openLink(path)
	if err != nil {
		return nil, err
	}
	defer nl.close()

	var bridge netlink.Link
	if l.spec.Bridged {
		node.Bridge = "br0"
		gw4, gw6 := bridgeGateways(i)
		if bridge, err = addBridge(nl.h, node.Bridge, byte(i)); err != nil {
			return nil, err
		}
		if err := addAddr(nl.h, bridge, netip.PrefixFrom(gw4, 24)); err != nil {
			return nil, err
		}
		if err := addAddr(nl.h, bridge, netip.PrefixFrom(gw6, 64)); err != nil {
			return nil, err
		}
		// Every interface the node forwards out of carries a fixed
		// link-local address: neighbour solicitations for forwarded
		// packets need one as source, and the kernel only generates its
		// own once the link is operationally up.
		if err := addAddr(nl.h, bridge, netip.PrefixFrom(routedGatewayV6, 64)); err != nil {
			return nil, err
		}
	}
	for j, podName := range spec.Pods {
		pod, err := l.buildPod(nl, node, bridge, j, podName)
		if err != nil {
			return nil, fmt.Errorf("create pod %s: %w", podName, err)
		}
		node.Pods = append(node.Pods, pod)
		l.Pods = append(l.Pods, pod)
	}
	return node, nil
}

func (l *Lab) buildPod(nl *nsLink, node *Node, bridge netlink.Link, j int, name string) (*Endpoint, error) {
	nsName, path, err := l.newNamespace(nsSuffix("pod", name))
	if err != nil {
		return nil, err
	}
	if err := l.prepare(path, baseSysctls, hostSysctls); err != nil {
		return nil, err
	}
	pod := &Endpoint{Name: name, Node: node, HostVeth: fmt.Sprintf("vp%d", j), NetNS: nsName, Path: path}
	pod.IPv4, pod.IPv6 = podAddrs(node.index, j)

	pl, err := l.openLink(path)
	if err != nil {
		return nil, err
	}
	defer pl.close()
	host, eth0, err := addVeth(nl, pl, pod.HostVeth)
	if err != nil {
		return nil, err
	}

	if bridge != nil {
		if err := nl.h.LinkSetMaster(host, bridge); err != nil {
			return nil, fmt.Errorf("attach %s to %s: %w", pod.HostVeth, bridge.Attrs().Name, err)
		}
		gw4, gw6 := bridgeGateways(node.index)
		steps := []error{
			addAddr(pl.h, eth0, netip.PrefixFrom(pod.IPv4, 24)),
			addAddr(pl.h, eth0, netip.PrefixFrom(pod.IPv6, 64)),
		}
		if err := errors.Join(steps...); err != nil {
			return nil, err
		}
		if err := addDefault(pl.h, eth0, gw4, false); err != nil {
			return nil, err
		}
		if err := addDefault(pl.h, eth0, gw6, false); err != nil {
			return nil, err
		}
		return pod, nil
	}

	// Routed (ptp, Calico style): the pod's only neighbour is a fixed gateway
	// address that every node-side veth carries, and the node reaches the
	// pod through a host route.
	steps := []func() error{
		func() error { return addAddr(nl.h, host, netip.PrefixFrom(routedGatewayV4, 32)) },
		func() error { return addAddr(nl.h, host, netip.PrefixFrom(routedGatewayV6, 64)) },
		func() error { return addHostRoute(nl.h, host, pod.IPv4) },
		func() error { return addHostRoute(nl.h, host, pod.IPv6) },
		func() error { return addAddr(pl.h, eth0, netip.PrefixFrom(pod.IPv4, 32)) },
		func() error { return addAddr(pl.h, eth0, netip.PrefixFrom(pod.IPv6, 128)) },
		func() error { return addDefault(pl.h, eth0, routedGatewayV4, true) },
		func() error { return addDefault(pl.h, eth0, routedGatewayV6, false) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return pod, nil
}

// buildExternal hangs external host k off the first node.
func (l *Lab) buildExternal(k int, name string) (*Endpoint, error) {
	node := l.Nodes[0]
	nsName, path, err := l.newNamespace(nsSuffix("ext", name))
	if err != nil {
		return nil, err
	}
	if err := l.prepare(path, baseSysctls, hostSysctls); err != nil {
		return nil, err
	}
	ext := &Endpoint{Name: name, External: true, Node: node, HostVeth: fmt.Sprintf("vx%d", k), NetNS: nsName, Path: path}
	n4, h4, n6, h6 := externalAddrs(k)
	ext.IPv4, ext.IPv6 = h4.Addr(), h6.Addr()

	nl, err := l.openLink(node.Path)
	if err != nil {
		return nil, err
	}
	defer nl.close()
	el, err := l.openLink(path)
	if err != nil {
		return nil, err
	}
	defer el.close()
	host, eth0, err := addVeth(nl, el, ext.HostVeth)
	if err != nil {
		return nil, err
	}
	steps := []func() error{
		func() error { return addAddr(nl.h, host, n4) },
		func() error { return addAddr(nl.h, host, n6) },
		func() error { return addAddr(nl.h, host, netip.PrefixFrom(routedGatewayV6, 64)) },
		func() error { return addAddr(el.h, eth0, h4) },
		func() error { return addAddr(el.h, eth0, h6) },
		func() error { return addDefault(el.h, eth0, n4.Addr(), false) },
		func() error { return addDefault(el.h, eth0, n6.Addr(), false) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return ext, nil
}

// buildSwitch joins the nodes' uplinks on a bridge in a namespace of its own
// and routes every node's pod CIDRs (and the external hosts behind node 0)
// through the owning node.
func (l *Lab) buildSwitch() error {
	name, path, err := l.newNamespace("switch")
	if err != nil {
		return err
	}
	l.Switch = name
	if err := l.prepare(path, baseSysctls, hostSysctls); err != nil {
		return err
	}
	sw, err := l.openLink(path)
	if err != nil {
		return err
	}
	defer sw.close()
	br, err := addBridge(sw.h, "br0", 0xff)
	if err != nil {
		return err
	}
	for _, node := range l.Nodes {
		if err := l.attachUplink(sw, br, node); err != nil {
			return fmt.Errorf("uplink of node %s: %w", node.Name, err)
		}
	}
	return nil
}

func (l *Lab) attachUplink(sw *nsLink, br netlink.Link, node *Node) error {
	nl, err := l.openLink(node.Path)
	if err != nil {
		return err
	}
	defer nl.close()
	// The switch port is named after the node's index; the node's end is up0.
	port, up, err := addVeth(sw, nl, fmt.Sprintf("n%d", node.index), "up0")
	if err != nil {
		return err
	}
	if err := sw.h.LinkSetMaster(port, br); err != nil {
		return fmt.Errorf("attach uplink to switch: %w", err)
	}
	a4, a6 := uplinkAddrs(node.index)
	// A fixed link-local address, as on every interface the node forwards
	// out of (see buildNode); unique per node on the shared link.
	ll := netip.MustParsePrefix(fmt.Sprintf("fe80::10:%x/64", node.index+1))
	if err := errors.Join(addAddr(nl.h, up, a4), addAddr(nl.h, up, a6), addAddr(nl.h, up, ll)); err != nil {
		return err
	}
	for _, other := range l.Nodes {
		if other == node {
			continue
		}
		var dsts []netip.Prefix
		c4, c6 := podCIDRs(other.index)
		dsts = append(dsts, c4, c6)
		if other.index == 0 {
			for k := range l.External {
				n4, _, n6, _ := externalAddrs(k)
				dsts = append(dsts, n4.Masked(), n6.Masked())
			}
		}
		for _, dst := range dsts {
			via := other.IPv4
			if dst.Addr().Is6() {
				via = other.IPv6
			}
			if err := addRoute(nl.h, up, dst, via); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureBrNetfilter loads br_netfilter if the host lacks it. It is a
// host-wide kernel module, not namespace state, so loading it is the one
// change a lab may make outside its namespaces.
func ensureBrNetfilter() error {
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		return nil
	}
	out, err := exec.Command("/sbin/modprobe", "br_netfilter").CombinedOutput()
	if err != nil {
		return fmt.Errorf("load br_netfilter (needed by bridged labs): %w: %s", err, out)
	}
	return nil
}
