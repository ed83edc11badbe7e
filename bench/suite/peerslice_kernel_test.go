//go:build benchmemory

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/peerslice"
)

// TestPeerSliceKernelLatency measures, at apiload's cluster size, the time
// from the write that gives a pod its address to that address in a remote
// agent's kernel table: one `nftguard run` for node-000 with its table in
// a network namespace of its own, a policy there that admits every pod
// labelled b37-peer=true, and scattered pod lives so labelled on other
// nodes. It runs the agent watching every Pod, then, when the binary has
// --peer-source, on the slices path; the publisher writes the slices in
// both runs (its load is the same either way).
//
// On demand only: behind the benchmemory build tag and
// NFTGUARD_BENCH_PEERSLICE_KERNEL (the number of pods), e.g.
//
//	NFTGUARD_KERNEL_TESTS=1 NFTGUARD_BENCH_PEERSLICE_KERNEL=10000 \
//	  go test -tags benchmemory -run '^TestPeerSliceKernelLatency$' -v -timeout 30m .
func TestPeerSliceKernelLatency(t *testing.T) {
	pods := envInt("NFTGUARD_BENCH_PEERSLICE_KERNEL", 0)
	if pods <= 0 {
		t.Skip("on demand: set NFTGUARD_BENCH_PEERSLICE_KERNEL to a number of pods")
	}
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
	nodeNames := spreadOverNodes(c, max(pods/30, 2))
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
	// The target: a pod on node-000 that admits, from any namespace, the
	// pods labelled b37-peer=true.
	if err := kubetest.CreateNamespaces(ctx, admin, "b37lat"); err != nil {
		t.Fatal(err)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "b37lat", Name: "target", Labels: map[string]string{"app": "b37-target"}},
		Spec: corev1.PodSpec{NodeName: localNode, Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := kubetest.CreateRunningPod(ctx, admin, target, "10.199.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.NetworkingV1().NetworkPolicies("b37lat").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "peers"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b37-target"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"b37-peer": "true"}},
			}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := srv.WriteKubeconfig(dir, kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}

	e := &sliceEnv{t: t, ctx: ctx, srv: srv, admin: admin, dyn: dyn, c: c, nodes: nodeNames, node: "b37-no-pods", avoidNode: localNode,
		refs: referencedPorts(c.Policies)}
	e.lat = newLatencies()
	gate.watchList.Store(false)
	e.today = newAPIWatcher(ctx, t, srv)
	e.today.infs[0].SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok && strings.HasPrefix(p.Name, "life-") && len(p.Status.PodIPs) > 0 {
			e.lat.seen(e.lat.pod, p.Namespace+"/"+p.Name)
		}
		return obj, nil
	})
	e.today.start(t)
	defer e.today.stop()
	e.agent = newSliceAgent(ctx, t, srv, e.node, e.lat)
	defer e.agent.stop()
	e.fleet = &nodeFleet{cancel: func() {}}
	gate.watchList.Store(true)
	pubStop := e.startPublisher(newPub, peerslice.DefaultOptions(), 200*time.Millisecond)
	defer pubStop()
	e.waitSettled("first publish")

	res := kernelRun{AgentBinary: os.Getenv("NFTGUARD_BENCH_PEERSLICE_BIN"), Pods: len(c.Pods), Nodes: len(nodeNames), Lives: lives, Publisher: pubName, Started: time.Now().UTC().Format(time.RFC3339)}
	modes := []string{"pods"}
	if realSlices {
		modes = append(modes, "slices")
	} else {
		t.Log("nftguard run has no --peer-source: the agent watches every Pod only")
	}
	base := 0
	for _, mode := range modes {
		ns := testns.New(t, "b37-k")
		args := []string{"run", "--kubeconfig", kc, "--node-name", localNode, "--netns", ns.Path, "--log-format", "json"}
		if realSlices {
			args = append(args, "--peer-source", mode)
		}
		ag := startAgentProcess(t, bin, args, filepath.Join(dir, "agent-"+mode+".log"), true)
		ag.waitReady(t)
		k, err := newKernelWatch(ns.Path)
		if err != nil {
			t.Fatal(err)
		}
		// Each life has an address of its own, none next to another (an
		// interval set would merge neighbours), and lives until its
		// address is in the kernel.
		e.life = func(p *corev1.Pod, i int) (string, func(*corev1.Pod) error) {
			p.Labels["b37-peer"] = "true"
			ip := netip.AddrFrom4([4]byte{10, 200, byte(i), 7})
			k.want(ip, p.Namespace+"/"+p.Name)
			// Both references too: every life is then published, in both
			// modes alike.
			return ip.String(), func(p *corev1.Pod) error {
				if err := k.waitSeen(ip, 2*time.Minute); err != nil {
					return err
				}
				return e.lat.untilSeen(p)
			}
		}
		e.lat.reset()
		kctx, kstop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- k.run(kctx) }()
		start := time.Now()
		if _, err := e.lives(shapeScattered, lives, base); err != nil {
			t.Fatalf("%v\n%s", err, tailFile(ag.logPath, 3000))
		}
		secs := time.Since(start).Seconds()
		kstop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		e.waitSettled("kernel lives settled")
		base += lives
		r := k.summary(e.lat, mode, lives)
		r.Seconds, r.Load = secs, loadAvg()
		t.Logf("%+v", r)
		res.Modes = append(res.Modes, r)
		ag.stop()
		k.close()
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("NFTGUARD_BENCH_PEERSLICE_OUT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "peerslice-kernel.json")
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("result (%s)", out)
}

type kernelRun struct {
	AgentBinary string // NFTGUARD_BENCH_PEERSLICE_BIN, or "" when built from this module
	Started     string
	Publisher   string
	Pods, Nodes int
	Lives       int
	Modes       []kernelLatency
}

// kernelLatency is one agent mode: from the address write (sent) to the
// address in a peer set of the agent's table, and to the events at the
// reference watchers, milliseconds.
type kernelLatency struct {
	Mode                            string
	N                               int
	KernelP50, KernelP99, KernelMax float64
	PodP50, PodP99                  float64
	SliceP50, SliceP99              float64
	Polls                           int
	PollMeanMs                      float64 // one read of all sets: the resolution
	Seconds                         float64
	Load                            string
}

// kernelWatch polls a table's peer sets for wanted addresses and notes
// when each first appears.
type kernelWatch struct {
	conn  *nftables.Conn
	ns    *os.File
	table *nftables.Table
	mu    sync.Mutex
	names map[[4]byte]string
	at    map[[4]byte]time.Time
	polls int
	spent time.Duration
}

func newKernelWatch(nsPath string) (*kernelWatch, error) {
	f, err := os.Open(nsPath)
	if err != nil {
		return nil, err
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())), nftables.AsLasting())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("netlink in %s: %w", nsPath, err)
	}
	return &kernelWatch{conn: c, ns: f, table: &nftables.Table{Family: nftables.TableFamilyINet, Name: "nftguard"},
		names: map[[4]byte]string{}, at: map[[4]byte]time.Time{}}, nil
}

func (k *kernelWatch) close() {
	k.conn.CloseLasting()
	k.ns.Close()
}

func (k *kernelWatch) want(ip netip.Addr, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.names[ip.As4()] = name
}

// run reads every set but the isolation sets until ctx ends.
func (k *kernelWatch) run(ctx context.Context) error {
	for ctx.Err() == nil {
		t0 := time.Now()
		sets, err := k.conn.GetSets(k.table)
		if err != nil {
			return fmt.Errorf("list sets: %w", err)
		}
		for _, s := range sets {
			if strings.HasPrefix(s.Name, "np_ingress") || strings.HasPrefix(s.Name, "np_egress") {
				continue
			}
			els, err := k.conn.GetSetElements(s)
			if err != nil {
				continue // replaced by a sync since the listing: read next time
			}
			now := time.Now()
			k.mu.Lock()
			for _, el := range els {
				if len(el.Key) != 4 || el.IntervalEnd {
					continue
				}
				key := [4]byte(el.Key)
				if _, ok := k.names[key]; ok {
					if _, seen := k.at[key]; !seen {
						k.at[key] = now
					}
				}
			}
			k.mu.Unlock()
		}
		k.mu.Lock()
		k.polls++
		k.spent += time.Since(t0)
		k.mu.Unlock()
	}
	return nil
}

func (k *kernelWatch) waitSeen(ip netip.Addr, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		k.mu.Lock()
		_, ok := k.at[ip.As4()]
		k.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v not in the agent's peer sets after %v", ip, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (k *kernelWatch) summary(l *latencies, mode string, lives int) kernelLatency {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var dk, dp, ds []time.Duration
	for key, name := range k.names {
		at, ok := k.at[key]
		short := name[strings.IndexByte(name, '/')+1:]
		sent, ok2 := l.sent[short]
		if !ok || !ok2 {
			continue
		}
		dk = append(dk, at.Sub(sent))
		if p, ok := l.pod[name]; ok {
			dp = append(dp, p.Sub(sent))
		}
		if s, ok := l.slice[name]; ok {
			ds = append(ds, s.Sub(sent))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r := kernelLatency{Mode: mode, N: len(dk), KernelP50: ms(quantile(dk, 0.5)), KernelP99: ms(quantile(dk, 0.99)), KernelMax: ms(quantile(dk, 1)),
		PodP50: ms(quantile(dp, 0.5)), PodP99: ms(quantile(dp, 0.99)), SliceP50: ms(quantile(ds, 0.5)), SliceP99: ms(quantile(ds, 0.99)), Polls: k.polls}
	if k.polls > 0 {
		r.PollMeanMs = ms(k.spent) / float64(k.polls)
	}
	return r
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return string(b[max(0, len(b)-n):])
}
