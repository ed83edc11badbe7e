package cnpconformance

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
)

var runFilter = flag.String("cnpconformance.run", "",
	"run only the upstream conformance tests matching this -run pattern (below TestNftguardConformance/), e.g. CNPAdminTierIngressSCTP")

var reportDir = flag.String("cnpconformance.report", "",
	"write the upstream conformance report of each placement into this directory as nftguard-PLACEMENT.yaml (a whole run only: a filtered run reports the tests it left out as passed)")

// The implementation the conformance report names.
const (
	implOrganization = "nftguard"
	implProject      = "nftguard"
	implURL          = "https://github.com/nftguard/nftguard" // the module path
)

// placement is where the lab's kubelets put pods. Ordinary pods always go
// to n1 and n2 (ordinal 0 on n1, 1 on n2, so the suite probes both within
// a node and across nodes); the suite's host-network pods go either to
// nodes of their own or beside the ordinary pods. Both placements run:
// a pod's egress to a host-network pod on another node crosses the forward
// hook, to one on its own node the input hook, and policy must hold on
// both paths.
type placement struct {
	name                string
	slug                string // in the report's file name
	podNodes, hostNodes []string
}

var placements = []placement{
	{name: "host-network pods on other nodes", slug: "hostnet-other-nodes", podNodes: []string{"n1", "n2"}, hostNodes: []string{"n3", "n4"}},
	{name: "host-network pods beside the client pods", slug: "hostnet-beside", podNodes: []string{"n1", "n2"}, hostNodes: []string{"n1", "n2"}},
}

// nodes are the lab's nodes: every node of either kind, once.
func (p placement) nodes() []string {
	var out []string
	for _, n := range append(append([]string{}, p.podNodes...), p.hostNodes...) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func agentUser(node string) string { return "agent-" + node }

// TestUpstreamConformance runs the ClusterNetworkPolicy conformance suite
// of sigs.k8s.io/network-policy-api (the go.mod version) against one
// `nftguard run` per lab node; see the package doc.
func TestUpstreamConformance(t *testing.T) {
	kerneltest.Require(t)
	if *reportDir != "" && *runFilter != "" {
		t.Fatal("-cnpconformance.report needs a whole run: upstream reports the tests a filter leaves out as passed")
	}
	// Read once, before the first placement writes its report into the
	// work tree and makes it look modified.
	gitVersion, gitErr := gitPseudoVersion()
	for _, p := range placements {
		t.Run(p.name, func(t *testing.T) { runConformance(t, p, gitVersion, gitErr) })
	}
}

// runConformance runs the whole suite against a fresh cluster whose pods
// are placed by pl.
func runConformance(t *testing.T, pl placement, gitVersion string, gitErr error) {
	start := time.Now()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "harness.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	logger := log.New(logf, "", log.Ltime|log.Lmicroseconds)

	// The upstream suite compiles (a minute or more on a busy machine)
	// while the cluster comes up.
	modDir, err := kubetest.ModuleDir(kubetest.CNPModule)
	if err != nil {
		t.Fatal(err)
	}
	upstream := filepath.Join(dir, "upstream")
	if err := prepareUpstream(modDir, upstream); err != nil {
		t.Fatalf("prepare the upstream suite: %v", err)
	}
	suiteBin := filepath.Join(dir, "conformance.test")
	compiled := make(chan error, 1)
	go func() { compiled <- compileUpstream(upstream, suiteBin) }()
	bin := buildNftguard(t, dir)
	version := implVersion(t, bin, gitVersion, gitErr)

	var users []string
	for _, n := range pl.nodes() {
		users = append(users, agentUser(n))
	}
	srv := kubetest.Start(t, kubetest.Options{Users: append([]string{controllerUser}, users...)})
	adminCfg := srv.Config(kubetest.Admin)
	cs := kubernetes.NewForConfigOrDie(adminCfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := kubetest.InstallCNPCRD(ctx, adminCfg, "experimental"); err != nil {
		t.Fatal(err)
	}
	deployRBAC(ctx, t, adminCfg, cs, users)
	var agentArgs []string
	switch src := peerSource(); src {
	case "":
	case "slices":
		deployController(ctx, t, srv, adminCfg, cs, bin, dir, users)
		agentArgs = []string{"--peer-source", src}
	default:
		t.Fatalf("NFTGUARD_E2E_PEER_SOURCE=%q: want slices or nothing", src)
	}

	var specs []netlab.NodeSpec
	for _, n := range pl.nodes() {
		specs = append(specs, netlab.NodeSpec{Name: n})
	}
	// The external hosts hold the cluster DNS and the addresses of the
	// names the domain names test resolves (startClusterDNS).
	lab := netlab.New(t, netlab.Spec{Nodes: specs, External: []string{dnsHost, namesHost}})
	rt, err := netlab.NewRuntime(lab)
	if err != nil {
		t.Fatal(err)
	}
	createNodes(ctx, t, cs, lab)
	clusterDNS := startClusterDNS(ctx, t, cs, lab)

	k := newKubelet(cs, rt, pl.podNodes, pl.hostNodes, logger)
	kctx, kcancel := context.WithCancel(ctx)
	kdone := make(chan struct{})
	go func() { k.run(kctx); close(kdone) }()
	// Cleanups run last-in first-out: this one before the lab closes.
	t.Cleanup(func() { kcancel(); <-kdone })

	agents := map[string]*agent{}
	for _, n := range lab.Nodes {
		agents[n.Name] = startAgent(t, srv, bin, dir, n, agentArgs...)
	}

	bridge := newExecBridge(k, rt, clusterDNS, logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: bridge}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	execURL := "http://" + ln.Addr().String() + "/exec"
	t.Logf("cluster ready in %v: API server, CRD, %d lab nodes, %d agents, cluster DNS at %v, exec bridge at %s; nftguard %s",
		time.Since(start).Round(time.Millisecond), len(lab.Nodes), len(agents), clusterDNS, execURL, version)

	dumpOnFailure := func() {
		if !t.Failed() {
			return
		}
		for _, n := range lab.Nodes {
			t.Logf("--- agent %s log (tail) ---\n%s", n.Name, agents[n.Name].logTail(3000))
		}
		if data, err := os.ReadFile(filepath.Join(dir, "controller.log")); err == nil {
			t.Logf("--- controller log (tail) ---\n%s", tail(string(data), 3000))
		}
		if data, err := os.ReadFile(logf.Name()); err == nil {
			t.Logf("--- harness log (tail) ---\n%s", tail(string(data), 6000))
		}
	}
	defer dumpOnFailure()

	if !t.Run("bridge preflight", func(t *testing.T) { preflight(ctx, t, cs, lab, k, execURL, clusterDNS) }) {
		t.FailNow()
	}

	if err := <-compiled; err != nil {
		t.Fatalf("compile the upstream suite: %v", err)
	}
	kc, err := srv.WriteKubeconfig(dir, kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	reportPath := filepath.Join(dir, "conformance-report.yaml")
	args := []string{
		"-organization=" + implOrganization, "-project=" + implProject, "-url=" + implURL,
		"-version=" + version, "-contact=" + implURL,
		"-additional-info=e2e/cnpconformance of " + implURL + ": the suite against one `nftguard run` per node of a network-namespace lab, " + pl.name,
		"-report-output=" + reportPath,
	}
	suiteStart := time.Now()
	res, jsonPath, err := runUpstream(ctx, upstream, suiteBin, kc, execURL, *runFilter, dir, args)
	wall := time.Since(suiteStart)
	if err != nil {
		t.Fatalf("run the upstream suite: %v", err)
	}
	t.Log(res.Summary(wall))
	t.Logf("exec bridge probe outcomes: %v; whole test %v (output: %s)", bridge.Counts(), time.Since(start).Round(time.Second), jsonPath)
	if n, last := k.errors(); n > 0 {
		t.Errorf("the harness's controllers failed %d time(s), last: %s", n, last)
	}
	for node, ag := range agents {
		if ag.exited() {
			t.Errorf("agent %s exited during the run: %v", node, ag.proc.Err())
		}
	}
	if !res.OK() {
		reportFailures(t, res)
		return
	}
	if *runFilter != "" {
		t.Logf("conformance report (of a filtered run: tests left out count as passed) at %s", reportPath)
		return
	}
	report, err := checkReport(reportPath, version, res)
	if err != nil {
		t.Errorf("conformance report %s: %v", reportPath, err)
		return
	}
	t.Logf("conformance report: %s", report)
	if *reportDir != "" {
		data, err := os.ReadFile(reportPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(*reportDir, "nftguard-"+pl.slug+".yaml"), data, 0o644)
		}
		if err != nil {
			t.Errorf("copy the conformance report: %v", err)
		}
	}
}

// reportFailures fails the test naming every failed and skipped upstream
// test, with the output of the failed leaves.
func reportFailures(t *testing.T, res *suiteResult) {
	t.Helper()
	if res.Tests() == 0 {
		t.Errorf("%v (filter %q)", errNoTests, *runFilter)
	}
	if res.PackageFailed && len(res.Failed) == 0 {
		t.Errorf("the upstream test binary failed:\n%s", tail(outputOf(res, ""), 4000))
	}
	if len(res.Skipped) > 0 {
		t.Errorf("%d upstream test(s) skipped (every test must run): %s", len(res.Skipped), strings.Join(res.Skipped, ", "))
	}
	if len(res.Failed) == 0 {
		return
	}
	t.Errorf("%d upstream test(s) failed: %s", len(res.Failed), strings.Join(res.Failed, "\n  "))
	leaves := 0
	for _, name := range res.Failed {
		isParent := false
		for _, other := range res.Failed {
			isParent = isParent || strings.HasPrefix(other, name+"/")
		}
		if isParent {
			continue
		}
		if leaves++; leaves > 25 {
			t.Logf("(output of further failed tests left out)")
			break
		}
		t.Logf("--- %s ---\n%s", name, tail(outputOf(res, name), 2500))
	}
}

func outputOf(res *suiteResult, name string) string {
	if b := res.Output[name]; b != nil {
		return b.String()
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// goEnv is the environment of the go commands run in the upstream copy:
// its own go.mod and go.sum, modules through the proxy, no workspace, this
// toolchain.
func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
}

func compileUpstream(dir, out string) error {
	cmd := exec.Command("go", "test", "-c", "-trimpath", "-o", out, "./"+driverDir)
	cmd.Dir = dir
	cmd.Env = goEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c ./%s: %w\n%s", driverDir, err, b)
	}
	return nil
}

// runUpstream runs the compiled suite under test2json and parses its
// events; the raw events stay in dir for a post-mortem.
func runUpstream(ctx context.Context, upstream, bin, kubeconfig, execURL, filter, dir string, args []string) (*suiteResult, string, error) {
	run := "^" + driverTest + "$"
	if filter != "" {
		run += "/" + filter
	}
	jsonPath := filepath.Join(dir, "upstream.json")
	out, err := os.Create(jsonPath)
	if err != nil {
		return nil, "", err
	}
	defer out.Close()
	var stderr bytes.Buffer
	argv := append([]string{"tool", "test2json", "-t", "-p", "conformance", bin,
		"-test.v=test2json", "-test.run", run, "-test.timeout", "35m", "-test.count", "1"}, args...)
	cmd := exec.CommandContext(ctx, "go", argv...)
	cmd.Dir = filepath.Join(upstream, driverDir)
	cmd.Env = append(goEnv(), "KUBECONFIG="+kubeconfig, "NFTGUARD_EXEC_URL="+execURL)
	cmd.Stdout, cmd.Stderr = out, &stderr
	// Its own process group, so a cancelled run takes the suite binary
	// (test2json's child) with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if _, err := out.Seek(0, 0); err != nil {
		return nil, jsonPath, err
	}
	res, err := parseTestJSON(out)
	if err != nil {
		return res, jsonPath, err
	}
	if runErr != nil && len(res.Failed) == 0 && !res.PackageFailed {
		// Exited non-zero without a failed test: a crash or a timeout.
		res.PackageFailed = true
		b := &strings.Builder{}
		b.WriteString(outputOf(res, ""))
		fmt.Fprintf(b, "\n%v\n%s", runErr, stderr.String())
		res.Output[""] = b
	}
	return res, jsonPath, nil
}

func buildNftguard(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "nftguard")
	// -buildvcs=auto over a GOFLAGS that turns stamping off: the report
	// names the version the binary says it is.
	cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "github.com/nftguard/nftguard/cmd/nftguard")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nftguard: %v\n%s", err, out)
	}
	return bin
}

// deployRBAC applies deploy/rbac.yaml and binds each agent's user to its
// ClusterRole: the agents get exactly what a deployment grants.
func deployRBAC(ctx context.Context, t *testing.T, cfg *rest.Config, cs kubernetes.Interface, users []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.Apply(ctx, cfg, data, false); err != nil {
		t.Fatalf("deploy/rbac.yaml: %v", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nftguard-conformance-agents"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nftguard"},
	}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: u})
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createNodes writes the Node objects a kubelet would register: the lab
// node's uplink addresses, and the well-known labels the suite's node peers
// select on.
func createNodes(ctx context.Context, t *testing.T, cs kubernetes.Interface, lab *netlab.Lab) {
	t.Helper()
	for _, ln := range lab.Nodes {
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ln.Name,
			Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH, "kubernetes.io/hostname": ln.Name}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ln.IPv4.String()},
			{Type: corev1.NodeInternalIP, Address: ln.IPv6.String()},
			{Type: corev1.NodeHostName, Address: ln.Name},
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// agent is one `nftguard run` process.
type agent struct {
	node    string
	logPath string
	proc    *childproc.Proc
}

// startAgent starts the node's agent with its RBAC-restricted kubeconfig
// and waits until its first sync is done (/readyz).
func startAgent(t *testing.T, srv *kubetest.Server, bin, dir string, n *netlab.Node, extra ...string) *agent {
	t.Helper()
	kc, err := srv.WriteKubeconfig(dir, agentUser(n.Name))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ag := &agent{node: n.Name, logPath: filepath.Join(dir, "agent-"+n.Name+".log")}
	logf, err := os.Create(ag.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"run", "--kubeconfig", kc, "--node-name", n.Name, "--netns", n.Path,
		"--metrics-addr", addr, "--log-format", "json"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if ag.proc, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ag.proc.Kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return ag
			}
		}
		if ag.exited() || time.Now().After(deadline) {
			t.Fatalf("agent %s not ready (exited=%v %v):\n%s", n.Name, ag.exited(), ag.proc.Err(), ag.logTail(3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (ag *agent) exited() bool { return ag.proc.Exited() }

func (ag *agent) logTail(n int) string {
	b, err := os.ReadFile(ag.logPath)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}
