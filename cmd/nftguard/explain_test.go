package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/kubetest"
)

// TestExplainLiveClusterNetworkPolicies runs explain in-process against a
// real API server (nothing here touches the kernel): without the
// ClusterNetworkPolicy CRD it judges by NetworkPolicy alone and says so;
// with it, it lists the policies of both served versions and names the
// deciding tier, policy, priority and rule.
func TestExplainLiveClusterNetworkPolicies(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	cfg := srv.Config(kubetest.Admin)
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.CreateNamespaces(ctx, admin, "x", "y"); err != nil {
		t.Fatal(err)
	}
	for key, ip := range map[string]string{"x/a": "10.1.0.1", "y/a": "10.1.1.1"} {
		ns, name, _ := strings.Cut(key, "/")
		if _, err := kubetest.CreateRunningPod(ctx, admin, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}},
		}, ip); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, err := srv.WriteKubeconfig(t.TempDir(), kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	explain := func(from, to, port string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := []string{"explain", "--kubeconfig", kubeconfig, "--from", from, "--to", to, "--port", port}
		if code := run(ctx, args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("explain %s -> %s: exit %d\n%s%s", from, to, code, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}

	out, errOut := explain("y/a", "x/a", "tcp/80")
	if !strings.Contains(errOut, "note: the ClusterNetworkPolicy CRD (policy.networking.k8s.io) is not served") || !strings.Contains(out, "verdict: allowed") {
		t.Errorf("without the CRD:\n%s%s", out, errOut)
	}

	if err := kubetest.InstallCNPCRD(ctx, cfg, "experimental"); err != nil {
		t.Fatal(err)
	}
	// One policy per served version; both are listed as v1beta1.
	manifests := `
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: isolate-x}
spec:
  tier: Admin
  priority: 10
  subject: {namespaces: {matchLabels: {ns: "x"}}}
  ingress:
  - {name: monitoring, action: Accept, from: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {pod: prometheus}}}}]}
  - {name: not-from-y, action: Deny, from: [{namespaces: {matchLabels: {ns: "y"}}}], protocols: [{tcp: {destinationPort: {number: 80}}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: egress-allowlist}
spec:
  tier: Baseline
  priority: 100
  subject: {namespaces: {matchLabels: {ns: "y"}}}
  egress:
  - {name: docs, action: Accept, to: [{domainNames: [kubernetes.io]}]}
  - {name: rest, action: Deny, to: [{networks: [0.0.0.0/0]}]}
`
	if _, err := kubetest.Apply(ctx, cfg, []byte(manifests), false); err != nil {
		t.Fatal(err)
	}
	out, errOut = explain("y/a", "x/a", "tcp/80")
	for _, want := range []string{
		`egress  y/a: denied by ClusterNetworkPolicy egress-allowlist (Baseline, priority 100) rule egress[1] "rest" (peer to[0] networks 0.0.0.0/0, port any port)`,
		`note: ClusterNetworkPolicy egress-allowlist (Baseline, priority 100) rule egress[0] "docs" matches addresses the pod resolved for kubernetes.io while their DNS answers last; without the node's live state this explanation takes it to match nothing`,
		`ingress x/a: denied by ClusterNetworkPolicy isolate-x (Admin, priority 10) rule ingress[1] "not-from-y" (peer from[0] namespaces ns=y, port protocols[0] TCP/80)`,
		"verdict: denied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(errOut, "domainNames") {
		t.Errorf("an Accept rule with domainNames is enforced, stderr warns about it:\n%s", errOut)
	}
	if strings.Contains(errOut, "not served") {
		t.Errorf("the CRD is served, stderr says otherwise:\n%s", errOut)
	}
	out, _ = explain("y/a", "x/a", "tcp/81")
	if !strings.Contains(out, "ingress x/a: allowed: not isolated for ingress: no NetworkPolicy selects the pod, and no rule of the ClusterNetworkPolicies that select it (Admin: isolate-x) decided") {
		t.Errorf("port 81:\n%s", out)
	}
}

// TestExplainEgressLive runs explain-egress against a real API server:
// the Service that translates the pod is read from the cluster like the
// pod and its Node (the live reader once left Services out, and every pod
// was "not translated").
func TestExplainEgressLive(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(srv.Config(kubetest.Admin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.CreateNamespaces(ctx, admin, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubetest.CreateRunningPod(ctx, admin, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}},
	}, "10.244.1.5"); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services("x").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"kube-vip.io/egress": "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	if _, err := admin.CoreV1().Services("x").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := srv.WriteKubeconfig(t.TempDir(), kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		local []string
		want  string
	}{
		{nil, "x/a (10.244.1.5) -> 198.51.100.1: leaves with 203.0.113.7"},
		{[]string{"203.0.113.7"}, "leaves with 203.0.113.7"},
		{[]string{"10.0.0.1"}, "dropped (held)"},
	} {
		args := []string{"explain-egress", "--kubeconfig", kubeconfig, "--from", "x/a", "--to", "198.51.100.1"}
		for _, a := range tc.local {
			args = append(args, "--node-address", a)
		}
		var stdout, stderr bytes.Buffer
		if code := run(ctx, args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("node addresses %v: want %q in\n%s", tc.local, tc.want, stdout.String())
		}
	}
}
