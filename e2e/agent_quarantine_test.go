package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// refuseLabel is agent.TestRefuseLabel: in a binary built with
// -tags nftguard_testhooks, an object carrying it compiles to a chain the
// kernel refuses (a jump to a missing chain) that no pre-check catches.
const refuseLabel = "test.nftguard.io/kernel-refuse"

// buildTestHooks builds the binary with the agent's test hook.
func buildTestHooks(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nftguard-testhooks")
	build := exec.Command("go", "build", "-tags", "nftguard_testhooks", "-o", bin, "github.com/nftguard/nftguard/cmd/nftguard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nftguard with test hooks: %v\n%s", err, out)
	}
	t.Logf("built the test-hook binary in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// readyz returns an agent's /readyz status and body.
func (ag *agentProc) readyz() (int, string) {
	resp, err := http.Get("http://" + ag.addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReadyz waits until every agent's /readyz answers code.
func (a *agentLab) waitReadyz(t *testing.T, code int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, n := range agentTopology {
		for {
			got, body := a.agents[n.Name].readyz()
			if got == code {
				t.Logf("agent %s /readyz %d: %s", n.Name, got, body)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent %s /readyz = %d %q, want %d\n%s", n.Name, got, body, code, a.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitQuarantined waits until the agents of nodes have each recorded a
// NftguardQuarantined Warning about the object and export it in
// nftguard_quarantined_objects.
func (a *agentLab) waitQuarantined(ctx context.Context, t *testing.T, kind, ns, name string, nodes ...string) {
	t.Helper()
	series := fmt.Sprintf(`nftguard_quarantined_objects{kind=%q,name=%q,namespace=%q}`, kind, name, ns)
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			list, err := a.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			var ev *corev1.Event
			for i, e := range list.Items {
				if e.Reason == "NftguardQuarantined" && e.Type == corev1.EventTypeWarning && e.Source.Host == node && e.InvolvedObject.Kind == kind {
					ev = &list.Items[i]
				}
			}
			m := a.agents[node].metrics(t)
			if ev != nil && metricValue(m, series) == 1 {
				t.Logf("agent %s: %s %s/%s quarantined: %s (%v check-only batches so far)", node, kind, ns, name, ev.Message,
					metricValue(m, "nftguard_sync_checks_total"))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent %s: no quarantine of %s %s/%s (event %v, %s = %v)\n%s", node, kind, ns, name, ev != nil, series, metricValue(m, series), a.logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestAgentQuarantine: objects the kernel refuses never freeze or open a
// node. A tenant who may only edit Services in namespace y creates a
// Service whose egress ports overlap, and a Service the kernel refuses in a
// way no pre-check catches (the test hook); default-deny and allow policies
// written afterwards are enforced within the usual time, with real
// packets; the refused Service is named in an Event and in
// nftguard_quarantined_objects; a refused update of a policy keeps its
// previous version in force; a refusal no object explains makes /readyz
// fail while the table stays as it was.
func TestAgentQuarantine(t *testing.T) {
	bin := buildTestHooks(t)
	a := newAgentLabWith(t, agentLabOptions{bin: bin, args: []string{}, users: []string{"tenant"}, cidrs: true})
	ctx := context.Background()

	// The tenant: Services in y, nothing else.
	if _, err := a.admin.RbacV1().Roles("y").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "service-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RbacV1().RoleBindings("y").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-service-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "service-editor"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "tenant"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant := kubernetes.NewForConfigOrDie(a.srv.Config("tenant"))
	if _, err := tenant.NetworkingV1().NetworkPolicies("y").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "nope"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant may create a NetworkPolicy (err %v): the test's RBAC is wrong", err)
	}

	// 1. Overlapping egress ports, selecting y/a on n1. Today's compiler
	// passes them and the kernel refuses the batch; a compiler that merges
	// them makes the Service valid. Either way nothing may freeze.
	overlap, err := tenant.CoreV1().Services("y").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "overlap", Annotations: map[string]string{
			"nftguard.io/egress":                   "true",
			"nftguard.io/egress-destination-ports": "tcp:1-100,tcp:50-200",
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"pod": "a"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The load balancer's controller (the admin here) gives it an address.
	overlap.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	if _, err := a.admin.CoreV1().Services("y").UpdateStatus(ctx, overlap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-ingress"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	})
	want := a.expect(ctx)
	t.Run("default deny enforced beside overlapping egress ports", func(t *testing.T) {
		a.converge(t, "deny-ingress", "y/b", "x/a", agentPorts[0], false, want, 0)
		a.waitReadyz(t, http.StatusOK, 10*time.Second)
		m := a.agents["n1"].metrics(t)
		if v := metricValue(m, `nftguard_quarantined_objects{kind="Service",name="overlap",namespace="y"}`); v == 1 {
			a.waitQuarantined(ctx, t, "Service", "y", "overlap", "n1")
			t.Log("overlapping ports reached the kernel: the Service is quarantined, everything else enforced")
		} else {
			out := nftList(t, a.lab.Node("n1").NetNS)
			t.Logf("overlapping ports handled before the kernel (merged or skipped by the compiler); n1's egress:\n%s", grepLines(out, "dport"))
		}
	})

	// From here until the fix in 3, y/b -> x/a on 81 must stay denied: the
	// searches use check-only batches and never open anything.
	stopWatch := a.watchDenied(t, "y/b", "x/a", agentPorts[1])

	// 2. A Service the kernel refuses in a way no pre-check catches.
	if _, err := tenant.CoreV1().Services("y").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hooked", Labels: map[string]string{refuseLabel: "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port80 := intstr.FromInt32(80)
	allow := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-y-80"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port80}},
			}},
		},
	}
	a.createPolicy(ctx, allow)
	t.Run("kernel refusal found by bisecting, the rest enforced", func(t *testing.T) {
		want = a.expect(ctx)
		a.converge(t, "allow-y-80 beside a refused Service", "y/b", "x/a", agentPorts[0], true, want, 0)
		a.waitQuarantined(ctx, t, "Service", "y", "hooked", "n1", "n2", "n3")
		a.waitReadyz(t, http.StatusOK, 10*time.Second)
		for _, n := range agentTopology {
			if out := nftList(t, a.lab.Node(n.Name).NetNS); strings.Contains(out, "test-refused") {
				t.Fatalf("node %s holds the refused object's chain:\n%s", n.Name, out)
			}
			if _, body := a.agents[n.Name].readyz(); !strings.Contains(body, "quarantined") {
				t.Errorf("agent %s /readyz body %q does not mention the quarantine", n.Name, body)
			}
		}
	})

	// 3. A refused update of a policy: its previous version stays in force
	// (port 80 only), not the new one (every port) and not nothing.
	t.Run("refused update keeps the last accepted version", func(t *testing.T) {
		np, err := a.admin.NetworkingV1().NetworkPolicies("x").Get(ctx, "allow-y-80", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np.Labels = map[string]string{refuseLabel: "true"}
		np.Spec.Ingress[0].Ports = nil
		if _, err := a.admin.NetworkingV1().NetworkPolicies("x").Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		a.waitQuarantined(ctx, t, "NetworkPolicy", "x", "allow-y-80", "n1", "n2", "n3")
		a.checkMatrix(t, "refused update", want)
		if opened := stopWatch(); opened > 0 {
			t.Errorf("y/b -> x/a %v got through %d time(s) while refused objects were searched for", agentPorts[1], opened)
		}
		// Fixed by its owner: the new version is taken.
		np, err = a.admin.NetworkingV1().NetworkPolicies("x").Get(ctx, "allow-y-80", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np.Labels = nil
		if _, err := a.admin.NetworkingV1().NetworkPolicies("x").Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = a.expect(ctx)
		a.converge(t, "fixed allow-y-80 (every port)", "y/b", "x/a", agentPorts[1], true, want, 0)
		if v := metricValue(a.agents["n1"].metrics(t), `nftguard_quarantined_objects{kind="NetworkPolicy",name="allow-y-80",namespace="x"}`); v == 1 {
			t.Errorf("the fixed policy is still quarantined")
		}
	})

	// 4. A refusal no new or changed policy or Service explains (a
	// namespace is never a suspect): every sync fails, /readyz says so,
	// and the table stays as it was.
	t.Run("unexplained refusal: not ready, table unchanged", func(t *testing.T) {
		before := nftList(t, a.lab.Node("n1").NetNS)
		setNamespaceLabel(ctx, t, a.admin, "y", refuseLabel, "true")
		a.waitReadyz(t, http.StatusServiceUnavailable, 30*time.Second)
		for _, n := range agentTopology {
			if _, body := a.agents[n.Name].readyz(); !strings.Contains(body, "last sync failed") {
				t.Errorf("agent %s /readyz body %q does not give the reason", n.Name, body)
			}
		}
		a.checkMatrix(t, "syncs failing", want)
		if after := nftList(t, a.lab.Node("n1").NetNS); after != before {
			t.Fatalf("the table changed while every sync failed:\n%s\n---\n%s", before, after)
		}
		setNamespaceLabel(ctx, t, a.admin, "y", refuseLabel, "")
		// Retried with back-off (at most 30s), then ready again.
		a.waitReadyz(t, http.StatusOK, 45*time.Second)
		a.checkMatrix(t, "after recovery", want)
	})
}

func setNamespaceLabel(ctx context.Context, t *testing.T, c kubernetes.Interface, name, key, value string) {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(ns.Labels, key)
	} else {
		ns.Labels[key] = value
	}
	if _, err := c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
