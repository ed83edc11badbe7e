package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/nodeaddr"
)

// localAddrKind names local address changes in the change-to-kernel
// histogram (nftguard_event_to_kernel_seconds{kind="LocalAddress"}): a
// kube-vip failover measured from the kernel's notification.
const localAddrKind = "LocalAddress"

// egressState is the node's side of egress: the addresses it holds, which
// decide where a Service's address may be translated to, and the metrics
// of what the last sync held back.
type egressState struct {
	mu          sync.Mutex
	local       *egress.LocalAddrs
	guardAlways bool

	held        *prometheus.GaugeVec
	pending     prometheus.Gauge
	localCount  prometheus.Gauge
	watchErrors prometheus.Counter
}

func newEgressState(reg prometheus.Registerer) *egressState {
	e := &egressState{
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftguard_egress_held_addresses",
			Help: "Local pod addresses whose traffic that leaves the cluster is dropped because their egress Service's address cannot be used on this node, by Service and reason (not_local, no_address, invalid).",
		}, []string{"namespace", "service", "reason"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_egress_pending_pods",
			Help: "Local pods an egress Service claims that have no address yet; while above zero, traffic leaving the cluster from this node's pod addresses no pod has is dropped.",
		}),
		localCount: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_local_address_prefixes", Help: "Local routes of the node's local routing table (its addresses), as last seen over rtnetlink.",
		}),
		watchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftguard_local_address_watch_errors_total", Help: "Failures of the rtnetlink watch of the node's addresses (it is restarted).",
		}),
	}
	reg.MustRegister(e.held, e.pending, e.localCount, e.watchErrors)
	return e
}

// start reads the node's addresses once: the first sync must know them,
// or it would hold every egress pod of the node.
func (e *egressState) start(nsPath string) error {
	ps, err := nodeaddr.List(nsPath)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	e.set(ps)
	return nil
}

func (e *egressState) set(ps []netip.Prefix) {
	e.mu.Lock()
	e.local = &egress.LocalAddrs{Prefixes: ps}
	e.mu.Unlock()
	e.localCount.Set(float64(len(ps)))
}

// input gives the compile the addresses last seen.
func (e *egressState) input(in *compose.Input) {
	e.mu.Lock()
	in.Local = e.local
	e.mu.Unlock()
	in.EgressGuardAlways = e.guardAlways
}

// observe sets the metrics of what the sync just held back.
func (e *egressState) observe(res compose.Result) {
	e.held.Reset()
	for _, h := range res.EgressHeld {
		ns, name, _ := strings.Cut(h.Service, "/")
		e.held.WithLabelValues(ns, name, string(h.Reason)).Inc()
	}
	e.pending.Set(float64(len(res.EgressPending)))
}

// watch follows the node's addresses and asks for a sync when they
// change (kube-vip moving an address), restarting the watch if it fails;
// changed is the sync loop's trigger.
func (e *egressState) watch(ctx context.Context, nsPath string, log *slog.Logger, changed func()) {
	for ctx.Err() == nil {
		err := nodeaddr.Watch(ctx, nsPath, func(ps []netip.Prefix) {
			e.mu.Lock()
			same := e.local != nil && slices.Equal(e.local.Prefixes, ps)
			e.mu.Unlock()
			if same {
				return
			}
			e.set(ps)
			log.Info("local addresses changed", "prefixes", len(ps))
			changed()
		})
		if ctx.Err() != nil {
			return
		}
		e.watchErrors.Inc()
		log.Error("local address watch failed; restarting it (egress keeps the addresses last seen)", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
