package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/nftguard/nftguard/agent"
	"github.com/nftguard/nftguard/dnsfwd/nodedns"
)

// runRun is `nftguard run`, the node agent: flags in, agent.Run does the work.
func runRun(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var c common
	c.register(fs)
	c.registerEgress(fs)
	c.registerLogDenied(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: the in-cluster service account)")
	metricsAddr := fs.String("metrics-addr", agent.DefaultMetricsAddr, `address for /metrics, /healthz and /readyz ("0" disables)`)
	minSync := fs.Duration("min-sync-interval", agent.DefaultMinSyncInterval, "quiet time: a change arriving at least this long after the previous sync (after a burst, an eighth of the coalescing window if longer) is synced at once; changes arriving sooner are coalesced into the next sync, in a window that starts at this value, doubles while a burst fills it and halves when changes pause")
	maxSync := fs.Duration("max-sync-interval", agent.DefaultMaxSyncInterval, "largest coalescing window: the longest any change waits for its sync, even during a steady stream of changes (a 1,000-event burst costs about 6 syncs plus one per second it lasts)")
	resync := fs.Duration("resync-period", agent.DefaultResyncPeriod, "periodic recompile and incremental sync without changes (negative disables)")
	crdCheck := fs.Duration("crd-check-interval", agent.DefaultCNPCheckInterval, "how often discovery is asked whether ClusterNetworkPolicies (policy.networking.k8s.io) are served: the delay before a CRD installed while the agent runs is watched")
	guard := fs.String("egress-pod-start-guard", "pending", `when traffic leaving the cluster from this node's pod addresses no pod has is dropped: "pending" while a pod an egress Service claims has no address yet, "always" while any Service claims pods (also covers a pod that sends before the agent learns of it; every new pod of the node waits for its address to be known)`)
	var clusterDNS, dnsAddrs stringList
	fs.Var(&clusterDNS, "cluster-dns", "cluster DNS address whose answers domainNames rules trust, and which subject pods' queries to are redirected to the forwarder (repeatable; default: the ClusterIPs of the Service kube-system/kube-dns)")
	fs.Var(&dnsAddrs, "dns-forwarder-address", "node address the DNS forwarder of domainNames rules listens on, one per family (repeatable; default: the Node's InternalIPs)")
	dnsPort := fs.Uint("dns-forwarder-port", nodedns.DefaultPort, "port (UDP and TCP) of the DNS forwarder of domainNames rules")
	dnsFwd := fs.Bool("dns-forwarder", true, "run the DNS forwarder that domainNames rules learn addresses from (false: those rules match nothing)")
	peerSource := fs.String("peer-source", string(agent.PeerSourceAuto), `where the pods of other nodes come from: "pods" watches every Pod; "slices" watches this node's Pods and the PeerSlices nftguard's controller publishes; "auto" reads slices when they are served and the controller's lease is fresh and says they are published, else pods and asks again every --crd-check-interval: once slices are published it restarts itself in place (the table stays in force) to read them`)
	lease := fs.String("controller-lease", agent.DefaultControllerLease.String(), "NAMESPACE/NAME of the controller's Lease: auto reads slices only while it is fresh and published; in slices mode the records are reported stale while it is not renewed")
	leaseCheck := fs.Duration("controller-lease-check", agent.DefaultControllerLeaseCheck, "how often, in slices mode, the controller's Lease is read to tell whether the peer records are stale")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *maxSync < *minSync {
		return usagef("--max-sync-interval %v is shorter than --min-sync-interval %v", *maxSync, *minSync)
	}
	if *guard != "pending" && *guard != "always" {
		return usagef("--egress-pod-start-guard %q: want pending or always", *guard)
	}
	if *dnsPort < 1 || *dnsPort > 65535 {
		return usagef("--dns-forwarder-port %d: want 1-65535", *dnsPort)
	}
	switch agent.PeerSource(*peerSource) {
	case agent.PeerSourceAuto, agent.PeerSourcePods, agent.PeerSourceSlices:
	default:
		return usagef("--peer-source %q: want auto, pods or slices", *peerSource)
	}
	leaseNS, leaseName, ok := strings.Cut(*lease, "/")
	if !ok || leaseNS == "" || leaseName == "" || strings.Contains(leaseName, "/") {
		return usagef("--controller-lease %q: want NAMESPACE/NAME", *lease)
	}
	if *leaseCheck <= 0 {
		return usagef("--controller-lease-check %v: want a positive duration", *leaseCheck)
	}
	dnsCfg := nodedns.Config{Off: !*dnsFwd, Port: uint16(*dnsPort)}
	for _, l := range []struct {
		vals stringList
		into *[]netip.Addr
		flag string
	}{{clusterDNS, &dnsCfg.ClusterDNS, "--cluster-dns"}, {dnsAddrs, &dnsCfg.Addrs, "--dns-forwarder-address"}} {
		for _, v := range l.vals {
			a, err := netip.ParseAddr(v)
			if err != nil || a.Zone() != "" {
				return usagef("%s %q: not an IP address", l.flag, v)
			}
			*l.into = append(*l.into, a.Unmap())
		}
	}
	logDenied, err := c.logDeniedConfig()
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return usageError{err}
	}
	// client-go logs through klog; send it to the same structured log.
	klog.SetSlogLogger(log)
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	err = agent.Run(ctx, agent.Config{
		REST:                 cfg,
		NodeName:             c.nodeName,
		NetNS:                c.netns,
		ClusterCIDRs:         c.clusterCIDRs,
		ServiceCIDRs:         c.serviceCIDRs,
		MinSyncInterval:      *minSync,
		MaxSyncInterval:      *maxSync,
		ResyncPeriod:         *resync,
		CNPCheckInterval:     *crdCheck,
		MetricsAddr:          *metricsAddr,
		Logger:               log,
		LogDenied:            logDenied,
		EgressGuardAlways:    *guard == "always",
		DNS:                  dnsCfg,
		PeerSource:           agent.PeerSource(*peerSource),
		ControllerLease:      types.NamespacedName{Namespace: leaseNS, Name: leaseName},
		ControllerLeaseCheck: *leaseCheck,
	})
	if errors.Is(err, agent.ErrPeerSourceChanged) {
		// The same process, the same arguments, a fresh start: no
		// container restart, no back-off. The table stayed in force.
		exe, xerr := os.Executable()
		if xerr == nil {
			xerr = syscall.Exec(exe, os.Args, os.Environ())
		}
		return fmt.Errorf("restart to read PeerSlices: %w", xerr)
	}
	return err
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := loadRESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %w", err)
	}
	// One agent per node: keep its share of the API server small but let
	// the initial lists go through without client-side throttling.
	cfg.QPS, cfg.Burst = 20, 40
	return cfg, nil
}
