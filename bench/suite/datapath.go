package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/podguard"
)

const (
	dpNode   = "n0"
	dpClient = "dp/client"
	dpServer = "dp/server"
	// dpWorkers load generators run at once: one per core of the
	// project's machine, so the node's forwarding, not one client
	// thread's latency, is what saturates.
	dpWorkers = 2
	// dpMaxOps bounds every load run, whatever its duration.
	dpMaxOps = 200000
)

// dpConfig is one firewall configuration of scenario 3: Policies
// policies selecting other pods in nftguard's table, or one of the two
// references below.
type dpConfig struct {
	Policies int
	// Guards adds the pods' guard chains (package podguard) on the
	// ingress hook of every local pod's interface: the cost of telling
	// pods by their interface, against the same table without them.
	Guards bool
}

const (
	// dpNone is no firewall at all: no table, so no conntrack either.
	dpNone = -1
	// dpConntrack is a one-rule forward chain accepting established
	// flows: what any stateful firewall costs before its first policy,
	// to tell conntrack's price from nftguard's.
	dpConntrack = -2
)

func (c dpConfig) String() string {
	switch c.Policies {
	case dpNone:
		return "no firewall"
	case dpConntrack:
		return "conntrack only"
	}
	if c.Guards {
		return fmt.Sprintf("%s policies + pod guards", human(c.Policies))
	}
	return fmt.Sprintf("%s policies", human(c.Policies))
}

// conntrackOnly is the dpConntrack table.
func conntrackOnly() *engine.Desired {
	return &engine.Desired{Chains: []engine.Chain{{Name: "forward", Type: "filter", Hook: "forward",
		Rules: []engine.Rule{{Rule: "ct state established,related accept"}}}}}
}

// dpResult is scenario 3 for one configuration.
type dpResult struct {
	Config     dpConfig
	TableRules int
	TableElems int
	TCPConn    sample // new connections per second
	UDPRR      sample // request/response pairs per second
}

// runDataPath measures pod-to-pod rates through one lab node for every
// configuration; within each repetition all configurations run back to
// back, so the baseline shares the machine's state with what it is
// compared to.
func (r *runner) runDataPath() ([]dpResult, error) {
	configs := []dpConfig{{Policies: dpNone}, {Policies: dpConntrack}}
	guarded := 0 // the largest size up to 1,000 policies runs with guards too
	for _, n := range r.prof.DataPath {
		configs = append(configs, dpConfig{Policies: n})
		if n <= 1000 {
			guarded = n
		}
	}
	configs = append(configs, dpConfig{Policies: guarded, Guards: true})
	res := make([]dpResult, len(configs))
	tables := make([]*engine.Desired, len(configs))
	for i, c := range configs {
		res[i].Config = c
		switch c.Policies {
		case dpNone:
			continue
		case dpConntrack:
			tables[i] = conntrackOnly()
			res[i].TableRules = 1
			continue
		}
		r.logf("data path: compiling %v", c)
		in := dataPathCluster(c.Policies).input()
		in.NodeName = dpNode
		if c.Guards {
			in.PodInterfaces, in.PodInterfacesKnown = dataPathInterfaces(in), true
		}
		b := compose.Build(in)
		if len(b.Problems) > 0 {
			return nil, fmt.Errorf("%v: invalid objects: %v", c, b.Problems[0])
		}
		tables[i] = b.Desired
		_, res[i].TableRules, _, res[i].TableElems = tableSize(b)
	}
	for rep := range r.prof.dpReps() {
		// Each repetition measures every configuration in one lab, in
		// an order that rotates from one repetition to the next, so a
		// configuration and its baseline share the lab and the moment.
		order := make([]int, len(configs))
		for k := range order {
			order[k] = (k + rep) % len(configs)
		}
		err := r.dataPathRound(tables, order, func(i int, tcp, udp float64) {
			res[i].TCPConn = append(res[i].TCPConn, tcp)
			res[i].UDPRR = append(res[i].UDPRR, udp)
			r.logf("data path: %v: %.0f TCP conn/s, %.0f UDP req/s", configs[i], tcp, udp)
		})
		if err != nil {
			return nil, fmt.Errorf("data path, repetition %d: %w", rep+1, err)
		}
	}
	return res, nil
}

// dataPathCluster is the lab's two pods, a policy that isolates the server
// and admits the client (so its traffic takes the verdict-map lookup into
// the server's chain), and n policies in a synthetic cluster that select
// other pods, about a tenth of them on the lab node.
func dataPathCluster(n int) *cluster {
	c := newCluster(size{Pods: min(max(1000, 10*n), 50000), Policies: n})
	// The synthetic pods live on "node-NNN"; put the lab node's share of
	// them on the lab node, so their chains are in its table.
	for _, p := range c.Pods {
		if p.Spec.NodeName == localNode {
			p.Spec.NodeName = dpNode
		}
	}
	c.Namespaces = append(c.Namespaces, namespace(9999))
	c.Namespaces[len(c.Namespaces)-1].Name = "dp"
	for _, name := range []string{"client", "server"} {
		p := pod(0, 0, dpNode, name)
		p.Namespace, p.Name = "dp", name
		p.Status.PodIP = labAddr(name)
		p.Status.PodIPs[0].IP = labAddr(name)
		c.Pods = append(c.Pods, p)
	}
	c.Policies = append(c.Policies, &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "dp", Name: "server-from-client"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}},
			}}},
		},
	})
	return c
}

// dataPathInterfaces are the lab node's pod interfaces as package podif
// would learn them: netlab names the host side of its j-th pod's veth
// vpJ (client 0, server 1); the synthetic local pods get interfaces of
// their own that no device has (the kernel binds their guard chains to
// the names), so every local pod is guarded as on a real node.
func dataPathInterfaces(in compose.Input) []podguard.Interface {
	var out []podguard.Interface
	n := 0
	for _, p := range in.Pods.All() {
		if p.NodeName != dpNode || p.HostNetwork {
			continue
		}
		var peer []netip.Addr
		for _, s := range p.IPs {
			if a, err := netip.ParseAddr(s); err == nil {
				peer = append(peer, a)
			}
		}
		name := fmt.Sprintf("sg%d", n)
		switch p.Namespace + "/" + p.Name {
		case dpClient:
			name = "vp0"
		case dpServer:
			name = "vp1"
		default:
			n++
		}
		out = append(out, podguard.Interface{Name: name, Peer: peer})
	}
	return out
}

// errLost marks a UDP request whose echo did not come back in time.
var errLost = errors.New("datagram lost")

// labAddr is the address netlab gives the dp pods: the first two pods of
// node 0 get 10.(100+i).0.(j+2). dataPathOnce checks it against the live
// lab.
func labAddr(pod string) string {
	if pod == "client" {
		return "10.100.0.2"
	}
	return "10.100.0.3"
}

// dataPathRound builds a fresh lab and, for each configuration in order,
// programs its table into the node (nil: none, the table removed), clears
// the node's conntrack table, and measures TCP connection and UDP
// request/response rates.
func (r *runner) dataPathRound(tables []*engine.Desired, order []int, record func(i int, tcp, udp float64)) (err error) {
	lab, err := netlab.Create(netlab.Spec{
		Nodes: []netlab.NodeSpec{{Name: dpNode, Pods: []string{dpClient, dpServer}}},
		Ports: []netlab.Port{{Proto: netlab.TCP, Num: 80}, {Proto: netlab.UDP, Num: 80}},
	})
	if err != nil {
		return fmt.Errorf("create lab: %w", err)
	}
	defer func() {
		if cerr := lab.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close lab: %w", cerr)
		}
	}()
	server := lab.Endpoint(dpServer)
	for _, name := range []string{"client", "server"} {
		if got, want := lab.Endpoint("dp/"+name).IPv4.String(), labAddr(name); got != want {
			return fmt.Errorf("lab gave %s address %s, the compiled table assumes %s", name, got, want)
		}
	}
	node := lab.Node(dpNode).Path
	e, err := engine.New(compose.Table(), engine.WithNetNS(node))
	if err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	defer e.Close()
	programmed := false
	dst := netip.AddrPortFrom(server.IPv4, 80)
	for _, i := range order {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		switch {
		case tables[i] != nil:
			if _, err := e.Sync(r.ctx, tables[i]); err != nil {
				return fmt.Errorf("program table: %w", err)
			}
			programmed = true
		case programmed:
			if err := e.Delete(r.ctx); err != nil {
				return fmt.Errorf("remove table: %w", err)
			}
			programmed = false
		}
		// Connections of the previous configuration must not weigh on
		// this one.
		if err := flushConntrack(node); err != nil {
			return err
		}
		tcp, err := r.load(lab, func() error { return tcpConnect(dst) })
		if err != nil {
			return fmt.Errorf("tcp load: %w", err)
		}
		udp, err := r.udpLoad(lab, dst)
		if err != nil {
			return fmt.Errorf("udp load: %w", err)
		}
		record(i, tcp, udp)
	}
	return nil
}

// flushConntrack empties the conntrack table of the namespace at path.
func flushConntrack(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("flush conntrack: %w", err)
	}
	defer f.Close()
	c, err := conntrack.Dial(&netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		return fmt.Errorf("flush conntrack: %w", err)
	}
	defer c.Close()
	if err := c.Flush(); err != nil {
		return fmt.Errorf("flush conntrack: %w", err)
	}
	return nil
}

// load runs op in dpWorkers goroutines, each on a thread inside the client
// pod's namespace, until LoadFor passes or dpMaxOps are done, and returns
// operations per second.
func (r *runner) load(lab *netlab.Lab, op func() error) (float64, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
	)
	perWorker := dpMaxOps / dpWorkers
	start := time.Now()
	deadline := start.Add(r.prof.LoadFor)
	for range dpWorkers {
		wg.Go(func() {
			n := 0
			err := lab.Run(dpClient, func() error {
				for i := 0; i < perWorker && time.Now().Before(deadline); i++ {
					switch err := op(); {
					case errors.Is(err, errLost):
						// A lost datagram is not a completed
						// request; its timeout costs the rate.
					case err != nil:
						return err
					default:
						n++
					}
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(total) / elapsed.Seconds(), nil
}

// tcpConnect opens one connection, waits for the server to close it (the
// lab's TCP server accepts and closes), and closes with a reset so that
// no TIME_WAIT state piles up in the client over thousands of runs.
func tcpConnect(dst netip.AddrPort) error {
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(dst))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetLinger(0); err != nil {
		return err
	}
	if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		return errors.New("tcp server sent data; expected it to close")
	}
	return nil
}

// udpLoad sends a datagram and waits for its echo, over connected sockets
// created inside the client pod's namespace (a socket stays in the
// namespace it was made in, whichever thread uses it later).
func (r *runner) udpLoad(lab *netlab.Lab, dst netip.AddrPort) (float64, error) {
	conns := make([]*net.UDPConn, dpWorkers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	err := lab.Run(dpClient, func() error {
		for i := range conns {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			conns[i] = c
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	next := make(chan *net.UDPConn, len(conns))
	for _, c := range conns {
		next <- c
	}
	payload := slices.Repeat([]byte{'x'}, 64)
	return r.load(lab, func() error {
		// The channel is a pool with one socket per worker: a request
		// borrows one and gives it back, so no socket ever carries two
		// requests at once and an echo always answers its own request.
		return udpRoundTrip(<-next, payload, next)
	})
}

func udpRoundTrip(c *net.UDPConn, payload []byte, back chan<- *net.UDPConn) error {
	defer func() { back <- c }()
	buf := make([]byte, 256)
	if err := c.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := c.Write(payload); err != nil {
		return err
	}
	if _, err := c.Read(buf); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errLost
		}
		return fmt.Errorf("no echo: %w", err)
	}
	return nil
}
