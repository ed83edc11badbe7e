package kubetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestServer starts the real API server, checks that the admin token works
// and a plain user is refused by RBAC, and survives an API server restart.
func TestServer(t *testing.T) {
	s := Start(t, Options{Users: []string{"someone"}})
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
