package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

// The informers' caches hold these instead of the API objects: a Pod is
// reduced to its record's sources as it arrives, a policy to the port
// names it refers to, so the controller's memory is its records'.
type podObj struct {
	metav1.ObjectMeta
	pod *podset.Pod
}

type policyObj struct {
	metav1.ObjectMeta
	names []string
}

// keep is the part of an object's metadata the caches need.
func keep(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}

// transform is the informers' transform (cache.TransformFunc).
func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &podObj{ObjectMeta: keep(&o.ObjectMeta), pod: podset.FromAPI(o)}, nil
	case *networkingv1.NetworkPolicy:
		return &policyObj{ObjectMeta: keep(&o.ObjectMeta), names: npPortNames(o)}, nil
	case *cnpv1beta1.ClusterNetworkPolicy:
		return &policyObj{ObjectMeta: keep(&o.ObjectMeta), names: cnpPortNames(o)}, nil
	case *cnpv1alpha2.ClusterNetworkPolicy:
		b, err := manifest.CNPFromV1alpha2(o)
		if err != nil {
			return nil, err
		}
		return &policyObj{ObjectMeta: keep(&b.ObjectMeta), names: cnpPortNames(b)}, nil
	case *unstructured.Unstructured:
		s, err := peerslice.FromUnstructured(o)
		if err != nil {
			return nil, err
		}
		// Every write sends them back; nothing here reads them.
		s.ManagedFields = nil
		return s, nil
	}
	return obj, nil
}

// unwrap returns a deleted object from a tombstone.
func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (c *controller) startInformers(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(c.cfg.Kube, 0, informers.WithTransform(transform))
	c.pods = f.Core().V1().Pods().Informer()
	c.policies = f.Networking().V1().NetworkPolicies().Informer()
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.cfg.Dynamic, 0, metav1.NamespaceAll, nil)
	c.slices = df.ForResource(peerslice.GroupVersionResource).Informer()
	if err := c.slices.SetTransform(transform); err != nil {
		return fmt.Errorf("PeerSlice informer: %w", err)
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{c.pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.onPod(o, false) },
			UpdateFunc: func(_, o any) { c.onPod(o, false) },
			DeleteFunc: func(o any) { c.onPod(o, true) },
		}},
		{c.policies, policyHandler(c, "NetworkPolicy")},
		{c.slices, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.onSlice(o, false) },
			UpdateFunc: func(_, o any) { c.onSlice(o, false) },
			DeleteFunc: func(o any) { c.onSlice(o, true) },
		}},
	}
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			return fmt.Errorf("informer handler: %w", err)
		}
		c.handlers = append(c.handlers, reg)
	}
	_ = c.slices.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		switch {
		case apierrors.IsNotFound(err):
			// Not retried quietly: without slices no leader can
			// ever finish its first reconcile.
			c.log.Error("PeerSlices are not served: install deploy/crd.yaml", "err", err)
		case apierrors.IsForbidden(err):
			c.log.Error("cannot list or watch PeerSlices: does the controller's ClusterRole grant them (deploy/controller.yaml)?", "err", err)
		default:
			cache.DefaultWatchErrorHandler(ctx, r, err)
		}
	})
	f.Start(ctx.Done())
	df.Start(ctx.Done())
	c.cnp = &cnpWatch{c: c}
	go c.cnp.run(ctx)
	go func() {
		<-ctx.Done()
		f.Shutdown()
		df.Shutdown()
	}()
	return nil
}

func policyHandler(c *controller, kind string) cache.ResourceEventHandler {
	on := func(o any, deleted bool) {
		p, ok := unwrap(o).(*policyObj)
		if !ok {
			return
		}
		var names []string
		if !deleted {
			names = p.names
		}
		c.onPolicy(policyKey(kind, p.Namespace, p.Name), names)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { on(o, false) },
		UpdateFunc: func(_, o any) { on(o, false) },
		DeleteFunc: func(o any) { on(o, true) },
	}
}

// synced tells whether every handler has seen a complete list: a leader
// plans nothing before, or it would delete the records of pods not yet
// listed. The handlers' registrations, not the informers: an informer has
// synced once its cache holds the list, while its handlers may still be
// working through the list's notifications (seen at 20,000 pods: a first
// plan made from part of them).
func (c *controller) synced() bool {
	for _, r := range c.handlers {
		if !r.HasSynced() {
			return false
		}
	}
	return c.cnp.synced()
}

func (c *controller) onPod(o any, deleted bool) {
	p, ok := unwrap(o).(*podObj)
	if !ok {
		return
	}
	pod := p.pod
	if deleted {
		pod = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.setPod(p.Namespace, p.Name, pod) {
		c.m.records.Set(float64(c.st.nrecords))
		c.markLocked(p.Namespace)
	}
}

func (c *controller) onPolicy(key string, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ns := range c.st.setPolicy(key, names) {
		c.markLocked(ns)
	}
	c.m.portNames.Set(float64(len(c.st.refCount)))
}

func (c *controller) onSlice(o any, deleted bool) {
	s, ok := unwrap(o).(*peerslice.PeerSlice)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ov.observe(s.Namespace, s.Name, s.ResourceVersion, deleted) == foreign {
		// A hand edit or delete, or another writer: the next plan
		// repairs it (and writes nothing if it is right).
		c.markLocked(s.Namespace)
	}
}

// markLocked dirties a namespace; only the leader flushes. The caller
// holds mu.
func (c *controller) markLocked(ns string) {
	if !c.leading {
		return
	}
	if c.batch.mark(ns, c.clk.Now()) {
		c.m.dirty.Set(float64(c.batch.pending()))
		c.poke()
	}
}

func (c *controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// cachedSlices are a namespace's slices in the informer's cache.
func (c *controller) cachedSlices(ns string) []*peerslice.PeerSlice {
	objs, _ := c.slices.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	out := make([]*peerslice.PeerSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*peerslice.PeerSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

// sliceNamespaces are the namespaces that have slices in the cache.
func (c *controller) sliceNamespaces() []string {
	var out []string
	for _, o := range c.slices.GetStore().List() {
		if s, ok := o.(*peerslice.PeerSlice); ok {
			out = append(out, s.Namespace)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
