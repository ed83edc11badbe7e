package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/policy"
)

func TestStripPod(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "x", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"pod": "a"}, Annotations: map[string]string{"big": "value"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n1", HostNetwork: false,
			Containers: []corev1.Container{
				{Name: "app", Image: "img", Command: []string{"serve"}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}},
				{Name: "sidecar", Image: "img2"},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.2",
			PodIPs:     []corev1.PodIP{{IP: "10.0.0.2"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	got, err := strip(p)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Pod)
	if s.Name != "a" || s.Namespace != "x" || s.UID != "u1" || s.ResourceVersion != "7" || s.Labels["pod"] != "a" {
		t.Errorf("identity or labels lost: %+v", s.ObjectMeta)
	}
	if s.Annotations != nil || s.ManagedFields != nil || s.Status.Conditions != nil {
		t.Errorf("unneeded fields kept: %+v", s)
	}
	if s.Spec.NodeName != "n1" || s.Status.Phase != corev1.PodRunning || len(s.Status.PodIPs) != 1 || s.Status.PodIP != "10.0.0.2" {
		t.Errorf("fields the compilers read lost: %+v", s)
	}
	if len(s.Spec.Containers) != 1 || s.Spec.Containers[0].Ports[0].Name != "http" || s.Spec.Containers[0].Image != "" {
		t.Errorf("containers = %+v, want only the named port", s.Spec.Containers)
	}
}

func TestSameContent(t *testing.T) {
	a := stripPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}})
	b := stripPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "2"}})
	if !sameContent(a, b) {
		t.Error("objects differing only in resource version are not the same")
	}
	if a.ResourceVersion != "1" {
		t.Error("sameContent changed its argument")
	}
	b.Labels = map[string]string{"k": "v"}
	if sameContent(a, b) {
		t.Error("a label change is not a change")
	}
}

// A namespace keeps its labels and the log-denied opt-in, and no other
// annotation: without it `--log-denied` would log no namespace.
func TestStripNamespaceKeepsLogOptIn(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"team": "a"},
		Annotations: map[string]string{policy.AnnotationLogDenied: "true", "big": "value"}}}
	out, err := strip(ns)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Namespace)
	if s.Labels["team"] != "a" || len(s.Annotations) != 1 || s.Annotations[policy.AnnotationLogDenied] != "true" {
		t.Errorf("stripped namespace: labels %v, annotations %v", s.Labels, s.Annotations)
	}
	out, _ = strip(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "y", Annotations: map[string]string{"big": "value"}}})
	if a := out.(*corev1.Namespace).Annotations; a != nil {
		t.Errorf("annotations kept: %v", a)
	}
}
