//go:build benchmemory

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// spreadOverNodes puts the cluster's pods on n nodes the way newCluster
// spreads them on clusterNodes, and returns the node names (localNode
// first). With n = clusterNodes nothing changes.
func spreadOverNodes(c *cluster, n int) []string {
	names := make([]string, n)
	for j := range n {
		names[j] = fmt.Sprintf("node-%03d", j)
		if n > 1000 {
			names[j] = fmt.Sprintf("node-%05d", j)
		}
	}
	names[0] = localNode
	if n == clusterNodes {
		return names
	}
	nns := len(c.Namespaces)
	for i, p := range c.Pods {
		p.Spec.NodeName = names[(i+i/nns)%n]
	}
	return names
}

func localPods(c *cluster) int {
	n := 0
	for _, p := range c.Pods {
		if p.Spec.NodeName == localNode {
			n++
		}
	}
	return n
}

// watcher is an informer set like the agent's (the same five kinds, no
// resync) with every response byte and handler call counted: bytes after
// the transport's gzip decoding, and bytes read from its connection (TLS
// records, about what crosses the network).
type watcher struct {
	bytes, events atomic.Int64
	wire          atomic.Int64
	mu            sync.Mutex
	ctype         string
}

type countingTransport struct {
	rt http.RoundTripper
	w  *watcher
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	c.w.mu.Lock()
	if r.URL.Query().Get("watch") == "true" && c.w.ctype == "" {
		c.w.ctype = resp.Header.Get("Content-Type")
	}
	c.w.mu.Unlock()
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.w.bytes}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func startWatcher(ctx context.Context, t *testing.T, cfg *rest.Config) *watcher {
	w := &watcher{}
	cfg = rest.CopyConfig(cfg)
	d := &net.Dialer{}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, in: &w.wire, out: new(atomic.Int64)}, nil
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, w: w} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(cs, 0)
	count := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.events.Add(1) },
		UpdateFunc: func(any, any) { w.events.Add(1) },
		DeleteFunc: func(any) { w.events.Add(1) },
	}
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Pods().Informer(), f.Core().V1().Namespaces().Informer(),
		f.Networking().V1().NetworkPolicies().Informer(), f.Core().V1().Services().Informer(), f.Core().V1().Nodes().Informer()} {
		if _, err := inf.AddEventHandler(count); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("watcher: %v never synced", typ)
		}
	}
	// Handlers are called after the caches fill: wait until the
	// initial list has been handed out, or it would count as churn.
	for last := int64(-1); w.events.Load() != last; {
		last = w.events.Load()
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return w
}

func (w *watcher) contentType() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctype
}

// fill derives the per-event and per-minute figures. The projection is
// for the churn, 100 pod creations and 100 deletions a second
// cluster-wide, at six events a life (see ENVELOPE.md). TestAPILoad
// measures a kubelet-like life instead: 8 events of ~2.8 kB each
// (bench/results/apiload/REPORT.md); the label flips here are smaller.
func (a *apiLoad) fill(w *watcher, writes int, seconds float64) {
	a.ChurnBytes, a.ChurnEvents, a.ChurnWireBytes = w.bytes.Load(), w.events.Load(), w.wire.Load()
	a.ChurnSeconds, a.ChurnWrites = seconds, writes
	if writes > 0 {
		a.PodEventsPerWrite = float64(a.ChurnEvents) / float64(writes)
	}
	if a.ChurnEvents > 0 {
		a.BytesPerEvent = float64(a.ChurnBytes) / float64(a.ChurnEvents)
	}
	const podEventsPerSecond = 100 * 6 // 100 pod lives a second, six events each
	a.ProjectedMBPerMinPerAgent = a.BytesPerEvent * podEventsPerSecond * 60 / (1 << 20)
}
