package kubetest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateNamespaces creates namespaces labelled ns=<name>, the labels the
// tests' selectors use.
func CreateNamespaces(ctx context.Context, cs kubernetes.Interface, names ...string) error {
	for _, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"ns": n}}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", n, err)
		}
	}
	return nil
}

// CreateRunningPod creates pod and then does what a kubelet would: sets
// its status to Running with these addresses (the first is also podIP).
// The test API server runs no kubelet, so a pod without this has no IP
// and no policy applies to it.
func CreateRunningPod(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, ips ...string) (*corev1.Pod, error) {
	p, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIPs = nil
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	if p, err = cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("set status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return p, nil
}
