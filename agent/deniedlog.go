package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
)

// Logging of denied packets, for `nftguard run --log-denied`:
// the agent reads the NFLOG group its table logs to, writes one slog
// record per denied packet (JSON with --log-format json), keeps the recent
// ones in a bounded journal, and counts them. The table side is
// policy.Input.LogDenied (through compose.Input.LogDenied).

// deniedJournalSize is how many recent denied-packet records the agent
// keeps in memory.
const deniedJournalSize = 1024

// deniedLogMetrics are the counters of the denied-packet log and, read
// from the kernel at each scrape, of denied packets (deniedcounters.go).
type deniedLogMetrics struct {
	records    prometheus.Counter
	suppressed *prometheus.CounterVec
}

// Reasons of nftguard_denied_log_suppressed_total.
const (
	suppressedRing   = "ring_overflow"  // pushed out of the journal unread
	suppressedSocket = "socket_overrun" // lost by the kernel on a full socket (at least one each)
)

// newDeniedLogMetrics registers the metrics on reg. The kernel's drop
// counters are read from src at each scrape (nil: not exported); errors
// reading them go to onError.
func newDeniedLogMetrics(reg prometheus.Registerer, src counterReader, onError func(error)) (*deniedLogMetrics, error) {
	m := &deniedLogMetrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_denied_log_records_total",
			Help: "Denied packets logged by the kernel and read by the agent (rate-limited in the kernel per node and direction).",
		}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftguard_denied_log_suppressed_total",
			Help: "Denied packets not logged or records not kept, by reason (rate_limit: over the kernel's log limit; ring_overflow: pushed out of the in-memory journal; socket_overrun: lost on a full socket).",
		}, []string{"reason"}),
	}
	cs := []prometheus.Collector{m.records, m.suppressed}
	if src != nil {
		// The collector exports the suppressed counters itself, after
		// reading the kernel, so a scrape sees rate_limit up to date.
		cs = []prometheus.Collector{m.records, newDeniedCounters(src, m.suppressed, onError)}
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register denied-log metrics: %w", err)
		}
	}
	for _, r := range []string{suppressedRateLimit, suppressedRing, suppressedSocket} {
		m.suppressed.WithLabelValues(r)
	}
	return m, nil
}

// runDeniedLog reads the group of l in the namespace netns until ctx ends:
// each record is resolved with res, logged on log at Info as "denied",
// added to journal and counted in m. It fails at once if the group cannot
// be bound (another reader has it: see flowlog.ErrGroupBusy).
func runDeniedLog(ctx context.Context, l policy.LogDenied, netns string, res flowlog.Resolver,
	log *slog.Logger, m *deniedLogMetrics, journal *flowlog.Journal) error {
	r, err := flowlog.Open(flowlog.Config{Group: l.Group, NetNS: netns})
	if err != nil {
		return fmt.Errorf("log denied packets: %w", err)
	}
	defer r.Close()
	var lost uint64
	return r.Run(ctx, func(rec flowlog.Record) {
		flowlog.Resolve(&rec, res)
		m.records.Inc()
		_, overBefore := journal.Counts()
		journal.Add(rec)
		if _, over := journal.Counts(); over > overBefore {
			m.suppressed.WithLabelValues(suppressedRing).Add(float64(over - overBefore))
		}
		if n := r.Lost(); n > lost {
			m.suppressed.WithLabelValues(suppressedSocket).Add(float64(n - lost))
			lost = n
		}
		log.Info("denied", deniedAttrs(&rec)...)
	})
}

// deniedAttrs are a record's slog attributes.
func deniedAttrs(r *flowlog.Record) []any {
	attrs := []any{
		slog.String("direction", string(r.Direction)),
		slog.String("protocol", r.ProtocolName()),
		slog.String("src", r.Src.String()), slog.String("dst", r.Dst.String()),
	}
	if r.HasICMP {
		attrs = append(attrs, slog.Int("icmpType", int(r.ICMPType)), slog.Int("icmpCode", int(r.ICMPCode)))
	} else if r.SrcPort != 0 || r.DstPort != 0 {
		attrs = append(attrs, slog.Int("srcPort", int(r.SrcPort)), slog.Int("dstPort", int(r.DstPort)))
	}
	if r.SrcPod != "" {
		attrs = append(attrs, slog.String("srcPod", r.SrcPod))
	}
	if r.DstPod != "" {
		attrs = append(attrs, slog.String("dstPod", r.DstPod))
	}
	if len(r.Policies) > 0 {
		attrs = append(attrs, slog.String("policies", strings.Join(r.Policies, ",")))
	}
	if c := r.ClusterRule; c != nil {
		attrs = append(attrs, slog.Group("clusterNetworkPolicy", slog.String("name", c.Policy), slog.String("tier", c.Tier),
			slog.Int("priority", int(c.Priority)), slog.String("rule", c.Direction+"["+strconv.Itoa(c.Index)+"]"), slog.String("ruleName", c.Name)))
	}
	return append(attrs, slog.String("decision", r.Decision))
}

// listerResolver resolves records from the agent's informer caches: pods
// by address through the pod informer's address index (podindex.go),
// policies through the lister of the pod's namespace, and
// ClusterNetworkPolicy Deny rules by evaluating the flow on the input of
// the last sync (clusterDecider).
type listerResolver struct {
	pods     func(namespace, name string) *podset.Pod
	addrs    cache.Indexer // the pod informer's store, with podAddrIndex
	policies netlisters.NetworkPolicyLister
	cluster  *clusterDecider // nil: NetworkPolicy decisions only
}

// ClusterDeny implements flowlog.ClusterDenier.
func (lr listerResolver) ClusterDeny(r *flowlog.Record) *flowlog.ClusterRule {
	if lr.cluster == nil {
		return nil
	}
	return flowlog.ClusterDeny(lr.cluster.get(), r)
}

// clusterDecider keeps the explain.Cluster that names the
// ClusterNetworkPolicy rule of a record (see flowlog.ClusterDeny). It is
// built from the input of the last successful sync, the input the table
// in force was compiled from, so a record is judged by the rules that
// dropped it; and it is built once per sync generation, lazily, when the
// first record after a sync needs it: a sync costs a pointer store, a
// record an evaluation over indexed objects, and a node with no
// ClusterNetworkPolicy nothing at all.
type clusterDecider struct {
	mu         sync.Mutex
	in         *compose.Input // of the last sync; nil before the first
	gen, built uint64
	c          *explain.Cluster
}

// synced records the input of a sync that succeeded (the syncer calls it).
func (d *clusterDecider) synced(in compose.Input) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.in = &in
	d.gen++
}

// get returns the cluster of the last sync, nil when it had no
// ClusterNetworkPolicy.
func (d *clusterDecider) get() *explain.Cluster {
	d.mu.Lock()
	in, gen, built, c := d.in, d.gen, d.built, d.c
	d.mu.Unlock()
	if in == nil || len(in.ClusterNetworkPolicies) == 0 {
		return nil
	}
	if built == gen && c != nil {
		return c
	}
	// Built outside the lock: synced runs in the sync loop and must not
	// wait for an evaluation index over every pod. Problems were
	// reported by the sync; the invalid objects are left out here as the
	// compiler left them out.
	c, _ = explain.New(explain.Input{
		NodeName: in.NodeName, Namespaces: in.Namespaces, Nodes: in.Nodes, Pods: in.Pods.All(),
		NetworkPolicies: in.NetworkPolicies.All(), ClusterNetworkPolicies: in.ClusterNetworkPolicies,
	})
	d.mu.Lock()
	if d.gen == gen {
		d.c, d.built = c, gen
	}
	d.mu.Unlock()
	return c
}

// PodByAddr implements flowlog.Resolver.
func (lr listerResolver) PodByAddr(a netip.Addr) string {
	return podByAddr(lr.addrs, a)
}

// Isolating implements flowlog.Resolver.
func (lr listerResolver) Isolating(pod string, d flowlog.Direction) []string {
	ns, name, _ := strings.Cut(pod, "/")
	p := lr.pods(ns, name)
	if p == nil {
		return nil
	}
	nps, err := lr.policies.NetworkPolicies(ns).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []string
	for _, np := range nps {
		if isolates(np, p, d) {
			out = append(out, np.Namespace+"/"+np.Name)
		}
	}
	sort.Strings(out)
	return out
}

// isolates reports whether np selects p and has direction d among its
// policy types: what makes p isolated in d, as the compiler sees it. A
// selector that does not parse selects nothing (the compiler skips the
// policy).
func isolates(np *networkingv1.NetworkPolicy, p *podset.Pod, d flowlog.Direction) bool {
	ing, egr := policy.PolicyTypes(np)
	if (d == flowlog.Ingress && !ing) || (d == flowlog.Egress && !egr) {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	return err == nil && sel.Matches(labels.Set(p.Labels))
}
