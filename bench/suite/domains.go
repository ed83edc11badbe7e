package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/netlab"
)

// Scenario 9: ClusterNetworkPolicy domainNames.
//
//   - Data path: the lab's client is the subject of an Admin CNP whose
//     egress accepts its N destination addresses, then denies everything.
//     The addresses are given once as a domainNames rule, whose timeout
//     set is filled through Engine.AddTimed as the DNS forwarder fills it,
//     and once as networks rules of /32s; both tables come from
//     compose.Build. Every connection and every UDP round trip is a new
//     flow, so each one is judged by the rule (an established flow never
//     reaches it), and each is timed.
//   - Memory and rate (domains_mem.go): Names answers of PerName addresses
//     for one pod, added through AddTimed one answer at a time, in a
//     memory cgroup of their own; an ipset of the same pairs alongside.

// domainsSpec sizes scenario 9; no sizes skip it.
type domainsSpec struct {
	Addrs   []int         // data path: destination addresses of the subject pod
	LoadFor time.Duration // data path: per configuration and protocol
	Reps    int           // data path: labs
	Names   int           // memory: answers (names) for one pod
	PerName int           // memory: addresses per answer
	MemReps int           // memory: fresh namespaces and cgroups
	// The forwarder (domains_fwd.go): FwdQueries names of each transport
	// and answer size through it and direct, in each of FwdReps labs
	// (none skips it); then RatePods × RateClients clients for RateFor
	// per answer size.
	FwdQueries, FwdReps   int
	RatePods, RateClients int
	RateFor               time.Duration
}

// The API's limits on a networks rule: 25 CIDRs a peer, 25 peers a rule.
const (
	cnpNetsPerPeer  = 25
	cnpPeersPerRule = 25
	cnpNetsPerRule  = cnpNetsPerPeer * cnpPeersPerRule
)

// domPattern is the domain rule's one pattern; a wildcard stands for the
// many names a real rule's answers come from.
const domPattern = "*.bench.example"

type domKind int

const (
	domNone     domKind = iota // no table
	domDomain                  // domainNames, the timeout set filled
	domNetworks                // networks rules as the API admits them: ≤ 625 /32s a rule
	domOneSet                  // one networks rule holding all N (beyond the API's limit)
)

type domConfig struct {
	Kind domKind
	N    int
}

func (c domConfig) String() string {
	switch c.Kind {
	case domNone:
		return "no firewall"
	case domDomain:
		return fmt.Sprintf("domainNames, %s addresses", human(c.N))
	case domNetworks:
		return fmt.Sprintf("networks, %s /32s in %d rules", human(c.N), networkRules(c.N))
	}
	return fmt.Sprintf("networks, %s /32s in one interval set", human(c.N))
}

func networkRules(n int) int { return (n + cnpNetsPerRule - 1) / cnpNetsPerRule }

// latRun is one load run: its rate and every operation's time.
type latRun struct {
	Rate float64
	Lost int
	Durs []float64 // seconds
}

// percentile of sorted values, nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latency is one protocol of one configuration over the repetitions:
// each repetition's p50 and p99 (seconds) and rate.
type latency struct {
	P50, P99, Rate sample
	Ops, Lost      int
}

func (l *latency) add(r latRun) {
	s := slices.Sorted(slices.Values(r.Durs))
	l.P50 = append(l.P50, percentile(s, 0.50))
	l.P99 = append(l.P99, percentile(s, 0.99))
	l.Rate = append(l.Rate, r.Rate)
	l.Ops += len(r.Durs)
	l.Lost += r.Lost
}

// domDP is the data path of one configuration.
type domDP struct {
	Config       domConfig
	Rules, Elems int // the table's rules and set elements (the timed ones included)
	EgressRules  int // rules in the client's Admin egress chain
	TCP, UDP     latency
}

// domainsResult is scenario 9.
type domainsResult struct {
	Spec     domainsSpec
	DP       []domDP
	Mem      []domMem // domains_mem.go
	MemNamed []domMem // the same with each element's comment
	IPSet    []domMem
	Fwd      *domFwd // domains_fwd.go
	LoadAvg  []string
	Duration time.Duration
}

// domAddrs are N destination addresses: N-1 from the benchmarking range
// 198.18.0.0/15 (set elements only: no packet is sent to them) and, last,
// the lab's server, so that in the rules form the server's address is in
// the last rule and every flow walks all of them.
func domAddrs(n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	a := netip.MustParseAddr("198.18.0.0")
	for range n - 1 {
		a = a.Next()
		out = append(out, a)
	}
	return append(out, netip.MustParseAddr(labAddr("server")))
}

// domainsCNP is the client's Admin CNP: the accept rules of kind for
// addrs, then a rule denying all egress.
func domainsCNP(kind domKind, addrs []netip.Addr) *cnpv1beta1.ClusterNetworkPolicy {
	accept := cnpv1beta1.ClusterNetworkPolicyRuleActionAccept
	var rules []cnpv1beta1.ClusterNetworkPolicyEgressRule
	switch kind {
	case domDomain:
		rules = append(rules, cnpv1beta1.ClusterNetworkPolicyEgressRule{Name: "domains", Action: accept,
			To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1beta1.DomainName{domPattern}}}})
	case domNetworks, domOneSet:
		for i := 0; i < len(addrs); i += cnpNetsPerRule {
			var peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer
			for j := i; j < min(i+cnpNetsPerRule, len(addrs)); j += cnpNetsPerPeer {
				var nets []cnpv1beta1.CIDR
				for _, a := range addrs[j:min(j+cnpNetsPerPeer, i+cnpNetsPerRule, len(addrs))] {
					nets = append(nets, cnpv1beta1.CIDR(netip.PrefixFrom(a, 32).String()))
				}
				peers = append(peers, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Networks: nets})
			}
			rules = append(rules, cnpv1beta1.ClusterNetworkPolicyEgressRule{Name: fmt.Sprintf("networks-%d", i/cnpNetsPerRule), Action: accept, To: peers})
			if kind == domOneSet {
				break // the rest goes into this rule's set after compiling
			}
		}
	}
	rules = append(rules, cnpv1beta1.ClusterNetworkPolicyEgressRule{Name: "deny-all", Action: cnpv1beta1.ClusterNetworkPolicyRuleActionDeny,
		To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1beta1.CIDR{"0.0.0.0/0", "::/0"}}}})
	dp := metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "dp"}}
	return &cnpv1beta1.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1beta1", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "client-egress"},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{
			Tier: cnpv1beta1.AdminTier, Priority: 10,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{
				NamespaceSelector: dp,
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
			}},
			Egress: rules,
		},
	}
}

// domainsTable compiles the lab node's table for c (nil for no
// firewall) and, for a domain rule, the timed elements the forwarder
// would add for the client's answers: "CLIENT . ADDR".
func domainsTable(c domConfig) (*engine.Desired, []engine.TimedElement, error) {
	if c.Kind == domNone {
		return nil, nil, nil
	}
	addrs := domAddrs(c.N)
	cl := dataPathCluster(0)
	cl.Namespaces[len(cl.Namespaces)-1].Labels["kubernetes.io/metadata.name"] = "dp"
	in := cnpCluster{cluster: cl, CNPs: []*cnpv1beta1.ClusterNetworkPolicy{domainsCNP(c.Kind, addrs)}}.input()
	in.NodeName = dpNode
	b := compose.Build(in)
	if len(b.Problems) > 0 {
		return nil, nil, fmt.Errorf("%v: invalid objects: %v", c, b.Problems[0])
	}
	if len(b.Warnings) > 0 {
		return nil, nil, fmt.Errorf("%v: %v", c, b.Warnings[0])
	}
	d := b.Desired
	switch c.Kind {
	case domDomain:
		p, err := fqdn.ParsePattern(domPattern)
		if err != nil {
			return nil, nil, err
		}
		set4, _ := clusterpolicy.DomainSets([]fqdn.Pattern{p})
		if !slices.ContainsFunc(d.Sets, func(s engine.Set) bool { return s.Name == set4 && s.Timeout }) {
			return nil, nil, fmt.Errorf("%v: the table has no timeout set %s", c, set4)
		}
		elems := make([]engine.TimedElement, len(addrs))
		for i, a := range addrs {
			elems[i] = engine.TimedElement{Set: set4, Key: labAddr("client") + " . " + a.String(), Timeout: time.Hour}
		}
		return d, elems, nil
	case domOneSet:
		// The compiler's set for the one rule holds its first 625
		// addresses; it gets all N, in the compiler's form (single
		// addresses of an interval set, in address order).
		first := addrs[0].String()
		i := slices.IndexFunc(d.Sets, func(s engine.Set) bool {
			return s.Interval && slices.ContainsFunc(s.Elements, func(e engine.Element) bool { return e.Key == first })
		})
		if i < 0 {
			return nil, nil, fmt.Errorf("%v: no interval set holds %s", c, first)
		}
		sorted := slices.SortedFunc(slices.Values(addrs), netip.Addr.Compare)
		els := make([]engine.Element, len(sorted))
		for k, a := range sorted {
			els[k] = engine.Element{Key: a.String()}
		}
		d.Sets = slices.Clone(d.Sets)
		d.Sets[i].Elements = els
	}
	return d, nil, nil
}

// egressRules counts the rules of the client's Admin egress chain.
func egressRules(d *engine.Desired) int {
	for _, ch := range d.Chains {
		if strings.HasPrefix(ch.Name, "cnp_ae_dp_client") {
			return len(ch.Rules)
		}
	}
	return 0
}

// domainsConfigs lists the configurations: no firewall, then per N the
// domain rule, the API's networks rules and, where they need more than
// one rule, one interval set of all N.
func domainsConfigs(spec domainsSpec) []domConfig {
	cs := []domConfig{{Kind: domNone}}
	for _, n := range spec.Addrs {
		cs = append(cs, domConfig{domDomain, n}, domConfig{domNetworks, n})
		if networkRules(n) > 1 {
			cs = append(cs, domConfig{domOneSet, n})
		}
	}
	return cs
}

// runDomains measures scenario 9.
func (r *runner) runDomains() (res domainsResult, err error) {
	spec := r.prof.Domains
	res = domainsResult{Spec: spec, LoadAvg: []string{loadAvg()}}
	if len(spec.Addrs) == 0 && spec.Names == 0 && spec.FwdQueries == 0 {
		return res, nil
	}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if spec.Names > 0 {
		if err := r.domainsMemory(&res); err != nil {
			return res, err
		}
		res.LoadAvg = append(res.LoadAvg, loadAvg())
	}
	if spec.FwdQueries > 0 {
		fwd, err := r.runDomainsFwd()
		if err != nil {
			return res, err
		}
		res.Fwd = &fwd
		res.LoadAvg = append(res.LoadAvg, loadAvg())
	}
	if len(spec.Addrs) == 0 {
		return res, nil
	}
	configs := domainsConfigs(spec)
	tables := make([]*engine.Desired, len(configs))
	fills := make([][]engine.TimedElement, len(configs))
	res.DP = make([]domDP, len(configs))
	for i, c := range configs {
		r.logf("domains: compiling %v", c)
		d, fill, err := domainsTable(c)
		if err != nil {
			return res, err
		}
		tables[i], fills[i] = d, fill
		res.DP[i].Config = c
		if d != nil {
			for _, ch := range d.Chains {
				res.DP[i].Rules += len(ch.Rules)
			}
			for _, s := range d.Sets {
				res.DP[i].Elems += len(s.Elements)
			}
			res.DP[i].Elems += len(fill)
			res.DP[i].EgressRules = egressRules(d)
		}
	}
	for rep := range spec.Reps {
		order := make([]int, len(configs))
		for k := range order {
			order[k] = (k + rep) % len(configs)
		}
		err := r.domainsRound(configs, tables, fills, order, func(i int, tcp, udp latRun) {
			res.DP[i].TCP.add(tcp)
			res.DP[i].UDP.add(udp)
			t, u := res.DP[i].TCP, res.DP[i].UDP
			r.logf("domains: %v: TCP p50 %s p99 %s (%.0f/s), UDP p50 %s p99 %s (%.0f/s, %d lost)", configs[i],
				usf(t.P50[len(t.P50)-1]), usf(t.P99[len(t.P99)-1]), tcp.Rate, usf(u.P50[len(u.P50)-1]), usf(u.P99[len(u.P99)-1]), udp.Rate, udp.Lost)
		})
		if err != nil {
			return res, fmt.Errorf("domains data path, repetition %d: %w", rep+1, err)
		}
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	return res, nil
}

// domainsRound builds a lab and measures every configuration in order in
// it, each in a fresh table: the table deleted, the configuration's table
// programmed, a domain rule's set filled in answers of 10 through
// AddTimed (after checking that the client is denied while it is empty),
// conntrack flushed, then the TCP and UDP loads.
func (r *runner) domainsRound(configs []domConfig, tables []*engine.Desired, fills [][]engine.TimedElement, order []int,
	record func(i int, tcp, udp latRun)) (err error) {
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
	dst := netip.AddrPortFrom(lab.Endpoint(dpServer).IPv4, 80)
	programmed := false
	for _, i := range order {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if programmed {
			if err := e.Delete(r.ctx); err != nil {
				return fmt.Errorf("remove table: %w", err)
			}
			programmed = false
		}
		if tables[i] != nil {
			if _, err := e.Sync(r.ctx, tables[i]); err != nil {
				return fmt.Errorf("%v: program table: %w", configs[i], err)
			}
			programmed = true
		}
		if fill := fills[i]; fill != nil {
			if err := flushConntrack(node); err != nil {
				return err
			}
			if err := lab.Run(dpClient, func() error { return tcpDenied(dst) }); err != nil {
				return fmt.Errorf("%v, set empty: %w", configs[i], err)
			}
			for k := 0; k < len(fill); k += 10 {
				if err := e.AddTimed(r.ctx, fill[k:min(k+10, len(fill))]); err != nil {
					return fmt.Errorf("%v: fill the domain set: %w", configs[i], err)
				}
			}
			got, err := e.ReadTimed(r.ctx, fill[0].Set)
			if err != nil {
				return fmt.Errorf("%v: %w", configs[i], err)
			}
			if len(got) != len(fill) {
				return fmt.Errorf("%v: the domain set holds %d elements, %d added", configs[i], len(got), len(fill))
			}
		}
		if err := flushConntrack(node); err != nil {
			return err
		}
		tcp, err := r.latLoad(lab, dpMaxOps/dpWorkers, func(int, int) error { return tcpConnect(dst) })
		if err != nil {
			return fmt.Errorf("%v: tcp load: %w", configs[i], err)
		}
		udp, err := r.latLoad(lab, udpPortsPerWorker, func(w, k int) error { return udpNewFlow(dst, udpPortBase+w*udpPortsPerWorker+k) })
		if err != nil {
			return fmt.Errorf("%v: udp load: %w", configs[i], err)
		}
		record(i, tcp, udp)
	}
	return nil
}

// tcpDenied checks that a connection to dst is not let through: the
// client's SYN must get no answer within 300 ms.
func tcpDenied(dst netip.AddrPort) error {
	c, err := net.DialTimeout("tcp4", dst.String(), 300*time.Millisecond)
	if err == nil {
		c.Close()
		return fmt.Errorf("a connection to %v went through the deny rule", dst)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	return fmt.Errorf("a connection to %v failed otherwise than by a dropped SYN: %w", dst, err)
}

// Each worker's UDP flows use source ports of their own, each once per
// run (the node's conntrack table is flushed before each configuration),
// so every round trip is a new flow that the rules judge.
const (
	udpPortBase       = 20000
	udpPortsPerWorker = 20000
)

// udpNewFlow sends one 64-byte datagram from a fresh socket bound to port
// and waits for its echo.
func udpNewFlow(dst netip.AddrPort, port int) error {
	c, err := net.DialUDP("udp4", &net.UDPAddr{Port: port}, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return err
	}
	defer c.Close()
	var buf [256]byte
	if err := c.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := c.Write(buf[:64]); err != nil {
		return err
	}
	if _, err := c.Read(buf[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errLost
		}
		return fmt.Errorf("no echo: %w", err)
	}
	return nil
}

// latLoad is load (datapath.go) with every operation timed: dpWorkers
// threads in the client's namespace run op until Domains.LoadFor passes
// or each has done perWorker.
func (r *runner) latLoad(lab *netlab.Lab, perWorker int, op func(worker, i int) error) (latRun, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		run  latRun
		errs []error
	)
	start := time.Now()
	deadline := start.Add(r.prof.Domains.LoadFor)
	for w := range dpWorkers {
		wg.Go(func() {
			durs := make([]float64, 0, 1<<14)
			lost := 0
			err := lab.Run(dpClient, func() error {
				for i := 0; i < perWorker; i++ {
					t0 := time.Now()
					if !t0.Before(deadline) {
						break
					}
					switch err := op(w, i); {
					case errors.Is(err, errLost):
						lost++
					case err != nil:
						return err
					default:
						durs = append(durs, time.Since(t0).Seconds())
					}
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			run.Durs = append(run.Durs, durs...)
			run.Lost += lost
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return latRun{}, err
	}
	if len(run.Durs) == 0 {
		return latRun{}, fmt.Errorf("no operation completed")
	}
	run.Rate = float64(len(run.Durs)) / time.Since(start).Seconds()
	return run, nil
}

// usf formats seconds as µs.
func usf(sec float64) string {
	us := sec * 1e6
	if us >= 1000 || us <= -1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

// usRange is a sample of seconds as "median (min–max)" in µs.
func (s sample) usRange() string {
	if len(s) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s–%s)", usf(s.median()), usf(s.min()), usf(s.max()))
}

// find returns the result of kind at n (any n for no firewall).
func (res domainsResult) find(kind domKind, n int) (domDP, bool) {
	i := slices.IndexFunc(res.DP, func(d domDP) bool { return d.Config.Kind == kind && (kind == domNone || d.Config.N == n) })
	if i < 0 {
		return domDP{}, false
	}
	return res.DP[i], true
}
