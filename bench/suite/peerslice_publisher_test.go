//go:build benchmemory

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/controller"
	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

// publisher publishes PeerSlices from the cluster's pods while
// TestPeerSliceLoad measures; run returns once it has stopped writing.
type publisher interface {
	run(ctx context.Context) error
}

// newPublisher makes the publisher the measurement names: "controller"
// (controller.Run, the default), "b37" (the in-test publisher below, which
// stood in for the controller before it was on main) or "controller-bin".
type newPublisher func(t *testing.T, srv *kubetest.Server, opt peerslice.Options, delay time.Duration) publisher

var publishers = map[string]newPublisher{
	"b37": func(t *testing.T, srv *kubetest.Server, opt peerslice.Options, delay time.Duration) publisher {
		cfg := srv.Config(kubetest.Admin)
		cfg.QPS, cfg.Burst = 2000, 4000
		return &testPublisher{cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg), opt: opt, delay: delay}
	},
	// "controller" is the controller itself, in this process, with the
	// client limits `nftguard controller` sets.
	"controller": func(t *testing.T, srv *kubetest.Server, opt peerslice.Options, delay time.Duration) publisher {
		cfg := srv.Config(kubetest.Admin)
		cfg.QPS, cfg.Burst = 200, 400
		cl, err := controller.NewClients(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return publisherFunc(func(ctx context.Context) error {
			err := controller.Run(ctx, controller.Config{Clients: cl, Identity: "b37", BatchDelay: delay, Slices: opt,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if ctx.Err() != nil {
				return nil
			}
			return err
		})
	},
	// "controller-bin" is `nftguard controller` as a process, the binary
	// NFTGUARD_BENCH_PEERSLICE_CONTROLLER_BIN (e.g. built from a branch
	// not yet merged); it sizes slices by peerslice.DefaultOptions only.
	"controller-bin": func(t *testing.T, srv *kubetest.Server, opt peerslice.Options, delay time.Duration) publisher {
		bin := os.Getenv("NFTGUARD_BENCH_PEERSLICE_CONTROLLER_BIN")
		if bin == "" {
			t.Fatal("publisher controller-bin: set NFTGUARD_BENCH_PEERSLICE_CONTROLLER_BIN to an nftguard binary")
		}
		if opt != peerslice.DefaultOptions() {
			t.Fatalf("publisher controller-bin sizes slices by %+v only, not %+v: set NFTGUARD_BENCH_PEERSLICE_SIZES=%d", peerslice.DefaultOptions(), opt, peerslice.DefaultOptions().MaxPeers)
		}
		dir := t.TempDir()
		kc, err := srv.WriteKubeconfig(dir, kubetest.Admin)
		if err != nil {
			t.Fatal(err)
		}
		return &binPublisher{args: []string{bin, "controller", "--kubeconfig", kc, "--identity", "b37", "--batch-delay", delay.String(),
			"--metrics-addr", "0", "--log-format", "json"}, log: filepath.Join(dir, "controller.log")}
	},
}

type publisherFunc func(ctx context.Context) error

func (f publisherFunc) run(ctx context.Context) error { return f(ctx) }

// binPublisher runs a publisher process until its context ends.
type binPublisher struct {
	args []string
	log  string
}

func (b *binPublisher) run(ctx context.Context) error {
	f, err := os.Create(b.log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(b.args[0], b.args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	p, err := childproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("start %v: %w", b.args, err)
	}
	select {
	case <-ctx.Done():
		p.Kill()
		<-p.Done()
		return nil
	case <-p.Done():
		out, _ := os.ReadFile(b.log)
		return fmt.Errorf("%s exited: %v\n%s", b.args[0], p.Err(), out[max(0, len(out)-3000):])
	}
}

// testPublisher does what the controller does, as far as the measurement
// can tell: it watches every Pod once, keeps a record per published pod
// (peerslice.Published, peerslice.FromPod with the port names the
// NetworkPolicies refer to), and when a namespace's records change it
// writes that namespace's peerslice.Plan after a bounded delay, counted
// from the first change and not reset by later ones. It does not watch
// the slices (it keeps what it wrote) nor the policies (read once: the
// measurement does not change them), so it repairs nothing: the
// controller's job, not the measurement's.
type testPublisher struct {
	cs    kubernetes.Interface
	dyn   dynamic.Interface
	opt   peerslice.Options
	delay time.Duration

	mu      sync.Mutex
	refs    map[string]bool
	ready   bool
	records map[string]map[string]peerslice.Peer       // namespace → pod → record
	current map[string]map[string]*peerslice.PeerSlice // namespace → slice name → as last written
	pending map[string]bool                            // namespaces with a flush scheduled
	nsLocks map[string]*sync.Mutex                     // one flush of a namespace at a time
	sem     chan struct{}
	wg      sync.WaitGroup
	ctx     context.Context
	writes  atomic.Int64
	errs    atomic.Int64
}

func (p *testPublisher) run(ctx context.Context) error {
	p.ctx = ctx
	p.records, p.current, p.pending, p.nsLocks = map[string]map[string]peerslice.Peer{}, map[string]map[string]*peerslice.PeerSlice{}, map[string]bool{}, map[string]*sync.Mutex{}
	p.sem = make(chan struct{}, 4)
	nps, err := p.cs.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list NetworkPolicies: %w", err)
	}
	list := make([]*networkingv1.NetworkPolicy, len(nps.Items))
	for i := range nps.Items {
		list[i] = &nps.Items[i]
	}
	p.refs = referencedPorts(list)
	if err := p.relist(ctx, ""); err != nil {
		return err
	}
	f := informers.NewSharedInformerFactory(p.cs, 0)
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.pod(obj) },
		UpdateFunc: func(_, obj any) { p.pod(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.set(pod.Namespace, pod.Name, nil)
			}
		},
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	// The first reconcile: every namespace with records or slices, at
	// once.
	p.mu.Lock()
	p.ready = true
	nss := map[string]bool{}
	for ns := range p.records {
		nss[ns] = true
	}
	for ns := range p.current {
		nss[ns] = true
	}
	for ns := range nss {
		p.schedule(ns, 0)
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.wg.Wait()
	return nil
}

func (p *testPublisher) pod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	rec := podset.FromAPI(pod)
	if !peerslice.Published(rec) {
		p.set(pod.Namespace, pod.Name, nil)
		return
	}
	peer := peerslice.FromPod(rec, func(name string) bool { return p.refs[name] })
	p.set(pod.Namespace, pod.Name, &peer)
}

// set records a pod's record (nil: none) and schedules its namespace's
// flush if the record changed.
func (p *testPublisher) set(ns, name string, peer *peerslice.Peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := p.records[ns][name]
	switch {
	case peer == nil && !had:
		return
	case peer == nil:
		delete(p.records[ns], name)
	case had && old.Equal(peer):
		return
	default:
		if p.records[ns] == nil {
			p.records[ns] = map[string]peerslice.Peer{}
		}
		p.records[ns][name] = *peer
	}
	if p.ready {
		p.schedule(ns, p.delay)
	}
}

// schedule flushes ns after delay unless a flush is already scheduled:
// the delay counts from the first change, later ones join it. p.mu held.
func (p *testPublisher) schedule(ns string, delay time.Duration) {
	if p.pending[ns] || p.ctx.Err() != nil {
		return
	}
	p.pending[ns] = true
	p.wg.Add(1)
	time.AfterFunc(delay, func() {
		defer p.wg.Done()
		p.flush(ns)
	})
}

func (p *testPublisher) flush(ns string) {
	p.mu.Lock()
	l := p.nsLocks[ns]
	if l == nil {
		l = &sync.Mutex{}
		p.nsLocks[ns] = l
	}
	p.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	p.sem <- struct{}{}
	defer func() { <-p.sem }()

	p.mu.Lock()
	p.pending[ns] = false
	desired := make([]peerslice.Peer, 0, len(p.records[ns]))
	for _, r := range p.records[ns] {
		desired = append(desired, r)
	}
	cur := make([]*peerslice.PeerSlice, 0, len(p.current[ns]))
	for _, s := range p.current[ns] {
		cur = append(cur, s)
	}
	p.mu.Unlock()
	for _, ch := range peerslice.Plan(ns, cur, desired, p.opt) {
		if err := p.write(ch); err != nil {
			if p.ctx.Err() != nil {
				return
			}
			// Someone else wrote (a conflict): read the namespace again
			// and plan once more, later.
			p.errs.Add(1)
			if err := p.relist(p.ctx, ns); err == nil {
				p.mu.Lock()
				p.schedule(ns, p.delay)
				p.mu.Unlock()
			}
			return
		}
	}
}

func (p *testPublisher) write(ch peerslice.Change) error {
	ri := p.dyn.Resource(peerslice.GroupVersionResource).Namespace(ch.Slice.Namespace)
	p.writes.Add(1)
	var got *peerslice.PeerSlice
	switch ch.Op {
	case peerslice.Delete:
		rv := ch.Slice.ResourceVersion
		err := ri.Delete(p.ctx, ch.Slice.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete PeerSlice %s/%s: %w", ch.Slice.Namespace, ch.Slice.Name, err)
		}
		p.mu.Lock()
		delete(p.current[ch.Slice.Namespace], ch.Slice.Name)
		p.mu.Unlock()
		return nil
	case peerslice.Create, peerslice.Update:
		u, err := peerslice.ToUnstructured(ch.Slice)
		if err != nil {
			return err
		}
		if ch.Op == peerslice.Create {
			u, err = ri.Create(p.ctx, u, metav1.CreateOptions{})
		} else {
			u, err = ri.Update(p.ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("%s PeerSlice in %s: %w", ch.Op, ch.Slice.Namespace, err)
		}
		if got, err = peerslice.FromUnstructured(u); err != nil {
			return err
		}
	default:
		return errors.New("unknown change")
	}
	p.mu.Lock()
	if p.current[got.Namespace] == nil {
		p.current[got.Namespace] = map[string]*peerslice.PeerSlice{}
	}
	p.current[got.Namespace][got.Name] = got
	p.mu.Unlock()
	return nil
}

// relist reads the slices of ns ("" for all) into current.
func (p *testPublisher) relist(ctx context.Context, ns string) error {
	l, err := p.dyn.Resource(peerslice.GroupVersionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list PeerSlices: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ns == "" {
		p.current = map[string]map[string]*peerslice.PeerSlice{}
	} else {
		p.current[ns] = map[string]*peerslice.PeerSlice{}
	}
	for i := range l.Items {
		s, err := peerslice.FromUnstructured(&l.Items[i])
		if err != nil {
			return err
		}
		if p.current[s.Namespace] == nil {
			p.current[s.Namespace] = map[string]*peerslice.PeerSlice{}
		}
		p.current[s.Namespace][s.Name] = s
	}
	return nil
}
