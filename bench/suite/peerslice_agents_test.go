//go:build benchmemory

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/peerslice"
)

// TestPeerSliceAgents runs tens of agents, each a process with its table
// in a network namespace of its own, against one API server under pod
// churn, first watching every Pod (today) and then on the slices path,
// with the API server's metrics as the ground truth of what each agent
// was sent. The agents are `nftguard run`; on the slices path they are
// `nftguard run --peer-source slices` when the binary has that flag, else
// agent-like informer processes (this test binary re-run as
// TestPeerSliceAgentChild: PeerSlices and its own node's Pods, plus the
// kinds every agent watches), and the result says which.
//
// On demand only: behind the benchmemory build tag and
// NFTGUARD_BENCH_PEERSLICE_AGENTS (the number of agents), e.g.
//
//	NFTGUARD_KERNEL_TESTS=1 NFTGUARD_BENCH_PEERSLICE_AGENTS=20 \
//	  go test -tags benchmemory -run '^TestPeerSliceAgents$' -v -timeout 30m .
func TestPeerSliceAgents(t *testing.T) {
	n := envInt("NFTGUARD_BENCH_PEERSLICE_AGENTS", 0)
	if n <= 0 {
		t.Skip("on demand: set NFTGUARD_BENCH_PEERSLICE_AGENTS to a number of agents")
	}
	pods := envInt("NFTGUARD_BENCH_PEERSLICE_AGENTS_PODS", 1000)
	lives := envInt("NFTGUARD_BENCH_PEERSLICE_LIVES", 100)
	pubName := os.Getenv("NFTGUARD_BENCH_PEERSLICE_PUBLISHER")
	if pubName == "" {
		pubName = "controller"
	}
	newPub := publishers[pubName]
	if newPub == nil {
		t.Fatalf("NFTGUARD_BENCH_PEERSLICE_PUBLISHER=%q: not one of %v", pubName, slicesKeys(publishers))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gate := &watchListGate{prev: features.FeatureGates()}
	features.ReplaceFeatureGates(gate)
	gate.watchList.Store(true)

	dir := t.TempDir()
	bin := nftguardBinary(t, dir)
	help, _ := exec.Command(bin, "run", "--help").CombinedOutput()
	realSlices := strings.Contains(string(help), "peer-source")

	c := newCluster(size{Pods: pods, Policies: pods / 15})
	nodeNames := spreadOverNodes(c, max(pods/30, n+1))
	srv := kubetest.Start(t, kubetest.Options{})
	cfg := srv.Config(kubetest.Admin)
	cfg.QPS, cfg.Burst = 2000, 4000
	admin := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := createCluster(ctx, t, admin, c, nodeNames); err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.Apply(ctx, cfg, peerslice.CRD(), false); err != nil {
		t.Fatalf("install the PeerSlice CRD: %v", err)
	}
	waitFor(t, time.Minute, "PeerSlices served", func() (bool, string) {
		_, err := dyn.Resource(peerslice.GroupVersionResource).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	kc, err := srv.WriteKubeconfig(dir, kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	res := agentsRun{AgentBinary: os.Getenv("NFTGUARD_BENCH_PEERSLICE_BIN"), Agents: n, Pods: len(c.Pods), Nodes: len(nodeNames), Namespaces: len(c.Namespaces), Lives: lives, Publisher: pubName,
		Started: time.Now().UTC().Format(time.RFC3339), LoadAtStart: loadAvg()}
	res.ServerPodWatches = sumOf((&sliceEnv{t: t, ctx: ctx, admin: admin}).scrape(), "apiserver_longrunning_requests", map[string]string{"resource": "pods", "verb": "WATCH"})

	// The references: today's watcher (all Pods, counted per node) and a
	// slices watcher on a node without pods (its own-node watch sees
	// nothing), both plain watches; they time the lives and tell when the
	// churn has settled.
	e := &sliceEnv{t: t, ctx: ctx, srv: srv, admin: admin, dyn: dyn, c: c, nodes: nodeNames, node: "b37-no-pods", refs: referencedPorts(c.Policies)}
	e.lat = newLatencies()
	perNode := &nodeCounts{m: map[string]int64{}}
	gate.watchList.Store(false)
	e.today = newAPIWatcher(ctx, t, srv)
	e.today.infs[0].SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			e.todayEvents.Add(1)
			perNode.add(p.Spec.NodeName)
			if strings.HasPrefix(p.Name, "life-") && len(p.Status.PodIPs) > 0 {
				e.lat.seen(e.lat.pod, p.Namespace+"/"+p.Name)
			}
		}
		return obj, nil
	})
	e.today.start(t)
	defer e.today.stop()
	e.agent = newSliceAgent(ctx, t, srv, e.node, e.lat)
	defer e.agent.stop()
	e.fleet = &nodeFleet{cancel: func() {}}
	gate.watchList.Store(true)
	opt := peerslice.DefaultOptions()
	pubStop := e.startPublisher(newPub, opt, 200*time.Millisecond)
	defer pubStop()
	e.waitSettled("first publish")

	agentNodes := nodeNames[1 : n+1] // node-000 is spreadOverNodes' local node; any n will do
	base := 0
	for _, mode := range []string{"pods", "slices"} {
		// Every PeerSlice watch receives every slice event: the ones open
		// before the agents start (the reference's, a controller's) are
		// the streams that are not the agents'.
		otherSlices := sumOf(e.scrape(), "apiserver_longrunning_requests", map[string]string{"resource": peerslice.Resource, "verb": "WATCH"})
		var procs []*agentProcess
		kind := "nftguard run"
		if mode == "slices" && !realSlices {
			kind = "informer process"
		}
		for i, node := range agentNodes {
			var p *agentProcess
			if kind == "nftguard run" {
				ns := testns.New(t, "b37-")
				args := []string{"run", "--kubeconfig", kc, "--node-name", node, "--netns", ns.Path, "--log-format", "json"}
				if realSlices {
					args = append(args, "--peer-source", mode)
				}
				p = startAgentProcess(t, bin, args, filepath.Join(dir, fmt.Sprintf("agent-%s-%d.log", mode, i)), true)
			} else {
				p = startAgentProcess(t, os.Args[0], []string{"-test.run", "^TestPeerSliceAgentChild$"},
					filepath.Join(dir, fmt.Sprintf("child-%s-%d.log", mode, i)), false, "B37_CHILD_KUBECONFIG="+kc, "B37_CHILD_NODE="+node, "B37_CHILD_MODE="+mode)
			}
			procs = append(procs, p)
		}
		for _, p := range procs {
			p.waitReady(t)
		}
		for _, shape := range []string{shapeScattered, shapeRollout} {
			ph := e.agentsChurn(mode, kind, shape, lives, base, procs, perNode, agentNodes, otherSlices)
			base += lives
			t.Logf("%d agents, %s (%s), %s: %+v", n, mode, kind, shape, ph)
			res.Phases = append(res.Phases, ph)
		}
		for _, p := range procs {
			p.stop()
		}
	}
	res.LoadAtEnd = loadAvg()
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("NFTGUARD_BENCH_PEERSLICE_OUT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "peerslice-agents.json")
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("result (%s)", out)
	t.Log(res.report())
}

type agentsRun struct {
	AgentBinary                     string // NFTGUARD_BENCH_PEERSLICE_BIN, or "" when built from this module
	Started, LoadAtStart, LoadAtEnd string
	Publisher                       string
	Agents, Pods, Nodes, Namespaces int
	Lives                           int
	ServerPodWatches                float64
	Phases                          []agentsPhase
}

// agentsPhase is one churn seen by the agents in one mode; the per-agent
// numbers are the API server's (metrics), the rest of the streams (the
// references, the publisher, the API server's own pod watch) subtracted.
type agentsPhase struct {
	Mode, Kind, Shape string
	Lives, Writes     int
	Seconds           float64
	// The API server's deltas.
	PodWatchEvents, PodWatchBytes     float64
	SliceWatchEvents, SliceWatchBytes float64
	// What the references received: today's watcher's pod events, the
	// agents' nodes' share of them, the slices watcher's slice events.
	RefPodEvents, RefAgentNodeEvents, RefSliceEvents int64
	OtherSliceWatches                                float64 // open before the agents: the reference's, a controller's
	// Per agent and life, the API server's figures: pod watch, slice
	// watch, events.
	PodBytesPerAgentLife, SliceBytesPerAgentLife   float64
	PodEventsPerAgentLife, SliceEventsPerAgentLife float64
	AgentCPUSeconds                                float64 // all agents' utime+stime over the phase
	Load                                           string
}

func (r agentsRun) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d agents, %d pods, %d nodes, %d namespaces, %d lives per phase; publisher %s; load %s → %s\n",
		r.Agents, r.Pods, r.Nodes, r.Namespaces, r.Lives, r.Publisher, r.LoadAtStart, r.LoadAtEnd)
	fmt.Fprintln(&b, "| mode | agents are | shape | pod B/agent/life | slice B/agent/life | total B/agent/life | pod events/agent/life | slice events/agent/life | agents' CPU s/life | load |")
	fmt.Fprintln(&b, "|---|---|---|---:|---:|---:|---:|---:|---:|---|")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.0f | %.0f | %.3f | %.3f | %.4f | %s |\n", p.Mode, p.Kind, p.Shape, p.PodBytesPerAgentLife, p.SliceBytesPerAgentLife,
			p.PodBytesPerAgentLife+p.SliceBytesPerAgentLife, p.PodEventsPerAgentLife, p.SliceEventsPerAgentLife, p.AgentCPUSeconds/float64(p.Lives), p.Load)
	}
	return b.String()
}

// nodeCounts counts pod events by node.
type nodeCounts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *nodeCounts) add(node string) {
	c.mu.Lock()
	c.m[node]++
	c.mu.Unlock()
}

func (c *nodeCounts) sum(nodes []string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, node := range nodes {
		n += c.m[node]
	}
	return n
}

func (e *sliceEnv) agentsChurn(mode, kind, shape string, lives, base int, procs []*agentProcess, perNode *nodeCounts, agentNodes []string, otherSlices float64) agentsPhase {
	ph := agentsPhase{Mode: mode, Kind: kind, Shape: shape, Lives: lives, OtherSliceWatches: otherSlices}
	e.lat.reset()
	m0 := e.scrape()
	ref0, refNodes0, refSl0 := e.todayEvents.Load(), perNode.sum(agentNodes), e.agent.sliceEvents.Load()
	cpu0 := 0.0
	for _, p := range procs {
		cpu0 += procCPU(e.t, p.proc.Pid())
	}
	start := time.Now()
	writes, err := e.lives(shape, lives, base)
	if err != nil {
		e.t.Fatal(err)
	}
	ph.Writes, ph.Seconds = writes, time.Since(start).Seconds()
	e.waitSettled("agents churn settled")
	ph.RefPodEvents, ph.RefAgentNodeEvents, ph.RefSliceEvents = e.todayEvents.Load()-ref0, perNode.sum(agentNodes)-refNodes0, e.agent.sliceEvents.Load()-refSl0
	// The pod streams besides the agents': today's reference, the
	// publisher's and the API server's own, all full.
	const others = 3
	agents := float64(len(procs))
	wantPods := float64(others) * float64(ph.RefPodEvents)
	wantSlices := otherSlices * float64(ph.RefSliceEvents)
	if mode == "pods" {
		wantPods += agents * float64(ph.RefPodEvents)
	} else {
		wantPods += float64(ph.RefAgentNodeEvents)
		wantSlices += agents * float64(ph.RefSliceEvents)
	}
	// The agents' streams are theirs to read: poll until the API server
	// has sent every event the references say it owes them.
	var m1 []metricSample
	waitFor(e.t, 2*time.Minute, "the API server's watch events reach the agents' count", func() (bool, string) {
		m1 = e.scrape()
		p := metricDelta(m0, m1, "apiserver_watch_events_sizes_count", map[string]string{"resource": "pods"})
		s := metricDelta(m0, m1, "apiserver_watch_events_sizes_count", map[string]string{"resource": peerslice.Resource})
		return p >= wantPods && s >= wantSlices, fmt.Sprintf("pod events %v of %v, slice events %v of %v", p, wantPods, s, wantSlices)
	})
	for _, p := range procs {
		ph.AgentCPUSeconds += procCPU(e.t, p.proc.Pid())
	}
	ph.AgentCPUSeconds -= cpu0
	pods, slices := map[string]string{"resource": "pods"}, map[string]string{"resource": peerslice.Resource}
	ph.PodWatchEvents = metricDelta(m0, m1, "apiserver_watch_events_sizes_count", pods)
	ph.PodWatchBytes = metricDelta(m0, m1, "apiserver_watch_events_sizes_sum", pods)
	ph.SliceWatchEvents = metricDelta(m0, m1, "apiserver_watch_events_sizes_count", slices)
	ph.SliceWatchBytes = metricDelta(m0, m1, "apiserver_watch_events_sizes_sum", slices)
	// Every full pod stream carries the same events: one stream's bytes
	// are the total over the streams (a pod event's mean size times the
	// reference's count).
	perPodEvent := ph.PodWatchBytes / ph.PodWatchEvents
	agentPodEvents := ph.PodWatchEvents - others*float64(ph.RefPodEvents)
	agentSliceEvents := ph.SliceWatchEvents - otherSlices*float64(ph.RefSliceEvents)
	perSliceEvent := 0.0
	if ph.SliceWatchEvents > 0 {
		perSliceEvent = ph.SliceWatchBytes / ph.SliceWatchEvents
	}
	l := float64(lives)
	ph.PodEventsPerAgentLife, ph.SliceEventsPerAgentLife = agentPodEvents/agents/l, agentSliceEvents/agents/l
	ph.PodBytesPerAgentLife, ph.SliceBytesPerAgentLife = agentPodEvents*perPodEvent/agents/l, agentSliceEvents*perSliceEvent/agents/l
	ph.Load = loadAvg()
	return ph
}

// nftguardBinary builds the nftguard of this module into dir, or returns
// NFTGUARD_BENCH_PEERSLICE_BIN when set (an agent built elsewhere).
func nftguardBinary(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv("NFTGUARD_BENCH_PEERSLICE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(dir, "nftguard")
	build := exec.Command("go", "build", "-o", bin, "github.com/nftguard/nftguard/cmd/nftguard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nftguard: %v\n%s", err, out)
	}
	return bin
}

// agentProcess is one agent: `nftguard run`, or this binary as
// TestPeerSliceAgentChild.
type agentProcess struct {
	proc    *childproc.Proc
	addr    string // /readyz of nftguard run
	ready   string // file the child writes once synced
	logPath string
}

func startAgentProcess(t *testing.T, bin string, args []string, logPath string, nftguard bool, env ...string) *agentProcess {
	t.Helper()
	a := &agentProcess{logPath: logPath}
	if nftguard {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a.addr = l.Addr().String()
		l.Close()
		args = append(args, "--metrics-addr", a.addr)
	} else {
		a.ready = logPath + ".ready"
		env = append(env, "B37_CHILD_READY="+a.ready)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if a.proc, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.stop)
	return a
}

func (a *agentProcess) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, 3*time.Minute, "agent ready", func() (bool, string) {
		if a.proc.Exited() {
			b, _ := os.ReadFile(a.logPath)
			t.Fatalf("agent exited: %v\n%s", a.proc.Err(), b[max(0, len(b)-3000):])
		}
		if a.ready != "" {
			_, err := os.Stat(a.ready)
			return err == nil, "no ready file"
		}
		resp, err := http.Get("http://" + a.addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

func (a *agentProcess) stop() {
	if a.proc != nil && !a.proc.Exited() {
		a.proc.Kill()
		<-a.proc.Done()
	}
}

// TestPeerSliceAgentChild is the agent-like informer process of
// TestPeerSliceAgents, run by it (it does nothing otherwise): the
// informers an agent has on a path (B37_CHILD_MODE "pods": all Pods;
// "slices": PeerSlices and its own node's Pods), plus Namespaces,
// NetworkPolicies, Services and Nodes as every agent, with client-go's
// defaults; it writes B37_CHILD_READY once synced and runs until killed.
func TestPeerSliceAgentChild(t *testing.T) {
	kc, node, mode, ready := os.Getenv("B37_CHILD_KUBECONFIG"), os.Getenv("B37_CHILD_NODE"), os.Getenv("B37_CHILD_MODE"), os.Getenv("B37_CHILD_READY")
	if kc == "" {
		t.Skip("run by TestPeerSliceAgents")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cs := kubernetes.NewForConfigOrDie(cfg)
	f := informers.NewSharedInformerFactory(cs, 0)
	synced := []cache.InformerSynced{
		f.Core().V1().Namespaces().Informer().HasSynced, f.Networking().V1().NetworkPolicies().Informer().HasSynced,
		f.Core().V1().Services().Informer().HasSynced, f.Core().V1().Nodes().Informer().HasSynced,
	}
	switch mode {
	case "pods":
		synced = append(synced, f.Core().V1().Pods().Informer().HasSynced)
	case "slices":
		own := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.nodeName=" + node
		}))
		synced = append(synced, own.Core().V1().Pods().Informer().HasSynced)
		own.Start(ctx.Done())
		defer own.Shutdown()
		df := dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0)
		synced = append(synced, df.ForResource(peerslice.GroupVersionResource).Informer().HasSynced)
		df.Start(ctx.Done())
		defer df.Shutdown()
	default:
		t.Fatalf("B37_CHILD_MODE=%q", mode)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("never synced")
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
}
