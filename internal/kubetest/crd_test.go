package kubetest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// TestCNPCRD installs the experimental ClusterNetworkPolicy CRD, checks
// that the API server validates against its schema (an out-of-range
// priority is refused, a valid object stored), and removes it again.
func TestCNPCRD(t *testing.T) {
	s := Start(t, Options{})
	ctx := context.Background()
	cfg := s.Config(Admin)
	if err := InstallCNPCRD(ctx, cfg, "experimental"); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	cnp := func(name string, priority int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.networking.k8s.io/v1beta1",
			"kind":       "ClusterNetworkPolicy",
			"metadata":   map[string]any{"name": name},
			"spec": map[string]any{
				"tier":     "Admin",
				"priority": priority,
				"subject":  map[string]any{"namespaces": map[string]any{}},
				"ingress": []any{map[string]any{
					"action": "Deny",
					"from":   []any{map[string]any{"namespaces": map[string]any{}}},
				}},
			},
		}}
	}
	ri := dyn.Resource(cnpResource)
	if _, err := ri.Create(ctx, cnp("too-high", 1001), metav1.CreateOptions{}); err == nil {
		t.Fatal("priority 1001 accepted; want the CRD schema to refuse it")
	}
	if _, err := ri.Create(ctx, cnp("ok", 10), metav1.CreateOptions{}); err != nil {
		t.Fatalf("valid ClusterNetworkPolicy: %v", err)
	}
	if err := RemoveCNPCRD(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := ri.List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("clusternetworkpolicies still served after the CRD was removed")
	}
}
