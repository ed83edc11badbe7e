package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/deniedflow"
	"github.com/nftguard/nftguard/dnsfwd/nodedns"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/problemevents"
	"github.com/nftguard/nftguard/quarantine"
	"github.com/nftguard/nftguard/rulecounter"
)

// Retry back-off after a failed sync: quick at first (a race), capped so a
// broken kernel or object does not spin.
const (
	retryMin = 500 * time.Millisecond
	retryMax = 30 * time.Second
)

// Run is the agent: it returns nil when ctx is done (SIGTERM), leaving the
// table in force, or an error if it cannot start. It is the order of
// things; each component's start-up is a function of its own.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	log := cfg.Logger.With("node", cfg.NodeName)

	// Open netlink first: a missing capability or namespace fails start-up
	// before anything else happens. Every kernel-counter metric is read
	// through counts, which also receives the final counts of the rules
	// each sync deletes.
	counts := rulecounter.New()
	eng, err := openEngine(cfg.NetNS, counts)
	if err != nil {
		return err
	}
	// Close releases the socket only; the table stays in force.
	defer eng.Close()
	client, cnpClient, dyn, err := newClients(&cfg)
	if err != nil {
		return err
	}

	m := newMetrics()
	h := &health{}
	if cfg.MetricsAddr != "" {
		srv, err := listenOps(cfg.MetricsAddr, m, h, log)
		if err != nil {
			return err
		}
		defer srv.shutdown()
	}

	// Deferred calls run last first: cancel, then wait. Waiting first
	// would hang a start-up that fails after a goroutine has started
	// (they stop when ctx ends) until a signal came.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	deb := newDebouncer(cfg.MinSyncInterval, cfg.MaxSyncInterval)
	var arrived arrivals
	onChange := func(kind string, initial bool) {
		// The initial list is measured by the time to the first sync,
		// not as changes.
		if !initial {
			arrived.add(kind, time.Now())
		}
		deb.trigger(reasonChange)
	}
	getLease := func(ctx context.Context) (*coordinationv1.Lease, error) {
		return client.CoordinationV1().Leases(cfg.ControllerLease.Namespace).Get(ctx, cfg.ControllerLease.Name, metav1.GetOptions{})
	}
	peers, why, problem := choosePeerSource(ctx, &cfg, client.Discovery(), getLease)
	level := slog.LevelInfo
	if problem {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "peer source chosen", "source", string(peers), "asked", string(cfg.PeerSource), "reason", why)
	m.setPeerSource(peers)
	// auto asks again every CNPCheckInterval: a controller deployed
	// with the agents publishes after they start, and a removed CRD
	// takes every record with it.
	var switched atomic.Bool
	if cfg.PeerSource == PeerSourceAuto {
		wg.Go(func() {
			if watchPeerSource(ctx, cfg.clock, cfg.CNPCheckInterval, peers, autoAgain(&cfg, peers, client.Discovery(), getLease), log) {
				switched.Store(true)
				cancel()
			}
		})
	}
	if peers == PeerSourceSlices {
		wg.Go(func() {
			watchControllerLease(ctx, cfg.clock, cfg.ControllerLeaseCheck, cfg.ControllerLease, getLease, m, h, log)
		})
	}
	src, err := startSources(ctx, &wg, &cfg, client, cnpClient, dyn, peers, m, log, onChange)
	if err != nil {
		return err
	}
	defer src.stop()
	defer src.cnp.shutdown()

	events, err := newEvents(client, cfg.NodeName, cfg.eventReporters, m, log, src.uidOf)
	if err != nil {
		return err
	}
	wg.Go(func() { events.Run(ctx) })

	if !waitForCaches(ctx, src, log) {
		log.Info("stopped before the caches synced; table left in place")
		if switched.Load() {
			return ErrPeerSourceChanged
		}
		return nil
	}
	wg.Go(func() { src.cnp.run(ctx) })
	wg.Go(func() { monitorDrift(ctx, eng, m, log, deb) })
	res, err := startDeniedFlow(ctx, &wg, &cfg, src, counts, m, log)
	if err != nil {
		return err
	}
	if cfg.ResyncPeriod > 0 {
		wg.Go(func() { periodic(ctx, cfg.ResyncPeriod, deb) })
	}
	wg.Go(func() {
		watchLocalPods(ctx, src.localPods(cfg.NodeName), cfg.noPodsAfter, m, log)
	})
	watchCounters(counts, eng, m, log)
	eg, err := startEgress(ctx, &wg, &cfg, m, log, func() { onChange(localAddrKind, false) })
	if err != nil {
		return err
	}
	pif, err := startPodIf(ctx, &wg, &cfg, m, log, func() { onChange(podIfKind, false) })
	if err != nil {
		return err
	}
	// The forwarder of domainNames rules listens before the first sync
	// programs the redirect to it (which its heartbeat enables).
	dns, err := nodedns.Start(ctx, &wg, cfg.DNS, nodedns.Node{Name: cfg.NodeName, NetNS: cfg.NetNS, Nodes: src.nodes, Eng: eng,
		Registerer: m.reg, OnError: func() { m.errors.WithLabelValues(errorKindDNS).Inc() }, Logger: log})
	if err != nil {
		return err
	}

	s := &syncer{cfg: &cfg, src: src, eng: eng, m: m, events: events, log: log, health: h, inject: testInjector(), q: quarantine.New(sameContent), egress: eg, dns: dns, podIf: pif,
		interruptible: deb.interruptible}
	if res != nil {
		s.synced = res.Synced
	}
	syncLoop(ctx, s, deb, &arrived, h, m, log)
	log.Info("shutting down; table left in place")
	if switched.Load() {
		return ErrPeerSourceChanged
	}
	return nil
}

// openEngine opens the table's netlink socket (in netNS, if set), handing
// counts the final counts of the rules each sync deletes.
func openEngine(netNS string, counts *rulecounter.Totals) (*engine.Engine, error) {
	opts := []engine.Option{engine.WithDeletedCounters(counts.Deleted)}
	if netNS != "" {
		opts = append(opts, engine.WithNetNS(netNS))
	}
	eng, err := engine.New(compose.Table(), opts...)
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return eng, nil
}

// newClients are the Kubernetes clientset, the ClusterNetworkPolicy
// clientset and the dynamic client (PeerSlices), all from cfg.REST.
func newClients(cfg *Config) (kubernetes.Interface, cnpclient.Interface, dynamic.Interface, error) {
	rest := *cfg.REST
	if rest.UserAgent == "" {
		rest.UserAgent = "nftguard/" + cfg.NodeName
	}
	client, err := kubernetes.NewForConfig(&rest)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	// The module's generated clientset: typed objects, and nothing new to
	// depend on (it is client-go's own code generator's output).
	cnpClient, err := cnpclient.NewForConfig(&rest)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ClusterNetworkPolicy client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(&rest)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dynamic client: %w", err)
	}
	return client, cnpClient, dyn, nil
}

// startSources are the informer caches the table is compiled from, not
// started yet (see waitForCaches), but for the ServiceCIDR source, which
// runs on wg and is never waited for (see servicecidr.go).
func startSources(ctx context.Context, wg *sync.WaitGroup, cfg *Config, client kubernetes.Interface, cnpClient cnpclient.Interface, dyn dynamic.Interface, peers PeerSource, m *metrics, log *slog.Logger, onChange func(string, bool)) (*sources, error) {
	src, err := newSources(client, dyn, peers, cfg.NodeName, m, onChange)
	if err != nil {
		return nil, err
	}
	if cfg.LogDenied != nil {
		// Before the informers start: records are resolved through it.
		if err := deniedflow.IndexPodAddrs(src.factory.Core().V1().Pods().Informer()); err != nil {
			src.stop()
			return nil, err
		}
		if src.sliceInf != nil {
			if err := indexPeerAddrs(src.sliceInf); err != nil {
				src.stop()
				return nil, err
			}
		}
	}
	src.cnp = newCNPSource(cnpClient, client.Discovery(), cfg.CNPCheckInterval, m, log, onChange)
	src.serviceCIDRs = newServiceCIDRSource(client, m, log, onChange)
	wg.Go(func() { src.serviceCIDRs.run(ctx) })
	return src, nil
}

// newEvents is the Event reporter (package problemevents), its metrics on
// the agent's registry and its errors counted with the agent's.
func newEvents(client kubernetes.Interface, node string, reporters int, m *metrics, log *slog.Logger, uidOf func(problem.Object) types.UID) (*problemevents.Reporter, error) {
	return problemevents.New(problemevents.Config{Client: client, Node: node, Reporters: reporters,
		Registerer: m.reg, Errors: m.errors, Logger: log, UIDOf: uidOf})
}

// waitForCaches waits until the informer caches are complete, or ctx is
// done (false). Until then the table of the previous run stays in force
// untouched: compiling from a partial cache would open or close traffic
// that the cluster's policies say otherwise about.
func waitForCaches(ctx context.Context, src *sources, log *slog.Logger) bool {
	log.Info("waiting for informer caches")
	start := time.Now()
	if !src.start(ctx) {
		return false
	}
	// ClusterNetworkPolicies too, when served: a first sync without them
	// would drop what the previous run enforced.
	if !src.cnp.waitReady(ctx) {
		return false
	}
	// Not a condition (see servicecidr.go): bounded, so that the first
	// sync normally has the Service ranges and no second one follows.
	src.serviceCIDRs.waitSettled(ctx, serviceCIDRWait)
	log.Info("informer caches synced", "after", time.Since(start).Round(time.Millisecond), "cluster_network_policy_version", src.cnp.watching())
	return true
}

// startDeniedFlow starts, with --log-denied, the denied-packet log (package
// deniedflow) on wg and returns the resolver that names the pods and
// policies of its records; nil without --log-denied.
func startDeniedFlow(ctx context.Context, wg *sync.WaitGroup, cfg *Config, src *sources, counts *rulecounter.Totals, m *metrics, log *slog.Logger) (*deniedflow.Resolver, error) {
	if cfg.LogDenied == nil {
		return nil, nil
	}
	res := deniedflow.NewResolver(src.factory.Core().V1().Pods().Informer().GetIndexer(), src.policies)
	if src.slices != nil {
		res.WithPeers(func(a netip.Addr) string { return peerByAddr(src.slices, a) })
	}
	dm, err := deniedflow.NewMetrics(m.reg, counts)
	if err != nil {
		return nil, err
	}
	wg.Go(func() {
		// Reading the log is an aid, not enforcement: if it fails
		// (another reader holds the group), the table is enforced all
		// the same.
		err := deniedflow.Run(ctx, *cfg.LogDenied, cfg.NetNS, res, log, dm, flowlog.NewJournal(deniedflow.JournalSize))
		if err != nil && ctx.Err() == nil {
			m.errors.WithLabelValues(errorKindDeniedLog).Inc()
			log.Error("denied-packet log stopped; enforcement goes on", "group", cfg.LogDenied.Group, "err", err)
		}
	})
	return res, nil
}

// watchCounters gives counts the egress and pod-guard views and registers
// the collector that reads the kernel's counters at a scrape.
func watchCounters(counts *rulecounter.Totals, eng rulecounter.Reader, m *metrics, log *slog.Logger) {
	counts.Watch(newEgressCounters())
	counts.Watch(newGuardCounters())
	// Registered once every view is watched: it describes them all.
	m.reg.MustRegister(counts.Collector(eng, 5*time.Second, func(err error) {
		m.errors.WithLabelValues(errorKindCounters).Inc()
		log.Warn("reading the kernel's rule counters failed", "err", err)
	}))
}

// startEgress reads the node's addresses, which decide where egress may
// translate, and follows them on wg; a change (kube-vip moving an address)
// is synced like an object change.
func startEgress(ctx context.Context, wg *sync.WaitGroup, cfg *Config, m *metrics, log *slog.Logger, changed func()) (*egressState, error) {
	eg := newEgressState(m.reg)
	eg.guardAlways = cfg.EgressGuardAlways
	if err := eg.start(cfg.NetNS); err != nil {
		return nil, err
	}
	wg.Go(func() { eg.watch(ctx, cfg.NetNS, log, changed) })
	return eg, nil
}

// startPodIf reads the node's pod-facing interfaces, which bind each local
// pod's packets to it (package podguard): before the first sync, again at
// every sync, and watched on wg so that a new pod's veth is synced like an
// object change.
func startPodIf(ctx context.Context, wg *sync.WaitGroup, cfg *Config, m *metrics, log *slog.Logger, changed func()) (*podIfState, error) {
	pif := newPodIfState(m.reg, cfg.NetNS, log)
	if err := pif.start(); err != nil {
		return nil, err
	}
	wg.Go(func() { pif.watch(ctx, log, changed) })
	return pif, nil
}

// syncLoop syncs whenever the debouncer says, until ctx is done, retrying
// a failed sync with back-off. The first sync replaces any table left by
// an earlier run in one transaction (the engine does a full replace on its
// first sync).
func syncLoop(ctx context.Context, s *syncer, deb *debouncer, arrived *arrivals, h *health, m *metrics, log *slog.Logger) {
	deb.trigger(reasonStart)
	backoff := retryMin
	var retry *time.Timer
	for {
		why := deb.wait(ctx)
		if why == 0 {
			break
		}
		changes := arrived.take()
		err := s.sync(ctx, why)
		deb.synced()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			arrived.putBack(changes)
			h.failed(err)
			log.Error("sync failed", "err", err, "retry_in", backoff)
			// Keep the reasons: a failed drift repair is still a repair
			// to do.
			retry = time.AfterFunc(backoff, func() { deb.trigger(why | reasonRetry) })
			backoff = min(2*backoff, retryMax)
			continue
		}
		observeArrivals(m.eventToKernel, changes, time.Now())
		if h.succeeded(s.q.Len()) {
			log.Info("table in force, ready")
		}
		backoff = retryMin
	}
	if retry != nil {
		retry.Stop()
	}
}

// observeArrivals records, for each change a sync put in the kernel at
// end, the time from its arrival.
func observeArrivals(h *prometheus.HistogramVec, changes map[string][]time.Time, end time.Time) {
	for kind, ts := range changes {
		obs := h.WithLabelValues(kind)
		for _, t := range ts {
			obs.Observe(end.Sub(t).Seconds())
		}
	}
}

// monitorDrift feeds the engine's netlink monitor into the sync loop and
// restarts it if it fails.
func monitorDrift(ctx context.Context, eng *engine.Engine, m *metrics, log interface {
	Error(string, ...any)
	Warn(string, ...any)
}, deb *debouncer) {
	for ctx.Err() == nil {
		err := eng.Monitor(ctx, func() {
			m.driftDetected.Inc()
			deb.trigger(reasonDrift)
		})
		if ctx.Err() != nil {
			return
		}
		m.errors.WithLabelValues(errorKindMonitor).Inc()
		log.Error("drift monitor failed; restarting it", "err", err)
		// The table may have changed while the monitor was down.
		deb.trigger(reasonDrift)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// periodic asks for a resync every period: a safety net that recompiles
// from the caches; the engine still sends only the difference.
func periodic(ctx context.Context, period time.Duration, deb *debouncer) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			deb.trigger(reasonResync)
		}
	}
}

// uidOf finds an object's UID in the caches, for Events.
func (s *sources) uidOf(ref problem.Object) types.UID {
	switch ref.Kind {
	case "NetworkPolicy":
		if o, err := s.policies.NetworkPolicies(ref.Namespace).Get(ref.Name); err == nil {
			return o.UID
		}
	case "Service":
		if o, err := s.services.Services(ref.Namespace).Get(ref.Name); err == nil {
			return o.UID
		}
	case "Pod":
		if p := s.pod(ref.Namespace, ref.Name); p != nil {
			return p.UID
		}
	case "Node":
		if o, err := s.nodes.Get(ref.Name); err == nil {
			return o.UID
		}
	case cnpKind:
		if s.cnp != nil {
			if o := s.cnp.get(ref.Name); o != nil {
				return o.UID
			}
		}
	}
	return ""
}
