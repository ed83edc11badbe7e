package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/dnsfwd/nodedns"
	"github.com/nftguard/nftguard/tablelayout"
)

// Defaults, from measurements on a 2-core machine (see debouncer and
// docs/operations.md): a change after a quiet moment of 20ms is synced at once (API
// write to kernel p50 8-11ms in the e2e lab); a burst of 1,000 events
// spread over 1-5 s costs 7-10 syncs; no change waits longer than a second.
const (
	DefaultMinSyncInterval = 20 * time.Millisecond
	DefaultMaxSyncInterval = time.Second
	DefaultResyncPeriod    = 5 * time.Minute
	DefaultMetricsAddr     = "127.0.0.1:9743"
)

// Config is everything Run needs.
type Config struct {
	// REST is the API server connection (in-cluster or from a kubeconfig).
	REST *rest.Config
	// NodeName is the node whose pods are enforced.
	NodeName string
	// NetNS, when set, is the path of the network namespace the table is
	// programmed in (multi-node simulation on one machine, tests).
	NetNS string
	// ClusterCIDRs and ServiceCIDRs tell egress SNAT what is in-cluster,
	// in addition to what the cluster says: Nodes' spec.podCIDRs and
	// ServiceCIDR objects.
	ClusterCIDRs []netip.Prefix
	ServiceCIDRs []netip.Prefix

	// MinSyncInterval is the quiet time after a sync that makes the next
	// change sync at once, and the first window in which changes arriving
	// during or just after a sync are coalesced (the window doubles while
	// a burst fills it and halves when changes pause). MaxSyncInterval
	// caps the window: no change waits longer. Zero means the default.
	// See debouncer.
	MinSyncInterval time.Duration
	MaxSyncInterval time.Duration
	// ResyncPeriod recompiles and syncs even without events, as a safety
	// net; the sync is still incremental. Zero means the default,
	// negative disables it.
	ResyncPeriod time.Duration
	// CNPCheckInterval is how often discovery is asked whether
	// ClusterNetworkPolicies are served (see cnp.go). Zero means
	// DefaultCNPCheckInterval.
	CNPCheckInterval time.Duration

	// PeerSource is where the pods of other nodes come from (see
	// peers.go); "" means PeerSourceAuto.
	PeerSource PeerSource
	// ControllerLease is the Lease of nftguard's controller, which
	// publishes the PeerSlices: PeerSourceAuto reads slices only when it
	// is fresh and says the records are published, and in slices mode
	// the records are stale while it is not renewed. The zero value means
	// kube-system/nftguard-controller.
	ControllerLease types.NamespacedName
	// ControllerLeaseCheck is how often the Lease is read in slices mode;
	// zero means DefaultControllerLeaseCheck.
	ControllerLeaseCheck time.Duration

	// MetricsAddr is where /metrics, /healthz and /readyz are served;
	// "" or "0" disables the server.
	MetricsAddr string

	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger

	// Budget bounds what NetworkPolicies may cost this node (package
	// budget); the zero value means budget.Default().
	Budget budget.Limits

	// EgressGuardAlways keeps egress's pod-start guard on whenever a
	// Service claims pods, not only while a claimed pod of this node
	// waits for its address (egress.Input.GuardAlways).
	EgressGuardAlways bool

	// DNS is how domainNames rules of ClusterNetworkPolicies are served
	// (a DNS forwarder on the node's addresses); see nodedns.Config.
	DNS nodedns.Config

	// LogDenied, when set, logs denied packets of pods in namespaces that
	// opt in (tablelayout.LogDenied): the table logs them to an NFLOG group,
	// and the agent reads the group and writes one log record each.
	LogDenied *tablelayout.LogDenied

	// eventReporters is how many nodes report a problem every node finds
	// (tests lower it); zero means problemevents.DefaultReporters.
	eventReporters int

	// clock reads the time and ticks the Lease checks (tests replace
	// it); nil means the real clock.
	clock clock.WithTicker

	// noPodsAfter is how long no pod may be scheduled to NodeName before
	// the agent warns (tests shorten it); zero means a minute.
	noPodsAfter time.Duration
}

// withDefaults returns a copy with zero values replaced by defaults, or an
// error naming the invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.REST == nil {
		return c, errors.New("no API server configuration")
	}
	if c.NodeName == "" {
		return c, errors.New("node name is empty")
	}
	if c.LogDenied != nil {
		if err := c.LogDenied.Validate(); err != nil {
			return c, fmt.Errorf("log denied packets: %w", err)
		}
	}
	if c.Budget == (budget.Limits{}) {
		c.Budget = budget.Default()
	}
	if err := c.Budget.Validate(); err != nil {
		return c, err
	}
	if c.MinSyncInterval == 0 {
		c.MinSyncInterval = DefaultMinSyncInterval
	}
	if c.MaxSyncInterval == 0 {
		c.MaxSyncInterval = DefaultMaxSyncInterval
	}
	if c.ResyncPeriod == 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if c.CNPCheckInterval == 0 {
		c.CNPCheckInterval = DefaultCNPCheckInterval
	}
	if c.CNPCheckInterval < 0 {
		return c, errors.New("CRD check interval must not be negative")
	}
	if c.MinSyncInterval < 0 || c.MaxSyncInterval < 0 {
		return c, errors.New("sync intervals must not be negative")
	}
	if c.MaxSyncInterval < c.MinSyncInterval {
		return c, fmt.Errorf("max sync interval %v is shorter than min sync interval %v", c.MaxSyncInterval, c.MinSyncInterval)
	}
	switch c.PeerSource {
	case "":
		c.PeerSource = PeerSourceAuto
	case PeerSourceAuto, PeerSourcePods, PeerSourceSlices:
	default:
		return c, fmt.Errorf("peer source %q: want auto, pods or slices", c.PeerSource)
	}
	if c.ControllerLease.Name == "" {
		c.ControllerLease.Name = DefaultControllerLease.Name
	}
	if c.ControllerLease.Namespace == "" {
		c.ControllerLease.Namespace = DefaultControllerLease.Namespace
	}
	if c.ControllerLeaseCheck == 0 {
		c.ControllerLeaseCheck = DefaultControllerLeaseCheck
	}
	if c.ControllerLeaseCheck < 0 {
		return c, errors.New("controller lease check interval must not be negative")
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.MetricsAddr == "0" {
		c.MetricsAddr = ""
	}
	if c.noPodsAfter == 0 {
		c.noPodsAfter = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
