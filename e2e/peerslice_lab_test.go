package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

// The controller that publishes PeerSlices is not part of these tests: the
// lab's publisher stands in for it. It does what the contract says the
// controller does, as simply as possible: on every Pod change it plans
// every namespace's slices from the Pods in the API server
// (peerslice.Plan, with every named port referenced) and writes the plan
// through the dynamic client; it holds the Lease kube-system/
// nftguard-controller, renews it every second, and annotates it once its
// first full publish is done.

// peerLease is the Lease the agents read (their default --controller-lease).
var peerLease = struct{ ns, name string }{"kube-system", "nftguard-controller"}

// peerLeaseSeconds is the Lease's duration: stale 3s after the last renewal.
const peerLeaseSeconds = 3

// installPeerSliceCRD installs peerslice.CRD() and waits until the API
// server serves PeerSlices.
func installPeerSliceCRD(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	if _, err := kubetest.Apply(ctx, cfg, peerslice.CRD(), false); err != nil {
		t.Fatalf("install the PeerSlice CRD: %v", err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	gv := peerslice.GroupVersionResource.GroupVersion().String()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := dc.ServerResourcesForGroupVersion(gv); err != nil {
			return false, nil
		}
		_, err := dyn.Resource(peerslice.GroupVersionResource).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("PeerSlices not served: %v", err)
	}
}

// peerPublisher is the lab's stand-in for nftguard's controller.
type peerPublisher struct {
	admin kubernetes.Interface
	dyn   dynamic.Interface
	kick  chan struct{}
	stop  context.CancelFunc
	done  sync.WaitGroup

	mu       sync.Mutex
	renewing bool
	err      error // the last reconcile's
	writes   int   // slice writes made
}

// startPeerPublisher publishes until the test ends and waits for its
// first full publish (the Lease annotated).
func startPeerPublisher(t *testing.T, cfg *rest.Config) *peerPublisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &peerPublisher{admin: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg),
		kick: make(chan struct{}, 1), stop: cancel, renewing: true}
	t.Cleanup(func() { cancel(); p.done.Wait() })
	f := informers.NewSharedInformerFactory(p.admin, 0)
	kick := func(any) {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: kick, DeleteFunc: kick, UpdateFunc: func(_, n any) { kick(n) },
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	p.done.Go(func() { f.Shutdown() })
	p.done.Go(func() { p.run(ctx) })
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := p.admin.CoordinationV1().Leases(peerLease.ns).Get(ctx, peerLease.name, metav1.GetOptions{})
		return err == nil && l.Annotations["nftguard.io/peers-published"] != "", nil
	})
	if err != nil {
		t.Fatalf("the lab's publisher did not publish: %v (last error %v)", err, p.lastErr())
	}
	return p
}

func (p *peerPublisher) lastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// setRenewing stops (false) or resumes renewing the Lease, as a controller
// that is down or back would.
func (p *peerPublisher) setRenewing(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.renewing = on
}

// run reconciles on every Pod change and renews the Lease every second.
func (p *peerPublisher) run(ctx context.Context) {
	renew := time.NewTicker(time.Second)
	defer renew.Stop()
	for {
		p.mu.Lock()
		renewing := p.renewing
		p.mu.Unlock()
		if renewing {
			// Annotated after a full reconcile, which every
			// successful reconcile here is.
			err := p.reconcile(ctx)
			if err == nil {
				err = p.renewLease(ctx, true)
			}
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-renew.C:
		}
	}
}

// renewLease creates or renews the Lease, annotated as published.
func (p *peerPublisher) renewLease(ctx context.Context, published bool) error {
	leases := p.admin.CoordinationV1().Leases(peerLease.ns)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, peerLease.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: peerLease.ns, Name: peerLease.name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a37-lab-publisher"), LeaseDurationSeconds: ptr[int32](peerLeaseSeconds),
				AcquireTime: &now, RenewTime: &now}}
		if published {
			l.Annotations = map[string]string{"nftguard.io/peers-published": "a37-lab-publisher"}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	// Taken over as a new leader would: its identity and duration.
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr("a37-lab-publisher"), ptr[int32](peerLeaseSeconds)
	l.Spec.RenewTime = &now
	if published {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations["nftguard.io/peers-published"] = "a37-lab-publisher"
	}
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// reconcile makes every namespace's slices hold its pods' records.
func (p *peerPublisher) reconcile(ctx context.Context) error {
	pods, err := p.admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	desired := map[string][]peerslice.Peer{}
	for i := range pods.Items {
		rec := podset.FromAPI(&pods.Items[i])
		if peerslice.Published(rec) {
			desired[rec.Namespace] = append(desired[rec.Namespace], peerslice.FromPod(rec, func(string) bool { return true }))
		}
	}
	res := p.dyn.Resource(peerslice.GroupVersionResource)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	current := map[string][]*peerslice.PeerSlice{}
	for i := range list.Items {
		s, err := peerslice.FromUnstructured(&list.Items[i])
		if err != nil {
			return err
		}
		current[s.Namespace] = append(current[s.Namespace], s)
	}
	nss := map[string]bool{}
	for ns := range desired {
		nss[ns] = true
	}
	for ns := range current {
		nss[ns] = true
	}
	for ns := range nss {
		for _, c := range peerslice.Plan(ns, current[ns], desired[ns], peerslice.DefaultOptions()) {
			u, err := peerslice.ToUnstructured(c.Slice)
			if err != nil {
				return err
			}
			switch c.Op {
			case peerslice.Create:
				_, err = res.Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
			case peerslice.Update:
				_, err = res.Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
			case peerslice.Delete:
				err = res.Namespace(ns).Delete(ctx, c.Slice.Name, metav1.DeleteOptions{})
			}
			if err != nil {
				return fmt.Errorf("%v slice %s/%s: %w", c.Op, ns, c.Slice.Name, err)
			}
			p.mu.Lock()
			p.writes++
			p.mu.Unlock()
		}
	}
	return nil
}

// labPeerSource is the lab's --peer-source: the option, else the env
// NFTGUARD_E2E_PEER_SOURCE.
func labPeerSource(opt string) string {
	if opt != "" {
		return opt
	}
	return os.Getenv("NFTGUARD_E2E_PEER_SOURCE")
}

// setPeerSource prepares the lab for the agents' peer source (see
// agentLabOptions.peerSource).
func (a *agentLab) setPeerSource(t *testing.T, source string) {
	t.Helper()
	switch source = labPeerSource(source); source {
	case "":
		return
	case "slices":
		cfg := a.srv.Config(kubetest.Admin)
		installPeerSliceCRD(context.Background(), t, cfg)
		a.peers = startPeerPublisher(t, cfg)
		// Quick to notice a Lease that is not renewed.
		a.args = append(a.args, "--controller-lease-check", "200ms")
	}
	a.args = append(a.args, "--peer-source", source)
}
