//go:build benchmemory

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/podset"
)

// TestAPILoad measures what one agent-like informer set costs the API
// server and the network (the envelope's design answer, measured): the
// initial sync streamed through a watch (watch-list, client-go's default)
// against a LIST (the feature off), alternated, and a pod-lifecycle churn
// whose every pod event is compared with what the agent keeps of it.
//
// On demand only: behind the benchmemory build tag and
// NFTGUARD_BENCH_APILOAD (the number of pods), e.g.
//
//	NFTGUARD_KERNEL_TESTS=1 NFTGUARD_BENCH_APILOAD=10000 \
//	  go test -tags benchmemory -run '^TestAPILoad$' -v -timeout 60m .
func TestAPILoad(t *testing.T) {
	pods, _ := strconv.Atoi(os.Getenv("NFTGUARD_BENCH_APILOAD"))
	if pods <= 0 {
		t.Skip("on demand: set NFTGUARD_BENCH_APILOAD to a number of pods")
	}
	reps, lives := 3, 100
	if v, err := strconv.Atoi(os.Getenv("NFTGUARD_BENCH_APILOAD_REPS")); err == nil && v > 0 {
		reps = v
	}
	if v, err := strconv.Atoi(os.Getenv("NFTGUARD_BENCH_APILOAD_LIVES")); err == nil && v > 0 {
		lives = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The reflector reads client-go's WatchListClient gate when it is
	// built; this gate answers from a switch the test flips between
	// informer sets, never while one is starting.
	gate := &watchListGate{prev: features.FeatureGates()}
	features.ReplaceFeatureGates(gate)

	sz := size{Pods: pods, Policies: pods / 15}
	c := newCluster(sz)
	nodeNames := spreadOverNodes(c, max(pods/30, 1))
	srv := kubetest.Start(t, kubetest.Options{})
	cfg := srv.Config(kubetest.Admin)
	cfg.QPS, cfg.Burst = 2000, 4000
	admin := kubernetes.NewForConfigOrDie(cfg)
	start := time.Now()
	if err := createCluster(ctx, t, admin, c, nodeNames); err != nil {
		t.Fatal(err)
	}
	res := apiLoadRun{Pods: len(c.Pods), Policies: len(c.Policies), Nodes: len(nodeNames), Namespaces: len(c.Namespaces),
		CreateSeconds: time.Since(start).Seconds(), Started: time.Now().UTC().Format(time.RFC3339)}
	api, err := apiServerPID(srv.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d pods, %d policies, %d nodes in %.0f s; kube-apiserver is pid %d", res.Pods, res.Policies, res.Nodes, res.CreateSeconds, api)
	time.Sleep(5 * time.Second) // the writes' aftermath (compaction, watch cache) settles
	res.IdleAPIServerCPUPerSecond = idleCPU(t, api, 5*time.Second)

	// 1 + 2: the initial sync, both ways, alternated.
	for rep := range reps {
		// Neither way always runs first, on a warmer server.
		modes := []string{modeWatchList, modeList, modePaged}
		for range rep {
			modes = append(modes[1:], modes[0])
		}
		for _, mode := range modes {
			s := measureSync(ctx, t, srv, api, gate, mode)
			s.Rep = rep
			s.Load = loadAvg()
			t.Logf("sync %s rep %d: %+v", s.Mode, rep, s)
			res.Syncs = append(res.Syncs, s)
			runtime.GC()
			time.Sleep(2 * time.Second)
		}
	}

	// 3: the pod lifecycle, seen by two agent-like watchers at once:
	// one started with watch-list (its pod watch is the stream that
	// carried the initial state, which the API server compresses) and one
	// started with a LIST (its watches are plain watches, which it does
	// not: what every watcher has after its first re-watch, 5–10 minutes
	// in).
	type churnWatcher struct {
		w             *apiWatcher
		rec           *eventRecorder
		wireIn0, dec0 int64
	}
	var cws []churnWatcher
	for _, wl := range []bool{true, false} {
		gate.watchList.Store(wl)
		cw := churnWatcher{w: newAPIWatcher(ctx, t, srv), rec: &eventRecorder{}}
		cw.w.podHandler = cw.rec
		cw.w.start(t)
		cws = append(cws, cw)
	}
	time.Sleep(2 * time.Second) // the initial events are handed out
	cpu0 := procCPU(t, api)
	for i := range cws {
		cw := &cws[i]
		cw.wireIn0, cw.dec0 = cw.w.wireIn.Load(), cw.w.decoded()
		cw.rec.on.Store(true)
	}
	start = time.Now()
	writes, err := podLives(ctx, admin, c, nodeNames, lives)
	if err != nil {
		t.Fatal(err)
	}
	seconds := time.Since(start).Seconds()
	time.Sleep(3 * time.Second) // the last watch events arrive
	res.ChurnAPIServerCPUSeconds = procCPU(t, api) - cpu0
	for i, cw := range cws {
		cw.rec.on.Store(false)
		ch := churnResult{Mode: "watch-list stream", Lives: lives, Writes: writes, Seconds: seconds, Load: loadAvg()}
		if i == 1 {
			ch.Mode = "plain watch (after a LIST)"
		}
		ch.WireInBytes, ch.DecodedBytes = cw.w.wireIn.Load()-cw.wireIn0, cw.w.decoded()-cw.dec0
		cw.w.mu.Lock()
		ch.Requests, ch.Gzipped = maps.Clone(cw.w.requests), maps.Clone(cw.w.gzipped)
		cw.w.mu.Unlock()
		cw.rec.fill(&ch)
		cw.w.stop()
		res.Churn = append(res.Churn, ch)
	}

	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("NFTGUARD_BENCH_APILOAD_OUT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "apiload.json")
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("result (%s):\n%s", out, b)
	res.report(t)
}

// apiLoadRun is everything TestAPILoad measured, written as JSON.
type apiLoadRun struct {
	Started                           string
	Pods, Policies, Nodes, Namespaces int
	CreateSeconds                     float64
	IdleAPIServerCPUPerSecond         float64 // the API server's own background work, to subtract
	Syncs                             []syncResult
	Churn                             []churnResult // the same churn, seen by two watchers
	ChurnAPIServerCPUSeconds          float64       // both watchers' streams together
}

// syncResult is one initial sync of the five informers.
type syncResult struct {
	Mode                string // "watch-list" or "list"
	Rep                 int
	Objects             int     // in the caches at HasSynced
	Seconds             float64 // start to HasSynced of all five
	WireInBytes         int64   // read from the TCP connection (TLS records)
	WireOutBytes        int64
	DecodedBytes        int64 // response bodies after gzip decoding
	Requests            map[string]int
	Gzipped             map[string]int // responses the transport decompressed, by class
	APIServerCPUSeconds float64        // utime + stime delta of kube-apiserver
	ClientCPUSeconds    float64        // this process, decode included
	Load                string
}

// churnResult is the pod lifecycle as one agent-like watcher saw it.
type churnResult struct {
	Mode                    string
	Lives, Writes           int
	Requests, Gzipped       map[string]int // by request class, since the watcher started
	Seconds                 float64
	WireInBytes             int64
	DecodedBytes            int64 // all five watch streams' bodies
	PodEvents               int
	PodEventBytes           int64          // the objects' protobuf size (Pod.Size)
	NoChangeEvents          int            // events after which the agent's record is what it was
	NoChangeBytes           int64          // their Pod.Size
	NeededBytes             int64          // a compact record per changing event, a key per delete
	ByKind                  map[string]int // add, update, delete
	ChangedFields           map[string]int // per record field, events that changed it
	StepEvents              map[string]int // events per lifecycle step (by the write that caused them)
	RecordCompactBytesMean  float64        // the record the agent keeps, compactLen, at Running
	PodObjectBytesAtRunning float64        // Pod.Size of the same pods at Running+Ready
	Load                    string
}

type watchListGate struct {
	prev      features.Gates
	watchList atomic.Bool
}

func (g *watchListGate) Enabled(f features.Feature) bool {
	if f == features.WatchListClient {
		return g.watchList.Load()
	}
	return g.prev.Enabled(f)
}

// apiWatcher is an informer set like the agent's (pods, namespaces,
// networkpolicies, services, nodes; no resync) on its own connection,
// counted on the wire (a net.Conn under TLS) and after the transport's
// gzip decoding (response bodies), per kind of request.
type apiWatcher struct {
	ctx             context.Context
	cancel          context.CancelFunc
	cs              *kubernetes.Clientset
	f               informers.SharedInformerFactory
	infs            []cache.SharedIndexInformer
	wireIn, wireOut atomic.Int64
	mu              sync.Mutex
	bodies          map[string]*atomic.Int64 // by request class
	requests        map[string]int
	gzipped         map[string]int // responses the transport decompressed, by class
	podHandler      cache.ResourceEventHandler
}

func newAPIWatcher(ctx context.Context, t *testing.T, srv *kubetest.Server) *apiWatcher {
	w := &apiWatcher{bodies: map[string]*atomic.Int64{}, requests: map[string]int{}, gzipped: map[string]int{}}
	w.ctx, w.cancel = context.WithCancel(ctx)
	cfg := srv.Config(kubetest.Admin)
	// A dialer of its own also keeps client-go from sharing the
	// transport (and its connection) with any other client.
	d := &net.Dialer{}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, in: &w.wireIn, out: &w.wireOut}, nil
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return classTransport{rt: rt, w: w} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.cs, w.f = cs, informers.NewSharedInformerFactory(cs, 0)
	w.infs = []cache.SharedIndexInformer{w.f.Core().V1().Pods().Informer(), w.f.Core().V1().Namespaces().Informer(),
		w.f.Networking().V1().NetworkPolicies().Informer(), w.f.Core().V1().Services().Informer(), w.f.Core().V1().Nodes().Informer()}
	return w
}

func (w *apiWatcher) start(t *testing.T) {
	if w.podHandler != nil {
		if _, err := w.infs[0].AddEventHandler(w.podHandler); err != nil {
			t.Fatal(err)
		}
	}
	w.f.Start(w.ctx.Done())
	for typ, ok := range w.f.WaitForCacheSync(w.ctx.Done()) {
		if !ok {
			t.Fatalf("watcher: %v never synced", typ)
		}
	}
}

func (w *apiWatcher) stop() {
	w.cancel()
	w.f.Shutdown()
}

func (w *apiWatcher) objects() int {
	n := 0
	for _, inf := range w.infs {
		n += len(inf.GetStore().ListKeys())
	}
	return n
}

func (w *apiWatcher) decoded() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, b := range w.bodies {
		n += b.Load()
	}
	return n
}

// classTransport counts requests and response bodies by class: "list",
// "watch" or "watch-list" (a watch asked for the initial state).
type classTransport struct {
	rt http.RoundTripper
	w  *apiWatcher
}

func (c classTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	q := r.URL.Query()
	class := "list"
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		class = "watch-list"
	case q.Get("watch") == "true":
		class = "watch"
	}
	c.w.mu.Lock()
	c.w.requests[class]++
	if resp.Uncompressed {
		c.w.gzipped[class]++
	}
	n := c.w.bodies[class]
	if n == nil {
		n = new(atomic.Int64)
		c.w.bodies[class] = n
	}
	c.w.mu.Unlock()
	resp.Body = &countingBody{ReadCloser: resp.Body, n: n}
	return resp, nil
}

type countingConn struct {
	net.Conn
	in, out *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

// measureSync starts a fresh watcher with watch-list on or off and
// measures it until all five caches report HasSynced.
// The initial sync's modes: client-go's default (watch-list), the
// reflector's LIST (the feature off; its first LIST asks for
// resourceVersion 0, served whole from the watch cache) and, for
// comparison, a consistent LIST in pages of 500 (resourceVersion "", what
// a reflector does when it must relist without a usable version); the
// last is the lists alone, without informers or watches.
const (
	modeWatchList = "watch-list"
	modeList      = "list"
	modePaged     = "paged-list"
)

// measureSync starts a fresh watcher in mode and measures it until all
// five caches report HasSynced (for modePaged: until all five lists are
// read).
func measureSync(ctx context.Context, t *testing.T, srv *kubetest.Server, api int, gate *watchListGate, mode string) syncResult {
	gate.watchList.Store(mode == modeWatchList)
	w := newAPIWatcher(ctx, t, srv)
	defer w.stop()
	cpu0, self0 := procCPU(t, api), selfCPU()
	start := time.Now()
	s := syncResult{Mode: mode}
	if mode == modePaged {
		n, err := pagedLists(ctx, w.cs, 500)
		if err != nil {
			t.Fatal(err)
		}
		s.Objects = n
	} else {
		w.start(t)
	}
	s.Seconds = time.Since(start).Seconds()
	s.APIServerCPUSeconds, s.ClientCPUSeconds = procCPU(t, api)-cpu0, selfCPU()-self0
	if mode != modePaged {
		s.Objects = w.objects()
	}
	s.WireInBytes, s.WireOutBytes, s.DecodedBytes = w.wireIn.Load(), w.wireOut.Load(), w.decoded()
	w.mu.Lock()
	s.Requests, s.Gzipped = maps.Clone(w.requests), maps.Clone(w.gzipped)
	w.mu.Unlock()
	// The watcher must have done what its mode says, or the comparison
	// compares nothing.
	switch {
	case mode == modeWatchList && s.Requests["watch-list"] != 5:
		t.Fatalf("watch-list sync made requests %v, want 5 watch-list requests", s.Requests)
	case mode == modeList && (s.Requests["watch-list"] != 0 || s.Requests["list"] < 5):
		t.Fatalf("list sync made requests %v, want ≥ 5 lists and no watch-list", s.Requests)
	case mode == modePaged && s.Requests["list"] <= 5:
		t.Fatalf("paged lists made requests %v, want more than one page", s.Requests)
	}
	return s
}

// pagedLists reads the five kinds in consistent pages of limit objects.
func pagedLists(ctx context.Context, cs *kubernetes.Clientset, limit int64) (objects int, err error) {
	type page func(metav1.ListOptions) (n int, cont string, err error)
	kinds := map[string]page{
		"pods": func(o metav1.ListOptions) (int, string, error) {
			l, err := cs.CoreV1().Pods("").List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		},
		"namespaces": func(o metav1.ListOptions) (int, string, error) {
			l, err := cs.CoreV1().Namespaces().List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		},
		"networkpolicies": func(o metav1.ListOptions) (int, string, error) {
			l, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		},
		"services": func(o metav1.ListOptions) (int, string, error) {
			l, err := cs.CoreV1().Services("").List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		},
		"nodes": func(o metav1.ListOptions) (int, string, error) {
			l, err := cs.CoreV1().Nodes().List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		},
	}
	for kind, list := range kinds {
		opts := metav1.ListOptions{Limit: limit}
		for {
			n, cont, err := list(opts)
			if err != nil {
				return objects, fmt.Errorf("list %s: %w", kind, err)
			}
			objects += n
			if cont == "" {
				break
			}
			opts.Continue = cont
		}
	}
	return objects, nil
}

// eventRecorder compares, for every pod event, the agent's record before
// and after.
type eventRecorder struct {
	on       atomic.Bool
	mu       sync.Mutex
	events   int
	bytes    int64
	noChange int
	noBytes  int64
	needed   int64
	byKind   map[string]int
	fields   map[string]int
	steps    map[string]int
	recLen   []int
	objLen   []int
	lastStep map[types.UID]string
}

func (r *eventRecorder) record(kind string, old, cur *corev1.Pod) {
	if !r.on.Load() {
		return
	}
	var a, b *podset.Pod
	obj := cur
	if old != nil {
		a = podset.FromAPI(old)
	}
	if cur != nil {
		b = podset.FromAPI(cur)
	} else {
		obj = old
	}
	size := int64(obj.Size())
	diff := recordDiff(a, b)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKind == nil {
		r.byKind, r.fields, r.steps = map[string]int{}, map[string]int{}, map[string]int{}
	}
	r.events++
	r.bytes += size
	r.byKind[kind]++
	step := stepOf(obj)
	if kind == "delete" {
		step = "deleted"
	}
	r.steps[step]++
	switch {
	case len(diff) == 0:
		r.noChange++
		r.noBytes += size
	case b == nil:
		r.needed += int64(deleteLen(a))
	default:
		r.needed += int64(compactLen(b))
		if kind == "update" {
			for _, f := range diff {
				r.fields[f]++
			}
		}
	}
	if kind == "update" && step == "ready" {
		r.recLen = append(r.recLen, compactLen(b))
		r.objLen = append(r.objLen, int(size))
	}
}

func (r *eventRecorder) OnAdd(obj any, initial bool) {
	if p, ok := obj.(*corev1.Pod); ok && !initial {
		r.record("add", nil, p)
	}
}

func (r *eventRecorder) OnUpdate(old, cur any) {
	a, ok1 := old.(*corev1.Pod)
	b, ok2 := cur.(*corev1.Pod)
	if ok1 && ok2 {
		r.record("update", a, b)
	}
}

func (r *eventRecorder) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		r.record("delete", p, nil)
	}
}

func (r *eventRecorder) fill(c *churnResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.PodEvents, c.PodEventBytes, c.NoChangeEvents, c.NoChangeBytes, c.NeededBytes = r.events, r.bytes, r.noChange, r.noBytes, r.needed
	c.ByKind, c.ChangedFields, c.StepEvents = r.byKind, r.fields, r.steps
	c.RecordCompactBytesMean, c.PodObjectBytesAtRunning = mean(r.recLen), mean(r.objLen)
}

func mean(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0
	for _, x := range xs {
		s += x
	}
	return float64(s) / float64(len(xs))
}

// stepOf names the lifecycle step (podLives) that wrote the object, from
// its content, so each event is attributed to its write.
func stepOf(p *corev1.Pod) string {
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	switch {
	case p.DeletionTimestamp != nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil:
		return "stopped"
	case p.DeletionTimestamp != nil:
		return "terminating"
	case p.Status.HostIP == "":
		return "created"
	case p.Status.Phase == corev1.PodPending:
		return "pending"
	case !ready:
		return "running"
	default:
		return "ready"
	}
}

// podLives runs n pod lifecycles as the control plane and a kubelet write
// them, ten at a time, spread over the cluster's namespaces and nodes:
// created already scheduled (spec.nodeName), Pending with the host
// address, Running with the pod address, Ready, deleted gracefully
// (deletionTimestamp), containers stopped (not ready), deleted with grace
// period 0 as the kubelet does once they are gone.
func podLives(ctx context.Context, cs *kubernetes.Clientset, c *cluster, nodes []string, n int) (writes int, err error) {
	var count atomic.Int64
	err = parallelN(10, n, func(i int) error {
		tmpl := c.Pods[(i*7919)%len(c.Pods)]
		node := nodes[(i*31)%len(nodes)]
		return podLife(ctx, cs, lifePod(tmpl, i, node), i, tmpl.Status.PodIP, &count, nil, nil)
	})
	return int(count.Load()), err
}

// podLife runs one pod's life (see podLives) and adds its writes to count.
// addressed, if not nil, is told when the write that gives the pod its
// address was sent and when it returned; hold, if not nil, is called once
// the pod is Ready and the pod lives until it returns.
func podLife(ctx context.Context, cs *kubernetes.Clientset, p *corev1.Pod, i int, podIP string, count *atomic.Int64,
	addressed func(name string, sent, done time.Time), hold func(p *corev1.Pod) error) error {
	pods := cs.CoreV1().Pods(p.Namespace)
	cur, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create %s: %w", p.Name, err)
	}
	count.Add(1)
	now := metav1.Now()
	hostIP := fmt.Sprintf("172.16.%d.%d", i>>8&255, i&255)
	cur.Status = corev1.PodStatus{Phase: corev1.PodPending, HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}}, StartTime: &now,
		QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: "ContainersNotReady", Message: "containers with unready status: [main]"},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: "ContainersNotReady", Message: "containers with unready status: [main]"},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	if cur, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pending %s: %w", p.Name, err)
	}
	cur.Status.Phase = corev1.PodRunning
	cur.Status.PodIP, cur.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	setCond(cur, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", "")
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: p.Spec.Containers[0].Image,
		ImageID:     "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
		ContainerID: "containerd://" + strings.Repeat(fmt.Sprintf("%08x", i), 8), Started: new(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	sent := time.Now()
	if cur, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("running %s: %w", p.Name, err)
	}
	if addressed != nil {
		addressed(p.Name, sent, time.Now())
	}
	setCond(cur, corev1.PodReady, corev1.ConditionTrue, "", "")
	setCond(cur, corev1.ContainersReady, corev1.ConditionTrue, "", "")
	cur.Status.ContainerStatuses[0].Ready = true
	if _, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("ready %s: %w", p.Name, err)
	}
	if hold != nil {
		if err := hold(p); err != nil {
			return err
		}
	}
	grace := int64(30)
	if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		return fmt.Errorf("graceful delete %s: %w", p.Name, err)
	}
	if cur, err = pods.Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get terminating %s: %w", p.Name, err)
	}
	setCond(cur, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [main]")
	setCond(cur, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [main]")
	cur.Status.ContainerStatuses[0].Ready = false
	cur.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
		StartedAt: cur.Status.ContainerStatuses[0].State.Running.StartedAt, FinishedAt: metav1.Now()}}
	if _, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("stopped %s: %w", p.Name, err)
	}
	if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		return fmt.Errorf("delete %s: %w", p.Name, err)
	}
	count.Add(6) // pending, running, ready, graceful delete, stopped, delete
	return nil
}

func setCond(p *corev1.Pod, typ corev1.PodConditionType, st corev1.ConditionStatus, reason, msg string) {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == typ {
			if c.Status != st {
				c.LastTransitionTime = metav1.Now()
			}
			c.Status, c.Reason, c.Message = st, reason, msg
		}
	}
}

// lifePod is a Deployment's pod as the API server receives it after
// scheduling: the template's labels and ports, an owner, resources.
func lifePod(tmpl *corev1.Pod, i int, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: fmt.Sprintf("life-%s-%05d", tmpl.Labels["app"], i),
		Labels: map[string]string{"app": tmpl.Labels["app"], "pod-template-hash": "7d9f8b6c5d"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: tmpl.Labels["app"] + "-7d9f8b6c5d",
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)), Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: *tmpl.Spec.DeepCopy()}
	p.Spec.NodeName = node
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}
	return p
}

// parallelN runs fn(0..n-1) on w workers, stopping at the first error.
func parallelN(w, n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		mu   sync.Mutex
		ferr error
	)
	for range w {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				stop := ferr != nil
				mu.Unlock()
				if stop || i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					ferr = err
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return ferr
}

// apiServerPID finds the kube-apiserver this test started: a child of
// this process (kubetest starts it directly) listening on host's port.
func apiServerPID(host string) (int, error) {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(host, "https://"))
	if err != nil {
		return 0, fmt.Errorf("API server host %q: %w", host, err)
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			if strings.TrimSpace(string(comm)) == "kube-apiserver" && strings.Contains(string(cmdline), "\x00"+port+"\x00") {
				return strconv.Atoi(pid)
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver child of pid %d on port %s", os.Getpid(), port)
}

// procCPU is a process's user + system CPU time from /proc/PID/stat.
func procCPU(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name may hold spaces: fields count from after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func idleCPU(t *testing.T, pid int, d time.Duration) float64 {
	c0 := procCPU(t, pid)
	time.Sleep(d)
	return (procCPU(t, pid) - c0) / d.Seconds()
}

// report logs the tables REPORT.md shows.
func (r apiLoadRun) report(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d pods, %d policies, %d namespaces, %d nodes; API server idle CPU %.3f s/s\n", r.Pods, r.Policies, r.Namespaces, r.Nodes, r.IdleAPIServerCPUPerSecond)
	fmt.Fprintln(&b, "| mode | rep | objects | wire in | decoded | wire/decoded | requests | gzipped | to HasSynced | API server CPU | client CPU | load |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|")
	syncs := append([]syncResult(nil), r.Syncs...)
	sort.SliceStable(syncs, func(i, j int) bool { return syncs[i].Mode > syncs[j].Mode })
	for _, s := range syncs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f MB | %.2f MB | %.2f | %v | %v | %.2f s | %.2f s | %.2f s | %s |\n", s.Mode, s.Rep, s.Objects,
			float64(s.WireInBytes)/1e6, float64(s.DecodedBytes)/1e6, float64(s.WireInBytes)/float64(s.DecodedBytes), s.Requests, s.Gzipped,
			s.Seconds, s.APIServerCPUSeconds, s.ClientCPUSeconds, s.Load)
	}
	fmt.Fprintf(&b, "\nchurn: API server CPU %.2f s for both watchers\n", r.ChurnAPIServerCPUSeconds)
	for _, c := range r.Churn {
		fmt.Fprintf(&b, "\n%s: %d lives, %d writes in %.1f s; wire in %d B, decoded %d B; requests %v gzipped %v; pod events %d (%v), steps %v\n",
			c.Mode, c.Lives, c.Writes, c.Seconds, c.WireInBytes, c.DecodedBytes, c.Requests, c.Gzipped, c.PodEvents, c.ByKind, c.StepEvents)
		if c.PodEvents == 0 {
			continue
		}
		fmt.Fprintf(&b, "events per life %.2f; Pod.Size per event %.0f B; decoded stream per event %.0f B; wire per event %.0f B\n",
			float64(c.PodEvents)/float64(c.Lives), float64(c.PodEventBytes)/float64(c.PodEvents), float64(c.DecodedBytes)/float64(c.PodEvents), float64(c.WireInBytes)/float64(c.PodEvents))
		fmt.Fprintf(&b, "no change for the agent: %d events (%.0f%%), %d B (%.0f%% of Pod.Size bytes); needed %d B (%.1f%% of Pod.Size bytes); fields changed by updates %v\n",
			c.NoChangeEvents, 100*float64(c.NoChangeEvents)/float64(c.PodEvents), c.NoChangeBytes, 100*float64(c.NoChangeBytes)/float64(c.PodEventBytes),
			c.NeededBytes, 100*float64(c.NeededBytes)/float64(c.PodEventBytes), c.ChangedFields)
		fmt.Fprintf(&b, "record kept (compact) %.0f B vs Pod.Size %.0f B at Ready\n", c.RecordCompactBytesMean, c.PodObjectBytesAtRunning)
	}
	t.Log(b.String())
}
