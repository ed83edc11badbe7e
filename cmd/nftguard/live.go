package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nftguard/nftguard/manifest"
)

// liveObjects lists, from a running cluster, the objects the one-shot
// commands otherwise read from manifests. An empty kubeconfig means the
// in-cluster service account.
func liveObjects(ctx context.Context, kubeconfig string) (*manifest.Objects, error) {
	cfg, err := liveRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	objs := &manifest.Objects{}
	all := metav1.ListOptions{}
	nss, err := cs.CoreV1().Namespaces().List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	objs.Namespaces = ptrs(nss.Items)
	nodes, err := cs.CoreV1().Nodes().List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	objs.Nodes = ptrs(nodes.Items)
	pods, err := cs.CoreV1().Pods("").List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	objs.Pods = ptrs(pods.Items)
	svcs, err := cs.CoreV1().Services("").List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	objs.Services = ptrs(svcs.Items)
	nps, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list networkpolicies: %w", err)
	}
	objs.NetworkPolicies = ptrs(nps.Items)
	return objs, nil
}

// ptrs points into items, as the manifest reader's objects are pointers
// (nil for none).
func ptrs[T any](items []T) []*T {
	var out []*T
	for i := range items {
		out = append(out, &items[i])
	}
	return out
}

// liveRESTConfig is the client configuration of the one-shot commands that
// read a live cluster.
func liveRESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := loadRESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// loadRESTConfig is the one place the commands turn --kubeconfig into a
// client configuration: the file, or the in-cluster service account when it
// is empty. Each caller wraps the error in the words its command uses.
func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
