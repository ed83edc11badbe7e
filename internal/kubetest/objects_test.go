package kubetest

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestCreateRunningPod: the namespaces get their ns label; the pod is
// stored as given, Running with both addresses (the first as podIP) and
// the status the API server keeps; a pod in a missing namespace is an
// error naming it.
func TestCreateRunningPod(t *testing.T) {
	s := Start(t, Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(s.Config(Admin))
	if err := CreateNamespaces(ctx, admin, "x", "y"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y"} {
		ns, err := admin.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
		if err != nil || ns.Labels["ns"] != n {
			t.Errorf("namespace %s: %v %v", n, ns.Labels, err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", Labels: map[string]string{"pod": "a"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}}}
	if _, err := CreateRunningPod(ctx, admin, pod, "10.1.0.1", "fd00::1"); err != nil {
		t.Fatal(err)
	}
	got, err := admin.CoreV1().Pods("x").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "n1" || got.Labels["pod"] != "a" || got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.1.0.1" ||
		!reflect.DeepEqual(got.Status.PodIPs, []corev1.PodIP{{IP: "10.1.0.1"}, {IP: "fd00::1"}}) {
		t.Errorf("stored pod: node %q labels %v status %+v", got.Spec.NodeName, got.Labels, got.Status)
	}
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "nowhere", Name: "b"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}}}
	if _, err := CreateRunningPod(ctx, admin, pod, "10.1.0.2"); err == nil || !strings.Contains(err.Error(), "nowhere/b") {
		t.Errorf("pod in a missing namespace: %v", err)
	}
}
