package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/dnsfwd"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/dnslab"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/podset"
	"golang.org/x/sys/unix"
)

// Scenario 9's forwarder part: what the DNS forwarder of domainNames
// rules adds to a pod's DNS and costs the agent, through the real
// dnsfwd.Forwarder. The lab's node has subject pods fw/sub0… (an Admin
// CNP's domain rule selects them, so the table redirects their DNS to the
// forwarder) and fw/plain, which no rule selects, whose DNS goes to the
// cluster DNS directly; the cluster DNS is a real server (dnslab) on the
// external host "dns". The agent is this program again, as a child pinned
// to one CPU with GOMAXPROCS=1: it compiles the table (compose.Build),
// syncs it into the node, and runs the forwarder (Config.NetNS the node's
// namespace) and its heartbeat as package dnsfwd/nodedns does, committing each
// answer's elements with the question name as their comment.

const (
	fwdChildEnv = "NFTGUARD_BENCH_DOMAINS_FWD" // the child's fwdParams, as JSON
	fwdPort     = 9753
	fwdNS       = "fw"
	fwdPlain    = "fw/plain"
	// fwdTTL (seconds) outlives every run: each answer's elements stay
	// in the set, so they can be counted.
	fwdTTL = 300
	// fwdMaxPerAnswer addresses an answer at most; query k's answer is
	// addresses k*fwdMaxPerAnswer… of 100.64.0.0/10, so every query adds
	// new elements and the space lasts fwdMaxQueries queries.
	fwdMaxPerAnswer = 10
	fwdMaxQueries   = (1 << 22) / fwdMaxPerAnswer
)

func fwdSubject(i int) string { return fmt.Sprintf("%s/sub%d", fwdNS, i) }

// fwdName is query k's name, with m addresses in its answer; it matches
// domPattern, and as an element's comment it is 19–25 bytes.
func fwdName(k, m int) string { return fmt.Sprintf("q%d.n%d.bench.example", k, m) }

// fwdAddr is address i of query k's answer.
func fwdAddr(k, i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], (100<<24|64<<16)+uint32(k*fwdMaxPerAnswer+i))
	return netip.AddrFrom4(b)
}

// fwdAnswer is the cluster DNS's zone: A records of fwdName(k, m), m of
// them; any other question is NXDOMAIN.
func fwdAnswer(name string, qtype uint16) ([]dns.RR, int) {
	n := fqdn.Normalize(name)
	var k, m int
	if _, err := fmt.Sscanf(n, "q%d.n%d.", &k, &m); err != nil || fwdName(k, m) != n || qtype != dns.TypeA ||
		m < 1 || m > fwdMaxPerAnswer || k < 0 || k >= fwdMaxQueries {
		return nil, dns.RcodeNameError
	}
	rrs := make([]dns.RR, m)
	for i := range rrs {
		rrs[i] = dnslab.A(name, fwdTTL, fwdAddr(k, i))
	}
	return rrs, dns.RcodeSuccess
}

// fwdParams is the lab as the child needs it to compile the table.
type fwdParams struct {
	Node     string // the node's namespace (path)
	PodCIDRs [2]netip.Prefix
	Pods     []fwdPod
	DNS      [2]netip.Addr     // the cluster DNS
	Forward  [2]netip.AddrPort // where the forwarder listens: the node's side of the DNS host's link
}

type fwdPod struct {
	Name       string
	IPv4, IPv6 netip.Addr
	Subject    bool
}

// fwdInput is the node's cluster: the pods, and an Admin CNP whose
// subjects (role=subject in namespace fw) may reach the answers of
// domPattern and nothing else of 100.64.0.0/10.
func fwdInput(p fwdParams) compose.Input {
	in := compose.Input{NodeName: dpNode}
	in.Namespaces = []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: fwdNS, Labels: map[string]string{"kubernetes.io/metadata.name": fwdNS}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: dpNode}}
	node.Spec.PodCIDRs = []string{p.PodCIDRs[0].String(), p.PodCIDRs[1].String()}
	in.Nodes = []*corev1.Node{node}
	var pods []*corev1.Pod
	for _, pod := range p.Pods {
		ns, name, _ := strings.Cut(pod.Name, "/")
		role := "plain"
		if pod.Subject {
			role = "subject"
		}
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"role": role}},
			Spec:       corev1.PodSpec{NodeName: dpNode},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: pod.IPv4.String(),
				PodIPs: []corev1.PodIP{{IP: pod.IPv4.String()}, {IP: pod.IPv6.String()}}},
		})
	}
	in.Pods = new(podset.Converter).Set(pods)
	in.ClusterNetworkPolicies = []*cnpv1beta1.ClusterNetworkPolicy{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1beta1", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "subject-names"},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{
			Tier: cnpv1beta1.AdminTier, Priority: 10,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fwdNS}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"role": "subject"}},
			}},
			Egress: []cnpv1beta1.ClusterNetworkPolicyEgressRule{
				{Name: "names", Action: cnpv1beta1.ClusterNetworkPolicyRuleActionAccept,
					To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1beta1.DomainName{domPattern}}}},
				{Name: "rest", Action: cnpv1beta1.ClusterNetworkPolicyRuleActionDeny,
					To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1beta1.CIDR{"100.64.0.0/10"}}}},
			},
		},
	}}
	in.DNS = &clusterpolicy.DNS{Servers: p.DNS[:], Forward4: p.Forward[0], Forward6: p.Forward[1]}
	return in
}

// fwdBuild compiles the child's table.
func fwdBuild(p fwdParams) (compose.Result, error) {
	res := compose.Build(fwdInput(p))
	if len(res.Problems) > 0 {
		return res, fmt.Errorf("forwarder lab: invalid objects: %v", res.Problems[0])
	}
	if len(res.Warnings) > 0 {
		return res, fmt.Errorf("forwarder lab: %v", res.Warnings[0])
	}
	if res.DNS == nil || len(res.DNS.Pods) == 0 {
		return res, errors.New("forwarder lab: the table has no DNS subjects")
	}
	return res, nil
}

// fwdMark is what the child reports when asked: its CPU so far, its
// commits, its heap.
type fwdMark struct {
	User, Sys float64 // seconds
	// Answers and Elements were committed (the heartbeat's refreshes
	// not counted); Failed commits returned an error.
	Answers, Elements, Failed int64
	// Heap is the bytes of live and not yet swept heap objects now
	// (after a collection for "gc"); HeapMax the most sampled (every
	// 10 ms) since the previous mark.
	Heap, HeapMax uint64
	Goroutines    int
	// Held is the pod's elements in the domain rule's IPv4 set ("count").
	Held int
	// Relayed and Refused are the forwarder's own counters: answers it
	// relayed without adding anything, queries it did not relay; by
	// reason, the reasons seen only.
	Relayed, Refused map[string]float64 `json:",omitempty"`
	Err              string             `json:",omitempty"`
}

// fwdCommitter is the agent's timedCommitter (package dnsfwd/nodedns; the
// question name is each element's comment), counting what it commits.
type fwdCommitter struct {
	eng                       engine.Timed
	answers, elements, failed atomic.Int64
}

func (c *fwdCommitter) AddTimed(ctx context.Context, elems []fqdn.Element) error {
	out := make([]engine.TimedElement, len(elems))
	heartbeat := false
	for i, e := range elems {
		out[i] = engine.TimedElement{Set: e.Set, Key: e.Key, Timeout: e.TTL, Comment: e.Name}
		heartbeat = heartbeat || e.Set == clusterpolicy.SetAlive
	}
	err := c.eng.AddTimed(ctx, out)
	switch {
	case heartbeat:
	case err != nil:
		c.failed.Add(1)
	default:
		c.answers.Add(1)
		c.elements.Add(int64(len(elems)))
	}
	return err
}

// fwdChildMain is the agent: it syncs the table, runs the forwarder and
// its heartbeat, prints a fwdMark once the redirect is alive, then
// answers commands on stdin ("mark", "gc", "count ADDR"), one fwdMark
// line each, until stdin closes.
func fwdChildMain(raw string) error {
	var p fwdParams
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return fmt.Errorf("%s: %w", fwdChildEnv, err)
	}
	res, err := fwdBuild(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := engine.New(compose.Table(), engine.WithNetNS(p.Node))
	if err != nil {
		return err
	}
	defer e.Close()
	if _, err := e.Sync(ctx, res.Desired); err != nil {
		return fmt.Errorf("program the table: %w", err)
	}
	ns, err := nfnl.OpenNetNS(p.Node)
	if err != nil {
		return err
	}
	defer ns.Close()
	com := &fwdCommitter{eng: e}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fm, err := dnsfwd.NewMetrics(nil)
	if err != nil {
		return err
	}
	fwd, err := dnsfwd.New(dnsfwd.Config{Listen: p.Forward[:], Committer: com, Logger: log, NetNS: ns, Metrics: fm})
	if err != nil {
		return err
	}
	fwd.SetTable(res.DNS)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- fwd.Run(ctx) })
	select {
	case <-fwd.Ready():
	case err := <-runErr:
		return fmt.Errorf("forwarder: %w", err)
	}
	wg.Go(func() { fwd.Heartbeat(ctx, clusterpolicy.SetAlive, []string{"tcp", "udp"}) })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, err := e.ReadTimed(ctx, clusterpolicy.SetAlive); err == nil && len(st) == 2 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the forwarder's heartbeat never reached the kernel")
		}
	}
	set := ""
	for _, s := range res.DNS.Pods {
		set = s.Rules[0].Set4
	}

	// The heap sampler: runtime/metrics reads without stopping the world.
	var heapMax atomic.Uint64
	heap := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if h := heap(); h > heapMax.Load() {
					heapMax.Store(h)
				}
			}
		}
	})
	mark := func() fwdMark {
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
		h := heap()
		return fwdMark{User: tvSec(ru.Utime), Sys: tvSec(ru.Stime), Answers: com.answers.Load(), Elements: com.elements.Load(),
			Failed: com.failed.Load(), Heap: h, HeapMax: max(heapMax.Swap(h), h), Goroutines: runtime.NumGoroutine(),
			Relayed: byReason(fm.AnswersIgnored), Refused: byReason(fm.QueriesRefused)}
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(mark()); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		var m fwdMark
		switch cmd {
		case "mark":
			m = mark()
		case "gc":
			runtime.GC()
			m = mark()
		case "count":
			m = mark()
			st, err := e.ReadTimed(ctx, set)
			if err != nil {
				m.Err = err.Error()
			}
			for _, s := range st {
				if strings.HasPrefix(s.Key, arg+" . ") {
					m.Held++
				}
			}
		default:
			m.Err = fmt.Sprintf("unknown command %q", cmd)
		}
		if err := out.Encode(m); err != nil {
			return err
		}
	}
	cancel()
	if err := <-runErr; err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	return in.Err()
}

// byReason reads a counter vector's non-zero values by their one label.
func byReason(v *prometheus.CounterVec) map[string]float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { v.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil || d.Counter.GetValue() == 0 || len(d.Label) == 0 {
			continue
		}
		out[d.Label[0].GetValue()] = d.Counter.GetValue()
	}
	return out
}

// fwdChild is the parent's end of a running child.
type fwdChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr *strings.Builder
}

// startFwdChild starts the agent child pinned to the last CPU and waits
// for its first mark: the table is in the node and the redirect alive.
func (r *runner) startFwdChild(p fwdParams) (*fwdChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(r.ctx, "taskset", "-c", strconv.Itoa(runtime.NumCPU()-1), exe)
	cmd.Env = append(os.Environ(), fwdChildEnv+"="+string(raw), "GOMAXPROCS=1")
	c := &fwdChild{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewScanner(stdout)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent child: %w", err)
	}
	if _, err := c.read(); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return c, nil
}

func (c *fwdChild) read() (fwdMark, error) {
	var m fwdMark
	if !c.out.Scan() {
		return m, fmt.Errorf("the agent child said nothing (%v): %s", c.out.Err(), strings.TrimSpace(c.stderr.String()))
	}
	if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
		return m, fmt.Errorf("the agent child's mark %q: %w", c.out.Text(), err)
	}
	if m.Err != "" {
		return m, fmt.Errorf("the agent child: %s", m.Err)
	}
	return m, nil
}

// ask sends a command and returns the child's mark.
func (c *fwdChild) ask(cmd string) (fwdMark, error) {
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return fwdMark{}, fmt.Errorf("the agent child: %w: %s", err, strings.TrimSpace(c.stderr.String()))
	}
	return c.read()
}

// stop closes the child's stdin and waits for it to end.
func (c *fwdChild) stop() error {
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("the agent child: %w: %s", err, strings.TrimSpace(c.stderr.String()))
	}
	return nil
}

// fwdLat is the latency of one transport and answer size, through the
// forwarder and direct.
type fwdLat struct {
	Transport string
	Addrs     int
	Queries   int // each way, all repetitions
	// Pcts are fwdPcts of every query of every repetition, seconds.
	Fwd, Direct []float64
	// FwdP99 and DirectP99 are each repetition's p99.
	FwdP99, DirectP99 sample
	fwd, direct       []float64
}

// fwdPcts are the percentiles reported.
var fwdPcts = []float64{0.50, 0.90, 0.99, 0.999}

func pcts(durs []float64) []float64 {
	s := slices.Sorted(slices.Values(durs))
	out := make([]float64, len(fwdPcts))
	for i, p := range fwdPcts {
		out[i] = percentile(s, p)
	}
	return out
}

// fwdRate is one load of many clients through the forwarder.
type fwdRate struct {
	Addrs          int
	Pods, Clients  int
	Seconds        float64
	Answers        int // answered with the full answer
	Failed         int // timed out or a wrong answer
	Committed      int64
	User, Sys      float64 // the agent child's CPU over the run
	HeapMax        uint64  // the child's largest sampled heap during the run
	CommitFailures int64
}

func (x fwdRate) perSec() float64       { return float64(x.Answers) / x.Seconds }
func (x fwdRate) cpuPerAnswer() float64 { return (x.User + x.Sys) / float64(x.Committed) }

// domFwd is the forwarder part of scenario 9.
type domFwd struct {
	Lat  []fwdLat
	Rate []fwdRate
	// HeapStart and HeapEnd are the child's heap after a collection,
	// before the first query and after the last; Answers were committed
	// in between (HeapMax the largest sampled).
	HeapStart, HeapEnd, HeapMax uint64
	Answers                     int64
	// Held is what the domain set held for sub0 after each latency run,
	// against the elements its answers named (Expected).
	Held, Expected []int
}

// fwdCombos are the latency's transports and answer sizes.
var fwdCombos = []struct {
	transport string
	addrs     int
}{{"udp", 1}, {"udp", 10}, {"tcp", 1}, {"tcp", 10}}

// runDomainsFwd measures the forwarder: FwdReps labs of latency, then in
// the last one the rates.
func (r *runner) runDomainsFwd() (res domFwd, err error) {
	spec := r.prof.Domains
	var next atomic.Int64
	res.Lat = make([]fwdLat, len(fwdCombos))
	for i, c := range fwdCombos {
		res.Lat[i] = fwdLat{Transport: c.transport, Addrs: c.addrs}
	}
	for rep := range spec.FwdReps {
		if err := r.fwdRound(&res, &next, rep == spec.FwdReps-1); err != nil {
			return res, fmt.Errorf("forwarder, repetition %d: %w", rep+1, err)
		}
	}
	for i := range res.Lat {
		l := &res.Lat[i]
		l.Queries = len(l.fwd)
		l.Fwd, l.Direct = pcts(l.fwd), pcts(l.direct)
	}
	return res, nil
}

// fwdRound builds a lab, starts the DNS server and the agent child, and
// measures the latency (and, if rates, the rates) in it.
func (r *runner) fwdRound(res *domFwd, next *atomic.Int64, rates bool) (err error) {
	spec := r.prof.Domains
	pods := make([]string, 0, spec.RatePods+1)
	for i := range max(spec.RatePods, 1) {
		pods = append(pods, fwdSubject(i))
	}
	pods = append(pods, fwdPlain)
	lab, err := netlab.Create(netlab.Spec{Nodes: []netlab.NodeSpec{{Name: dpNode, Pods: pods}}, External: []string{"dns"}})
	if err != nil {
		return fmt.Errorf("create lab: %w", err)
	}
	defer func() {
		if cerr := lab.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close lab: %w", cerr)
		}
	}()
	node, dnsEP := lab.Node(dpNode), lab.Endpoint("dns")
	p := fwdParams{Node: node.Path, PodCIDRs: [2]netip.Prefix{node.PodCIDRv4, node.PodCIDRv6}, DNS: [2]netip.Addr{dnsEP.IPv4, dnsEP.IPv6}}
	for _, name := range pods {
		ep := lab.Endpoint(name)
		p.Pods = append(p.Pods, fwdPod{Name: name, IPv4: ep.IPv4, IPv6: ep.IPv6, Subject: name != fwdPlain})
	}
	// The node's side of the DNS host's link, as the agent listens on a
	// node address.
	f4, f6 := dnsEP.IPv4.As4(), dnsEP.IPv6.As16()
	f4[3], f6[15] = 1, 1
	p.Forward = [2]netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4(f4), fwdPort), netip.AddrPortFrom(netip.AddrFrom16(f6), fwdPort)}

	srv, err := dnslab.Serve(func(fn func() error) error { return lab.Run("dns", fn) }, p.DNS[:], fwdAnswer)
	if err != nil {
		return err
	}
	defer srv.Close()
	child, err := r.startFwdChild(p)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := child.stop(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	nss := map[string]*nfnl.NetNS{}
	for _, name := range pods {
		ns, err := nfnl.OpenNetNS(lab.Endpoint(name).Path)
		if err != nil {
			return err
		}
		defer ns.Close()
		nss[name] = ns
	}
	start, err := child.ask("gc")
	if err != nil {
		return err
	}
	if res.HeapStart == 0 {
		res.HeapStart = start.Heap
	}

	// Latency: one query at a time, each from a fresh socket as a stub
	// resolver makes it; for each name, through the forwarder from sub0
	// and direct from plain, which goes first alternating.
	sub0 := fwdSubject(0)
	server := netip.AddrPortFrom(p.DNS[0], 53)
	expected := 0
	for i := range r.prof.Domains.FwdQueries {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		for c, combo := range fwdCombos {
			k := int(next.Add(1))
			if k >= fwdMaxQueries {
				return fmt.Errorf("more than %d queries: the answers' address space is used up", fwdMaxQueries)
			}
			name := fwdName(k, combo.addrs)
			order := []string{sub0, fwdPlain}
			if (i+c)%2 == 1 {
				order[0], order[1] = fwdPlain, sub0
			}
			for _, pod := range order {
				d, err := fwdQuery(nss[pod], combo.transport, server, name, combo.addrs)
				if err != nil {
					return fmt.Errorf("%s from %s over %s: %w", name, pod, combo.transport, err)
				}
				l := &res.Lat[c]
				if pod == sub0 {
					l.fwd = append(l.fwd, d.Seconds())
				} else {
					l.direct = append(l.direct, d.Seconds())
				}
			}
			expected += combo.addrs
		}
	}
	// Each repetition's p99, from its own queries.
	for c := range res.Lat {
		l := &res.Lat[c]
		n := r.prof.Domains.FwdQueries
		l.FwdP99 = append(l.FwdP99, percentile(slices.Sorted(slices.Values(l.fwd[len(l.fwd)-n:])), 0.99))
		l.DirectP99 = append(l.DirectP99, percentile(slices.Sorted(slices.Values(l.direct[len(l.direct)-n:])), 0.99))
	}
	count, err := child.ask("count " + lab.Endpoint(sub0).IPv4.String())
	if err != nil {
		return err
	}
	// Every forwarded answer, and no direct one, was committed: the
	// plain pod's queries bypassed the forwarder.
	if want := int64(r.prof.Domains.FwdQueries * len(fwdCombos)); count.Answers-start.Answers != want || count.Failed != 0 {
		return fmt.Errorf("the forwarder committed %d answers (%d failed), %d were forwarded; relayed without adding %v, refused %v; the agent child logged: %s",
			count.Answers-start.Answers, count.Failed, want, count.Relayed, count.Refused, strings.TrimSpace(child.stderr.String()))
	}
	if count.Held != expected {
		return fmt.Errorf("the domain set holds %d elements of sub0, its answers named %d", count.Held, expected)
	}
	res.Held, res.Expected = append(res.Held, count.Held), append(res.Expected, expected)
	r.logf("domains: forwarder latency, lab %d: %d names each way; the set holds sub0's %d elements", len(res.Held), r.prof.Domains.FwdQueries*len(fwdCombos), count.Held)

	if rates {
		for _, m := range []int{1, fwdMaxPerAnswer} {
			x, err := r.fwdRateRun(child, nss, server, next, m)
			if err != nil {
				return err
			}
			res.Rate = append(res.Rate, x)
			res.HeapMax = max(res.HeapMax, x.HeapMax)
			r.logf("domains: forwarder rate, %d addresses an answer, %d pods × %d clients: %.0f answers/s, CPU %.1f µs an answer (%.0f answers/s a core), %d failed",
				m, x.Pods, x.Clients, x.perSec(), x.cpuPerAnswer()*1e6, 1/x.cpuPerAnswer(), x.Failed)
		}
	}
	end, err := child.ask("gc")
	if err != nil {
		return err
	}
	res.HeapEnd, res.Answers = end.Heap, res.Answers+end.Answers
	return nil
}

// fwdQuery resolves name from a fresh socket in the pod's namespace and
// returns the time from the socket's creation to the reply read; the
// answer must hold addrs A records.
func fwdQuery(ns *nfnl.NetNS, transport string, server netip.AddrPort, name string, addrs int) (time.Duration, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	wire, err := q.Pack()
	if err != nil {
		return 0, err
	}
	var d time.Duration
	var reply []byte
	err = ns.Run(func() error {
		start := time.Now()
		conn, err := net.DialTimeout(transport, server.String(), 2*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(start.Add(2 * time.Second)); err != nil {
			return err
		}
		if transport == "tcp" {
			msg := binary.BigEndian.AppendUint16(nil, uint16(len(wire)))
			if _, err := conn.Write(append(msg, wire...)); err != nil {
				return err
			}
			var l [2]byte
			if _, err := io.ReadFull(conn, l[:]); err != nil {
				return err
			}
			reply = make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(conn, reply); err != nil {
				return err
			}
		} else {
			if _, err := conn.Write(wire); err != nil {
				return err
			}
			buf := make([]byte, dns.MinMsgSize+1)
			n, err := conn.Read(buf)
			if err != nil {
				return err
			}
			reply = buf[:n]
		}
		d = time.Since(start)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return d, checkAnswer(reply, q.Id, addrs)
}

// checkAnswer checks a reply's header: the query's id, a response without
// error, addrs records in the answer section.
func checkAnswer(b []byte, id uint16, addrs int) error {
	if len(b) < 12 {
		return fmt.Errorf("a reply of %d bytes", len(b))
	}
	if got := binary.BigEndian.Uint16(b); got != id {
		return fmt.Errorf("reply id %d, query id %d", got, id)
	}
	if b[2]&0x80 == 0 || b[3]&0x0f != 0 {
		return fmt.Errorf("not a successful response (flags %#x %#x)", b[2], b[3])
	}
	if an := int(binary.BigEndian.Uint16(b[6:])); an != addrs {
		return fmt.Errorf("%d answer records, want %d", an, addrs)
	}
	return nil
}

// fwdRateRun runs RatePods × RateClients clients for RateFor, each
// asking one new name after another over its own UDP socket, and reads
// the child's CPU and commits around the run.
func (r *runner) fwdRateRun(child *fwdChild, nss map[string]*nfnl.NetNS, server netip.AddrPort, next *atomic.Int64, m int) (fwdRate, error) {
	spec := r.prof.Domains
	x := fwdRate{Addrs: m, Pods: spec.RatePods, Clients: spec.RateClients}
	var conns []*net.UDPConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for p := range spec.RatePods {
		for range spec.RateClients {
			var c *net.UDPConn
			if err := nss[fwdSubject(p)].Run(func() (err error) {
				c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
				return err
			}); err != nil {
				return x, err
			}
			conns = append(conns, c)
		}
	}
	m0, err := child.ask("mark")
	if err != nil {
		return x, err
	}
	var answers, failed atomic.Int64
	var overflow atomic.Bool
	start := time.Now()
	deadline := start.Add(spec.RateFor)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			buf := make([]byte, dns.MinMsgSize+1)
			q := new(dns.Msg)
			for time.Now().Before(deadline) && r.ctx.Err() == nil {
				k := int(next.Add(1))
				if k >= fwdMaxQueries {
					overflow.Store(true)
					return
				}
				q.SetQuestion(fwdName(k, m)+".", dns.TypeA)
				wire, err := q.Pack()
				if err != nil {
					failed.Add(1)
					continue
				}
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write(wire); err != nil {
					failed.Add(1)
					continue
				}
				for {
					n, err := c.Read(buf)
					if err != nil {
						failed.Add(1) // lost: the client moves on, as a resolver retries
						break
					}
					if n >= 2 && binary.BigEndian.Uint16(buf) != q.Id {
						continue // a late reply to an earlier query
					}
					if checkAnswer(buf[:n], q.Id, m) != nil {
						failed.Add(1)
					} else {
						answers.Add(1)
					}
					break
				}
			}
		})
	}
	wg.Wait()
	x.Seconds = time.Since(start).Seconds()
	m1, err := child.ask("mark")
	if err != nil {
		return x, err
	}
	if overflow.Load() {
		return x, fmt.Errorf("more than %d queries: the answers' address space is used up", fwdMaxQueries)
	}
	x.Answers, x.Failed = int(answers.Load()), int(failed.Load())
	x.Committed, x.CommitFailures = m1.Answers-m0.Answers, m1.Failed-m0.Failed
	x.User, x.Sys, x.HeapMax = m1.User-m0.User, m1.Sys-m0.Sys, m1.HeapMax
	if x.Answers == 0 || x.Committed == 0 {
		return x, fmt.Errorf("no answer through the forwarder in %v (%d failed)", spec.RateFor, x.Failed)
	}
	if x.CommitFailures > 0 {
		return x, fmt.Errorf("%d commits failed", x.CommitFailures)
	}
	return x, nil
}
