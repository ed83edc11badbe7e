//go:build benchdenied

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
)

// TestDeniedLogCPU is scenario 6's CPU part (deniedlog.go): the agent's
// CPU while the kernel hands it records at a known rate. It is a test
// because the API server harness runs only under testing; the suite runs
// it with `go test -tags benchdenied` and reads the JSON it writes.
func TestDeniedLogCPU(t *testing.T) {
	outPath := os.Getenv("NFTGUARD_BENCH_DENIED_OUT")
	window, err := time.ParseDuration(os.Getenv("NFTGUARD_BENCH_DENIED_FOR"))
	if outPath == "" || err != nil {
		t.Fatal("run through bench/suite: NFTGUARD_BENCH_DENIED_OUT, _RATES and _FOR must be set")
	}
	var rates []int
	for _, s := range strings.Split(os.Getenv("NFTGUARD_BENCH_DENIED_RATES"), ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("NFTGUARD_BENCH_DENIED_RATES: %q", s)
		}
		rates = append(rates, n)
	}
	ctx := context.Background()
	srv := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(srv.Config(kubetest.Admin))
	lab := netlab.New(t, netlab.Spec{Nodes: []netlab.NodeSpec{{Name: "n0", Pods: []string{"x/a", "x/b"}}},
		Ports: []netlab.Port{{Proto: netlab.UDP, Num: 80}}})
	if err := deniedCluster(ctx, admin, lab); err != nil {
		t.Fatal(err)
	}
	bin := buildAgent(t)
	kc, err := srv.WriteKubeconfig(t.TempDir(), kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var out []deniedCPU
	for _, rate := range rates {
		ag := startDeniedAgent(t, bin, kc, lab.Node("n0").Path, rate)
		res, err := ag.measure(lab, rate, window)
		ag.stop()
		if err != nil {
			t.Fatalf("rate %d: %v\nagent log:\n%s", rate, err, tail(ag.log(), 20))
		}
		t.Logf("rate %d: %+v", rate, res)
		out = append(out, res)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deniedCluster writes the node, namespace x (opted in to logging) with
// the lab's two pods, and a policy isolating x/b for ingress.
func deniedCluster(ctx context.Context, cs kubernetes.Interface, lab *netlab.Lab) error {
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"nftguard.io/log-denied": "true"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, e := range lab.Pods {
		_, name, _ := strings.Cut(e.Name, "/")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name, Labels: map[string]string{"pod": name}},
			Spec: corev1.PodSpec{NodeName: "n0", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: e.IPv4.String()}, {IP: e.IPv6.String()}}
		p.Status.PodIP = e.IPv4.String()
		if err := createPod(ctx, cs, p); err != nil {
			return err
		}
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-b"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}}
	_, err := cs.NetworkingV1().NetworkPolicies("x").Create(ctx, np, metav1.CreateOptions{})
	return err
}

func createPod(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	created, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	created.Status = p.Status
	_, err = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func buildAgent(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "nftguard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nftguard")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nftguard: %v\n%s", err, out)
	}
	return bin
}

type deniedAgent struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
}

func startDeniedAgent(t *testing.T, bin, kubeconfig, netns string, rate int) *deniedAgent {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ag := &deniedAgent{addr: l.Addr().String(), logPath: filepath.Join(t.TempDir(), "agent.log")}
	l.Close()
	logf, err := os.Create(ag.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	r := strconv.Itoa(rate)
	ag.cmd = exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--node-name", "n0", "--netns", netns,
		"--metrics-addr", ag.addr, "--log-format", "json", "--log-denied", "--log-group", "1630", "--log-rate", r, "--log-burst", r)
	ag.cmd.Stdout, ag.cmd.Stderr = logf, logf
	ag.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ag.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ag.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + ag.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent not ready:\n%s", tail(ag.log(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ag
}

func (a *deniedAgent) stop() {
	if a.cmd.ProcessState == nil {
		a.cmd.Process.Kill()
		a.cmd.Wait()
	}
}

func (a *deniedAgent) log() string {
	b, _ := os.ReadFile(a.logPath)
	return string(b)
}

// cpuSeconds is the agent's user + system CPU time so far.
func (a *deniedAgent) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at
	// state; utime and stime are fields 14 and 15 of the whole line.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat: %q", b)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ is 100 on Linux
}

// rssKB is the agent's VmRSS (0 if unreadable).
func (a *deniedAgent) rssKB() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}

func (a *deniedAgent) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + a.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sum, found := 0.0, false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				sum, found = sum+v, true
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("no %s in the metrics", name)
	}
	return sum, sc.Err()
}

// measure takes the agent's CPU over one idle window and one window of
// flooding x/b with denied datagrams at 3 × rate a second.
func (a *deniedAgent) measure(lab *netlab.Lab, rate int, window time.Duration) (deniedCPU, error) {
	res := deniedCPU{LogRate: rate, Seconds: window.Seconds()}
	// Let the first sync's work and the table's burst settle.
	time.Sleep(time.Second)
	c0, err := a.cpuSeconds()
	if err != nil {
		return res, err
	}
	time.Sleep(window)
	c1, err := a.cpuSeconds()
	if err != nil {
		return res, err
	}
	res.CPUIdle = (c1 - c0) / window.Seconds()
	res.RSSIdleKB = a.rssKB()

	// A short flood first empties the limit's bucket, so the measured
	// window sees the steady rate, not the burst.
	if _, err := flood(lab, 3*rate, time.Second); err != nil {
		return res, err
	}
	read := func() (recs, limited, denied, cpu float64, err error) {
		if recs, err = a.metric("nftguard_denied_log_records_total"); err != nil {
			return
		}
		if limited, err = a.metric(`nftguard_denied_log_suppressed_total{reason="rate_limit"}`); err != nil {
			return
		}
		if denied, err = a.metric("nftguard_denied_packets_total"); err != nil {
			return
		}
		cpu, err = a.cpuSeconds()
		return
	}
	r0, l0, d0, c0, err := read()
	if err != nil {
		return res, err
	}
	sent, err := flood(lab, 3*rate, window)
	if err != nil {
		return res, err
	}
	time.Sleep(200 * time.Millisecond) // the last records reach the agent
	r1, l1, d1, c1, err := read()
	if err != nil {
		return res, err
	}
	// Records come only while the flood runs, so rates are per flood
	// window; the CPU spent on the last ones after it ended is theirs.
	res.FloodPPS = float64(sent) / window.Seconds()
	res.RecordsCounted = r1 - r0
	res.RecordsPerSec = (r1 - r0) / window.Seconds()
	res.RateLimited = l1 - l0
	res.DeniedPackets = d1 - d0
	res.CPUFlood = (c1 - c0) / window.Seconds()
	res.RSSFloodKB = a.rssKB()
	if res.RecordsCounted == 0 {
		return res, errors.New("no records during the flood")
	}
	return res, nil
}

// flood sends denied UDP datagrams from x/a to x/b:81 at pps a second for
// d, paced in 1 ms steps; it returns how many it sent.
func flood(lab *netlab.Lab, pps int, d time.Duration) (int, error) {
	dst := lab.Endpoint("x/b").IPv4
	sent := 0
	err := lab.Run("x/a", func() error {
		c, err := net.Dial("udp4", net.JoinHostPort(dst.String(), "81"))
		if err != nil {
			return err
		}
		defer c.Close()
		msg := []byte("denied")
		start := time.Now()
		for {
			el := time.Since(start)
			if el >= d {
				return nil
			}
			for want := int(el.Seconds() * float64(pps)); sent < want; sent++ {
				if _, err := c.Write(msg); err != nil && !errors.Is(err, unix.ECONNREFUSED) {
					return err
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	return sent, err
}
