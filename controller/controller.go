package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/peerslice"
)

// Defaults of Config.
const (
	DefaultBatchDelay       = 200 * time.Millisecond
	DefaultWorkers          = 16
	DefaultLeaseNamespace   = "kube-system"
	DefaultLeaseName        = "nftguard-controller"
	DefaultLeaseDuration    = 15 * time.Second
	DefaultRenewDeadline    = 10 * time.Second
	DefaultRetryPeriod      = 2 * time.Second
	DefaultCNPCheckInterval = 30 * time.Second
	// retryDelay is how long a namespace whose writes failed waits.
	retryDelay = time.Second
	// maxReplans bounds the re-plans of one flush after conflicts.
	maxReplans = 5
)

// Clients are the API clients the controller uses.
type Clients struct {
	// Kube reads Pods and NetworkPolicies and holds the Lease (Protobuf).
	Kube kubernetes.Interface
	// Dynamic reads and writes PeerSlices (JSON: custom resources have
	// no Protobuf encoding).
	Dynamic dynamic.Interface
	// CNP reads ClusterNetworkPolicies while they are served.
	CNP cnpclient.Interface
	// Discovery tells whether ClusterNetworkPolicies are served.
	Discovery discovery.DiscoveryInterface
}

// NewClients makes the clients from one configuration: the core kinds in
// Protobuf, as client-go's own controllers do (smaller and cheaper to
// decode than JSON).
func NewClients(cfg *rest.Config) (Clients, error) {
	pb := rest.CopyConfig(cfg)
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	var c Clients
	var err error
	if c.Kube, err = kubernetes.NewForConfig(pb); err != nil {
		return c, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("dynamic client: %w", err)
	}
	if c.CNP, err = cnpclient.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("ClusterNetworkPolicy client: %w", err)
	}
	if c.Discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		return c, fmt.Errorf("discovery client: %w", err)
	}
	return c, nil
}

// Config configures Run. Zero values take the defaults.
type Config struct {
	Clients
	// LeaseNamespace/LeaseName name the coordination.k8s.io Lease the
	// replicas elect their leader with.
	LeaseNamespace, LeaseName string
	// Identity is this replica's name in the Lease (default: $POD_NAME,
	// else the host name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are leaderelection's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// BatchDelay is how long after the first change that dirtied a
	// namespace its slices are written: the bound on the delay batching
	// adds.
	BatchDelay time.Duration
	// Workers flush namespaces in parallel; a namespace's writes are
	// made one after another. 16 by default: under churn spread over
	// many namespaces, 4 left namespaces waiting behind each other's
	// writes (e2e TestControllerPublishRate).
	Workers int
	// Slices sizes slices (default peerslice.DefaultOptions).
	Slices peerslice.Options
	// CNPCheckInterval is how often discovery is asked whether
	// ClusterNetworkPolicies are served.
	CNPCheckInterval time.Duration
	// Registerer takes the metrics (default: a registry of its own).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Clock times batching (tests step a fake one). Leader election
	// keeps the real clock.
	Clock clock.Clock
}

func (cfg *Config) defaults() error {
	if cfg.Kube == nil || cfg.Dynamic == nil || cfg.Discovery == nil {
		return errors.New("controller: Config needs the Kube, Dynamic and Discovery clients")
	}
	if cfg.LeaseNamespace == "" {
		cfg.LeaseNamespace = DefaultLeaseNamespace
	}
	if cfg.LeaseName == "" {
		cfg.LeaseName = DefaultLeaseName
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity()
	}
	if cfg.Identity == "" {
		return errors.New("controller: no identity: set it, or $POD_NAME")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.LeaseDuration, DefaultLeaseDuration)
	def(&cfg.RenewDeadline, DefaultRenewDeadline)
	def(&cfg.RetryPeriod, DefaultRetryPeriod)
	def(&cfg.BatchDelay, DefaultBatchDelay)
	def(&cfg.CNPCheckInterval, DefaultCNPCheckInterval)
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Slices == (peerslice.Options{}) {
		cfg.Slices = peerslice.DefaultOptions()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return nil
}

// DefaultIdentity is $POD_NAME (the Deployment sets it), else the host
// name.
func DefaultIdentity() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

type controller struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	clk clock.Clock

	pods, policies, slices cache.SharedIndexInformer
	// handlers are the registrations of the handlers on them.
	handlers []cache.ResourceEventHandlerRegistration
	cnp      *cnpWatch

	// mu guards what follows: the handlers, workers and leader share it.
	mu      sync.Mutex
	st      *state
	ov      *overlay
	batch   *batcher
	leading bool
	// initial are the namespaces of a new leader's first full reconcile
	// not yet flushed; initialDone is closed when none is left.
	initial     map[string]bool
	initialDone chan struct{}
	// wake tells the dispatcher a namespace was dirtied or a flush ended.
	wake chan struct{}
}

// Run runs the controller until ctx ends: informers always (a standby
// keeps warm caches, so a failover does not start from nothing), and
// while it holds the Lease, the writes. A replica that loses the Lease
// stops writing at once and becomes a candidate again.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return fmt.Errorf("controller metrics: %w", err)
	}
	c := &controller{
		cfg: cfg, log: cfg.Logger, m: m, clk: cfg.Clock,
		st: newState(), ov: newOverlay(), batch: newBatcher(cfg.BatchDelay),
		wake: make(chan struct{}, 1),
	}
	ictx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	if err := c.startInformers(ictx); err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName},
		Client:     cfg.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	c.log.Info("controller started: a candidate for the lease", "lease", cfg.LeaseNamespace+"/"+cfg.LeaseName, "identity", cfg.Identity)
	for ctx.Err() == nil {
		// leaderelection calls OnStartedLeading in a goroutine of its
		// own; the term runs here instead, so that the next term
		// starts only once this one has made its last write.
		terms := make(chan context.Context, 1)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) { terms <- lctx },
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if id != cfg.Identity {
						c.log.Info("another replica leads", "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			le.Run(ctx)
		}()
		select {
		case lctx := <-terms:
			c.lead(lctx)
		case <-ran:
		}
		<-ran
	}
	return nil
}
