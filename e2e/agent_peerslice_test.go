package e2e

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/peerslice"
)

// TestAgentPeerSlices runs the agents against a real API server with
// deploy/crd.yaml and deploy/controller.yaml applied and `nftguard
// controller` running with the controller's RBAC:
//
//   - auto without the CRD reads Pods, and with the CRD but a Lease that
//     does not say the records are published; with the CRD and a fresh,
//     published Lease it reads slices (metric and log say which);
//   - deploy/rbac.yaml lets the agent list slices and get the controller's
//     Lease, and write neither;
//   - two agents for node n1, in two network namespaces of their own, one
//     reading Pods and one reading slices, program byte-for-byte the same
//     table, also after a label change that reaches one through a Pod and
//     the other through a record;
//   - real packets, over IPv4 and IPv6, obey policies whose peers the
//     enforcing node knows only through records (selected by labels, with
//     named ports resolved on the record);
//   - the controller down (SIGKILL: the Lease is not renewed): the records
//     are stale (metric, /readyz detail, still ready) and stay enforced;
//     auto at start then reads Pods; the controller back, fresh again,
//     and that auto agent restarts itself in place to read slices.
func TestAgentPeerSlices(t *testing.T) {
	a := newAgentLabWith(t, agentLabOptions{noAgents: true, peerSource: "auto"})
	ctx := context.Background()
	adminCfg := a.srv.Config(kubetest.Admin)

	t.Run("auto without the CRD reads Pods", func(t *testing.T) {
		a.startAgent(t, "n1")
		m := a.agents["n1"].metrics(t)
		if v := metricValue(m, `nftguard_peer_source{source="pods"}`); v != 1 {
			t.Errorf(`nftguard_peer_source{source="pods"} = %v, want 1`, v)
		}
		if v := metricValue(m, `nftguard_peer_source{source="slices"}`); v != 0 {
			t.Errorf(`nftguard_peer_source{source="slices"} = %v, want 0`, v)
		}
		if log := a.agents["n1"].log(t); strings.Count(log, `"msg":"peer source chosen"`) != 1 || !strings.Contains(log, "are not served") {
			t.Errorf("the choice and its reason are not logged once:\n%s", a.agents["n1"].logTail())
		}
	})

	// destinationNamedPort is in the experimental channel; installed
	// before the controller starts, which then publishes the port names
	// ClusterNetworkPolicies refer to from its first reconcile.
	if err := kubetest.InstallCNPCRD(ctx, adminCfg, "experimental"); err != nil {
		t.Fatal(err)
	}
	// The CRD (deploy/crd.yaml, with deploy/controller.yaml) and a fresh
	// Lease that does not say the records are published: auto still
	// reads Pods.
	a.deployController(t)
	t.Run("auto with an unpublished Lease reads Pods", func(t *testing.T) {
		now := metav1.NewMicroTime(time.Now())
		if _, err := a.admin.CoordinationV1().Leases(peerLease.ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: peerLease.ns, Name: peerLease.name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("a37-new-leader"), LeaseDurationSeconds: ptr[int32](60), RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		a.startAgent(t, "n1")
		if v := metricValue(a.agents["n1"].metrics(t), `nftguard_peer_source{source="pods"}`); v != 1 {
			t.Errorf(`nftguard_peer_source{source="pods"} = %v, want 1`, v)
		}
		if log := a.agents["n1"].log(t); !strings.Contains(log, "has no nftguard.io/peers-published annotation") {
			t.Errorf("the reason is not logged:\n%s", a.agents["n1"].logTail())
		}
	})

	// The controller (which takes the Lease and annotates it after its
	// first full publish): auto reads slices. The hand-made Lease goes
	// first: held by another identity for 60s, it would keep the
	// controller from leading.
	if err := a.admin.CoordinationV1().Leases(peerLease.ns).Delete(ctx, peerLease.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctl := a.startController(t)
	a.waitPublished(t)
	a.args = append(a.args, "--controller-lease-check", "200ms")
	t.Run("auto with a fresh published Lease reads slices", func(t *testing.T) {
		for _, n := range agentTopology {
			a.startAgent(t, n.Name)
			if v := metricValue(a.agents[n.Name].metrics(t), `nftguard_peer_source{source="slices"}`); v != 1 {
				t.Fatalf(`agent %s: nftguard_peer_source{source="slices"} = %v, want 1:\n%s`, n.Name, v, a.agents[n.Name].logTail())
			}
		}
	})

	t.Run("the agent may read slices and the Lease, and write neither", func(t *testing.T) {
		cfg := a.srv.Config(agentUser("n1"))
		res := dynamic.NewForConfigOrDie(cfg).Resource(peerslice.GroupVersionResource)
		if _, err := res.List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list PeerSlices as the agent: %v", err)
		}
		forged, err := peerslice.ToUnstructured(&peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a37-forged"},
			Peers: []peerslice.Peer{{Name: "forged", Node: "n2", IPs: []string{"10.0.0.66"}, Labels: map[string]string{"access": "yes"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Namespace("x").Create(ctx, forged, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the agent created a PeerSlice: %v", err)
		}
		list, err := res.Namespace("x").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("no slice in x: %v", err)
		}
		if _, err := res.Namespace("x").Update(ctx, &list.Items[0], metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the agent updated a PeerSlice: %v", err)
		}
		if err := res.Namespace("x").Delete(ctx, list.Items[0].GetName(), metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the agent deleted a PeerSlice: %v", err)
		}
		leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases(peerLease.ns)
		l, err := leases.Get(ctx, peerLease.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the controller's Lease as the agent: %v", err)
		}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the agent updated the controller's Lease: %v", err)
		}
		if _, err := leases.Get(ctx, "kube-controller-manager", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the agent may read another Lease of kube-system: %v", err)
		}
	})

	// Two more agents for n1, where no packet passes: one per source.
	pods, slices := testns.New(t, "a37-pods"), testns.New(t, "a37-slices")
	a.startAgentAs(t, "n1-pods", "n1", pods.Path, "--peer-source", "pods")
	a.startAgentAs(t, "n1-slices", "n1", slices.Path, "--peer-source", "slices")
	if v := metricValue(a.agents["n1-pods"].metrics(t), `nftguard_peer_source{source="pods"}`); v != 1 {
		t.Fatalf("the pods agent reads slices")
	}

	// Policies that select peers by labels only, with named ports.
	a.labelOnlyPeerPolicies(ctx)
	// An Admin Deny on a named port, whose pods are records too: it must
	// hold while the records are stale.
	cnps := cnpclient.NewForConfigOrDie(adminCfg)
	deny := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a37-deny-81-to-access"}}
	deny.Spec.Tier, deny.Spec.Priority = "Admin", 5
	deny.Spec.Subject.Namespaces = &metav1.LabelSelector{}
	deny.Spec.Egress = []cnpv1beta1.ClusterNetworkPolicyEgressRule{{Action: "Deny",
		To:        []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: metav1.LabelSelector{}, PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"access": "yes"}}}}},
		Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "serve-81"}}}}
	if _, err := cnps.PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := a.peerSliceExpect()
	t.Run("packets: peers known only through records", func(t *testing.T) {
		a.convergeFamilies(t, "label-only peers through records", want)
	})

	t.Run("pods and slices program the same table", func(t *testing.T) {
		// Both must hold the records' addresses: y/b and x/c, IPv4 and IPv6.
		var marks []string
		for _, p := range []string{"y/b", "x/c"} {
			ep := a.lab.Endpoint(p)
			marks = append(marks, ep.IPv4.String(), ep.IPv6.String())
		}
		// Each agent programs its table from scratch: stopped, its table
		// deleted, started again.
		restart := func() {
			for _, r := range []struct{ key, ns, path, source string }{
				{"n1-pods", pods.Name, pods.Path, "pods"}, {"n1-slices", slices.Name, slices.Path, "slices"},
			} {
				a.agents[r.key].signal(t, syscall.SIGKILL)
				if out, err := exec.Command("ip", "netns", "exec", r.ns, "nft", "delete", "table", "inet", "nftguard").CombinedOutput(); err != nil {
					t.Fatalf("delete the table of %s: %v: %s", r.key, err, out)
				}
				a.startAgentAs(t, r.key, "n1", r.path, "--peer-source", r.source)
			}
		}
		a.sameTables(t, "n1-pods", pods.Name, "n1-slices", slices.Name, marks, restart)
		// A label change: a Pod event for one, a record for the other.
		a.setPodLabel(ctx, "y/c", "access", "yes") // on n3
		marks = append(marks, a.lab.Endpoint("y/c").IPv4.String())
		a.sameTables(t, "n1-pods", pods.Name, "n1-slices", slices.Name, marks, restart)
		want = a.peerSliceExpect()
		a.convergeFamilies(t, "label change through a record", want)
	})

	t.Run("controller down: records stale, kept, ready", func(t *testing.T) {
		ctl.kill(t)
		for _, n := range agentTopology {
			ag := a.agents[n.Name]
			waitFor(t, 30*time.Second, "agent "+n.Name+" reports stale records", func() bool {
				return metricValue(ag.metrics(t), "nftguard_peer_records_stale") == 1
			})
			code, body := ag.readyz()
			if code != http.StatusOK || !regexp.MustCompile(`^ok; peer records stale since \S+: controller lease not renewed$`).MatchString(body) {
				t.Errorf("agent %s /readyz %d %q", n.Name, code, body)
			}
		}
		if v := metricValue(a.agents["n1-pods"].metrics(t), "nftguard_peer_records_stale"); v != 0 {
			t.Errorf("the pods agent says its records are stale: %v", v)
		}
		a.checkFamilies(t, "controller down", want)
		// auto at start now reads Pods, and enforces the same; it asks
		// again every --crd-check-interval.
		a.startAgentAs(t, "n3", "n3", a.lab.Node("n3").Path, "--crd-check-interval", "200ms")
		if v := metricValue(a.agents["n3"].metrics(t), `nftguard_peer_source{source="pods"}`); v != 1 {
			t.Errorf("auto with a stale Lease: pods = %v, want 1:\n%s", v, a.agents["n3"].logTail())
		}
		a.checkFamilies(t, "n3 reads Pods, n1 and n2 stale records", want)
		n3pid := a.agents["n3"].proc.Pid()
		a.runController(t, ctl)
		// The controller back: n3 restarts itself (the same process,
		// its table in force) and reads slices.
		waitFor(t, 30*time.Second, "n3 reads slices after the controller is back", func() bool {
			resp, err := http.Get("http://" + a.agents["n3"].addr + "/metrics")
			if err != nil {
				return false // between the two runs
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return err == nil && metricValue(string(b), `nftguard_peer_source{source="slices"}`) == 1
		})
		if pid := a.agents["n3"].proc.Pid(); pid != n3pid || a.agents["n3"].exited() {
			t.Errorf("n3 was to restart in place: pid %d, was %d, exited %v", pid, n3pid, a.agents["n3"].exited())
		}
		if log := a.agents["n3"].log(t); !strings.Contains(log, "peer source changes: restarting to read slices") {
			t.Errorf("n3 does not say why it restarted:\n%s", a.agents["n3"].logTail())
		}
		waitFor(t, 30*time.Second, "n3 ready again", func() bool { code, _ := a.agents["n3"].readyz(); return code == http.StatusOK })
		a.checkFamilies(t, "n3 restarted into slices", want)
		ag := a.agents["n1"]
		waitFor(t, 30*time.Second, "n1's records fresh again", func() bool {
			return metricValue(ag.metrics(t), "nftguard_peer_records_stale") == 0
		})
		if code, body := ag.readyz(); code != http.StatusOK || body != "ok" {
			t.Errorf("n1 /readyz %d %q after the controller came back", code, body)
		}
	})

	if !*peerScale {
		t.Log("scale comparison not run by default (enable with -agent.peerscale)")
		return
	}
	t.Run("scale: same table, memory of each source", func(t *testing.T) {
		a.loadScale(t, scalePods, scalePolicies)
		restart := func() {
			for _, r := range []struct{ key, ns, path, source string }{
				{"n1-pods", pods.Name, pods.Path, "pods"}, {"n1-slices", slices.Name, slices.Path, "slices"},
			} {
				a.agents[r.key].signal(t, syscall.SIGKILL)
				if out, err := exec.Command("ip", "netns", "exec", r.ns, "nft", "delete", "table", "inet", "nftguard").CombinedOutput(); err != nil {
					t.Fatalf("delete the table of %s: %v: %s", r.key, err, out)
				}
				start := time.Now()
				a.startAgentAs(t, r.key, "n1", r.path, "--peer-source", r.source)
				t.Logf("scale: %s ready %v after start", r.key, time.Since(start).Round(time.Millisecond))
			}
		}
		a.sameTables(t, "n1-pods", pods.Name, "n1-slices", slices.Name, []string{"scale-"}, restart)
		for _, key := range []string{"n1-pods", "n1-slices"} {
			m := a.agents[key].metrics(t)
			t.Logf("scale: %s RSS %d MiB, Go heap in use %.1f MiB, informer events %v pods / %v peerslices",
				key, a.agents[key].rssKiB(t)/1024, metricValue(m, "go_memstats_heap_inuse_bytes")/(1<<20),
				metricValue(m, `nftguard_informer_events_total{resource="pods"}`), metricValue(m, `nftguard_informer_events_total{resource="peerslices"}`))
		}
		// What a re-list costs each agent: the JSON of the lists each
		// source reads (the API server's protobuf for Pods is smaller).
		raw := func(path string, params map[string]string) int {
			req := a.admin.CoreV1().RESTClient().Get().AbsPath(path)
			for k, v := range params {
				req = req.Param(k, v)
			}
			b, err := req.DoRaw(ctx)
			if err != nil {
				t.Fatalf("list %s: %v", path, err)
			}
			return len(b)
		}
		all := raw("/api/v1/pods", nil)
		own := raw("/api/v1/pods", map[string]string{"fieldSelector": "spec.nodeName=n1"})
		sl := raw("/apis/nftguard.io/v1alpha1/peerslices", nil)
		t.Logf("scale: re-list JSON per agent: pods mode %d B (every Pod); slices mode %d B (%d B n1's Pods + %d B PeerSlices)", all, own+sl, own, sl)
		t.Logf("scale: the controller wrote %v slice changes since its restart", ctl.writes())
	})
}

var peerScale = flag.Bool("agent.peerscale", false, "TestAgentPeerSlices: also load 10k pods (100 on n1) and 1k policies, compare the two sources' tables of n1 byte for byte and log each agent's memory")

// peerSliceExpect is the matrix TestAgentPeerSlices's policies allow: x
// admits access=yes pods on port 80 (serve-80); y may reach access=yes pods
// on port 80 only (the Admin Deny on serve-81 changes nothing the
// NetworkPolicies allow, and is checked not to open it).
func (a *agentLab) peerSliceExpect() func(from, to string, p netlab.Port) bool {
	access := map[string]bool{}
	for pod, l := range a.podLabels {
		access[pod] = l["access"] == "yes"
	}
	return func(from, to string, p netlab.Port) bool {
		if from == to {
			return true
		}
		if nsOf(to) == "x" && !(access[from] && p.Num == 80) {
			return false
		}
		if nsOf(from) == "y" && !(access[to] && p.Num == 80) {
			return false
		}
		if access[to] && p.Num == 81 {
			return false
		}
		return true
	}
}

var peerFamilies = []netlab.Family{netlab.IPv4, netlab.IPv6}

func (a *agentLab) expectedIn(f netlab.Family, want func(from, to string, p netlab.Port) bool) *netlab.Matrix {
	exp := a.lab.NewExpected(f, false, agentPorts...)
	for _, from := range exp.From {
		for _, to := range exp.To {
			for _, p := range agentPorts {
				exp.Expect(from, to, want(from, to, p), p)
			}
		}
	}
	return exp
}

// convergeFamilies waits until the whole matrix equals want over IPv4 and
// IPv6.
func (a *agentLab) convergeFamilies(t *testing.T, what string, want func(from, to string, p netlab.Port) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range peerFamilies {
		for {
			got, err := a.lab.Reachability(context.Background(), f, agentPorts...)
			if err != nil {
				t.Fatal(err)
			}
			diff := netlab.Compare(a.expectedIn(f, want), got)
			if diff == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s (%v): did not converge:\n%s\n%s", what, f, diff, a.logs())
			}
		}
	}
}

// checkFamilies asserts the matrix over both families right now.
func (a *agentLab) checkFamilies(t *testing.T, what string, want func(from, to string, p netlab.Port) bool) {
	t.Helper()
	for _, f := range peerFamilies {
		got, err := a.lab.Reachability(context.Background(), f, agentPorts...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := netlab.Compare(a.expectedIn(f, want), got); diff != "" {
			t.Fatalf("%s (%v): enforcement changed:\n%s", what, f, diff)
		}
	}
}

// counters are the only text of a listing that may differ between two
// tables of equal content (no packet passes in these namespaces, but a
// listing prints the counters all the same).
var counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// listTable is `nft list table inet nftguard` in the named namespace, its
// counters zeroed.
func listTable(t *testing.T, netns string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", netns, "nft", "list", "table", "inet", "nftguard").CombinedOutput()
	if err != nil {
		return "error: " + err.Error() + ": " + string(out)
	}
	return counters.ReplaceAllString(string(out), "counter packets 0 bytes 0")
}

// sameTables checks that the agents keyA and keyB (for one node, in the
// network namespaces nsA and nsB) program the same table. First it waits
// until both tables hold every mark (both have synced the latest change)
// and hold the same chains, sets and rules: the order nft lists chains in
// is the order they were created, which incremental syncs make depend on
// each agent's history of events, so this wait compares the blocks
// sorted. Then restart has both agents program their tables from scratch
// (in the compiled order), and the listings are compared byte for byte (counters zeroed: the only other text that may
// differ; no packet passes in these namespaces).
func (a *agentLab) sameTables(t *testing.T, keyA, nsA, keyB, nsB string, marks []string, restart func()) {
	t.Helper()
	wait := func(exact bool) {
		t.Helper()
		var ta, tb string
		deadline := time.Now().Add(30 * time.Second)
		for {
			ta, tb = listTable(t, nsA), listTable(t, nsB)
			complete := true
			for _, m := range marks {
				complete = complete && strings.Contains(ta, m) && strings.Contains(tb, m)
			}
			if complete && (ta == tb || !exact && sortedBlocks(ta) == sortedBlocks(tb)) {
				if exact {
					t.Logf("tables equal byte for byte (%d bytes), holding %v", len(ta), marks)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tables differ (exact=%v) or miss %v after 30s:\n--- %s\n%s\n--- %s\n%s", exact, marks, keyA, ta, keyB, tb)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait(false)
	restart()
	wait(true)
}

// sortedBlocks is a listing with its top-level blocks (chains, sets, maps)
// sorted.
func sortedBlocks(listing string) string {
	var blocks []string
	var cur strings.Builder
	in := false
	for _, line := range strings.Split(listing, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "\t\t") && strings.HasSuffix(line, "{"):
			in = true
			cur.Reset()
			cur.WriteString(line + "\n")
		case in && line == "\t}":
			in = false
			cur.WriteString(line + "\n")
			blocks = append(blocks, cur.String())
		case in:
			cur.WriteString(line + "\n")
		default:
			blocks = append(blocks, line+"\n")
		}
	}
	sort.Strings(blocks)
	return strings.Join(blocks, "")
}

// labelOnlyPeerPolicies labels y/b (on n2) and x/c (on n3) access=yes and
// lets x's pods in, and y's pods out, only from and to such pods on the
// named port serve-80: the peers are selected by labels only, so a node
// other than theirs knows them only through records in slices mode.
func (a *agentLab) labelOnlyPeerPolicies(ctx context.Context) {
	a.t.Helper()
	a.setPodLabel(ctx, "y/b", "access", "yes") // on n2
	a.setPodLabel(ctx, "x/c", "access", "yes") // on n3
	serve80 := intstr.FromString("serve-80")
	access := &metav1.LabelSelector{MatchLabels: map[string]string{"access": "yes"}}
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "ingress-from-access"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: access}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &serve80}},
			}},
		},
	})
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "egress-to-access"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: access}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &serve80}},
			}},
		},
	})
}
