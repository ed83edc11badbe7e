//go:build benchmemory

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestAgentMemory is scenario 4. It is a test, behind a build tag, because
// the real API server harness (kubetest) runs only under testing; the
// suite runs it with `go test -tags benchmemory` and reads the JSON it
// writes to $NFTGUARD_BENCH_MEMORY_OUT.
func TestAgentMemory(t *testing.T) {
	outPath := os.Getenv("NFTGUARD_BENCH_MEMORY_OUT")
	churn, _ := strconv.Atoi(os.Getenv("NFTGUARD_BENCH_CHURN"))
	if outPath == "" || churn <= 0 {
		t.Fatal("run through bench/suite: NFTGUARD_BENCH_MEMORY_OUT and NFTGUARD_BENCH_CHURN must be set")
	}
	sz, nodes := s10k, clusterNodes
	if v := os.Getenv("NFTGUARD_BENCH_MEMORY_PODS"); v != "" {
		sz.Pods, _ = strconv.Atoi(v)
		sz.Policies, _ = strconv.Atoi(os.Getenv("NFTGUARD_BENCH_MEMORY_POLICIES"))
		nodes, _ = strconv.Atoi(os.Getenv("NFTGUARD_BENCH_MEMORY_NODES"))
		if sz.Pods <= 0 || sz.Policies <= 0 || nodes <= 0 {
			t.Fatal("NFTGUARD_BENCH_MEMORY_PODS, _POLICIES and _NODES must all be positive numbers")
		}
	}
	deadline := 15 * time.Minute
	if d, ok := t.Deadline(); ok {
		deadline = time.Until(d) - time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c := newCluster(sz)
	nodeNames := spreadOverNodes(c, nodes)
	rules, elems := expectedSize(c)

	srv := kubetest.Start(t, kubetest.Options{})
	cfg := srv.Config(kubetest.Admin)
	// client-go's default 5 requests/s would take over an hour for the
	// 20k writes that set the cluster up.
	cfg.QPS, cfg.Burst = 2000, 4000
	admin := kubernetes.NewForConfigOrDie(cfg)
	start := time.Now()
	if err := createCluster(ctx, t, admin, c, nodeNames); err != nil {
		t.Fatal(err)
	}
	res := memoryMeasured{Pods: len(c.Pods), Policies: len(c.Policies), Nodes: len(nodeNames), LocalPods: localPods(c),
		Rules: rules, Elements: elems, CreateSeconds: time.Since(start).Seconds()}
	t.Logf("created %d pods, %d policies, %d nodes in %v (%d local pods)", len(c.Pods), len(c.Policies), len(nodeNames), time.Since(start), res.LocalPods)

	// The suite's tag (prefix + pid) lets a later run remove this
	// namespace should the test binary be killed before its cleanup.
	ns := testns.New(t, fmt.Sprintf("%s%d", tagPrefix, os.Getpid()))
	ag := startAgent(t, srv, ns.Path)
	start = time.Now()
	if err := ag.waitTable(ctx, rules, elems); err != nil {
		t.Fatal(err)
	}
	res.FirstSyncSeconds = time.Since(start).Seconds()
	res.CachesSyncedSeconds = ag.cachesSynced()
	if m, err := ag.metrics(); err == nil {
		// Every sync until the table was complete counts (the first
		// may have run before the last objects arrived).
		res.CompileSeconds = m["nftguard_compile_duration_seconds_sum"]
		for k, v := range m {
			if strings.HasPrefix(k, "nftguard_sync_duration_seconds_sum") {
				res.KernelSeconds += v
			}
		}
	}
	t.Logf("first sync after %.1f s: caches synced %.1f s, compile %.3f s, kernel %.3f s", res.FirstSyncSeconds, res.CachesSyncedSeconds, res.CompileSeconds, res.KernelSeconds)
	time.Sleep(2 * time.Second) // let the post-sync garbage settle as it would in a quiet cluster
	res.RSSAfterSyncKB, res.HWMAfterSyncKB = ag.rss(t)

	// A second informer set like the agent's, in this process, counts
	// what one agent receives: the initial lists now, the watch events
	// during the churn.
	w := startWatcher(ctx, t, srv.Config(kubetest.Admin))
	res.APILoad.ContentType = w.contentType()
	res.APILoad.ListBytes, res.APILoad.ListObjects, res.APILoad.ListWireBytes = w.bytes.Load(), w.events.Load(), w.wire.Load()
	w.bytes.Store(0)
	w.events.Store(0)
	w.wire.Store(0)

	start = time.Now()
	writes, err := churnPods(ctx, admin, c, churn)
	if err != nil {
		t.Fatal(err)
	}
	res.Churn, res.ChurnSeconds = churn, time.Since(start).Seconds()
	time.Sleep(2 * time.Second) // the last watch events arrive
	res.APILoad.fill(w, writes, res.ChurnSeconds)
	t.Logf("API load: %+v", res.APILoad)
	// The churn ends in the starting state, so the table's size alone
	// cannot tell that the agent caught up: wait for its syncs to stop.
	if err := ag.waitQuiet(ctx, rules, elems); err != nil {
		t.Fatal(err)
	}
	res.RSSAfterChurnKB, res.HWMAfterChurnKB = ag.rss(t)
	res.MoreAgents = moreAgents(ctx, t, srv, rules, elems)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// expectedSize is the table the agent must reach, from the same compiler.
func expectedSize(c *cluster) (rules, elems int) {
	_, rules, _, elems = tableSize(compose.Build(c.input()))
	return rules, elems
}

// createCluster writes the objects as users and kubelets would: the pod,
// then its status with the address.
func createCluster(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, c *cluster, nodes []string) error {
	err := parallel(len(nodes), func(i int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[i], Labels: map[string]string{"kubernetes.io/hostname": nodes[i]}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.16.%d.%d", i>>8, i&255)}}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, ns := range c.Namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	// Pods in batches, logging the creation rate: at 150k pods the rate
	// measured on the first 10k tells whether the rest can finish.
	start := time.Now()
	const batch = 10000
	for from := 0; from < len(c.Pods); from += batch {
		to := min(from+batch, len(c.Pods))
		if err := parallel(to-from, func(i int) error { return createPod(ctx, cs, c.Pods[from+i]) }); err != nil {
			return err
		}
		el := time.Since(start)
		rate := float64(to) / el.Seconds()
		t.Logf("created %d/%d pods in %v (%.0f pods/s, load %s); the rest at this rate: %v",
			to, len(c.Pods), el.Round(time.Second), rate, loadAvg(), (time.Duration(float64(len(c.Pods)-to)/rate) * time.Second).Round(time.Second))
	}
	return parallel(len(c.Policies), func(i int) error {
		np := c.Policies[i]
		if _, err := cs.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create policy %s/%s: %w", np.Namespace, np.Name, err)
		}
		return nil
	})
}

func createPod(ctx context.Context, cs *kubernetes.Clientset, p *corev1.Pod) error {
	created, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	created.Status = p.Status
	if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// parallel runs fn(0..n-1) on a few workers, stopping at the first error.
func parallel(n int, fn func(i int) error) error {
	const workers = 16 // enough to keep the API server busy on 2 cores
	return parallelN(workers, n, fn)
}

// churnPods makes n changes and ends where it began: every tenth pod is
// deleted and recreated, the others get a label flipped and flipped back
// (two events each), so the final table equals the first.
func churnPods(ctx context.Context, cs *kubernetes.Clientset, c *cluster, n int) (writes int, err error) {
	for i := 0; i < n; i += 2 {
		p := c.Pods[(i*7919)%len(c.Pods)]
		pods := cs.CoreV1().Pods(p.Namespace)
		if i%20 == 0 {
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				return writes, fmt.Errorf("churn: delete pod %s: %w", p.Name, err)
			}
			if err := createPod(ctx, cs, p.DeepCopy()); err != nil {
				return writes, fmt.Errorf("churn: %w", err)
			}
			writes += 3 // delete, create, status
			continue
		}
		for _, app := range []string{"churned", p.Labels["app"]} {
			cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return writes, fmt.Errorf("churn: %w", err)
			}
			cur.Labels["app"] = app
			if _, err := pods.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return writes, fmt.Errorf("churn: relabel pod %s: %w", p.Name, err)
			}
			writes++
		}
	}
	return writes, nil
}

// agent is a running `nftguard run`.
type agent struct {
	cmd  *exec.Cmd
	addr string
	log  string
}

// cachesSynced reads from the agent's log how long its informers took to
// list and decode everything (0 if the line is missing).
func (a *agent) cachesSynced() float64 {
	b, _ := os.ReadFile(a.log)
	for line := range strings.Lines(string(b)) {
		var rec struct {
			Msg   string          `json:"msg"`
			After json.RawMessage `json:"after"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "informer caches synced" {
			continue
		}
		// slog writes a Duration as nanoseconds in JSON.
		var ns int64
		if json.Unmarshal(rec.After, &ns) == nil {
			return time.Duration(ns).Seconds()
		}
		var text string
		if json.Unmarshal(rec.After, &text) == nil {
			if d, err := time.ParseDuration(text); err == nil {
				return d.Seconds()
			}
		}
	}
	return 0
}

func startAgent(t *testing.T, srv *kubetest.Server, netns string) *agent {
	return startAgentLimited(t, srv, netns, os.Getenv("NFTGUARD_BENCH_AGENT_GOMEMLIMIT"))
}

// startAgentLimited is startAgent with the agent's Go memory limit
// (GOMEMLIMIT; "" for none).
func startAgentLimited(t *testing.T, srv *kubetest.Server, netns, memLimit string) *agent {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nftguard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nftguard")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nftguard: %v\n%s", err, out)
	}
	kc, err := srv.WriteKubeconfig(dir, kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ag := &agent{addr: l.Addr().String()}
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	ag.log = filepath.Join(dir, "agent.log")
	ag.cmd = exec.Command(bin, "run", "--kubeconfig", kc, "--node-name", localNode, "--netns", netns,
		"--metrics-addr", ag.addr, "--log-format", "json", "--log-level", "info")
	ag.cmd.Stdout, ag.cmd.Stderr = logf, logf
	if memLimit != "" {
		// The agent alone runs with the memory limit the DaemonSet
		// gives it; the test process holds the cluster and must not.
		ag.cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memLimit)
	}
	ag.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ag.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ag.cmd.Process.Kill()
		ag.cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("agent log:\n%s", b)
		}
	})
	return ag
}

// waitTable waits until the agent's metrics report the expected table
// size after a successful sync.
func (a *agent) waitTable(ctx context.Context, rules, elems int) error {
	for {
		m, err := a.metrics()
		if err == nil && m[`nftguard_table_objects{kind="rules"}`] == float64(rules) && m[`nftguard_table_objects{kind="elements"}`] == float64(elems) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent never reported %d rules and %d elements (last metrics error %v, rules %v, elements %v)",
				rules, elems, err, m[`nftguard_table_objects{kind="rules"}`], m[`nftguard_table_objects{kind="elements"}`])
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitQuiet waits until the table has the expected size and no sync has
// happened for three seconds.
func (a *agent) waitQuiet(ctx context.Context, rules, elems int) error {
	last, since := -1.0, time.Now()
	for {
		if err := a.waitTable(ctx, rules, elems); err != nil {
			return err
		}
		m, err := a.metrics()
		if err != nil {
			return err
		}
		var syncs float64
		for k, v := range m {
			if strings.HasPrefix(k, "nftguard_syncs_total") {
				syncs += v
			}
		}
		if syncs != last {
			last, since = syncs, time.Now()
		} else if time.Since(since) >= 3*time.Second {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (a *agent) metrics() (map[string]float64, error) {
	resp, err := http.Get("http://" + a.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			m[k] = f
		}
	}
	return m, sc.Err()
}

// rss reads the agent's resident set and its high-water mark.
func (a *agent) rss(t *testing.T) (rss, hwm int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch k {
		case "VmRSS":
			rss = kb
		case "VmHWM":
			hwm = kb
		}
	}
	return rss, hwm
}
