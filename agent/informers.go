package agent

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/compose"
)

// sources are the informer caches the table is compiled from.
type sources struct {
	factory  informers.SharedInformerFactory
	synced   []cache.InformerSynced
	pods     corelisters.PodLister
	ns       corelisters.NamespaceLister
	policies networkinglisters.NetworkPolicyLister
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	// cnp follows the ClusterNetworkPolicy CRD; nil lists none.
	cnp *cnpSource
}

// newSources sets up the informers; onChange is called (from informer
// goroutines) for every add, delete, and update that changes a stripped
// object, with the object's kind and whether it is part of the initial
// list.
func newSources(client kubernetes.Interface, m *metrics, onChange func(kind string, initial bool)) (*sources, error) {
	// No informer resync: the agent's own periodic resync recompiles from
	// the caches, and replaying every object through handlers would only
	// mark the state dirty again.
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(newStripper().strip))
	s := &sources{factory: f}
	add := func(resource, kind string, inf cache.SharedIndexInformer) error {
		count := m.informerEvents.WithLabelValues(resource)
		changed := func(initial bool) { count.Inc(); onChange(kind, initial) }
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(_ any, initial bool) { changed(initial) },
			UpdateFunc: func(old, new any) {
				if !sameContent(old, new) {
					changed(false)
				}
			},
			DeleteFunc: func(any) { changed(false) },
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", resource, err)
		}
		s.synced = append(s.synced, inf.HasSynced)
		return nil
	}
	pods := f.Core().V1().Pods()
	ns := f.Core().V1().Namespaces()
	pol := f.Networking().V1().NetworkPolicies()
	svc := f.Core().V1().Services()
	nodes := f.Core().V1().Nodes()
	for _, r := range []struct {
		name, kind string
		inf        cache.SharedIndexInformer
	}{
		{"pods", "Pod", pods.Informer()}, {"namespaces", "Namespace", ns.Informer()},
		{"networkpolicies", "NetworkPolicy", pol.Informer()}, {"services", "Service", svc.Informer()},
		{"nodes", "Node", nodes.Informer()},
	} {
		if err := add(r.name, r.kind, r.inf); err != nil {
			return nil, err
		}
	}
	s.pods, s.ns, s.policies, s.services, s.nodes = pods.Lister(), ns.Lister(), pol.Lister(), svc.Lister(), nodes.Lister()
	return s, nil
}

// start runs the informers until ctx is done and waits for their first
// list; it reports false if ctx ended first.
func (s *sources) start(ctx context.Context) bool {
	s.factory.Start(ctx.Done())
	return cache.WaitForCacheSync(ctx.Done(), s.synced...)
}

// stop waits for the informer goroutines (after ctx is done).
func (s *sources) stop() { s.factory.Shutdown() }

// input snapshots the caches for compose.Build. The objects are shared with
// the caches; the compilers are pure and do not modify them.
func (s *sources) input(cfg *Config) (compose.Input, error) {
	in := compose.Input{NodeName: cfg.NodeName, ClusterCIDRs: cfg.ClusterCIDRs, ServiceCIDRs: cfg.ServiceCIDRs, LogDenied: cfg.LogDenied}
	var err error
	all := labels.Everything()
	if in.Pods, err = s.pods.List(all); err != nil {
		return in, fmt.Errorf("list pods: %w", err)
	}
	if in.Namespaces, err = s.ns.List(all); err != nil {
		return in, fmt.Errorf("list namespaces: %w", err)
	}
	if in.NetworkPolicies, err = s.policies.List(all); err != nil {
		return in, fmt.Errorf("list network policies: %w", err)
	}
	if in.Services, err = s.services.List(all); err != nil {
		return in, fmt.Errorf("list services: %w", err)
	}
	if in.Nodes, err = s.nodes.List(all); err != nil {
		return in, fmt.Errorf("list nodes: %w", err)
	}
	if s.cnp != nil {
		in.ClusterNetworkPolicies = s.cnp.list()
	}
	return in, nil
}
