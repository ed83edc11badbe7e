package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// sources are the informer caches the table is compiled from.
type sources struct {
	factory informers.SharedInformerFactory
	synced  []cache.InformerSynced
	// pods holds podset records (the transform makes them), not API
	// objects: client-go's typed pod lister cannot read it. In slices
	// mode it holds this node's pods only.
	pods cache.Indexer
	// slices holds the PeerSlices' records of other nodes' pods
	// (remoteSlice) in slices mode; nil in pods mode.
	slices   cache.Indexer
	polIdx   cache.Indexer // the NetworkPolicy informer's store
	ns       corelisters.NamespaceLister
	policies networkinglisters.NetworkPolicyLister
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	// cnp follows the ClusterNetworkPolicy CRD; nil lists none.
	cnp *cnpSource
	// serviceCIDRs follows ServiceCIDR objects; nil adds no range.
	serviceCIDRs *serviceCIDRSource

	// What the last input read, and what changed since: the namespaces
	// whose pods changed and the other kinds with a change. An input
	// costs what the events touched, not the cluster: an unchanged list
	// is passed again as the same list, which the compilers take as
	// unchanged without looking at its objects (see compose.Builder).
	mu            sync.Mutex
	podSet        *podset.Set
	dirtyNS       map[string]bool
	dirtyKinds    map[string]bool
	dirtyPolicyNS map[string]bool
	policySet     *npset.Set // the last input's NetworkPolicies
	stripper      *stripper  // the informers' transform, swept by input
	// sliceInf is the PeerSlice informer (not the factory's), run on
	// sliceWG; nil in pods mode.
	sliceInf       cache.SharedIndexInformer
	sliceWG        sync.WaitGroup
	lastNamespaces cachedList[*corev1.Namespace]
	lastServices   cachedList[*corev1.Service]
	lastNodes      cachedList[*corev1.Node]
}

// cachedList is the last list of one kind read from its cache.
type cachedList[T any] struct {
	list []T
	read bool
}

// get returns the cached list, or reads it again when the kind changed
// since (or it was never read).
func (c *cachedList[T]) get(changed bool, list func(labels.Selector) ([]T, error)) ([]T, error) {
	if c.read && !changed {
		return c.list, nil
	}
	l, err := list(labels.Everything())
	if err != nil {
		return nil, err
	}
	c.list, c.read = l, true
	return l, nil
}

// newSources sets up the informers; onChange is called (from informer
// goroutines) for every add, delete, and update that changes a stripped
// object, with the object's kind and whether it is part of the initial
// list. With PeerSourceSlices, the pod informer watches node's pods only
// and dyn watches the PeerSlices (see peers.go).
func newSources(client kubernetes.Interface, dyn dynamic.Interface, peers PeerSource, node string, m *metrics, onChange func(kind string, initial bool)) (*sources, error) {
	// No informer resync: the agent's own periodic resync recompiles from
	// the caches, and replaying every object through handlers would only
	// mark the state dirty again.
	strip := newStripper()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(strip.strip))
	s := &sources{factory: f, stripper: strip, dirtyNS: map[string]bool{}, dirtyKinds: map[string]bool{}, dirtyPolicyNS: map[string]bool{}}
	add := func(resource, kind string, inf cache.SharedIndexInformer, touched func(obj any)) error {
		count := m.informerEvents.WithLabelValues(resource)
		changed := func(initial bool) { count.Inc(); onChange(kind, initial) }
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) { touched(obj); changed(initial) },
			UpdateFunc: func(old, new any) {
				if !sameContent(old, new) {
					touched(old)
					touched(new)
					changed(false)
				}
			},
			DeleteFunc: func(obj any) { touched(obj); changed(false) },
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", resource, err)
		}
		s.synced = append(s.synced, inf.HasSynced)
		return nil
	}
	if peers == PeerSourceSlices {
		// Registered first, so that Pods() (deniedflow's index among
		// others) returns this informer; the factory sets the transform.
		sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
		f.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredPodInformer(c, metav1.NamespaceAll, resync,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
				func(o *metav1.ListOptions) { o.FieldSelector = sel })
		})
	}
	pods := f.Core().V1().Pods()
	ns := f.Core().V1().Namespaces()
	pol := f.Networking().V1().NetworkPolicies()
	svc := f.Core().V1().Services()
	nodes := f.Core().V1().Nodes()
	kindTouched := func(kind string) func(any) {
		return func(any) { s.kindTouched(kind) }
	}
	for _, r := range []struct {
		name, kind string
		inf        cache.SharedIndexInformer
		touched    func(any)
	}{
		{"pods", "Pod", pods.Informer(), s.podTouched}, {"namespaces", "Namespace", ns.Informer(), kindTouched("Namespace")},
		{"networkpolicies", "NetworkPolicy", pol.Informer(), s.policyTouched},
		{"services", "Service", svc.Informer(), kindTouched("Service")}, {"nodes", "Node", nodes.Informer(), kindTouched("Node")},
	} {
		if err := add(r.name, r.kind, r.inf, r.touched); err != nil {
			return nil, err
		}
	}
	if peers == PeerSourceSlices {
		inf, err := newSliceInformer(dyn, strip, node)
		if err != nil {
			return nil, err
		}
		if err := add("peerslices", peerSliceKind, inf, s.podTouched); err != nil {
			return nil, err
		}
		s.slices, s.sliceInf = inf.GetIndexer(), inf
	}
	s.pods, s.ns, s.policies, s.services, s.nodes = pods.Informer().GetIndexer(), ns.Lister(), pol.Lister(), svc.Lister(), nodes.Lister()
	s.polIdx = pol.Informer().GetIndexer()
	return s, nil
}

// kindTouched notes that an object of kind (not Pod) changed.
func (s *sources) kindTouched(kind string) {
	s.mu.Lock()
	s.dirtyKinds[kind] = true
	s.mu.Unlock()
}

// policyTouched notes the namespace of a NetworkPolicy that changed.
func (s *sources) policyTouched(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		s.mu.Lock()
		s.dirtyPolicyNS[np.Namespace] = true
		s.mu.Unlock()
	}
}

// podTouched notes the namespace of a pod, or a PeerSlice, that changed. The informer has
// already stored the change when it calls a handler, so the next input
// reads it.
func (s *sources) podTouched(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var ns string
	switch o := obj.(type) {
	case *podset.Pod:
		ns = o.Namespace
	case *remoteSlice:
		ns = o.Namespace
	default:
		return
	}
	s.mu.Lock()
	s.dirtyNS[ns] = true
	s.mu.Unlock()
}

// start runs the informers until ctx is done and waits for their first
// list; it reports false if ctx ended first.
func (s *sources) start(ctx context.Context) bool {
	s.factory.Start(ctx.Done())
	if s.sliceInf != nil {
		s.sliceWG.Go(func() { s.sliceInf.RunWithContext(ctx) })
	}
	return cache.WaitForCacheSync(ctx.Done(), s.synced...)
}

// stop waits for the informer goroutines (after ctx is done).
func (s *sources) stop() {
	s.factory.Shutdown()
	s.sliceWG.Wait()
}

// input snapshots the caches for compose.Build. The objects are shared with
// the caches; the compilers are pure and do not modify them.
func (s *sources) input(cfg *Config) (compose.Input, error) {
	in := compose.Input{NodeName: cfg.NodeName, ClusterCIDRs: cfg.ClusterCIDRs, ServiceCIDRs: cfg.ServiceCIDRs, LogDenied: cfg.LogDenied}
	if cfg.Budget != (budget.Limits{}) {
		in.Budget = &cfg.Budget
	}
	in.Pods = s.podInput()
	if s.stripper != nil && s.stripper.needsSweep() {
		cached := s.pods.List()
		if s.slices != nil {
			cached = append(cached, s.slices.List()...)
		}
		s.stripper.sweep(cached)
	}
	// The changes are taken before the caches are read: a change that
	// lands in between is read now and marks its kind again, which costs
	// one more read, never a lost change.
	s.mu.Lock()
	dirty := s.dirtyKinds
	s.dirtyKinds = map[string]bool{}
	s.mu.Unlock()
	var err error
	if in.Namespaces, err = s.lastNamespaces.get(dirty["Namespace"], s.ns.List); err != nil {
		return in, fmt.Errorf("list namespaces: %w", err)
	}
	if in.NetworkPolicies, err = s.policyInput(); err != nil {
		return in, fmt.Errorf("list network policies: %w", err)
	}
	if in.Services, err = s.lastServices.get(dirty["Service"], s.services.List); err != nil {
		return in, fmt.Errorf("list services: %w", err)
	}
	if in.Nodes, err = s.lastNodes.get(dirty["Node"], s.nodes.List); err != nil {
		return in, fmt.Errorf("list nodes: %w", err)
	}
	if s.cnp != nil {
		in.ClusterNetworkPolicies = s.cnp.list()
	}
	if learned := s.serviceCIDRs.ranges(); len(learned) > 0 {
		in.ServiceCIDRs = append(slices.Clip(cfg.ServiceCIDRs), learned...)
	}
	return in, nil
}

// podInput is the pod cache as a Set: the last one with the namespaces
// that changed since read again. The first reads every pod. Only the sync
// loop calls it; the lock guards what the handlers write.
func (s *sources) podInput() *podset.Set {
	s.mu.Lock()
	dirty := s.dirtyNS
	s.dirtyNS = map[string]bool{}
	s.mu.Unlock()
	if s.podSet == nil {
		s.podSet = podset.NewSet(s.allPods())
		return s.podSet
	}
	if len(dirty) == 0 {
		return s.podSet
	}
	byNS := make(map[string][]*podset.Pod, len(dirty))
	for ns := range dirty {
		local, err := s.pods.ByIndex(cache.NamespaceIndex, ns)
		var remote []any
		if err == nil && s.slices != nil {
			remote, err = s.slices.ByIndex(cache.NamespaceIndex, ns)
		}
		if err != nil {
			// The namespace index is the informers' own; without it
			// the whole cache is read.
			s.podSet = podset.NewSet(s.allPods())
			return s.podSet
		}
		byNS[ns] = mergePods(local, remote)
	}
	s.podSet = s.podSet.Replace(byNS)
	return s.podSet
}

// allPods are every cached pod and record (mergePods).
func (s *sources) allPods() []*podset.Pod {
	var remote []any
	if s.slices != nil {
		remote = s.slices.List()
	}
	return mergePods(s.pods.List(), remote)
}

// sortedPods are the records among objs by namespace and name: the cache
// hands them out in map order, and the compilers' output must not depend
// on it.
func sortedPods(objs []any) []*podset.Pod {
	out := make([]*podset.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*podset.Pod); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *podset.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// pod is the cached record of a pod, or nil.
func (s *sources) pod(namespace, name string) *podset.Pod {
	o, ok, err := s.pods.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := o.(*podset.Pod)
	return p
}

// policyInput is the NetworkPolicy cache grouped by namespace, each
// namespace's sorted by name: the namespaces with a change since the last
// input are read again through the informer's namespace index, the others
// keep their Group, so the policy compiler reads only what changed. Only
// the sync loop calls it.
func (s *sources) policyInput() (*npset.Set, error) {
	s.mu.Lock()
	dirty := s.dirtyPolicyNS
	s.dirtyPolicyNS = map[string]bool{}
	s.mu.Unlock()
	if s.policySet == nil {
		objs, err := s.policies.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		byNS := map[string][]*networkingv1.NetworkPolicy{}
		for _, np := range objs {
			byNS[np.Namespace] = append(byNS[np.Namespace], np)
		}
		for _, l := range byNS {
			sortPolicies(l)
		}
		s.policySet = (*npset.Set)(nil).Replace(byNS)
		return s.policySet, nil
	}
	if len(dirty) == 0 {
		return s.policySet, nil
	}
	byNS := make(map[string][]*networkingv1.NetworkPolicy, len(dirty))
	for ns := range dirty {
		objs, err := s.polIdx.ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			return nil, err
		}
		l := make([]*networkingv1.NetworkPolicy, 0, len(objs))
		for _, o := range objs {
			if np, ok := o.(*networkingv1.NetworkPolicy); ok {
				l = append(l, np)
			}
		}
		sortPolicies(l)
		byNS[ns] = l
	}
	s.policySet = s.policySet.Replace(byNS)
	return s.policySet, nil
}

func sortPolicies(l []*networkingv1.NetworkPolicy) {
	slices.SortFunc(l, func(a, b *networkingv1.NetworkPolicy) int { return cmp.Compare(a.Name, b.Name) })
}
