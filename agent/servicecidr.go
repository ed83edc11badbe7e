package agent

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// serviceCIDRKind labels ServiceCIDR changes in metrics.
const serviceCIDRKind = "ServiceCIDR"

// serviceCIDRSource follows networking.k8s.io/v1 ServiceCIDR objects, the
// cluster's own list of Service ranges, so that egress translation knows
// them without --service-cidr. They are an aid, not a condition (a Service
// address that egress does not know is one kube-proxy has not translated
// to a pod: a Service without endpoints): the first sync waits for them at
// most serviceCIDRWait after the other caches, and an API server that does
// not serve the kind, or a ClusterRole without the permission, is logged
// once and leaves the flags alone in force; nothing else is held back.
type serviceCIDRSource struct {
	client kubernetes.Interface
	log    *slog.Logger
	m      *metrics
	// onChange is the informers' change callback (see newSources).
	onChange func(kind string, initial bool)

	// settled is closed once the ranges are read or known not to be
	// readable.
	settled     chan struct{}
	settledOnce sync.Once

	mu     sync.Mutex
	inf    cache.SharedIndexInformer // nil until the kind is known to be readable
	cached []netip.Prefix
	dirty  bool
}

// serviceCIDRWait bounds how long the first sync waits for the ranges
// after the other caches synced: only so that it is not followed at once
// by a second sync that adds them.
const serviceCIDRWait = 5 * time.Second

func newServiceCIDRSource(client kubernetes.Interface, m *metrics, log *slog.Logger, onChange func(string, bool)) *serviceCIDRSource {
	return &serviceCIDRSource{client: client, m: m, log: log, onChange: onChange, settled: make(chan struct{})}
}

func (s *serviceCIDRSource) settle() { s.settledOnce.Do(func() { close(s.settled) }) }

// waitSettled waits until the ranges are read or known not to be
// readable, at most d.
func (s *serviceCIDRSource) waitSettled(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.settled:
	case <-t.C:
	case <-ctx.Done():
	}
}

// run asks once whether ServiceCIDRs can be listed (retrying while the API
// server cannot answer), then watches them until ctx is done.
func (s *serviceCIDRSource) run(ctx context.Context) {
	defer s.settle()
	backoff := time.Second
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.client.NetworkingV1().ServiceCIDRs().List(lctx, metav1.ListOptions{Limit: 1})
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			s.log.Info("ServiceCIDR objects not served (Kubernetes before 1.33): Service ranges are --service-cidr alone")
			return
		case apierrors.IsForbidden(err):
			s.m.errors.WithLabelValues(errorKindServiceCIDR).Inc()
			s.log.Warn("ServiceCIDR objects may not be listed (the ClusterRole lacks list/watch on networking.k8s.io servicecidrs): Service ranges are --service-cidr alone; everything else is enforced", "err", err)
			return
		default:
			// API server down or slow: ask again later.
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Minute)
			continue
		}
		break
	}
	f := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTransform(stripServiceCIDR))
	inf := f.Networking().V1().ServiceCIDRs().Informer()
	changed := func(initial bool) {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		s.onChange(serviceCIDRKind, initial)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(_ any, initial bool) { changed(initial) },
		UpdateFunc: func(_, _ any) { changed(false) },
		DeleteFunc: func(any) { changed(false) },
	})
	if err != nil {
		s.m.errors.WithLabelValues(errorKindServiceCIDR).Inc()
		s.log.Error("watch ServiceCIDRs: Service ranges are --service-cidr alone", "err", err)
		return
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	// The handler's own sync: its initial adds have been delivered, so
	// none of them triggers a sync after the first.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	s.mu.Lock()
	s.inf, s.dirty = inf, true
	s.mu.Unlock()
	s.onChange(serviceCIDRKind, true) // the ranges enter the next sync
	s.settle()
	s.log.Info("watching ServiceCIDR objects for the cluster's Service ranges")
	<-ctx.Done()
}

// stripServiceCIDR keeps what the ranges are read from.
func stripServiceCIDR(obj any) (any, error) {
	if sc, ok := obj.(*networkingv1.ServiceCIDR); ok {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: sc.Name, ResourceVersion: sc.ResourceVersion},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: sc.Spec.CIDRs}}, nil
	}
	return obj, nil
}

// ranges are the Service ranges of every ServiceCIDR object (none while
// they are not watched); a value that does not parse is left out, which
// only translates more destinations as outside the Service ranges, the
// same as before the object existed.
func (s *serviceCIDRSource) ranges() []netip.Prefix {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inf == nil || !s.dirty {
		return s.cached
	}
	var out []netip.Prefix
	for _, o := range s.inf.GetStore().List() {
		sc, ok := o.(*networkingv1.ServiceCIDR)
		if !ok {
			continue
		}
		for _, c := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Zone() == "" {
				out = append(out, p.Masked())
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	s.cached, s.dirty = slices.Compact(out), false
	return s.cached
}
