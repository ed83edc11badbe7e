package kubetest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestServer starts the real API server, checks that the admin token works
// and a plain user is refused by RBAC, that the audit log records the
// refusal, and survives an API server restart.
func TestServer(t *testing.T) {
	s := Start(t, Options{Users: []string{"someone"}, Audit: true})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(s.Config(Admin))
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatalf("admin get kube-system: %v", err)
	}
	user := kubernetes.NewForConfigOrDie(s.Config("someone"))
	_, err := user.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("unbound user list pods: err = %v, want forbidden", err)
	}
	events, err := s.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events {
		if ev.User.Username == "someone" && ev.Verb == "list" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "pods" &&
			ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
			found = true
		}
	}
	if !found {
		t.Errorf("the audit log (%d events) has no refused list of pods by someone", len(events))
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubetest-restart"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.StopAPIServer()
	if _, err := admin.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("API server answers after StopAPIServer")
	}
	if err := s.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// etcd kept the data across the restart.
	if _, err := admin.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	path, err := s.WriteKubeconfig(t.TempDir(), "someone")
	if err != nil || path == "" {
		t.Fatalf("kubeconfig: %q %v", path, err)
	}
}

// TestServerDualStack: with DualStack the API server allocates a
// RequireDualStack Service an address of each family and an IPv6-only
// Service an IPv6 address, and a Service that asks for nothing still gets
// one IPv4 address, as from the single-stack server.
func TestServerDualStack(t *testing.T) {
	s := Start(t, Options{DualStack: true})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(s.Config(Admin))
	require := corev1.IPFamilyPolicyRequireDualStack
	single := corev1.IPFamilyPolicySingleStack
	for _, c := range []struct {
		name     string
		policy   *corev1.IPFamilyPolicy
		families []corev1.IPFamily
		want     []corev1.IPFamily
	}{
		{"default", nil, nil, []corev1.IPFamily{corev1.IPv4Protocol}},
		{"v6", &single, []corev1.IPFamily{corev1.IPv6Protocol}, []corev1.IPFamily{corev1.IPv6Protocol}},
		{"dual", &require, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
	} {
		svc, err := admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec: corev1.ServiceSpec{IPFamilyPolicy: c.policy, IPFamilies: c.families,
				Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(svc.Spec.ClusterIPs) != len(c.want) {
			t.Fatalf("%s: cluster IPs %v, want one per family of %v", c.name, svc.Spec.ClusterIPs, c.want)
		}
		for i, f := range c.want {
			if svc.Spec.IPFamilies[i] != f || strings.Contains(svc.Spec.ClusterIPs[i], ":") != (f == corev1.IPv6Protocol) {
				t.Errorf("%s: families %v, cluster IPs %v, want %v", c.name, svc.Spec.IPFamilies, svc.Spec.ClusterIPs, c.want)
			}
		}
	}
}
