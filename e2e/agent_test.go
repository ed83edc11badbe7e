package e2e

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
)

var (
	agentOutage = flag.Duration("agent.outage", 10*time.Second, "how long TestAgent keeps the API server down (the issue's soak value is 60s)")
	agentChurn  = flag.Bool("agent.churn", false, "TestAgent: also create and delete 200 pods and 50 policies in bursts")
	agentScale  = flag.Bool("agent.scale", false, "TestAgent: also load 10k pods (100 on n1) and 1k policies, then measure agent RSS and label-change latency")
)

// The agent tests use ports 80 and 81 over TCP: enough to tell a port rule
// from a peer rule, and a denied matrix costs one probe timeout.
var agentPorts = []netlab.Port{{Proto: netlab.TCP, Num: 80}, {Proto: netlab.TCP, Num: 81}}

// agentLab is three lab nodes with two pods each, the API server that
// describes them, and one `nftguard run` per node.
type agentLab struct {
	t      *testing.T
	lab    *netlab.Lab
	srv    *kubetest.Server
	admin  kubernetes.Interface
	dir    string
	agents map[string]*agentProc
	// ctls are the controller replicas (see setPeerSource), in the order
	// started: ctl-1, ctl-2.
	ctls []*ctlProc
	// labels of each pod, for the expectations
	podLabels map[string]map[string]string
	// bin and args are the agents' binary and their flags beyond the
	// lab's own (kubeconfig, node, netns, metrics, log format).
	bin  string
	args []string
	// extraLogs, when set, adds the logs of agents this lab did not start.
	extraLogs func() string
}

// agentLabOptions change what newAgentLabWith starts.
type agentLabOptions struct {
	bin   string   // default: the binary TestMain built
	args  []string // default: short sync intervals, for quick tests
	users []string // API users besides the agents' (no permissions)
	// cidrs passes the lab's pod CIDRs as --cluster-cidr (egress needs them).
	cidrs bool
	// topology and external replace agentTopology and add external hosts
	// (behind the first node).
	topology []netlab.NodeSpec
	external []string
	// dualStack gives the API server an IPv6 Service range too
	// (kubetest.Options.DualStack).
	dualStack bool
	// bridged joins the pods to their nodes through a Linux bridge with
	// br_netfilter (netlab.Spec.Bridged) instead of routed veths.
	bridged bool
	// noAgents starts no `nftguard run` (the test runs the agent its own
	// way, e.g. in a container); audit turns on the API server's audit
	// log (kubetest.Options.Audit).
	noAgents, audit bool
	// peerSource is the agents' --peer-source: "" leaves the default
	// (auto, which finds no PeerSlices here: pods); "slices" also applies
	// deploy/crd.yaml and deploy/controller.yaml and runs `nftguard
	// controller` (controllers replicas, default 1) until the Lease says
	// the records are published, before the agents start, so that auto
	// would choose slices too; "auto" is the agents' default, for tests
	// that deploy the controller themselves or not at all. The env
	// NFTGUARD_E2E_PEER_SOURCE sets it for every lab whose test leaves it
	// empty (run the agent tests in either mode).
	peerSource  string
	controllers int
}

var agentTopology = []netlab.NodeSpec{
	{Name: "n1", Pods: []string{"x/a", "y/a"}},
	{Name: "n2", Pods: []string{"x/b", "y/b"}},
	{Name: "n3", Pods: []string{"x/c", "y/c"}},
}

func agentUser(node string) string { return "agent-" + node }

// TestAgent runs one API server and three agents, and walks through the
// life of a cluster: deploy/ RBAC only, policies and label changes
// converging on every node, invalid objects reported once as Events, an
// agent SIGKILLed and restarted, an API server outage, drift repair, and a
// graceful shutdown that leaves the table in force.
func TestAgent(t *testing.T) {
	a := newAgentLab(t)
	ctx := context.Background()

	t.Run("baseline", func(t *testing.T) {
		a.converge(t, "no policies", "y/b", "x/a", agentPorts[1], true, func(from, to string, p netlab.Port) bool { return true }, 0)
	})

	want := a.expect(ctx)
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-ingress"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	})
	t.Run("deny ingress to x", func(t *testing.T) {
		want = a.expect(ctx)
		a.converge(t, "deny-ingress", "y/b", "x/a", agentPorts[0], false, want, 0)
	})

	port80 := intstr.FromInt32(80)
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-y-80"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port80}},
			}},
		},
	})
	t.Run("allow y on port 80 across nodes", func(t *testing.T) {
		want = a.expect(ctx)
		a.converge(t, "allow-y-80", "y/b", "x/a", agentPorts[0], true, want, 0)
	})

	// A Service the egress compiler refuses: every agent finds it, and
	// one Event reports it.
	_, err := a.admin.CoreV1().Services("y").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-egress", Annotations: map[string]string{"nftguard.io/egress": "maybe"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-labeled"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"access": "yes"}},
				}},
			}},
		},
	})
	t.Run("pod label change", func(t *testing.T) {
		a.setPodLabel(ctx, "x/c", "access", "yes")
		want = a.expect(ctx)
		a.converge(t, "label x/c access=yes", "x/c", "x/a", agentPorts[1], true, want, 0)
	})

	t.Run("invalid object reported once", func(t *testing.T) {
		a.checkEvents(ctx, t, "y", "bad-egress")
	})

	t.Run("SIGKILL and restart keeps the table", func(t *testing.T) {
		n1 := a.agents["n1"]
		stopWatch := a.watchDenied(t, "y/b", "x/a", agentPorts[1])
		n1.signal(t, syscall.SIGKILL)
		// Down: n1's table stays in force while the cluster changes; the
		// live agents enforce the change (in milliseconds: wait for them).
		old := want
		a.deletePolicy(ctx, "x", "allow-labeled")
		want = a.expect(ctx)
		onN1 := map[string]bool{}
		for _, p := range a.lab.Node("n1").Pods {
			onN1[p.Name] = true
		}
		// Only ingress policies in these tests: the destination's node
		// decides.
		mixed := func(from, to string, p netlab.Port) bool {
			if onN1[to] {
				return old(from, to, p)
			}
			return want(from, to, p)
		}
		a.converge(t, "policy deleted while n1's agent is down", "x/c", "x/b", agentPorts[1], false, mixed, 0)
		a.checkMatrix(t, "n1 agent down", mixed)
		a.startAgent(t, "n1")
		a.converge(t, "restarted n1 agent", "x/c", "x/a", agentPorts[1], false, want, 0)
		if opened := stopWatch(); opened > 0 {
			t.Errorf("y/b -> x/a %v got through %d time(s) while the agent restarted", agentPorts[1], opened)
		}
		m := n1.metrics(t)
		if n := metricValue(m, `nftguard_syncs_total{result="success"}`); n != 1 {
			t.Errorf("restarted agent needed %v syncs to converge, want exactly 1", n)
		}
	})

	t.Run("API server outage", func(t *testing.T) {
		a.srv.StopAPIServer()
		start := time.Now()
		for time.Since(start) < *agentOutage {
			a.checkMatrix(t, "API server down", want)
			time.Sleep(time.Second)
		}
		for node, ag := range a.agents {
			if ag.exited() {
				t.Fatalf("agent %s exited while the API server was down:\n%s", node, ag.logTail())
			}
		}
		if err := a.srv.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		t.Logf("API server down for %v, enforcement unchanged", time.Since(start).Round(time.Second))
		a.deletePolicy(ctx, "x", "allow-y-80")
		want = a.expect(ctx)
		// client-go's reflectors back off exponentially (capped at 30s,
		// with jitter up to 60s) while the API server is down, so the first
		// change after an outage waits for their next attempt.
		a.converge(t, "delete allow-y-80 after the outage", "y/b", "x/a", agentPorts[0], false, want, 90*time.Second)
	})

	t.Run("drift is repaired", func(t *testing.T) {
		node := a.lab.Node("n2")
		if out, err := exec.Command("ip", "netns", "exec", node.NetNS, "nft", "delete", "table", "inet", "nftguard").CombinedOutput(); err != nil {
			t.Fatalf("delete the table behind the agent's back: %v: %s", err, out)
		}
		a.converge(t, "drift repair on n2", "y/a", "x/b", agentPorts[0], false, want, 0)
		if r := metricValue(a.agents["n2"].metrics(t), "nftguard_drift_repairs_total"); r < 1 {
			t.Errorf("nftguard_drift_repairs_total = %v on n2, want >= 1", r)
		}
	})

	if *agentChurn {
		t.Run("churn", func(t *testing.T) {
			a.runChurn(t)
			a.checkMatrix(t, "after churn", want)
		})
	} else {
		t.Log("churn not run by default (enable with -agent.churn)")
	}

	if *agentScale {
		t.Run("scale", func(t *testing.T) { a.runScale(t) })
	} else {
		t.Log("scale not run by default (enable with -agent.scale)")
	}

	t.Run("metrics and memory", func(t *testing.T) {
		m := a.agents["n2"].metrics(t)
		for _, name := range []string{
			"nftguard_sync_duration_seconds_bucket", "nftguard_sync_operations_bucket", `nftguard_table_objects{kind="rules"}`,
			`nftguard_table_objects{kind="elements"}`, `nftguard_table_objects{kind="sets"}`, "nftguard_drift_repairs_total",
			`nftguard_errors_total{kind="sync"}`, "nftguard_last_sync_success_timestamp_seconds", `nftguard_invalid_objects{kind="Service"}`,
		} {
			if !strings.Contains(m, name) {
				t.Errorf("metric %s missing", name)
			}
		}
		if v := metricValue(m, `nftguard_errors_total{kind="sync"}`); v != 0 {
			t.Errorf("n2 had %v failed syncs", v)
		}
		for _, node := range []string{"n1", "n2", "n3"} {
			t.Logf("agent %s RSS %d MiB", node, a.agents[node].rssKiB(t)/1024)
		}
	})

	t.Run("SIGTERM leaves the table in force", func(t *testing.T) {
		n3 := a.agents["n3"]
		n3.signal(t, syscall.SIGTERM)
		select {
		case <-n3.proc.Done():
		case <-time.After(15 * time.Second):
			t.Fatal("agent did not stop within 15s of SIGTERM")
		}
		if err := n3.proc.Err(); err != nil {
			t.Fatalf("agent exited with %v after SIGTERM:\n%s", err, n3.logTail())
		}
		if out, err := exec.Command("ip", "netns", "exec", a.lab.Node("n3").NetNS, "nft", "list", "table", "inet", "nftguard").CombinedOutput(); err != nil {
			t.Fatalf("table gone after SIGTERM: %v: %s", err, out)
		}
		a.checkMatrix(t, "n3 agent stopped", want)
	})
}

// TestAgentBinaryStatic checks that the binary the Dockerfile builds
// (CGO_ENABLED=0) runs in FROM scratch: no interpreter, no dynamic section.
func TestAgentBinaryStatic(t *testing.T) {
	f, err := elf.Open(nftguardBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary imports %v", libs)
	}
}

func newAgentLab(t *testing.T) *agentLab { return newAgentLabWith(t, agentLabOptions{}) }

func newAgentLabWith(t *testing.T, opts agentLabOptions) *agentLab {
	t.Helper()
	topology := opts.topology
	if topology == nil {
		topology = agentTopology
	}
	var users []string
	for _, n := range topology {
		users = append(users, agentUser(n.Name))
	}
	start := time.Now()
	srv := kubetest.Start(t, kubetest.Options{Users: append(append([]string{labCtlUser}, users...), opts.users...), DualStack: opts.dualStack, Audit: opts.audit})
	t.Logf("API server ready in %v", time.Since(start).Round(time.Millisecond))
	a := &agentLab{t: t, srv: srv, admin: kubernetes.NewForConfigOrDie(srv.Config(kubetest.Admin)),
		dir: t.TempDir(), agents: map[string]*agentProc{}, podLabels: map[string]map[string]string{},
		bin: opts.bin, args: opts.args}
	if a.bin == "" {
		a.bin = nftguardBin
	}
	if a.args == nil {
		a.args = []string{"--min-sync-interval", "50ms", "--max-sync-interval", "500ms"}
	}
	a.lab = netlab.New(t, netlab.Spec{Nodes: topology, External: opts.external, Ports: agentPorts, Bridged: opts.bridged})
	if opts.cidrs {
		for _, n := range a.lab.Nodes {
			a.args = append(a.args, "--cluster-cidr", n.PodCIDRv4.String())
		}
	}
	ctx := context.Background()
	a.deploy(ctx, users)
	a.createCluster(ctx)
	a.setPeerSource(t, opts.peerSource, opts.controllers)
	if opts.noAgents {
		return a
	}
	for _, n := range topology {
		a.startAgent(t, n.Name)
	}
	return a
}

// deploy applies deploy/ to the API server (server-side dry run first, as
// an operator would check it, then for real) and binds each agent's user to
// the ClusterRole from deploy/rbac.yaml: the agents get nothing else.
func (a *agentLab) deploy(ctx context.Context, users []string) {
	t := a.t
	cfg := a.srv.Config(kubetest.Admin)
	for _, f := range []string{"rbac.yaml", "daemonset.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubetest.Apply(ctx, cfg, data, true); err != nil {
			t.Fatalf("deploy/%s (dry run): %v", f, err)
		}
		if _, err := kubetest.Apply(ctx, cfg, data, false); err != nil {
			t.Fatalf("deploy/%s: %v", f, err)
		}
	}
	// The Role of deploy/rbac.yaml in kube-system (the controller's
	// Lease), when it has one.
	if _, err := a.admin.RbacV1().Roles("kube-system").Get(ctx, "nftguard", metav1.GetOptions{}); err == nil {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nftguard-test-agents"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "nftguard"},
		}
		for _, u := range users {
			rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: u})
		}
		if _, err := a.admin.RbacV1().RoleBindings("kube-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nftguard-test-agents"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nftguard"},
	}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: u})
	}
	if _, err := a.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createCluster writes what kubelets and users would: Nodes with their
// addresses, namespaces, and pods whose status carries the lab's addresses.
func (a *agentLab) createCluster(ctx context.Context) {
	t := a.t
	for _, ln := range a.lab.Nodes {
		n, err := a.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ln.Name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ln.IPv4.String()}}
		if _, err := a.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"x", "y"} {
		_, err := a.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range a.lab.Pods {
		ns, name, _ := strings.Cut(ep.Name, "/")
		a.podLabels[ep.Name] = map[string]string{"pod": name}
		p, err := a.admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}},
			Spec: corev1.PodSpec{NodeName: ep.Node.Name, Containers: []corev1.Container{{
				Name: "serve", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Ports: []corev1.ContainerPort{{Name: "serve-80", ContainerPort: 80}, {Name: "serve-81", ContainerPort: 81}},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.HostIP = ep.Node.IPv4.String()
		p.Status.PodIP = ep.IPv4.String()
		p.Status.PodIPs = []corev1.PodIP{{IP: ep.IPv4.String()}, {IP: ep.IPv6.String()}}
		if _, err := a.admin.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set status of pod %s: %v", ep.Name, err)
		}
	}
}

func (a *agentLab) createPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) {
	a.t.Helper()
	if _, err := a.admin.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		a.t.Fatalf("create policy %s/%s: %v", np.Namespace, np.Name, err)
	}
}

func (a *agentLab) deletePolicy(ctx context.Context, ns, name string) {
	a.t.Helper()
	if err := a.admin.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		a.t.Fatalf("delete policy %s/%s: %v", ns, name, err)
	}
}

func (a *agentLab) setPodLabel(ctx context.Context, pod, key, value string) {
	a.t.Helper()
	ns, name, _ := strings.Cut(pod, "/")
	p, err := a.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	p.Labels[key] = value
	if _, err := a.admin.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	a.podLabels[pod][key] = value
}

// expect computes the expected matrix from the policies in the API server,
// for the few shapes these tests use (ingress policies in x with namespace,
// pod-label and port conditions). A pod always reaches itself.
func (a *agentLab) expect(ctx context.Context) func(from, to string, p netlab.Port) bool {
	a.t.Helper()
	list, err := a.admin.NetworkingV1().NetworkPolicies("x").List(ctx, metav1.ListOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	pols := list.Items
	labels := map[string]map[string]string{}
	for k, v := range a.podLabels {
		labels[k] = map[string]string{}
		for lk, lv := range v {
			labels[k][lk] = lv
		}
	}
	return func(from, to string, p netlab.Port) bool {
		if from == to || nsOf(to) != "x" || len(pols) == 0 {
			return true
		}
		for _, np := range pols {
			for _, r := range np.Spec.Ingress {
				if agentPeerMatches(r.From, from, labels[from]) && agentPortMatches(r.Ports, p) {
					return true
				}
			}
		}
		return false
	}
}

func agentPeerMatches(peers []networkingv1.NetworkPolicyPeer, from string, podLabels map[string]string) bool {
	if len(peers) == 0 {
		return true
	}
	subset := func(sel *metav1.LabelSelector, have map[string]string) bool {
		for k, v := range sel.MatchLabels {
			if have[k] != v {
				return false
			}
		}
		return true
	}
	for _, pr := range peers {
		nsOK := pr.NamespaceSelector == nil && nsOf(from) == "x" || pr.NamespaceSelector != nil && subset(pr.NamespaceSelector, map[string]string{"ns": nsOf(from)})
		podOK := pr.PodSelector == nil || subset(pr.PodSelector, podLabels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func agentPortMatches(ports []networkingv1.NetworkPolicyPort, p netlab.Port) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		if pp.Port == nil || pp.Port.IntValue() == p.Num {
			return true
		}
	}
	return false
}

// converge measures how long the cluster takes to reach want after a change
// made just before: it polls one key cell (from -> to on port, which the
// change flips to keyAllowed) quickly, then checks the whole matrix on
// every node, retrying until a deadline (30s when within is 0).
func (a *agentLab) converge(t *testing.T, what, from, to string, port netlab.Port, keyAllowed bool, want func(from, to string, p netlab.Port) bool, within time.Duration) {
	t.Helper()
	if within == 0 {
		within = 30 * time.Second
	}
	start := time.Now()
	deadline := start.Add(within)
	var keyAt time.Duration
	for {
		// A lab connection is set up in well under a millisecond, so a
		// short timeout keeps the measurement fine-grained.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		ok, _ := a.lab.Probe(ctx, from, to, port, netlab.IPv4) // a timeout reads as denied
		cancel()
		if ok == keyAllowed {
			keyAt = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s -> %s %v still allowed=%v after %v\n%s", what, from, to, port, ok, within, a.logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	exp := a.expected(want)
	for {
		got, err := a.lab.Reachability(context.Background(), netlab.IPv4, agentPorts...)
		if err != nil {
			t.Fatal(err)
		}
		diff := netlab.Compare(exp, got)
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: connectivity did not converge within %v:\n%s\n%s", what, within, diff, a.logs())
		}
	}
	t.Logf("%s: converged in %v (key cell %s -> %s %v), whole matrix by %v", what, keyAt.Round(time.Millisecond),
		from, to, port, time.Since(start).Round(time.Millisecond))
}

func (a *agentLab) expected(want func(from, to string, p netlab.Port) bool) *netlab.Matrix {
	exp := a.lab.NewExpected(netlab.IPv4, false, agentPorts...)
	for _, from := range exp.From {
		for _, to := range exp.To {
			for _, p := range agentPorts {
				exp.Expect(from, to, want(from, to, p), p)
			}
		}
	}
	return exp
}

// checkMatrix asserts the matrix equals want right now (no retries).
func (a *agentLab) checkMatrix(t *testing.T, what string, want func(from, to string, p netlab.Port) bool) {
	t.Helper()
	got, err := a.lab.Reachability(context.Background(), netlab.IPv4, agentPorts...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := netlab.Compare(a.expected(want), got); diff != "" {
		t.Fatalf("%s: enforcement changed:\n%s", what, diff)
	}
}

// watchDenied probes a denied cell in a loop until the returned function is
// called, which reports how often it got through.
func (a *agentLab) watchDenied(t *testing.T, from, to string, port netlab.Port) func() int {
	var opened atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			if ok, _ := a.lab.Probe(ctx, from, to, port, netlab.IPv4); ok {
				opened.Add(1)
			}
			cancel()
		}
	}()
	return func() int {
		close(stop)
		<-done
		return int(opened.Load())
	}
}

// checkEvents waits for the Warning Event about the object, then checks
// that later syncs did not repeat it: every agent finds the problem, and
// the agents that report it write one Event of one name.
func (a *agentLab) checkEvents(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	list := func() []corev1.Event {
		l, err := a.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, e := range l.Items {
			if e.Reason == "NftguardCompileFailed" && e.Type == corev1.EventTypeWarning {
				out = append(out, e)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(list()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no event about %s/%s\n%s", ns, name, a.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Make every agent sync a few more times, then count again.
	syncs := func() map[string]float64 {
		out := map[string]float64{}
		for node, ag := range a.agents {
			out[node] = metricValue(ag.metrics(t), `nftguard_syncs_total{result="success"}`)
		}
		return out
	}
	for i := 0; i < 3; i++ {
		before := syncs()
		a.setPodLabel(ctx, "y/c", "round", strconv.Itoa(i))
		deadline := time.Now().Add(time.Minute)
		for node, n := range syncs() {
			for ; n <= before[node]; n = metricValue(a.agents[node].metrics(t), `nftguard_syncs_total{result="success"}`) {
				if time.Now().After(deadline) {
					t.Fatalf("agent %s did not sync after a label change", node)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	// Events are written by a goroutine of their own after the sync
	// that found the problem: absence takes a moment to show.
	time.Sleep(time.Second)
	evs := list()
	if len(evs) != 1 || evs[0].Count != 1 {
		t.Errorf("%d events about %s/%s from %d agents, want one with count 1: %+v", len(evs), ns, name, len(agentTopology), evs)
		return
	}
	t.Logf("one event about %s/%s, written by %s", ns, name, evs[0].Source.Host)
}

func (a *agentLab) logs() string {
	var b strings.Builder
	for _, n := range agentTopology {
		if ag := a.agents[n.Name]; ag != nil {
			fmt.Fprintf(&b, "--- agent %s log (tail) ---\n%s\n", n.Name, ag.logTail())
		}
	}
	b.WriteString(a.ctlLogs())
	if a.extraLogs != nil {
		b.WriteString(a.extraLogs())
	}
	return b.String()
}

// agentProc is one `nftguard run` process.
type agentProc struct {
	node    string
	addr    string // host:port of /metrics, /healthz, /readyz
	logPath string
	proc    *childproc.Proc // nil until started
}

// startAgent starts (or restarts) the node's agent with its RBAC-restricted
// kubeconfig and waits until it is ready.
func (a *agentLab) startAgent(t *testing.T, node string) {
	t.Helper()
	a.startAgentAs(t, node, node, a.lab.Node(node).Path)
}

// startAgentAs starts (or restarts) the agent a.agents[key] for node in the
// network namespace netns, with extra flags after the lab's: a second
// agent for a node, in a namespace of its own, compiles that node's table
// where it touches no packet.
func (a *agentLab) startAgentAs(t *testing.T, key, node, netns string, extra ...string) {
	t.Helper()
	kc, err := a.srv.WriteKubeconfig(a.dir, agentUser(node))
	if err != nil {
		t.Fatal(err)
	}
	ag := a.agents[key]
	if ag == nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ag = &agentProc{node: key, addr: l.Addr().String(), logPath: filepath.Join(a.dir, "agent-"+key+".log")}
		l.Close()
		a.agents[key] = ag
		// The lab's test, not a subtest's: the agent outlives the subtest that starts it.
		a.t.Cleanup(func() { ag.signal(a.t, syscall.SIGKILL) })
	} else {
		ag.signal(t, syscall.SIGKILL)
	}
	logf, err := os.OpenFile(ag.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(a.bin, append(append([]string{"run", "--kubeconfig", kc, "--node-name", node,
		"--netns", netns, "--metrics-addr", ag.addr, "--log-format", "json"}, a.args...), extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if ag.proc, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		resp, err := http.Get("http://" + ag.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if ag.exited() || time.Since(start) > 30*time.Second {
			t.Fatalf("agent %s not ready after %v (exited=%v %v):\n%s", node, time.Since(start), ag.exited(), ag.proc.Err(), ag.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("agent %s ready (first sync done) %v after start", key, time.Since(start).Round(time.Millisecond))
}

func (ag *agentProc) exited() bool { return ag.proc != nil && ag.proc.Exited() }

// signal sends sig to the agent by PID; SIGKILL also waits for the exit.
func (ag *agentProc) signal(t *testing.T, sig syscall.Signal) {
	if ag.proc == nil || ag.exited() {
		return
	}
	if err := ag.proc.Signal(sig); err != nil {
		t.Errorf("signal agent %s: %v", ag.node, err)
	}
	if sig == syscall.SIGKILL {
		<-ag.proc.Done()
	}
}

func (ag *agentProc) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + ag.addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape agent %s: %v", ag.node, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

func (ag *agentProc) rssKiB(t *testing.T) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ag.proc.Pid()))
	if err != nil {
		t.Fatalf("agent %s: %v", ag.node, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

func (ag *agentProc) logTail() string {
	b, err := os.ReadFile(ag.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// metricValue returns the value of one series in Prometheus text format
// (-1 when absent).
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// runChurn creates 200 pods and 50 policies in bursts of 20, deletes half of
// each, and then checks that no sync failed, that the lab's connectivity is
// unchanged (the churn lives in its own namespace), and that each node's
// table equals a fresh compile of what is in the API server.
func (a *agentLab) runChurn(t *testing.T) { a.runChurnWith(t, nil) }

// runChurnWith is runChurn, calling mid (when not nil) once half the pods
// are created: a failure injected in the middle of the churn.
func (a *agentLab) runChurnWith(t *testing.T, mid func()) {
	ctx := context.Background()
	const pods, policies, burst = 200, 50, 20
	if _, err := a.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "churn", Labels: map[string]string{"ns": "churn"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("p%03d", i)
		p, err := a.admin.CoreV1().Pods("churn").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": fmt.Sprintf("app%d", i%10), "pod": name}},
			Spec: corev1.PodSpec{NodeName: agentTopology[i%len(agentTopology)].Name, Containers: []corev1.Container{{
				Name: "c", Image: "agnhost", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip := fmt.Sprintf("10.200.%d.%d", i/250, i%250+1)
		p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		if _, err := a.admin.CoreV1().Pods("churn").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%burst == burst-1 {
			time.Sleep(200 * time.Millisecond) // let a burst's sync happen mid-churn
		}
		if i == pods/2 && mid != nil {
			mid()
		}
	}
	named := intstr.FromString("http")
	for i := 0; i < policies; i++ {
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "churn", Name: fmt.Sprintf("np%02d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (i+1)%10)}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
				}},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("192.168.%d.0/24", i)}}},
				}},
			},
		}
		if _, err := a.admin.NetworkingV1().NetworkPolicies("churn").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%burst == burst-1 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	for i := 0; i < pods; i += 2 {
		if err := a.admin.CoreV1().Pods("churn").Delete(ctx, fmt.Sprintf("p%03d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < policies; i += 2 {
		if err := a.admin.NetworkingV1().NetworkPolicies("churn").Delete(ctx, fmt.Sprintf("np%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("churn: %d pods and %d policies created, half deleted, in %v", pods, policies, time.Since(start).Round(time.Millisecond))

	manifest := a.dumpCluster(ctx, t)
	converged := time.Now()
	for _, n := range agentTopology {
		ag := a.agents[n.Name]
		if ag == nil || ag.exited() {
			continue
		}
		// The rendered table of the API state loads with nft and has
		// the churn pods.
		if wantTable := a.freshTable(t, manifest, n.Name); !strings.Contains(wantTable, "10.200.0.") {
			t.Fatalf("fresh compile for %s lacks the churn pods:\n%s", n.Name, wantTable)
		}
		// Each table must equal a fresh compile of the API state for
		// that node, its pods' interfaces included (render reads none,
		// so its table has no guard chains): doctor -f compiles as
		// apply would there and compares kernel objects exactly.
		var got string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			out, err := exec.Command(nftguardBin, "doctor", "-f", manifest, "--netns", a.lab.Node(n.Name).Path,
				"--node-name", n.Name, "--probe=false").CombinedOutput()
			got = string(out)
			return err == nil && strings.Contains(got, "in sync with the manifests"), nil
		})
		if err != nil {
			t.Fatalf("node %s: table differs from a fresh compile after churn:\n%s\n%s", n.Name, got, ag.logTail())
		}
		if v := metricValue(ag.metrics(t), `nftguard_errors_total{kind="sync"}`); v != 0 {
			t.Errorf("node %s: %v failed syncs during churn", n.Name, v)
		}
	}
	t.Logf("churn: every node's table equals a fresh compile %v after the last change", time.Since(converged).Round(time.Millisecond))
}

// dumpCluster writes the API server's objects as one manifest for
// `nftguard render`.
func (a *agentLab) dumpCluster(ctx context.Context, t *testing.T) string {
	var items []any
	nss, err := a.admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nss.Items {
		o := &nss.Items[i]
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
		items = append(items, o)
	}
	ps, err := a.admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps.Items {
		o := &ps.Items[i]
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		items = append(items, o)
	}
	nps, err := a.admin.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nps.Items {
		o := &nps.Items[i]
		o.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
		items = append(items, o)
	}
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.dir, "cluster.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// freshTable renders the node's table from the manifest, loads it with nft
// into a scratch namespace and lists it back, so both sides of the
// comparison are printed by the same nft.
func (a *agentLab) freshTable(t *testing.T, manifest, node string) string {
	out, err := exec.Command(nftguardBin, "render", "-f", manifest, "--node-name", node).Output()
	if err != nil {
		t.Fatalf("render for %s: %v", node, err)
	}
	// A namespace of this test's own (testns), not `ip netns add`: its
	// name carries its owner, so a killed run's is swept by the next.
	// (Create, not New: this runs many times per test, each namespace goes
	// when the comparison is done.)
	ns, err := testns.Create("churn")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("delete %s: %v", ns.Name, err)
		}
	}()
	if msg, err := ns.Exec(string(out), "nft", "-f", "-"); err != nil {
		t.Fatalf("nft -f rendered table: %v: %s", err, msg)
	}
	listing, err := ns.Exec("", "nft", "list", "table", "inet", "nftguard")
	if err != nil {
		t.Fatalf("nft list in %s: %v: %s", ns.Name, err, listing)
	}
	return normalizeNft(listing)
}

func nftList(t *testing.T, netns string) string {
	out, err := exec.Command("ip", "netns", "exec", netns, "nft", "list", "table", "inet", "nftguard").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list in %s: %v: %s", netns, err, out)
	}
	return string(out)
}

// normalizeNft makes two listings of equal tables compare equal: chains and
// sets are listed in creation order and hash-set elements in insertion
// order, both of which differ between an incrementally built table and a
// fresh load. Rule order inside a chain is kept: it is semantic.
func normalizeNft(listing string) string {
	var blocks []string
	var cur []string
	var elems []string
	inElems := false
	for _, line := range strings.Split(listing, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case inElems || strings.HasPrefix(trimmed, "elements = {"):
			inElems = true
			part := strings.TrimPrefix(trimmed, "elements = {")
			closed := strings.HasSuffix(part, "}")
			part = strings.TrimSuffix(part, "}")
			for _, e := range strings.Split(part, ",") {
				if e = strings.TrimSpace(e); e != "" {
					elems = append(elems, e)
				}
			}
			if closed {
				sort.Strings(elems)
				cur = append(cur, "elements = { "+strings.Join(elems, ", ")+" }")
				elems, inElems = nil, false
			}
		case strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "\t\t") && trimmed == "}":
			cur = append(cur, trimmed)
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		case strings.HasPrefix(line, "\t"):
			cur = append(cur, trimmed)
		}
	}
	sort.Strings(blocks)
	return strings.Join(blocks, "\n\n")
}

// runScale loads 10k pods spread over 100 nodes (100 of them on n1, whose
// agent is measured) in 50 namespaces, and 1k policies, then measures the
// agents' RSS and the time from a pod label change to the kernel change on
// n1, with the whole load in every agent's caches and table.
func (a *agentLab) runScale(t *testing.T) {
	a.loadScale(t, scalePods, scalePolicies)
	for _, node := range []string{"n1", "n2"} {
		t.Logf("scale: agent %s RSS %d MiB", node, a.agents[node].rssKiB(t)/1024)
	}
	a.measureScaleLabel(t)
}

// The scale load of the agent tests: 10k pods over scaleNodes nodes (100
// of them on n1), 1k policies.
const scalePods, scalePolicies, scaleNodes = 10000, 1000, 100

// loadScale writes the scale load, pods over scaleNodes nodes (every
// scaleNodes-th on n1) in 50 namespaces and policies, and waits until n1's
// agent has synced it.
func (a *agentLab) loadScale(t *testing.T, pods, policies int) {
	ctx := context.Background()
	const namespaces, nodes = 50, scaleNodes
	cfg := a.srv.Config(kubetest.Admin)
	cfg.QPS, cfg.Burst = 5000, 5000
	admin := kubernetes.NewForConfigOrDie(cfg)
	start := time.Now()
	for i := 0; i < namespaces; i++ {
		name := fmt.Sprintf("scale-%02d", i)
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"ns": name, "tier": fmt.Sprintf("t%d", i%5)}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	work := make(chan int)
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		go func() {
			for i := range work {
				errs <- a.scalePod(ctx, admin, i, namespaces, nodes)
			}
		}()
	}
	go func() {
		for i := 0; i < pods; i++ {
			work <- i
		}
		close(work)
	}()
	for i := 0; i < pods; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	named := intstr.FromString("http")
	for i := 0; i < policies; i++ {
		ns := fmt.Sprintf("scale-%02d", i%namespaces)
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("np%04d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%20)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": fmt.Sprintf("t%d", i%5)}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (i+1)%20)}},
					}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
				}},
			},
		}
		if _, err := admin.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("scale: %d pods over %d nodes and %d policies written in %v", pods, nodes, policies, time.Since(start).Round(time.Second))

	// Wait until n1's agent has synced everything: its table holds a
	// verdict map entry per local pod.
	n1 := a.agents["n1"]
	loaded := time.Now()
	var elems float64
	for {
		time.Sleep(time.Second)
		m := n1.metrics(t)
		e := metricValue(m, `nftguard_table_objects{kind="elements"}`)
		if e == elems && e > 0 {
			break
		}
		elems = e
		if time.Since(loaded) > 3*time.Minute {
			t.Fatalf("n1 still changing after 3 min (elements %v)", e)
		}
	}
	m := n1.metrics(t)
	t.Logf("scale: n1 settled: table %v rules, %v sets, %v elements; sync errors %v",
		metricValue(m, `nftguard_table_objects{kind="rules"}`), metricValue(m, `nftguard_table_objects{kind="sets"}`),
		elems, metricValue(m, `nftguard_errors_total{kind="sync"}`))
}

func (a *agentLab) measureScaleLabel(t *testing.T) {
	ctx := context.Background()
	n1 := a.agents["n1"]
	// Label-change latency on n1: toggle a label that a policy in x
	// matches and time the key cell, minus the 50ms debounce.
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-scale-probe"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "yes"}}}},
			}},
		},
	})
	time.Sleep(2 * time.Second)
	var lat []time.Duration
	for i := 0; i < 5; i++ {
		a.setPodLabel(ctx, "x/b", "probe", "yes")
		lat = append(lat, a.waitCell(t, "x/b", "x/a", agentPorts[1], true))
		a.setPodLabel(ctx, "x/b", "probe", "no")
		a.waitCell(t, "x/b", "x/a", agentPorts[1], false)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	m := n1.metrics(t)
	t.Logf("scale: label change -> kernel on n1 (lab sync intervals 50ms/500ms): min %v median %v max %v; compile avg %.1fms, sync avg %.1fms",
		lat[0], lat[len(lat)/2], lat[len(lat)-1],
		1000*metricValue(m, "nftguard_compile_duration_seconds_sum")/metricValue(m, "nftguard_compile_duration_seconds_count"),
		1000*metricValue(m, `nftguard_sync_duration_seconds_sum{mode="incremental"}`)/metricValue(m, `nftguard_sync_duration_seconds_count{mode="incremental"}`))
	a.deletePolicy(ctx, "x", "allow-scale-probe")
	delete(a.podLabels["x/b"], "probe")
}

func (a *agentLab) scalePod(ctx context.Context, admin kubernetes.Interface, i, namespaces, nodes int) error {
	ns := fmt.Sprintf("scale-%02d", i%namespaces)
	node := fmt.Sprintf("fake-%03d", i%nodes)
	if i%nodes == 0 {
		node = "n1"
	}
	p, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Labels: map[string]string{"app": fmt.Sprintf("app%d", i%20)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Image: "agnhost", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 128+i/65536, i/256%256, i%256)
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
	_, err = admin.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// waitCell polls one cell until it reads allowed and returns how long that
// took.
func (a *agentLab) waitCell(t *testing.T, from, to string, port netlab.Port, allowed bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		ok, _ := a.lab.Probe(ctx, from, to, port, netlab.IPv4)
		cancel()
		if ok == allowed {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s -> %s %v not allowed=%v after 30s", from, to, port, allowed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
