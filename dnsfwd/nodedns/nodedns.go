package nodedns

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/dnsfwd"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/nodeaddr"
)

// DefaultPort is the port (UDP and TCP) of the node addresses
// the DNS forwarder of domainNames rules listens on.
const DefaultPort = 9753

// Config is how the agent serves ClusterNetworkPolicy domainNames rules.
type Config struct {
	// Off runs no forwarder: domainNames rules then learn no address and
	// match nothing, as under apply.
	Off bool
	// ClusterDNS are the cluster DNS addresses the subject pods' queries
	// go to and whose answers are trusted; empty means the ClusterIPs of
	// the Service kube-system/kube-dns, followed as it changes.
	ClusterDNS []netip.Addr
	// Port is the forwarder's port; zero means DefaultPort.
	Port uint16
	// Addrs are the node addresses (one per family) the forwarder
	// listens on and the redirect sends the queries to; empty means the
	// Node's first InternalIP of each family, read once at start-up, and
	// for a family it has none of, the first global address of the
	// node's own of that family.
	Addrs []netip.Addr
}

// Forwarder runs the forwarder and gives the compile its addresses.
type Forwarder struct {
	cfg              Config
	fwd              *dnsfwd.Forwarder
	listen4, listen6 netip.AddrPort
	table            atomic.Pointer[fqdn.Table]
	log              *slog.Logger
	noServers        atomic.Bool // logged once while no cluster DNS is known
	eng              engine.Timed
	seeded           bool // the forwarder's budget counts what the sets held at start
}

// Node is where the forwarder runs and what it is given.
type Node struct {
	// Name is the node's name, whose Node's InternalIPs it listens on
	// unless Config.Addrs says otherwise.
	Name string
	// NetNS is the node's network namespace ("" for this process's).
	NetNS string
	Nodes corelisters.NodeLister
	Eng   *engine.Engine
	// Registerer is where the forwarder's metrics are registered.
	Registerer prometheus.Registerer
	// OnError counts a forwarder that could not start or stopped (the
	// agent's nftguard_errors_total{kind="dns_forwarder"}).
	OnError func()
	Logger  *slog.Logger
}

// Start starts the forwarder and its heartbeat (on wg) for the node's
// addresses, or returns nil, having said why, when cfg.Off or there is no
// address to listen on: domainNames rules then match nothing, and DNS is
// untouched.
func Start(ctx context.Context, wg *sync.WaitGroup, cfg Config, node Node) (*Forwarder, error) {
	if cfg.Off {
		return nil, nil
	}
	eng, log := node.Eng, node.Logger
	d := &Forwarder{cfg: cfg, log: log, eng: eng}
	port := cfg.Port
	if port == 0 {
		port = DefaultPort
	}
	addrs := cfg.Addrs
	if len(addrs) == 0 {
		if n, err := node.Nodes.Get(node.Name); err == nil {
			addrs = internalIPs(n)
		}
	}
	// One address a family: the configured or InternalIPs first.
	take := func(a netip.Addr) {
		a = a.Unmap()
		switch {
		case a.Is4() && !d.listen4.IsValid():
			d.listen4 = netip.AddrPortFrom(a, port)
		case a.Is6() && !d.listen6.IsValid():
			d.listen6 = netip.AddrPortFrom(a, port)
		}
	}
	for _, a := range addrs {
		take(a)
	}
	if !d.listen4.IsValid() || !d.listen6.IsValid() {
		// A family the Node names no InternalIP of (a dual-stack pod
		// network on nodes registered with one address): any global
		// address of the node's own of that family will do, since the
		// redirect only needs a local destination.
		if local, err := nodeaddr.List(node.NetNS); err == nil {
			for _, p := range local {
				if p.IsSingleIP() && p.Addr().IsGlobalUnicast() {
					take(p.Addr())
				}
			}
		}
	}
	var listen []netip.AddrPort
	for _, l := range []netip.AddrPort{d.listen4, d.listen6} {
		if l.IsValid() {
			listen = append(listen, l)
		}
	}
	if len(listen) == 0 {
		node.OnError()
		log.Warn("no node address for the DNS forwarder (no InternalIP on the Node, no --dns-forwarder-address): domainNames rules match nothing", "node", node.Name)
		return nil, nil
	}
	ns, err := nfnl.OpenNetNS(node.NetNS)
	if err != nil {
		return nil, fmt.Errorf("dns forwarder: %w", err)
	}
	fm, err := dnsfwd.NewMetrics(node.Registerer)
	if err != nil {
		ns.Close()
		return nil, err
	}
	d.fwd, err = dnsfwd.New(dnsfwd.Config{Listen: listen, Committer: timedCommitter{eng}, Logger: log, Metrics: fm, NetNS: ns})
	if err != nil {
		ns.Close()
		return nil, err
	}
	node.Registerer.MustRegister(NewHeld(eng, &d.table, log))
	wg.Go(func() {
		defer ns.Close()
		if err := d.fwd.Run(ctx); err != nil && ctx.Err() == nil {
			// Without it the heartbeat stops and the redirect lapses:
			// pods resolve through the cluster DNS directly, and
			// domainNames rules learn nothing new.
			node.OnError()
			log.Error("DNS forwarder stopped: pods' DNS goes to the cluster DNS directly, domainNames rules learn no new address", "err", err)
		}
	})
	wg.Go(func() { d.fwd.Heartbeat(ctx, clusterpolicy.SetAlive, []string{"tcp", "udp"}) })
	log.Info("DNS forwarder for domainNames rules", "listen", listen)
	return d, nil
}

// internalIPs are a Node's InternalIP addresses.
func internalIPs(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
			out = append(out, ip)
		}
	}
	return out
}

// Input tells the compile where the forwarder listens and which cluster
// DNS it trusts; a nil Forwarder tells it nothing.
func (d *Forwarder) Input(in *compose.Input) {
	if d == nil {
		return
	}
	servers := d.cfg.ClusterDNS
	if len(servers) == 0 {
		servers = kubeDNS(in.Services)
	}
	if len(servers) == 0 {
		if !d.noServers.Swap(true) {
			d.log.Warn("no cluster DNS known (no Service kube-system/kube-dns with a ClusterIP, no --cluster-dns): domainNames rules match nothing until there is one")
		}
	} else {
		d.noServers.Store(false)
	}
	in.DNS = &clusterpolicy.DNS{Servers: servers, Forward4: d.listen4, Forward6: d.listen6}
}

// Synced hands the forwarder the table of a sync the kernel accepted: its
// sets exist now.
func (d *Forwarder) Synced(res compose.Result) {
	if d == nil {
		return
	}
	d.table.Store(res.DNS)
	d.fwd.SetTable(res.DNS)
	if !d.seeded {
		// The first sync kept the domain sets of an agent before this
		// one with their elements: the forwarder's element budget must
		// count them, or the node could hold its limit twice.
		d.seeded = true
		held := heldElements(d.eng, res.DNS, d.log)
		d.fwd.Seed(held)
		d.log.Info("DNS forwarder: the domain sets' elements count against its limits", "elements", len(held))
	}
}

// heldElements are the elements the domain sets of t hold in the kernel,
// with the time they have left.
func heldElements(eng engine.Timed, t *fqdn.Table, log *slog.Logger) []fqdn.Element {
	var out []fqdn.Element
	for _, set := range domainSets(t) {
		states, err := eng.ReadTimed(context.Background(), set)
		if err != nil {
			if !engine.IsNotFound(err) {
				log.Warn("reading a domainNames set failed", "set", set, "err", err)
			}
			continue
		}
		for _, st := range states {
			out = append(out, fqdn.Element{Set: set, Key: st.Key, TTL: st.Expires})
		}
	}
	return out
}

// kubeDNS are the ClusterIPs of kube-system/kube-dns, the cluster DNS
// Service kubeadm and most distributions create (CoreDNS behind it).
func kubeDNS(services []*corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, s := range services {
		if s.Namespace != "kube-system" || s.Name != "kube-dns" {
			continue
		}
		ips := s.Spec.ClusterIPs
		if len(ips) == 0 && s.Spec.ClusterIP != "" {
			ips = []string{s.Spec.ClusterIP}
		}
		for _, a := range ips {
			if ip, err := netip.ParseAddr(a); err == nil && ip.Zone() == "" {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// timedCommitter adds the forwarder's elements through the engine, with
// the name each address was resolved for as the element's comment.
type timedCommitter struct{ eng engine.Timed }

func (c timedCommitter) AddTimed(ctx context.Context, elems []fqdn.Element) error {
	out := make([]engine.TimedElement, len(elems))
	for i, e := range elems {
		// The name is what the pod asked: tenant text, made safe for
		// nft to read back as every comment in the table is.
		out[i] = engine.TimedElement{Set: e.Set, Key: e.Key, Timeout: e.TTL, Comment: nftsafe.Comment(e.Name)}
	}
	return c.eng.AddTimed(ctx, out)
}

// held exports, at each scrape, what the domainNames sets hold: the
// addresses (pod and destination pairs) and the distinct names they were
// resolved for, read from the kernel.
type held struct {
	eng   engine.Timed
	table *atomic.Pointer[fqdn.Table]
	log   *slog.Logger
}

// NewHeld is the collector of what the domainNames sets of the table
// last synced (table) hold in eng's kernel: nftguard_dns_addresses_held
// and nftguard_dns_names_held.
func NewHeld(eng engine.Timed, table *atomic.Pointer[fqdn.Table], log *slog.Logger) prometheus.Collector {
	return &held{eng: eng, table: table, log: log}
}

var (
	dnsAddrsDesc = prometheus.NewDesc("nftguard_dns_addresses_held",
		"Pod and address pairs the domainNames rules' sets hold (answers within their TTL).", nil, nil)
	dnsNamesDesc = prometheus.NewDesc("nftguard_dns_names_held",
		"Distinct names whose answers the domainNames rules' sets hold.", nil, nil)
)

func (h *held) Describe(ch chan<- *prometheus.Desc) {
	ch <- dnsAddrsDesc
	ch <- dnsNamesDesc
}

func (h *held) Collect(ch chan<- prometheus.Metric) {
	addrs, names := 0, map[string]bool{}
	for _, set := range domainSets(h.table.Load()) {
		states, err := h.eng.ReadTimed(context.Background(), set)
		if err != nil {
			if !engine.IsNotFound(err) {
				h.log.Warn("reading a domainNames set failed", "set", set, "err", err)
			}
			continue
		}
		addrs += len(states)
		for _, s := range states {
			names[s.Comment] = true
		}
	}
	ch <- prometheus.MustNewConstMetric(dnsAddrsDesc, prometheus.GaugeValue, float64(addrs))
	ch <- prometheus.MustNewConstMetric(dnsNamesDesc, prometheus.GaugeValue, float64(len(names)))
}

// domainSets are the sets a forwarder's table writes to, each once.
func domainSets(t *fqdn.Table) []string {
	if t == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	// Every domain rule's sets, also those no local pod is a subject of
	// now: they hold elements until those expire.
	for _, set := range t.Sets {
		if !seen[set] {
			seen[set] = true
			out = append(out, set)
		}
	}
	for _, s := range t.Pods {
		for _, r := range s.Rules {
			for _, set := range []string{r.Set4, r.Set6} {
				if set != "" && !seen[set] {
					seen[set] = true
					out = append(out, set)
				}
			}
		}
	}
	return out
}
