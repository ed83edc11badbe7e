package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/podguard"
	"github.com/nftguard/nftguard/podif"
	"github.com/nftguard/nftguard/problem"
)

// podIfKind names pod interface changes in the change-to-kernel histogram
// (nftguard_event_to_kernel_seconds{kind="PodInterface"}).
const podIfKind = "PodInterface"

// podIfLayoutReason is the Warning Event's message on the Node when it has
// local pods and none of them has an interface of its own.
const podIfLayoutReason = "none of the node's pods has an interface of its own that nftguard can learn " +
	"(a network plugin without veth peers in the node's network namespace?): " +
	"their packets are attributed by address only"

// podIfState is the node's pod-facing interfaces (package podif), which
// bind each local pod to the interface its packets enter by (package
// podguard), and the metrics of what the last sync could bind.
//
// The interfaces are read again at every sync, not only when the watch
// reports a change: the watch hears of a pod's address changes through
// NETLINK_LISTEN_ALL_NSID only once the node's namespace has an id for the
// pod's, and a read is cheap (one link dump and one address dump per pod).
// A read that fails keeps the interfaces last read: a pod never loses its
// guard because the kernel could not be asked.
type podIfState struct {
	nsPath string
	log    *slog.Logger

	mu    sync.Mutex
	ifs   []podguard.Interface
	known bool
	// logged are the unattributed pods already logged, so a pod is
	// logged once while it stays unattributed, not at every sync.
	logged map[string]bool

	interfaces   prometheus.Gauge
	guarded      prometheus.Gauge
	unattributed prometheus.Gauge
	readErrors   prometheus.Counter
	watchErrors  prometheus.Counter
	readSeconds  prometheus.Histogram
}

func newPodIfState(reg prometheus.Registerer, nsPath string, log *slog.Logger) *podIfState {
	p := &podIfState{
		nsPath: nsPath, log: log, logged: map[string]bool{},
		interfaces: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_pod_interfaces",
			Help: "Pod-facing interfaces of the node (veths whose peer is in another network namespace), as last read over rtnetlink.",
		}),
		guarded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_pods_guarded",
			Help: "Local pods bound to an interface of their own after the last successful sync: only their own addresses leave it.",
		}),
		unattributed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_pods_unattributed",
			Help: "Local pods without an interface of their own after the last successful sync: their packets are attributed by address only.",
		}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_pod_interface_read_errors_total",
			Help: "Failed reads of the node's pod-facing interfaces (the sync keeps the interfaces last read).",
		}),
		watchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_pod_interface_watch_errors_total",
			Help: "Failures of the rtnetlink watch of the node's pod-facing interfaces (it is restarted).",
		}),
		readSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nftguard_pod_interface_read_seconds",
			Help:    "Wall time of one read of the node's pod-facing interfaces (one link dump, one address dump per pod namespace).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12), // 0.5 ms to 1 s
		}),
	}
	reg.MustRegister(p.interfaces, p.guarded, p.unattributed, p.readErrors, p.watchErrors, p.readSeconds)
	return p
}

// start reads the interfaces once: the first sync must know them, or it
// would program a table without the pods' guards.
func (p *podIfState) start() error { return p.read() }

// read reads the interfaces and keeps them; on failure it keeps those
// last read.
func (p *podIfState) read() error {
	start := time.Now()
	ifs, err := podif.Read(p.nsPath)
	if err != nil {
		p.readErrors.Inc()
		return fmt.Errorf("pod interfaces: %w", err)
	}
	p.readSeconds.Observe(time.Since(start).Seconds())
	p.mu.Lock()
	p.ifs, p.known = ifs, true
	p.mu.Unlock()
	p.interfaces.Set(float64(len(ifs)))
	return nil
}

// input reads the interfaces again and gives the compile what it has.
func (p *podIfState) input(in *compose.Input) {
	if p == nil {
		return
	}
	if err := p.read(); err != nil {
		p.log.Warn("reading the pod interfaces failed; the sync keeps those last read", "err", err)
	}
	p.mu.Lock()
	in.PodInterfaces, in.PodInterfacesKnown = p.ifs, p.known
	p.mu.Unlock()
}

// observe reports what a successful sync could not bind: each local pod
// without an interface of its own, logged once while it stays so.
func (p *podIfState) observe(res compose.Result) {
	if p == nil {
		return
	}
	p.guarded.Set(float64(len(res.Guarded)))
	p.unattributed.Set(float64(len(res.Unattributed)))
	now := make(map[string]bool, len(res.Unattributed))
	for _, pod := range res.Unattributed {
		now[pod] = true
		if !p.logged[pod] {
			p.log.Warn("pod has no interface of its own on this node: its packets are attributed by address only, and forged sources are not dropped", "pod", pod)
		}
	}
	p.logged = now
}

// layoutProblem is the Node's problem when it has local pods and none of
// them has an interface of its own (a network plugin nftguard cannot
// learn): said once, as a Warning Event on the Node, while it lasts.
func layoutProblem(node string, res compose.Result) []problem.Problem {
	if len(res.Unattributed) == 0 || len(res.Guarded) > 0 {
		return nil
	}
	return []problem.Problem{{
		Object: problem.Object{APIVersion: problem.CoreV1, Kind: "Node", Name: node},
		Reason: podIfLayoutReason,
		Local:  true,
	}}
}

// watch follows the interfaces and asks for a sync when they change (a
// pod's veth created or deleted, a pod's address added), restarting the
// watch if it fails; changed is the sync loop's trigger.
func (p *podIfState) watch(ctx context.Context, log *slog.Logger, changed func()) {
	var degradedOnce sync.Once
	for ctx.Err() == nil {
		// The watch calls only when a read differs from the last;
		// the sync reads again.
		p.mu.Lock()
		last := p.ifs
		p.mu.Unlock()
		err := podif.Watch(ctx, p.nsPath, last, changed, func(err error) {
			degradedOnce.Do(func() {
				log.Info("the pods' own namespaces cannot be watched (it needs CAP_NET_BROADCAST, which the DaemonSet does not grant); their interfaces are read at every sync and every 2 s", "err", err)
			})
		})
		if ctx.Err() != nil {
			return
		}
		p.watchErrors.Inc()
		log.Error("pod interface watch failed; restarting it (syncs still read the interfaces)", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
