package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"bytes"
	"encoding/json"
	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/selection"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// The envelope (Kubernetes' limits): 150k pods over 5,000 Nodes, 30 of
// them on the agent's node, 10k NetworkPolicies. Smaller points keep the
// same shape: 150 pods per namespace, 10 policies per namespace, 30 pods per node, 10
// replicas per Deployment (pods of one Deployment share their label set,
// as pod-template-hash makes them do in a real cluster).
const (
	envPodsPerNS      = 150
	envPoliciesPerNS  = 10
	envPodsPerNode    = 30
	envReplicas       = 10
	envNode           = "node-00000"
	envTeams          = 10
	envAppsPerNS      = envPodsPerNS / envReplicas
	envPodAddrOffset  = 1 << 20 // 10.16.0.0 onwards
	envPodNamePattern = "%s-%010x-%05x"
)

// envCluster is a synthetic cluster as the agent's informers hold it:
// objects passed through the transform, in client-go indexers.
type envCluster struct {
	pods, namespaces, nodes, policies cache.Indexer
	nPods, nNS, nNodes                int
	strip                             func(any) (any, error)
	// src reads the pod cache as the agent's sources do: the last Set
	// with the namespaces that changed since read again.
	src *sources
	// records tells whether the transform makes podset records (the
	// agent's) or keeps API objects (the baseline).
	records bool
}

// podAdd, podUpdate and podDelete change the pod cache as the informer
// does, and tell src as the informer's handlers do.
func (c *envCluster) podAdd(o any)    { c.pods.Add(o); c.src.podTouched(o) }
func (c *envCluster) podUpdate(o any) { c.pods.Update(o); c.src.podTouched(o) }
func (c *envCluster) podDelete(o any) { c.pods.Delete(o); c.src.podTouched(o) }

// envRawPod is pod i as the API server sends it (every string its own
// allocation, as decoding makes them), before the transform.
func envRawPod(i, nns, nnodes int, relabel string) *corev1.Pod {
	ns := i % nns
	dep := (i / nns) / envReplicas // the Deployment within the namespace
	app := fmt.Sprintf("app%d", dep%envAppsPerNS)
	if relabel != "" {
		app = relabel
	}
	hash := fmt.Sprintf("%010x", uint32(ns*7919+dep)*2654435761)
	a := netip.AddrFrom4([4]byte{10, byte((envPodAddrOffset + i) >> 16), byte((envPodAddrOffset + i) >> 8), byte(envPodAddrOffset + i)})
	ip := a.String()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns%04d", ns), Name: fmt.Sprintf(envPodNamePattern, app, hash, i),
			UID:             types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)),
			ResourceVersion: strconv.Itoa(1000000 + i),
			Labels:          map[string]string{"app": app, "pod-template-hash": hash, "team": fmt.Sprintf("team%d", ns%envTeams)},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-01T00:00:00Z"},
		},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%05d", i%nnodes), Containers: []corev1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// envReplica is pod i of the cluster made a replica of pod like: like's
// namespace, node and labels, pod i's name, UID and address.
func envReplica(like, i, nns, nnodes int) *corev1.Pod {
	p := envRawPod(like, nns, nnodes, "")
	q := envRawPod(i, nns, nnodes, "")
	p.Name = fmt.Sprintf(envPodNamePattern, p.Labels["app"], p.Labels["pod-template-hash"], i)
	p.UID, p.ResourceVersion = q.UID, q.ResourceVersion
	p.Status.PodIP, p.Status.PodIPs = q.Status.PodIP, q.Status.PodIPs
	return p
}

func envPolicy(i, nns int) *networkingv1.NetworkPolicy {
	ns := i % nns
	k := i / nns
	named := intstr.FromString("http")
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%04d", ns), Name: fmt.Sprintf("np%06d", i),
			UID: types.UID(fmt.Sprintf("np-%d", i)), ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", k%envAppsPerNS)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	peer := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (k+1)%envAppsPerNS)}}}
	if k%5 == 4 {
		// One policy in five admits a team's pods from every
		// namespace of that team: sets of a tenth of the cluster.
		peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("team%d", (ns+1)%envTeams)}}
	}
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{peer},
		Ports: []networkingv1.NetworkPolicyPort{{Port: &named}}}}
	return np
}

// newEnvCluster builds the cluster for pods pods through transform.
func newEnvCluster(tb testing.TB, pods int, transform func(any) (any, error)) *envCluster {
	return newEnvClusterMeasured(tb, pods, transform, func() {})
}

// newEnvClusterMeasured is newEnvCluster calling beforePods once every
// other kind is in its cache.
func newEnvClusterMeasured(tb testing.TB, pods int, transform func(any) (any, error), beforePods func()) *envCluster {
	nns := max(pods/envPodsPerNS, 1)
	c := &envCluster{nPods: pods, nNS: nns, nNodes: max(pods/envPodsPerNode, 1), strip: transform,
		pods:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		namespaces: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		nodes:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		policies:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
	}
	c.src = &sources{pods: c.pods, polIdx: c.policies, dirtyNS: map[string]bool{}, dirtyKinds: map[string]bool{}, dirtyPolicyNS: map[string]bool{},
		ns: corelisters.NewNamespaceLister(c.namespaces), policies: networkinglisters.NewNetworkPolicyLister(c.policies),
		services: corelisters.NewServiceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		nodes:    corelisters.NewNodeLister(c.nodes)}
	if o, err := transform(envRawPod(0, 1, 1, "")); err == nil {
		_, c.records = o.(*podset.Pod)
	}
	add := func(s cache.Indexer, o any) {
		o, err := transform(o)
		if err != nil {
			tb.Fatal(err)
		}
		if err := s.Add(o); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range nns {
		name := fmt.Sprintf("ns%04d", i)
		add(c.namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name), ResourceVersion: "1",
			Labels: map[string]string{corev1.LabelMetadataName: name, "team": fmt.Sprintf("team%d", i%envTeams)}}})
	}
	for i := range c.nNodes {
		name := fmt.Sprintf("node-%05d", i)
		add(c.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name), ResourceVersion: "1",
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3), "node.kubernetes.io/instance-type": "m5.xlarge"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.%d.%d.%d", 16+i>>16, i>>8&255, i&255)},
				{Type: corev1.NodeHostName, Address: name}}}})
	}
	for i := range nns * envPoliciesPerNS {
		add(c.policies, envPolicy(i, nns))
	}
	beforePods()
	for i := range pods {
		add(c.pods, envRawPod(i, nns, c.nNodes, ""))
	}
	return c
}

// input reads the caches as the agent's sources.input does on every sync.
func (c *envCluster) input() compose.Input {
	if c.records {
		// With the budgets, as the agent compiles.
		in, err := c.src.input(&Config{NodeName: envNode, Budget: budget.Default()})
		if err != nil {
			panic(err)
		}
		return in
	}
	// API objects in the cache (the transform before podset records): every
	// kind listed, the pods converted, as the agent did before.
	in := compose.Input{NodeName: envNode}
	all := labels.Everything()
	objs, _ := corelisters.NewPodLister(c.pods).List(all)
	in.Pods = podset.NewSet(podset.FromAPIList(objs))
	in.Namespaces, _ = corelisters.NewNamespaceLister(c.namespaces).List(all)
	in.Nodes, _ = corelisters.NewNodeLister(c.nodes).List(all)
	for _, o := range c.policies.List() {
		in.NetworkPolicies = npset.New(append(in.NetworkPolicies.All(), o.(*networkingv1.NetworkPolicy)))
	}
	return in
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// envelopeBytes are the live bytes of each layer at one size.
type envelopeBytes struct {
	pods                             int
	caches, podCache, selection, all uint64
	rules, elements                  int
}

// measureEnvelope builds the caches and compiles once, measuring the live
// heap after each step.
func measureEnvelope(tb testing.TB, name string, pods int, transform func(any) (any, error)) envelopeBytes {
	base := liveHeap()
	var noPods uint64
	c := newEnvClusterMeasured(tb, pods, transform, func() { noPods = liveHeap() - base })
	caches := liveHeap() - base
	in := c.input()
	afterList := liveHeap()
	var m selection.Memo
	x := m.Index(envNode, in.Namespaces, in.Pods)
	_ = x.All()
	sel := liveHeap() - afterList
	runtime.KeepAlive(x)
	x = nil
	if in.Budget == nil {
		// As the agent compiles: with the budgets.
		limits := budget.Default()
		in.Budget = &limits
	}
	var b compose.Builder
	res := b.Build(in)
	all := liveHeap() - base
	if len(res.Problems) > 0 {
		tb.Fatal(res.Problems[0])
	}
	if dir := os.Getenv("NFTGUARD_ENVELOPE_PPROF"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%s-%d.pprof", name, pods)))
		if err != nil {
			tb.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	out := envelopeBytes{pods: pods, caches: caches, podCache: caches - noPods, selection: sel, all: all}
	for _, ch := range res.Desired.Chains {
		out.rules += len(ch.Rules)
	}
	for _, s := range res.Desired.Sets {
		out.elements += len(s.Elements)
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(&b)
	runtime.KeepAlive(in)
	return out
}

// TestEnvelopeMemory measures where an agent's bytes go: the informer
// caches (stripped objects in client-go indexers), selection's index and
// the whole compiled state, per pod. It runs at 10k pods; with
// NFTGUARD_ENVELOPE=1 at 1k, 10k, 50k and 150k pods (the envelope), and
// with NFTGUARD_ENVELOPE_PPROF=DIR it writes a heap profile per size.
func TestEnvelopeMemory(t *testing.T) {
	sizes := []int{10000}
	if os.Getenv("NFTGUARD_ENVELOPE") != "" {
		sizes = []int{1000, 10000, 50000, 150000}
	}
	var rows []EnvelopeMemoryRow
	for _, n := range sizes {
		for _, tr := range []struct {
			name string
			fn   func(any) (any, error)
		}{{"objects", stripBaseline}, {"records", strip}, {"shared", newStripper().strip}} {
			e := measureEnvelope(t, tr.name, n, tr.fn)
			per := func(b uint64) float64 { return float64(b) / float64(n) }
			rows = append(rows, EnvelopeMemoryRow{Pods: n, Transform: tr.name, PodCacheBytesPerPod: per(e.podCache),
				OtherKindsBytes: e.caches - e.podCache, SelectionBytesPerPod: per(e.selection), AllBytes: e.all, AllBytesPerPod: per(e.all)})
			t.Logf("%-13s %6d pods: caches %6.1f MB (pods %5.0f B/pod, other kinds %5.1f MB), selection %5.1f MB (%4.0f B/pod), all compiled + caches %6.1f MB (%5.0f B/pod); table %d rules, %d elements",
				tr.name, n, mbytes(e.caches), per(e.podCache), mbytes(e.caches-e.podCache), mbytes(e.selection), per(e.selection), mbytes(e.all), per(e.all), e.rules, e.elements)
			// The bound guards against a regression of the agent's
			// transform or of the index (see bench/results/ENVELOPE.md
			// for the measured bytes).
			if p := per(e.all); tr.name == "shared" && p > envMaxBytesPerPod {
				t.Errorf("%s, %d pods: %.0f live bytes per pod, want ≤ %d", tr.name, n, p, envMaxBytesPerPod)
			}
		}
	}
	writeEnvelopeOut(t, "memory.json", rows)
}

// EnvelopeMemoryRow is one TestEnvelopeMemory measurement, as written to
// $NFTGUARD_ENVELOPE_OUT/memory.json for bench/suite's envelope profile.
type EnvelopeMemoryRow struct {
	Pods                                                      int
	Transform                                                 string // objects, records or shared (the agent's)
	PodCacheBytesPerPod, SelectionBytesPerPod, AllBytesPerPod float64
	OtherKindsBytes, AllBytes                                 uint64
}

// EnvelopeEventRow is one BenchmarkEnvelopeEvent result, as written to
// $NFTGUARD_ENVELOPE_OUT/events.json.
type EnvelopeEventRow struct {
	Pods                                    int
	Event                                   string
	Events                                  int
	WallNs, CPUNs, InputNs, BuildNs, SyncNs float64 // per event; SyncNs 0 without kernel tests
}

// writeEnvelopeOut writes v as JSON into $NFTGUARD_ENVELOPE_OUT (set by
// bench/suite's envelope profile), if set.
func writeEnvelopeOut(tb testing.TB, name string, v any) {
	dir := os.Getenv("NFTGUARD_ENVELOPE_OUT")
	if dir == "" {
		return
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func mbytes(b uint64) float64 { return float64(b) / (1 << 20) }

// BenchmarkEnvelopeEvent is the cost of one event for the compilers at
// each size: the caches read as the agent reads them and one
// compose.Builder.Build after a pod is added or removed, relabelled, or a
// policy is added or removed. Each iteration does one event, alternating
// between a change and its undo, so the state stays the same. With
// NFTGUARD_KERNEL_TESTS=1 each event is also synced into a real kernel
// table (engine.Sync in a fresh network namespace), reported as sync-ns/op.
func BenchmarkEnvelopeEvent(b *testing.B) {
	sizes := []int{1000, 10000, 50000, 150000}
	if s := os.Getenv("NFTGUARD_ENVELOPE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	var eng *engine.Engine
	if os.Getenv("NFTGUARD_KERNEL_TESTS") != "" {
		ns := testns.New(b, "envev")
		var err error
		if eng, err = engine.New(compose.Table(), engine.WithNetNS(ns.Path)); err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
	}
	sync := func(b *testing.B, d *engine.Desired) {
		if eng == nil {
			return
		}
		if _, err := eng.Sync(context.Background(), d); err != nil {
			b.Fatal(err)
		}
	}
	rows := map[string]EnvelopeEventRow{} // the last run of each: b.Run may call a function more than once
	var order []string
	defer func() {
		out := make([]EnvelopeEventRow, 0, len(order))
		for _, k := range order {
			out = append(out, rows[k])
		}
		writeEnvelopeOut(b, "events.json", out)
	}()
	for _, n := range sizes {
		c := newEnvCluster(b, n, strip)
		var bld compose.Builder
		sync(b, bld.Build(c.input()).Desired)
		// Every event is the same event at every size, so that sizes
		// compare: pods are new replicas of pod 0 (on envNode, in
		// namespace 0, selected by the same policies at every size) or
		// of a remote pod of namespace 0, and the policy is an 11th one
		// in namespace 0 selecting pod 0's Deployment.
		local, _ := strip(envRawPod(0, c.nNS, c.nNodes, ""))
		localRelabelled, _ := strip(envRawPod(0, c.nNS, c.nNodes, "relabelled"))
		remoteLike := c.nNS // namespace 0, node nNS % nNodes: not envNode
		if remoteLike%c.nNodes == 0 {
			b.Fatalf("pod %d is on %s", remoteLike, envNode)
		}
		extraRemote, _ := strip(envReplica(remoteLike, n, c.nNS, c.nNodes))
		extraLocal, _ := strip(envReplica(0, n+1, c.nNS, c.nNodes))
		pol := envPolicy(c.nNS*envPoliciesPerNS, c.nNS)
		pol.Spec.PodSelector.MatchLabels = map[string]string{"app": local.(*podset.Pod).Labels["app"]}
		events := []struct {
			name     string
			do, undo func()
		}{
			{"remote-pod-add-remove", func() { c.podAdd(extraRemote) }, func() { c.podDelete(extraRemote) }},
			{"local-pod-add-remove", func() { c.podAdd(extraLocal) }, func() { c.podDelete(extraLocal) }},
			{"local-pod-relabel", func() { c.podUpdate(localRelabelled) }, func() { c.podUpdate(local) }},
			{"policy-add-remove", func() { c.policies.Add(pol); c.src.policyTouched(pol) },
				func() { c.policies.Delete(pol); c.src.policyTouched(pol) }},
		}
		for _, ev := range events {
			b.Run(fmt.Sprintf("pods=%d/%s", n, ev.name), func(b *testing.B) {
				var list, build, synced time.Duration
				i := 0
				cpu0 := cpuTime()
				for b.Loop() {
					if i%2 == 0 {
						ev.do()
					} else {
						ev.undo()
					}
					i++
					t0 := time.Now()
					in := c.input()
					t1 := time.Now()
					res := bld.Build(in)
					t2 := time.Now()
					build += t2.Sub(t1)
					list += t1.Sub(t0)
					if len(res.Problems) > 0 {
						b.Fatal(res.Problems[0])
					}
					sync(b, res.Desired)
					synced += time.Since(t2)
				}
				cpu := cpuTime() - cpu0
				if i%2 == 1 {
					ev.undo()
					sync(b, bld.Build(c.input()).Desired)
				}
				// The process's CPU time (garbage collection included)
				// is less skewed by other processes than wall time on
				// a loaded machine.
				key := fmt.Sprintf("%d/%s", n, ev.name)
				if _, ok := rows[key]; !ok {
					order = append(order, key)
				}
				rows[key] = EnvelopeEventRow{Pods: n, Event: ev.name, Events: i, WallNs: float64((list + build + synced).Nanoseconds()) / float64(i),
					CPUNs: float64(cpu.Nanoseconds()) / float64(i), InputNs: float64(list.Nanoseconds()) / float64(i),
					BuildNs: float64(build.Nanoseconds()) / float64(i)}
				if eng != nil {
					r := rows[key]
					r.SyncNs = float64(synced.Nanoseconds()) / float64(i)
					rows[key] = r
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
				b.ReportMetric(float64(list.Nanoseconds())/float64(i), "list-ns/op")
				b.ReportMetric(float64(build.Nanoseconds())/float64(i), "build-ns/op")
				if eng != nil {
					b.ReportMetric(float64(synced.Nanoseconds())/float64(i), "sync-ns/op")
				}
			})
		}
	}
}

// envMaxBytesPerPod bounds the live bytes per pod of the agent's caches
// and compiled state (measured 2026-12-01 with records: see
// bench/results/ENVELOPE.md).
const envMaxBytesPerPod = 850

// stripBaseline is the transform as it was before podset records (API objects
// in the cache, every container with ports kept whole, nothing shared):
// the baseline each measurement is compared with in the same run.
func stripBaseline(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return strip(obj)
	}
	ports := func(cs []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			if len(c.Ports) > 0 {
				out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports})
			}
		}
		return out
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels}}
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.HostNetwork = p.Spec.HostNetwork
	out.Spec.InitContainers = ports(p.Spec.InitContainers)
	out.Spec.Containers = ports(p.Spec.Containers)
	out.Status.Phase = p.Status.Phase
	out.Status.PodIP = p.Status.PodIP
	out.Status.PodIPs = p.Status.PodIPs
	return out, nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEnvelopeDecode is the agent's CPU per pod of the initial list
// that is not the API server's: decoding a pod from the protobuf the API
// server sends (as client-go's reflector does) and the informer's
// transform. Times the pod count, it is the decode part of the first sync
// (bench/results/ENVELOPE.md); the rest of "caches synced" is waiting for
// the API server and the network.
func BenchmarkEnvelopeDecode(b *testing.B) {
	const n = 1000
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	codec := scheme.Codecs.EncoderForVersion(ser, corev1.SchemeGroupVersion)
	wire := make([][]byte, n)
	size := 0
	for i := range wire {
		var buf bytes.Buffer
		if err := codec.Encode(envServedPod(i), &buf); err != nil {
			b.Fatal(err)
		}
		wire[i] = buf.Bytes()
		size += buf.Len()
	}
	for _, tr := range []struct {
		name string
		fn   func(any) (any, error)
	}{{"decode", nil}, {"decode+transform", newStripper().strip}} {
		b.Run(tr.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				obj, _, err := ser.Decode(wire[i%n], nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if tr.fn != nil {
					if _, err := tr.fn(obj); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			b.ReportMetric(float64(size)/n, "wire-B/pod")
		})
	}
}

// envServedPod is envRawPod as an API server hands it out after a create
// and a status write: defaults, two managedFields entries, conditions and
// a container status (1.2–1.3 kB of protobuf, as the envelope run's pods
// measured on the wire: bench/results/apiload/REPORT.md).
func envServedPod(i int) *corev1.Pod {
	p := envRawPod(i, 100, 33, "")
	t := metav1.NewTime(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	p.CreationTimestamp = t
	grace := int64(30)
	prio := int32(0)
	never := corev1.PreemptLowerPriority
	p.Spec.RestartPolicy, p.Spec.DNSPolicy, p.Spec.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	p.Spec.TerminationGracePeriodSeconds, p.Spec.Priority, p.Spec.PreemptionPolicy = &grace, &prio, &never
	p.Spec.SecurityContext = &corev1.PodSecurityContext{}
	c := &p.Spec.Containers[0]
	c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "/dev/termination-log", corev1.TerminationMessageReadFile, corev1.PullIfNotPresent
	fields := func(manager, sub, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw), Subresource: sub}
	}
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		fields("suite", "", `{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/restartedAt":{}},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:team":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}},"k:{\"containerPort\":9090,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}}}},"f:nodeName":{}}}`),
		fields("suite", "status", `{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:status":{},"f:type":{}}},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"`+p.Status.PodIP+`\"}":{".":{},"f:ip":{}}}}}`),
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t}}
	p.Status.QOSClass = corev1.PodQOSBestEffort
	return p
}
