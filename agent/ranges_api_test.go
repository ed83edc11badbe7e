package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestClusterRangesFromTheCluster: an agent given only the IPv4 pod range
// learns the IPv6 one from its Node's spec.podCIDRs (so a Service's IPv6
// egress is translated, and traffic to the range is not) and the Service
// range from the API server's ServiceCIDR object. An agent whose
// ClusterRole lacks servicecidrs enforces all the same, without that
// range, and counts the refusal.
func TestClusterRangesFromTheCluster(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{Users: []string{"full", "limited"}})
	cfg := srv.Config(kubetest.Admin)
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	rbac, err := os.ReadFile("../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.Apply(ctx, cfg, rbac, false); err != nil {
		t.Fatal(err)
	}
	role, err := admin.RbacV1().ClusterRoles().Get(ctx, "nftguard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limited := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nftguard-limited"}}
	for _, r := range role.Rules {
		if len(r.Resources) == 1 && r.Resources[0] == "servicecidrs" {
			continue
		}
		limited.Rules = append(limited.Rules, r)
	}
	if len(limited.Rules) != len(role.Rules)-1 {
		t.Fatalf("deploy/rbac.yaml has no rule of its own for servicecidrs: %+v", role.Rules)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, limited, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for user, roleName := range map[string]string{"full": "nftguard", "limited": "nftguard-limited"} {
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: roleName},
			Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{PodCIDR: "10.77.0.0/24", PodCIDRs: []string{"10.77.0.0/24", "fd00:77::/64"}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.CreateNamespaces(ctx, admin, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.CreateRunningPod(ctx, admin, apiPod("t", "p", "n1"), "10.77.0.2", "fd00:77::2"); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services("t").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "t"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {IP: "2001:db8::7"}}
	if _, err := admin.CoreV1().Services("t").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	type agent struct {
		ns   *testns.NS
		addr string
	}
	agents := map[string]agent{}
	for _, user := range []string{"full", "limited"} {
		a := agent{ns: testns.New(t, "rg"+user), addr: freeAddr(t)}
		// The node holds the Service's addresses, as kube-vip's leader
		// does: egress translates only to addresses of its node.
		a.ns.MustExec(t, "", "ip", "link", "set", "lo", "up")
		a.ns.MustExec(t, "", "ip", "addr", "add", "203.0.113.7/32", "dev", "lo")
		a.ns.MustExec(t, "", "ip", "addr", "add", "2001:db8::7/128", "dev", "lo")
		agents[user] = a
		wg.Go(func() {
			err := Run(ctx, Config{REST: srv.Config(user), NodeName: "n1", NetNS: a.ns.Path, MetricsAddr: a.addr,
				ClusterCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.77.0.0/16")},
				MinSyncInterval: 10 * time.Millisecond, MaxSyncInterval: 100 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Errorf("agent %s: %v", user, err)
			}
		})
	}
	// set is the text of one set or map of the agent's table.
	set := func(a agent, name string) string {
		out, _ := a.ns.Exec("", "nft", "list", "table", "inet", "nftguard")
		for _, kw := range []string{"\tset ", "\tmap "} {
			if i := strings.Index(out, kw+name+" {"); i >= 0 {
				if j := strings.Index(out[i:], "}"); j >= 0 {
					return out[i : i+j+1]
				}
			}
		}
		return ""
	}
	waitFor := func(user, name, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(set(agents[user], name), want) {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s: %s lacks %s:\n%s", user, name, want, set(agents[user], name))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, user := range []string{"full", "limited"} {
		// The IPv6 range is the Node's: IPv6 egress is translated, and
		// traffic to the range is not.
		waitFor(user, "eg_snat6", "fd00:77::2 : 2001:db8::7")
		waitFor(user, "eg_internal6", "fd00:77::/64")
		waitFor(user, "eg_snat4", "10.77.0.2 : 203.0.113.7")
	}
	// The API server's default ServiceCIDR is its --service-cluster-ip-range.
	waitFor("full", "eg_internal4", "10.96.0.0/16")
	waitStatus(t, agents["limited"].addr, "/readyz", 200, 30*time.Second)
	if s := set(agents["limited"], "eg_internal4"); strings.Contains(s, "10.96.0.0/16") {
		t.Errorf("the agent without the servicecidrs permission has the Service range:\n%s", s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(get(t, agents["limited"].addr, "/metrics"), `nftguard_errors_total{kind="service_cidr"} 1`) {
		if time.Now().After(deadline) {
			t.Fatal(`nftguard_errors_total{kind="service_cidr"} is not 1 for the agent without the permission`)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := get(t, agents["full"].addr, "/metrics"); !strings.Contains(m, `nftguard_errors_total{kind="service_cidr"} 0`) {
		t.Error(`nftguard_errors_total{kind="service_cidr"} is not 0 for the agent with the permission`)
	}
}
