package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/kubetest"
)

// TestExplainLive runs `nftguard explain --kubeconfig` against a real API
// server: the verdicts come from the live objects, not from manifests.
func TestExplainLive(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(srv.Config(kubetest.Admin))
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{"x/a": "10.1.0.1", "x/b": "10.1.0.2", "y/a": "10.1.1.1"}
	if err := kubetest.CreateNamespaces(ctx, admin, "x", "y"); err != nil {
		t.Fatal(err)
	}
	for key, ip := range ips {
		ns, name, _ := strings.Cut(key, "/")
		if _, err := kubetest.CreateRunningPod(ctx, admin, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}},
		}, ip); err != nil {
			t.Fatal(err)
		}
	}
	allowB := np("x", "allow-b", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{pods("pod", "b")}, port(tcp, 80))})
	if _, err := admin.NetworkingV1().NetworkPolicies("x").Create(ctx, allowB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := srv.WriteKubeconfig(t.TempDir(), kubetest.Admin)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t}
	cases := []struct {
		from, to, port string
		want           []string
	}{
		{"x/b", "x/a", "tcp/80", []string{"ingress x/a: allowed by x/allow-b ingress[0]", "verdict: allowed"}},
		{"y/a", "x/a", "tcp/80", []string{"isolated by x/allow-b", "verdict: denied"}},
		{"x/b", "x/a", "tcp/81", []string{"verdict: denied"}},
		{"10.1.1.1", "x/b", "udp/53", []string{"verdict: allowed"}},
	}
	for _, tc := range cases {
		out, errOut, err := c.run("explain", "--kubeconfig", kubeconfig, "--from", tc.from, "--to", tc.to, "--port", tc.port)
		if err != nil {
			t.Fatalf("explain %s -> %s %s: %v\n%s%s", tc.from, tc.to, tc.port, err, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("explain %s -> %s %s: output lacks %q:\n%s", tc.from, tc.to, tc.port, w, out)
			}
		}
	}
	// Deleting the policy changes the live answer.
	if err := admin.NetworkingV1().NetworkPolicies("x").Delete(ctx, "allow-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _, err := c.run("explain", "--kubeconfig", kubeconfig, "--from", "y/a", "--to", "x/a", "--port", "tcp/80")
	if err != nil || !strings.Contains(out, "verdict: allowed") {
		t.Errorf("after deleting the policy: %v\n%s", err, out)
	}
}
