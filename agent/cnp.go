package agent

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	cnpinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/served"
)

// ClusterNetworkPolicy is a CRD: it may be installed after the agent starts,
// removed while it runs, or never installed. The agent follows that without
// a restart:
//
//   - It asks discovery (GET /apis/policy.networking.k8s.io/VERSION, which
//     every authenticated client may read: no RBAC beyond the ClusterRole's
//     get/list/watch on clusternetworkpolicies) whether the resource is
//     served, at start-up and then every DefaultCNPCheckInterval. Watching
//     the CustomResourceDefinition object instead would notice faster, but
//     needs read access to every CRD of the cluster, which the agent does
//     not otherwise need.
//   - While it is served, one informer watches it: v1beta1 (the storage
//     version) when served, else v1alpha2, whose objects are converted to
//     v1beta1 as they enter the cache (the schemas are identical; see
//     manifest.CNPFromV1alpha2).
//   - When the CRD is removed, the API server deletes every
//     ClusterNetworkPolicy first, and the informer reports the deletions:
//     they leave the table at once. The next discovery check then stops
//     the informer. A failed discovery request (API server down) changes
//     nothing: only a definite "not found" means the CRD is gone.
//   - Until a new informer's first list is complete, the previous
//     informer's objects (none, after an installation) stay in the desired
//     state: a partial cache would drop policies that are still in force.

// DefaultCNPCheckInterval is how often the agent asks discovery whether
// ClusterNetworkPolicies are served: the delay before the agent notices a
// CRD installed while it runs. One small GET per node and interval.
const DefaultCNPCheckInterval = 30 * time.Second

// cnpResource is the resource's plural name, as discovery lists it.
const cnpResource = "clusternetworkpolicies"

// cnpVersions are the versions watched, in order of preference.
var cnpVersions = []string{cnpv1beta1.GroupVersion.Version, cnpv1alpha2.GroupVersion.Version}

// cnpKind labels ClusterNetworkPolicy changes in metrics.
const cnpKind = "ClusterNetworkPolicy"

// cnpSource watches ClusterNetworkPolicies while the API server serves them.
type cnpSource struct {
	client   cnpclient.Interface
	disc     discovery.DiscoveryInterface
	interval time.Duration
	m        *metrics
	log      *slog.Logger
	// onChange is the informers' change callback (see newSources).
	onChange func(kind string, initial bool)

	mu sync.Mutex
	// version is the version watched, "" when none is served.
	version string
	// known: a discovery check has given a definite answer.
	known bool
	// inf is the current informer, stop ends it.
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
	done chan struct{}
	// prev is what the previous informer held, used until inf has synced.
	prev []*cnpv1beta1.ClusterNetworkPolicy
	// lastErr is the last discovery error logged, to log each kind once.
	lastErr string

	// served is 1 while ClusterNetworkPolicies are watched; count is how
	// many the last list returned (the desired state's).
	servedGauge, count prometheus.Gauge
}

func newCNPSource(client cnpclient.Interface, disc discovery.DiscoveryInterface, interval time.Duration, m *metrics, log *slog.Logger, onChange func(string, bool)) *cnpSource {
	c := &cnpSource{client: client, disc: disc, interval: interval, m: m, log: log, onChange: onChange,
		servedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_cluster_network_policy_crd_served",
			Help: "1 while the API server serves ClusterNetworkPolicies and the agent watches them, 0 otherwise.",
		}),
		count: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftguard_cluster_network_policies",
			Help: "ClusterNetworkPolicies in the desired state at the last compile.",
		}),
	}
	// Registered here rather than in newMetrics: they describe this
	// source, and exist from the start (0) like the other gauges.
	m.reg.MustRegister(c.servedGauge, c.count)
	return c
}

// served asks discovery which version of ClusterNetworkPolicy to watch: ""
// when none is served (a definite answer), or an error when it cannot tell.
func (c *cnpSource) served() (string, error) {
	return served.Version(c.disc, cnpv1beta1.GroupName, cnpResource, cnpVersions...)
}

// check runs one discovery check and starts, switches or stops the informer
// to match. ctx bounds the informer's life.
func (c *cnpSource) check(ctx context.Context) {
	v, err := c.served()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// Keep whatever is watched: an unreachable API server says
		// nothing about the CRD.
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			c.log.Warn("cannot tell whether ClusterNetworkPolicies are served; keeping the current state", "err", err)
		}
		return
	}
	c.lastErr = ""
	first := !c.known
	c.known = true
	if v == c.version && !first {
		return
	}
	switch {
	case v == "" && first:
		c.log.Info("ClusterNetworkPolicy CRD not served: enforcing NetworkPolicy only; checking for it every interval",
			"group", cnpv1beta1.GroupName, "interval", c.interval)
	case v == "":
		c.log.Info("ClusterNetworkPolicy CRD no longer served: ClusterNetworkPolicies leave the table; enforcing NetworkPolicy only",
			"group", cnpv1beta1.GroupName, "was", c.version)
	case c.version == "":
		c.log.Info("ClusterNetworkPolicy CRD served: watching ClusterNetworkPolicies", "group", cnpv1beta1.GroupName, "version", v)
	default:
		c.log.Info("ClusterNetworkPolicy served in another version: watching it", "group", cnpv1beta1.GroupName, "version", v, "was", c.version)
	}
	c.switchTo(ctx, v)
	if v != "" {
		c.servedGauge.Set(1)
	} else {
		c.servedGauge.Set(0)
	}
}

// switchTo replaces the informer with one for version v ("": none). The
// caller holds mu.
func (c *cnpSource) switchTo(ctx context.Context, v string) {
	if c.inf != nil {
		c.prev = nil
		if v != "" && c.inf.HasSynced() {
			c.prev = listCNPs(c.inf)
		}
		c.stop()
		<-c.done
		c.inf, c.stop, c.done = nil, nil, nil
	}
	c.version = v
	if v == "" {
		c.prev = nil
		c.onChange(cnpKind, false)
		return
	}
	f := cnpinformers.NewSharedInformerFactoryWithOptions(c.client, 0, cnpinformers.WithTransform(cnpTransform))
	var inf cache.SharedIndexInformer
	if v == cnpv1beta1.GroupVersion.Version {
		inf = f.Policy().V1beta1().ClusterNetworkPolicies().Informer()
	} else {
		inf = f.Policy().V1alpha2().ClusterNetworkPolicies().Informer()
	}
	count := c.m.informerEvents.WithLabelValues(cnpResource)
	changed := func(initial bool) { count.Inc(); c.onChange(cnpKind, initial) }
	// Errors cannot happen before the informer starts.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) { changed(initial) },
		UpdateFunc: func(old, new any) {
			if !sameContent(old, new) {
				changed(false)
			}
		},
		DeleteFunc: func(any) { changed(false) },
	})
	log := c.log
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		switch {
		case apierrors.IsForbidden(err):
			// Not retried quietly: without the permission the cache
			// never fills, so the agent cannot become ready.
			log.Error("cannot list or watch ClusterNetworkPolicies: does the agent's ClusterRole grant get, list, watch on clusternetworkpolicies?", "err", err)
		case apierrors.IsNotFound(err):
			// The CRD is being removed; the next discovery check stops
			// the informer.
			log.Debug("ClusterNetworkPolicy watch: not found", "err", err)
		default:
			log.Warn("ClusterNetworkPolicy watch failed; retrying", "err", err)
		}
	})
	ictx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	f.Start(ictx.Done())
	go func() {
		defer close(done)
		if cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
			// The complete cache replaces prev: sync it. Like an
			// initial list, it is not a change to measure.
			c.onChange(cnpKind, true)
		}
		<-ictx.Done()
		f.Shutdown()
	}()
	c.inf, c.stop, c.done = inf, cancel, done
}

// run checks discovery every interval until ctx is done, then stops the
// informer.
func (c *cnpSource) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.shutdown()
			return
		case <-t.C:
			c.check(ctx)
		}
	}
}

// waitReady blocks until a discovery check has given a definite answer and,
// when ClusterNetworkPolicies are served, their cache is complete: the first
// sync must not drop ClusterNetworkPolicies the previous run enforced. It
// reports false if ctx ended first.
func (c *cnpSource) waitReady(ctx context.Context) bool {
	for {
		c.check(ctx)
		c.mu.Lock()
		known, inf := c.known, c.inf
		c.mu.Unlock()
		if known {
			if inf == nil || cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				return ctx.Err() == nil
			}
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// shutdown stops the informer and waits for it.
func (c *cnpSource) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inf != nil {
		c.stop()
		<-c.done
		c.inf = nil
	}
}

// list returns the ClusterNetworkPolicies of the desired state: the
// informer's when its cache is complete, the previous informer's until
// then, none when the resource is not served.
func (c *cnpSource) list() []*cnpv1beta1.ClusterNetworkPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.prev
	if c.inf != nil && c.inf.HasSynced() {
		out = listCNPs(c.inf)
	}
	c.count.Set(float64(len(out)))
	return out
}

// get finds one ClusterNetworkPolicy by name (for Events), or nil.
func (c *cnpSource) get(name string) *cnpv1beta1.ClusterNetworkPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inf == nil {
		return nil
	}
	o, ok, err := c.inf.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	p, _ := o.(*cnpv1beta1.ClusterNetworkPolicy)
	return p
}

// watching reports the version watched ("" for none).
func (c *cnpSource) watching() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// listCNPs lists an informer's cache in name order (the transform made
// every object v1beta1).
func listCNPs(inf cache.SharedIndexInformer) []*cnpv1beta1.ClusterNetworkPolicy {
	items := inf.GetIndexer().List()
	out := make([]*cnpv1beta1.ClusterNetworkPolicy, 0, len(items))
	for _, o := range items {
		if p, ok := o.(*cnpv1beta1.ClusterNetworkPolicy); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *cnpv1beta1.ClusterNetworkPolicy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// cnpTransform is the ClusterNetworkPolicy informers' transform: v1alpha2
// objects become v1beta1 once, as they enter the cache (so every sync sees
// the same object, which the incremental compilers and the quarantine
// compare by identity), and fields the compiler does not read go.
func cnpTransform(obj any) (any, error) {
	if a, ok := obj.(*cnpv1alpha2.ClusterNetworkPolicy); ok {
		b, err := manifest.CNPFromV1alpha2(a)
		if err != nil {
			return nil, err
		}
		obj = b
	}
	if p, ok := obj.(*cnpv1beta1.ClusterNetworkPolicy); ok {
		// Status is written by controllers (conditions), not read by the
		// compiler: its updates must not cost a sync.
		p.ManagedFields, p.Annotations = nil, nil
		p.Status = cnpv1beta1.ClusterNetworkPolicyStatus{}
		p.TypeMeta = metav1.TypeMeta{}
		return p, nil
	}
	return obj, nil // tombstones
}
