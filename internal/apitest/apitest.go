// Package apitest builds the Kubernetes API objects that the compilers'
// tests write by the hundred (namespaces, pods, label selectors) and
// changes them at random for the tests that compare an incremental
// compiler with a fresh compile. The policy and clusterpolicy tests share
// it so that a pod means the same thing to both.
package apitest

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels is a label map from key, value pairs; an odd last key is
// dropped.
func Labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Namespace is a namespace with these labels (key, value pairs).
func Namespace(name string, kv ...string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(kv...)}}
}

// Selector matches these labels (key, value pairs); none selects all.
func Selector(kv ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: Labels(kv...)}
}

// PodOpt changes a pod that Pod builds.
type PodOpt func(*corev1.Pod)

// Pod is a running pod labelled pod=name on node n1 with the one address
// ip, then changed by opts in order.
func Pod(namespace, name, ip string, opts ...PodOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"pod": name}}}
	p.Spec.NodeName = "n1"
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// OnNode puts the pod on node n.
func OnNode(n string) PodOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

// IPs replaces the pod's addresses (none: no address yet).
func IPs(a ...string) PodOpt {
	return func(p *corev1.Pod) {
		p.Status.PodIPs = nil
		for _, ip := range a {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
}

// WithLabels replaces the pod's labels (key, value pairs).
func WithLabels(kv ...string) PodOpt { return func(p *corev1.Pod) { p.Labels = Labels(kv...) } }

// Port adds a named container port to the pod's first container (made
// if there is none).
func Port(name string, num int32, proto corev1.Protocol) PodOpt {
	return func(p *corev1.Pod) {
		if len(p.Spec.Containers) == 0 {
			p.Spec.Containers = []corev1.Container{{Name: "c"}}
		}
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, ContainerPort: num, Protocol: proto})
	}
}

// Phase sets the pod's phase.
func Phase(ph corev1.PodPhase) PodOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

// HostNetwork makes the pod a host-network pod.
func HostNetwork() PodOpt { return func(p *corev1.Pod) { p.Spec.HostNetwork = true } }

// JSON is v as compact JSON, for golden texts that show their input.
func JSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
