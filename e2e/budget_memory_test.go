package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
)

// memCgroup is a memory cgroup made for one test and removed after it:
// cgroup v2 (memory.max, memory.events) where /sys/fs/cgroup is the
// unified hierarchy, else a v1 memory cgroup (memory.limit_in_bytes,
// memory.oom_control) under the test's own, so the machine's other
// cgroups are never touched.
type memCgroup struct {
	dir string
	v2  bool
}

func newMemCgroup(t *testing.T, limit int64) *memCgroup {
	t.Helper()
	name := fmt.Sprintf("ngt-budget-%d", os.Getpid())
	var cg memCgroup
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		cg = memCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
	} else {
		own, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		parent := ""
		for _, l := range strings.Split(string(own), "\n") {
			if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
				parent = f[2]
			}
		}
		if parent == "" {
			t.Fatal("no memory cgroup (neither cgroup v2 nor a v1 memory controller)")
		}
		cg = memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", parent, name)}
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The processes in it are gone by now (they die with the test);
		// removal retries briefly while the kernel lets go of them.
		for i := 0; i < 50; i++ {
			if err := os.Remove(cg.dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("cgroup %s not removed", cg.dir)
	})
	lim := strconv.FormatInt(limit, 10)
	if cg.v2 {
		cg.write(t, "memory.max", lim)
		cg.write(t, "memory.swap.max", "0")
	} else {
		cg.write(t, "memory.limit_in_bytes", lim)
		if _, err := os.Stat(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")); err == nil {
			cg.write(t, "memory.memsw.limit_in_bytes", lim)
		}
	}
	return &cg
}

func (c *memCgroup) write(t *testing.T, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func (c *memCgroup) read(file string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, file))
	return string(b)
}

// ooms is how many processes the kernel OOM-killed in the cgroup.
func (c *memCgroup) ooms() int {
	f := "memory.oom_control"
	if c.v2 {
		f = "memory.events"
	}
	for _, l := range strings.Split(c.read(f), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// peak is the most memory the cgroup used, in bytes.
func (c *memCgroup) peak() int64 {
	f := "memory.max_usage_in_bytes"
	if c.v2 {
		f = "memory.peak"
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(c.read(f)), 10, 64)
	return n
}

// TestAgentMemoryBudget: the hostile objects of the budget issue against
// `nftguard run` with the DaemonSet's limits (GOMEMLIMIT=160MiB in a
// 256 MiB memory cgroup) and a real API server with ~2,000 pods: a
// 5,000-port policy selecting 10 local pods, and 300 small policies that
// each allow egress to every namespace through a selector of its own (so
// no two share a set: 300 copies of every pod's address). The ports are
// one set, so that policy is enforced; the copies exceed the node's
// budget, so the largest fail closed (their pods stay isolated). The agent
// is not OOM-killed, and another tenant's policy lands within a small
// multiple of the latency it had before them.
func TestAgentMemoryBudget(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	cfg := srv.Config(kubetest.Admin)
	cfg.QPS, cfg.Burst = 500, 1000
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const local, remote = 30, 1976 // 2,006 pods
	nss := []string{"big", "egr", "t"}
	for i := range 20 {
		nss = append(nss, fmt.Sprintf("r%d", i))
	}
	if err := kubetest.CreateNamespaces(ctx, admin, nss...); err != nil {
		t.Fatal(err)
	}
	type podSpec struct {
		ns, name, node, ip string
	}
	var specs []podSpec
	for i := range local {
		ns := nss[i%3]
		specs = append(specs, podSpec{ns, fmt.Sprintf("l%d", i), "n1", fmt.Sprintf("10.77.0.%d", i+2)})
	}
	for i := range remote {
		specs = append(specs, podSpec{nss[3+i%20], fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", 2+i%50), fmt.Sprintf("10.78.%d.%d", i/200, i%200+2)})
	}
	created := time.Now()
	work := make(chan podSpec)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Go(func() {
			for s := range work {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name, Labels: map[string]string{"app": s.ns}},
					Spec: corev1.PodSpec{NodeName: s.node, Containers: []corev1.Container{{Name: "c", Image: "agnhost",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
				if _, err := kubetest.CreateRunningPod(ctx, admin, p, s.ip); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	for _, s := range specs {
		work <- s
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("%d pods created in %v", len(specs), time.Since(created).Round(time.Millisecond))

	// The agent, in its own memory cgroup from its first instruction.
	cg := newMemCgroup(t, 256<<20)
	ns := testns.New(t, "bud")
	dir := t.TempDir()
	kubeconfig, err := srv.WriteKubeconfig(dir, kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg.dir,
		nftguardBin, "run", "--kubeconfig", kubeconfig, "--node-name", "n1", "--netns", ns.Path,
		"--metrics-addr", metricsAddr, "--cluster-cidr", "10.64.0.0/10")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=160MiB")
	cmd.Stdout, cmd.Stderr = logf, logf
	agent, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Kill()
	logTail := func() string {
		b, _ := os.ReadFile(logf.Name())
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		return string(b)
	}
	metrics := func() string {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	ingress := func() string {
		out, _ := ns.Exec("", "nft", "list", "map", "inet", "nftguard", "np_ingress4")
		return out
	}
	waitFor := func(what string, timeout time.Duration, ok func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !ok() {
			if agent.Exited() {
				t.Fatalf("the agent exited while waiting for %s (OOM kills: %d):\n%s", what, cg.ooms(), logTail())
			}
			if time.Since(start) > timeout {
				t.Fatalf("%s: not within %v (OOM kills: %d):\n%s", what, timeout, cg.ooms(), logTail())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitFor("the first sync", 2*time.Minute, func() bool { return strings.Contains(metrics(), "nftguard_last_sync_success_timestamp_seconds 1") })

	// probe creates a tenant policy isolating the pod l<i> of namespace t
	// and returns how long it took to reach the kernel.
	probe := func(i int) time.Duration {
		t.Helper()
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: fmt.Sprintf("probe-%d", i)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"probe": strconv.Itoa(i)}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}}}
		// The pod to isolate: a new local pod the policy selects.
		ip := fmt.Sprintf("10.77.1.%d", i+2)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: fmt.Sprintf("probe-%d", i), Labels: map[string]string{"probe": strconv.Itoa(i)}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}}}
		if _, err := kubetest.CreateRunningPod(ctx, admin, p, ip); err != nil {
			t.Fatal(err)
		}
		waitFor("the probe pod", time.Minute, func() bool { return strings.Contains(metrics(), `nftguard_local_pods `+strconv.Itoa(local+i+1)) })
		start := time.Now()
		if _, err := admin.NetworkingV1().NetworkPolicies("t").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor("probe policy "+np.Name, time.Minute, func() bool { return strings.Contains(ingress(), ip+" ") })
		return time.Since(start)
	}
	var before []time.Duration
	for i := range 3 {
		before = append(before, probe(i))
	}

	// The hostile objects: 5,000 ports (800,000 rules when rules were
	// peers × ports × pods), and 300 copies of every pod's address.
	var ports []networkingv1.NetworkPolicyPort
	for i := range 5000 {
		p := intstr.FromInt32(int32(1000 + i))
		ports = append(ports, networkingv1.NetworkPolicyPort{Port: &p})
	}
	big := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "big", Name: "ports"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports,
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}, {IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16"}}}}}}}
	hostileStart := time.Now()
	if _, err := admin.NetworkingV1().NetworkPolicies("big").Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Enforced before the 300 come: once they are in, the node's budget
	// may make it give way as the largest.
	waitFor("the 5,000-port policy enforced", 3*time.Minute, func() bool {
		return strings.Contains(mustList(ns, "chain", "np_pi_big_ports"), "dport")
	})
	for i := range 300 {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "egr", Name: fmt.Sprintf("all-%d", i)},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: fmt.Sprintf("k%d", i), Operator: metav1.LabelSelectorOpDoesNotExist}}}}}}}}}
		if _, err := admin.NetworkingV1().NetworkPolicies("egr").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// All 300 read: the last one created is either enforced or over
	// budget, and the agent has synced since.
	waitFor("the 300 egress policies", 3*time.Minute, func() bool {
		m := metrics()
		return strings.Contains(m, `name="all-299"`) || strings.Contains(mustList(ns, "chain", "np_egr_egr_l1"), "all-299")
	})
	settled := time.Since(hostileStart)
	var after []time.Duration
	for i := 3; i < 6; i++ {
		after = append(after, probe(i))
	}
	m := metrics()
	overNode := strings.Count(m, `nftguard_objects_over_budget{budget="node"`)
	// Enforced before the 300 came (above); since, the node's budget
	// may have made it give way as the largest, never its own.
	if strings.Contains(m, `budget="object",kind="NetworkPolicy",name="ports",namespace="big"`) {
		t.Error("the 5,000-port policy, one port set, is over its own budget")
	}
	if overNode == 0 {
		t.Error("300 copies of every pod's address fit the node's budget: the test no longer proves the budget under memory pressure")
	}
	if cg.ooms() != 0 || agent.Exited() {
		t.Fatalf("the agent was OOM-killed %d times (exited: %v):\n%s", cg.ooms(), agent.Exited(), logTail())
	}
	// The over-budget policy's pods stay isolated.
	for i := 0; i < local; i += 3 {
		if ip := fmt.Sprintf("10.77.0.%d", i+2); !strings.Contains(ingress(), ip+" ") {
			t.Errorf("pod big/l%d (%s) of the 5,000-port policy is not isolated", i, ip)
		}
	}
	t.Logf("probe latency before %v, after %v; hostile objects settled in %v; %d egress policies over the node budget; peak memory %.1f MiB of 256; OOM kills %d",
		before, after, settled.Round(time.Millisecond), overNode, float64(cg.peak())/(1<<20), cg.ooms())
	worst := max(before[0], before[1], before[2])
	for _, d := range after {
		if d > 10*worst+200*time.Millisecond {
			t.Errorf("a tenant policy took %v to land, %v before the hostile objects", d, worst)
		}
	}
	agent.Kill()
	<-agent.Done()
}

func mustList(ns *testns.NS, kind, name string) string {
	out, _ := ns.Exec("", "nft", "list", kind, "inet", "nftguard", name)
	return out
}
