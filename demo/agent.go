package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
)

// agentOptions are the agent demo's inputs.
type agentOptions struct {
	bin    string // the nftguard binary
	deploy string // folder of rbac.yaml
}

// The demo's cluster: namespace shop, a database on node1 that only the
// backend should reach, and a mailer on each node whose LoadBalancer
// Service sends their traffic out with its own address.
const (
	shop       = "shop"
	lbAddr     = "203.0.113.10" // the Service's load-balancer address (TEST-NET-3)
	dbPort     = 5432
	askPort    = 80 // the outside host's "who are you" server
	policyName = "db-from-backend"
)

var demoTopology = []netlab.NodeSpec{
	{Name: "node1", Pods: []string{"shop/db", "shop/mailer-1"}},
	{Name: "node2", Pods: []string{"shop/frontend", "shop/backend", "shop/mailer-2"}},
}

// appOf is the app label of each pod: the pod's name without its number.
func appOf(pod string) string {
	_, name, _ := strings.Cut(pod, "/")
	app, _, _ := strings.Cut(name, "-")
	return app
}

// agentDemo is the running demo: what it started, for close.
type agentDemo struct {
	out     io.Writer
	o       agentOptions
	dir     string
	srv     *kubetest.Server
	admin   kubernetes.Interface
	adminKC string
	lab     *netlab.Lab
	outside *recorder
	agents  []*agentProc
}

// agentProc is one `nftguard run`.
type agentProc struct {
	node    string
	metrics string // host:port of /metrics and /readyz
	logPath string
	proc    *childproc.Proc
}

// runAgent is `make demo`.
func runAgent(ctx context.Context, out io.Writer, o agentOptions) error {
	began := time.Now()
	if _, err := os.Stat(o.bin); err != nil {
		return fmt.Errorf("nftguard binary: %w (run `make build` first)", err)
	}
	before, err := snapshotHost()
	if err != nil {
		return err
	}
	d := &agentDemo{out: out, o: o}
	runErr := d.run(ctx)
	switch {
	case runErr != nil && ctx.Err() != nil:
		fmt.Fprintln(out, "\nInterrupted.")
	case runErr != nil:
		// The logs go with the demo's files: show where it went wrong.
		for _, ag := range d.agents {
			fmt.Fprintf(out, "\n--- the end of the log of the agent on %s ---\n%s", ag.node, tailFile(ag.logPath))
		}
	}
	fmt.Fprintln(out, "\n== Cleaning up")
	left, closeErr := d.close()
	if closeErr == nil && left == "" {
		fmt.Fprintf(out, "   Stopped what the demo started (agents, API server, etcd); removed its network namespaces and its files (%s).\n", d.dir)
	}
	after, err := snapshotHost()
	if err == nil {
		if diff := before.diff(after); diff != "" {
			err = fmt.Errorf("the host's ruleset or network sysctls changed while the demo ran:\n%s", diff)
		} else {
			fmt.Fprintf(out, "   The host's firewall ruleset and its network sysctls (%d checked) are as they were before the demo.\n", len(before.sysctls))
		}
	}
	if left != "" {
		closeErr = errors.Join(closeErr, fmt.Errorf("left behind: %s", left))
	}
	if runErr == nil && closeErr == nil && err == nil {
		fmt.Fprintf(out, "   The demo took %.1f s.\n", time.Since(began).Seconds())
	}
	return errors.Join(runErr, closeErr, err)
}

func (d *agentDemo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

func (d *agentDemo) run(ctx context.Context) error {
	if err := d.setUp(ctx); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{d.policy, d.drift, d.egress, d.failover, d.explain} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// setUp starts the API server and builds the lab at the same time, writes
// the cluster's objects as kubelets and an operator would, and starts the
// agents.
func (d *agentDemo) setUp(ctx context.Context) error {
	var err error
	if d.dir, err = os.MkdirTemp("", tempPrefix); err != nil {
		return err
	}
	d.printf("nftguard's agent (nftguard run) keeps each node's firewall table equal to the cluster's NetworkPolicies\n")
	d.printf("and egress Services. This demo builds a small cluster on this machine and shows it at work; it removes\n")
	d.printf("everything it starts when it ends, also on Ctrl-C.\n\n")
	d.printf("== A small cluster on this machine\n")
	d.printf("   Starting a real Kubernetes API server (kube-apiserver and etcd) on 127.0.0.1.\n")
	type launched struct {
		srv *kubetest.Server
		err error
	}
	started := time.Now()
	srvc := make(chan launched, 1)
	go func() {
		s, err := kubetest.Launch(ctx, kubetest.Options{Users: agentUsers(), TempDir: d.dir})
		srvc <- launched{s, err}
	}()
	d.lab, err = netlab.Create(netlab.Spec{Nodes: demoTopology, External: []string{"outside"},
		Ports: []netlab.Port{{Proto: netlab.TCP, Num: dbPort}}, Tag: labTag})
	l := <-srvc
	d.srv = l.srv
	if err = errors.Join(err, l.err); err != nil {
		return err
	}
	d.printf("   It answers after %.1f s.\n", time.Since(started).Seconds())
	if d.outside, err = startRecorder(d.lab, "outside", askPort); err != nil {
		return err
	}
	d.printf("   Two nodes with pods, and a host outside the cluster, each a throw-away network namespace:\n")
	for _, n := range d.lab.Nodes {
		var pods []string
		for _, p := range n.Pods {
			pods = append(pods, fmt.Sprintf("%s %s", p.Name, p.IPv4))
		}
		d.printf("     %-8s %-10s pods: %s\n", n.Name, n.IPv4, strings.Join(pods, ", "))
	}
	d.printf("     %-8s %-10s answers each connection with the address it came from\n", "outside", d.outsideAddr())
	// What most clusters' networking does: pods leave with their node's
	// address. The outside host hangs off node1, so every pod's traffic
	// to it leaves through node1.
	if err := d.nft("node1", "-f", "-", fmt.Sprintf(`table ip cni {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr { %s, %s } oifname %q masquerade
	}
}
`, d.lab.Nodes[0].PodCIDRv4, d.lab.Nodes[1].PodCIDRv4, d.lab.Endpoint("outside").HostVeth)); err != nil {
		return err
	}
	d.printf("     node1 masquerades pods' traffic to the outside host (as most clusters' networking does): it leaves with node1's address %s.\n", d.nodeAddr())

	cfg := d.srv.Config(kubetest.Admin)
	d.admin, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if d.adminKC, err = d.srv.WriteKubeconfig(d.dir, kubetest.Admin); err != nil {
		return err
	}
	if err := d.writeCluster(ctx); err != nil {
		return err
	}
	d.printf("   The nodes, namespace %s and its pods are registered with the API server, as kubelets would.\n", shop)
	d.printf("   Starting the agent on each node, with the permissions of %s:\n", filepath.Join(d.o.deploy, "rbac.yaml"))
	for _, n := range d.lab.Nodes {
		ag, err := d.startAgent(ctx, n.Name)
		if err != nil {
			return err
		}
		d.agents = append(d.agents, ag)
	}
	return nil
}

func agentUsers() []string {
	var users []string
	for _, n := range demoTopology {
		users = append(users, "nftguard-"+n.Name)
	}
	return users
}

// writeCluster applies deploy/rbac.yaml and binds the agents' users to its
// ClusterRole, then writes what kubelets would: Nodes with their addresses
// and pod ranges, and running pods with their lab addresses.
func (d *agentDemo) writeCluster(ctx context.Context) error {
	rbac, err := os.ReadFile(filepath.Join(d.o.deploy, "rbac.yaml"))
	if err != nil {
		return err
	}
	if _, err := kubetest.Apply(ctx, d.srv.Config(kubetest.Admin), rbac, false); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(d.o.deploy, "rbac.yaml"), err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nftguard-demo-agents"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nftguard"},
	}
	for _, u := range agentUsers() {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	if _, err := d.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, ln := range d.lab.Nodes {
		n, err := d.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: ln.Name},
			Spec:       corev1.NodeSpec{PodCIDR: ln.PodCIDRv4.String(), PodCIDRs: []string{ln.PodCIDRv4.String()}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ln.IPv4.String()}}
		if _, err := d.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if err := kubetest.CreateNamespaces(ctx, d.admin, shop); err != nil {
		return err
	}
	for _, ep := range d.lab.Pods {
		_, name, _ := strings.Cut(ep.Name, "/")
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name, Labels: map[string]string{"app": appOf(ep.Name)}},
			Spec: corev1.PodSpec{NodeName: ep.Node.Name, Containers: []corev1.Container{{
				Name: appOf(ep.Name), Image: appOf(ep.Name),
			}}},
		}
		if _, err := kubetest.CreateRunningPod(ctx, d.admin, p, ep.IPv4.String()); err != nil {
			return err
		}
	}
	return nil
}

// startAgent starts `nftguard run` for node with its own user's kubeconfig
// and waits until its table is in the kernel (/readyz).
func (d *agentDemo) startAgent(ctx context.Context, node string) (*agentProc, error) {
	kc, err := d.srv.WriteKubeconfig(d.dir, "nftguard-"+node)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ag := &agentProc{node: node, metrics: l.Addr().String(), logPath: filepath.Join(d.dir, "agent-"+node+".log")}
	l.Close()
	logf, err := os.Create(ag.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"run", "--kubeconfig", kc, "--node-name", node, "--netns", d.lab.Node(node).Path,
		"--service-cidr", kubetest.ServiceRangeV4, "--metrics-addr", ag.metrics}
	d.printf("     nftguard %s\n", strings.Join(args, " "))
	cmd := newCommand(d.o.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if ag.proc, err = childproc.Start(cmd); err != nil {
		return nil, err
	}
	start := time.Now()
	err = poll(ctx, 30*time.Second, 50*time.Millisecond, func() (bool, error) {
		if ag.proc.Exited() {
			return false, fmt.Errorf("agent on %s exited: %v\n%s", node, ag.proc.Err(), tailFile(ag.logPath))
		}
		resp, err := http.Get("http://" + ag.metrics + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		ag.stop()
		return nil, fmt.Errorf("agent on %s not ready: %w\n%s", node, err, tailFile(ag.logPath))
	}
	d.printf("     ready %.0f ms later: its table is in %s's kernel.\n", ms(time.Since(start)), node)
	return ag, nil
}

// stop ends the agent as a DaemonSet's update would (SIGTERM: it leaves
// its table in force), and kills it if it has not ended in 5 s.
func (ag *agentProc) stop() {
	if ag.proc == nil || ag.proc.Exited() {
		return
	}
	ag.proc.Signal(syscall.SIGTERM)
	select {
	case <-ag.proc.Done():
	case <-time.After(5 * time.Second):
		ag.proc.Kill()
	}
}

// close stops everything the demo started and removes its namespaces and
// files. left names what is still there afterwards.
func (d *agentDemo) close() (left string, err error) {
	for _, ag := range d.agents {
		ag.stop()
	}
	if d.srv != nil {
		d.srv.Close()
	}
	if d.outside != nil {
		d.outside.close()
	}
	var errs []error
	var leftovers []string
	if d.lab != nil {
		errs = append(errs, d.lab.Close())
		names, lerr := netlab.Leftovers()
		errs = append(errs, lerr)
		for _, n := range names {
			if strings.Contains(n, d.lab.ID) {
				leftovers = append(leftovers, "network namespace "+n)
			}
		}
	}
	for _, ag := range d.agents {
		if !ag.proc.Exited() {
			leftovers = append(leftovers, "the agent of "+ag.node)
		}
	}
	if d.dir != "" {
		errs = append(errs, os.RemoveAll(d.dir))
		if _, err := os.Stat(d.dir); err == nil {
			leftovers = append(leftovers, d.dir)
		}
	}
	return strings.Join(leftovers, ", "), errors.Join(errs...)
}

// outsideAddr is the outside host's address; nodeAddr is node1's address
// towards it, the address its masquerade gives pods.
func (d *agentDemo) outsideAddr() netip.Addr { return d.lab.Endpoint("outside").IPv4 }

func (d *agentDemo) nodeAddr() netip.Addr {
	return netip.PrefixFrom(d.outsideAddr(), 24).Masked().Addr().Next()
}

// policy: a NetworkPolicy created through the API reaches the kernel.
func (d *agentDemo) policy(ctx context.Context) error {
	d.printf("\n== 1. A NetworkPolicy goes from the API server into the kernel\n")
	d.printf("   Before: no policy, so every pod may connect to the database.\n")
	if err := d.showConnect(ctx, map[string]bool{"shop/frontend": true, "shop/backend": true}); err != nil {
		return err
	}
	node1 := d.agents[0]
	m0, err := node1.scrape()
	if err != nil {
		return err
	}
	port := intstr.FromInt32(dbPort)
	tcp := corev1.ProtocolTCP
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: policyName},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "backend"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if _, err := d.admin.NetworkingV1().NetworkPolicies(shop).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return err
	}
	d.printf("   Creating NetworkPolicy %s/%s through the API (as kubectl apply would):\n", shop, policyName)
	d.printf("     the pods labelled app=db accept connections only from pods labelled app=backend, on port %d.\n", dbPort)
	took, err := node1.latency(ctx, "NetworkPolicy", m0)
	if err != nil {
		return fmt.Errorf("the policy did not reach node1's kernel: %w", err)
	}
	d.printf("   node1's agent had it in the kernel %.1f ms after it arrived from the API server (measured by the agent itself:\n", ms(took))
	d.printf("   its metric nftguard_event_to_kernel_seconds{kind=\"NetworkPolicy\"}).\n")
	d.printf("   After:\n")
	return d.showConnect(ctx, map[string]bool{"shop/frontend": false, "shop/backend": true})
}

// showConnect connects to the database from each pod, prints what
// happened and fails unless it is what want says.
func (d *agentDemo) showConnect(ctx context.Context, want map[string]bool) error {
	db := netip.AddrPortFrom(d.lab.Endpoint("shop/db").IPv4, dbPort)
	for _, from := range []string{"shop/frontend", "shop/backend"} {
		// A connection that should go through gets three tries (a loaded
		// machine can be slow); one that should not costs one timeout.
		var ok bool
		for try := 0; try < 3 && (try == 0 || want[from]) && !ok; try++ {
			var err error
			if ok, err = d.lab.DialTCP(from, db, time.Second); err != nil {
				return err
			}
		}
		verdict := "connects"
		if !ok {
			verdict = "blocked (no answer within 1 s)"
		}
		d.printf("     %-14s -> shop/db port %d: %s\n", from, dbPort, verdict)
		if ok != want[from] {
			return fmt.Errorf("%s -> shop/db: connected=%v, want %v", from, ok, want[from])
		}
	}
	return ctx.Err()
}

// drift: a rule deleted by hand is put back by the agent.
func (d *agentDemo) drift(ctx context.Context) error {
	d.printf("\n== 2. Someone deletes a rule by hand; the agent puts it back\n")
	listing, err := d.nftOut("node1", "-a", "list", "table", "inet", "nftguard")
	if err != nil {
		return err
	}
	// The rule that isolates the database: without it, what no policy
	// allows would get through.
	const isolates = `drop comment "isolated for ingress`
	chain, rule, handle := findRule(listing, isolates)
	if handle == "" || !strings.Contains(chain, "shop_db") {
		return fmt.Errorf("no rule isolating shop/db in node1's table:\n%s", listing)
	}
	node1 := d.agents[0]
	m0, err := node1.scrape()
	if err != nil {
		return err
	}
	d.printf("   The rule that isolates shop/db in node1's table (nft list table inet nftguard): it drops\n")
	d.printf("   every connection to shop/db that no policy allows. Without it, shop/frontend could connect again.\n")
	d.printf("     chain %s: %s\n", chain, rule)
	d.printf("   Deleting it with nft, as an administrator or another tool might:\n")
	d.printf("     nft delete rule inet nftguard %s handle %s\n", chain, handle)
	deleted := time.Now()
	if err := d.nft("node1", "delete", "rule", "inet", "nftguard", chain, "handle", handle); err != nil {
		return err
	}
	var back time.Duration
	err = poll(ctx, 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		l, err := d.nftOut("node1", "-a", "list", "chain", "inet", "nftguard", chain)
		if err != nil {
			return false, err
		}
		if _, r, h := findRule(l, isolates); r == rule && h != handle {
			back = time.Since(deleted)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the deleted rule did not come back: %w", err)
	}
	m1, err := node1.scrape()
	if err != nil {
		return err
	}
	repairs := m1.value("nftguard_drift_repairs_total") - m0.value("nftguard_drift_repairs_total")
	d.printf("   The agent saw the change in the kernel and the rule was back within %.0f ms (nftguard_drift_repairs_total: +%.0f).\n", ms(back), repairs)
	if repairs < 1 {
		return fmt.Errorf("nftguard_drift_repairs_total did not grow")
	}
	d.printf("   After:\n")
	return d.showConnect(ctx, map[string]bool{"shop/frontend": false, "shop/backend": true})
}

// findRule returns the chain, text (without its handle) and handle of the
// first rule of an `nft -a` listing that contains match.
func findRule(listing, match string) (chain, rule, handle string) {
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		if c, ok := strings.CutPrefix(line, "chain "); ok {
			chain, _, _ = strings.Cut(c, " ") // "chain NAME { # handle N"
			continue
		}
		text, h, ok := strings.Cut(line, " # handle ")
		if ok && strings.Contains(text, match) {
			return chain, text, h
		}
	}
	return "", "", ""
}

// egress: the Service's pods leave with its address where the address is.
func (d *agentDemo) egress(ctx context.Context) error {
	d.printf("\n== 3. Egress: a Service's pods leave the cluster with the Service's address\n")
	d.printf("   Before: each mailer connects to the outside host, which sees the address it came from.\n")
	for _, pod := range []string{"shop/mailer-1", "shop/mailer-2"} {
		seen, err := d.await(ctx, pod, d.nodeAddr().String())
		if err != nil {
			return fmt.Errorf("before the Service: %w", err)
		}
		d.printf("     %-14s (%s) -> outside: outside saw %s, node1's address\n", pod, d.lab.Endpoint(pod).Node.Name, seen)
	}
	if err := d.announce("node1"); err != nil {
		return err
	}
	d.printf("   kube-vip puts the Service's address %s on node1 (the demo adds it to node1's lo, as kube-vip does).\n", lbAddr)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "mailer", Annotations: map[string]string{"kube-vip.io/egress": "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "mailer"},
			Ports: []corev1.ServicePort{{Port: 25}}},
	}
	s, err := d.admin.CoreV1().Services(shop).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbAddr}}
	if _, err := d.admin.CoreV1().Services(shop).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return err
	}
	d.printf("   Creating Service %s/mailer: type LoadBalancer, selects app=mailer, annotated kube-vip.io/egress: \"true\",\n", shop)
	d.printf("   load-balancer address %s (what kube-vip writes into its status).\n", lbAddr)
	// Both agents have the Service in force once node2 holds mailer-2:
	// node2 does not have the address.
	if err := d.agents[1].await(ctx, heldSeries, 1); err != nil {
		return err
	}
	seen, err := d.await(ctx, "shop/mailer-1", lbAddr)
	if err != nil {
		return err
	}
	// From here on both agents have the Service in force: no mailer may
	// reach the outside host with another address than the Service's.
	d.outside.mark("in force")
	d.printf("   After:\n")
	d.printf("     %-14s (node1) -> outside: outside saw %s, the Service's address\n", "shop/mailer-1", seen)
	mark := d.outside.mark("held on node2")
	seen, err = d.ask("shop/mailer-2", time.Second)
	if err != nil {
		return err
	}
	d.printf("     %-14s (node2) -> outside: %s: held. The address is not on node2, so its traffic leaving the\n", "shop/mailer-2", describe(seen))
	d.printf("                     cluster is dropped there rather than sent out with a node's address.\n")
	if seen != "" || len(d.outside.since(mark)) > 0 {
		return fmt.Errorf("mailer-2 on node2 reached outside (as %q) while the address was on node1", seen)
	}
	return nil
}

// failover: the address moves to node2, as kube-vip moves it.
func (d *agentDemo) failover(ctx context.Context) error {
	d.printf("\n== 4. The address moves to node2 (kube-vip fails over)\n")
	n1, n2 := d.agents[0], d.agents[1]
	m0, err := n2.scrape()
	if err != nil {
		return err
	}
	h0, err := n1.scrape()
	if err != nil {
		return err
	}
	mark := d.outside.mark("moved")
	if err := d.announce("node2"); err != nil {
		return err
	}
	d.printf("   Moving %s from node1's lo to node2's lo.\n", lbAddr)
	seen, err := d.await(ctx, "shop/mailer-2", lbAddr)
	if err != nil {
		return err
	}
	took, err := n2.latency(ctx, "LocalAddress", m0)
	if err != nil {
		return err
	}
	d.printf("     %-14s (node2) -> outside: outside saw %s. node2's agent had its table updated %.1f ms after the\n", "shop/mailer-2", seen, ms(took))
	d.printf("                     address arrived (nftguard_event_to_kernel_seconds{kind=\"LocalAddress\"}).\n")
	if err := n1.await(ctx, heldSeries, 1); err != nil {
		return err
	}
	const tries = 3
	var got []string
	for range tries {
		seen, err := d.ask("shop/mailer-1", time.Second)
		if err != nil {
			return err
		}
		if seen != "" {
			got = append(got, seen)
		}
	}
	h1, err := n1.scrape()
	if err != nil {
		return err
	}
	const dropped = `nftguard_egress_dropped_packets_total{reason="held"}`
	d.printf("     %-14s (node1) -> outside, %d tries: %s. Held on node1: its agent dropped %.0f packets\n", "shop/mailer-1", tries, describe(strings.Join(got, ", ")),
		h1.value(dropped)-h0.value(dropped))
	d.printf("                     (nftguard_egress_dropped_packets_total{reason=\"held\"}) instead of letting node1's masquerade send them.\n")
	if len(got) > 0 {
		return fmt.Errorf("mailer-1 on node1 reached outside as %v after the address moved away", got)
	}
	since := d.outside.since(mark)
	fromNode := 0
	for _, s := range since {
		if s == d.nodeAddr().String() {
			fromNode++
		}
	}
	d.printf("   What the outside host saw since the move: %s.\n", summarize(since))
	d.printf("   With node1's address %s: %s.\n", d.nodeAddr(), count(fromNode))
	if fromNode > 0 {
		return fmt.Errorf("the outside host saw %d connections with node1's address after the move", fromNode)
	}
	for _, s := range d.outside.sinceMark("in force") {
		if s != lbAddr {
			return fmt.Errorf("the outside host saw a connection from %s while the Service was in force", s)
		}
	}
	return nil
}

const heldSeries = `nftguard_egress_held_addresses{namespace="shop",reason="not_local",service="mailer"}`

// explain runs the CLI against the API server for the flows above.
func (d *agentDemo) explain(ctx context.Context) error {
	d.printf("\n== 5. Asking nftguard why (the CLI reads the cluster through the API, like kubectl)\n")
	kc := d.adminKC
	d.printf("   (explain-egress --node-address: the addresses the pod's node holds now, which an agent reads from its node.)\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "--kubeconfig", kc, "--from", "shop/frontend", "--to", "shop/db", "--port", fmt.Sprintf("tcp/%d", dbPort)}, "denied"},
		{[]string{"explain-egress", "--kubeconfig", kc, "--from", "shop/mailer-2", "--to", d.outsideAddr().String(), "--port", fmt.Sprintf("tcp/%d", askPort),
			"--node-address", d.lab.Node("node2").IPv4.String(), "--node-address", lbAddr}, "leaves with " + lbAddr},
		{[]string{"explain-egress", "--kubeconfig", kc, "--from", "shop/mailer-1", "--to", d.outsideAddr().String(), "--port", fmt.Sprintf("tcp/%d", askPort),
			"--node-address", d.lab.Node("node1").IPv4.String(), "--node-address", d.nodeAddr().String()}, "dropped"},
	} {
		d.printf("   $ nftguard %s\n", strings.Join(c.args, " "))
		out, err := nftguard(ctx, d.o.bin, c.args...)
		d.printf("%s", indent(indent(out)))
		if err != nil {
			return err
		}
		if !strings.Contains(out, c.want) {
			return fmt.Errorf("nftguard %s: the answer lacks %q", c.args[0], c.want)
		}
	}
	return nil
}

// announce puts the load-balancer address on node's lo and routes it there
// from the other node, as kube-vip's leader holds it and ARP points the
// others at it.
func (d *agentDemo) announce(node string) error {
	holder := d.lab.Node(node)
	for _, n := range d.lab.Nodes {
		if err := d.lab.Run(n.Name, func() error { return placeAddr(netip.MustParseAddr(lbAddr), n == holder, holder.IPv4) }); err != nil {
			return fmt.Errorf("move %s on %s: %w", lbAddr, n.Name, err)
		}
	}
	return nil
}

// ask connects from pod to the outside host and returns the source address
// it answered with ("" when nothing got through within timeout).
func (d *agentDemo) ask(pod string, timeout time.Duration) (string, error) {
	var seen string
	err := d.lab.Run(pod, func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(d.outsideAddr(), askPort).String(), timeout)
		if err != nil {
			return nil
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		seen = strings.TrimSpace(string(buf[:n]))
		return nil
	})
	return seen, err
}

// await asks from pod until the outside host sees want.
func (d *agentDemo) await(ctx context.Context, pod, want string) (string, error) {
	var seen string
	err := poll(ctx, 10*time.Second, 10*time.Millisecond, func() (bool, error) {
		var err error
		seen, err = d.ask(pod, 200*time.Millisecond)
		return seen == want, err
	})
	if err != nil {
		return seen, fmt.Errorf("%s -> outside: outside saw %s, want %s: %w", pod, orNothing(seen), want, err)
	}
	return seen, nil
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func describe(seen string) string {
	if seen == "" {
		return "nothing arrived"
	}
	return "outside saw " + seen
}

func count(n int) string {
	if n == 0 {
		return "nothing"
	}
	return fmt.Sprintf("%d connections", n)
}

// summarize counts the sources the outside host saw.
func summarize(srcs []string) string {
	if len(srcs) == 0 {
		return "nothing"
	}
	n := map[string]int{}
	var order []string
	for _, s := range srcs {
		if n[s] == 0 {
			order = append(order, s)
		}
		n[s]++
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d connection(s) from %s", n[s], s))
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// poll calls fn until it returns true or an error, ctx ends or timeout
// passes.
func poll(ctx context.Context, timeout, every time.Duration, fn func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := fn()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
