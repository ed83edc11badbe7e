package manifest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/problem"
)

// Objects are the API objects found in the manifests, in file order.
type Objects struct {
	Namespaces      []*corev1.Namespace
	Nodes           []*corev1.Node
	Pods            []*corev1.Pod
	NetworkPolicies []*networkingv1.NetworkPolicy
	// ClusterNetworkPolicies of policy.networking.k8s.io v1beta1 and
	// v1alpha2 (identical schemas), all as v1beta1.
	ClusterNetworkPolicies []*cnpv1beta1.ClusterNetworkPolicy
	Services               []*corev1.Service
	EndpointSlices         []*discoveryv1.EndpointSlice
	// Warnings are about input that was read but may not mean what its
	// author thinks: an object given twice (the later one is used).
	Warnings []problem.Problem

	// sources maps kind/namespace/name to "FILE:DOCUMENT".
	sources map[string]string
}

// Len is the number of objects.
func (o *Objects) Len() int {
	return len(o.Namespaces) + len(o.Nodes) + len(o.Pods) + len(o.NetworkPolicies) + len(o.ClusterNetworkPolicies) + len(o.Services) + len(o.EndpointSlices)
}

// Source says where the object was read ("FILE:DOCUMENT"), or "" when it was
// not read from a manifest. The apiVersion is ignored: an object is the same
// object in every version it is read in (ClusterNetworkPolicy v1alpha2 and
// v1beta1).
func (o *Objects) Source(obj problem.Object) string {
	return o.sources[sourceKey(obj.Kind, obj.Namespace, obj.Name)]
}

func sourceKey(kind, ns, name string) string { return kind + "\x00" + ns + "\x00" + name }

// InputError says the manifests could not be read completely; Problems
// names every document that could not be decoded and why. Nothing read is
// returned with it: applying what could be read would enforce a guess.
type InputError struct {
	Problems []problem.Problem
}

func (e *InputError) Error() string {
	if len(e.Problems) == 1 {
		return "unreadable input: " + e.Problems[0].Error()
	}
	return fmt.Sprintf("unreadable input: %d problems, the first: %v", len(e.Problems), e.Problems[0])
}

func (r *reader) objects() *Objects {
	objs := &Objects{Warnings: r.warnings, sources: map[string]string{}}
	for _, e := range r.entries {
		switch o := e.obj.(type) {
		case *corev1.Namespace:
			objs.Namespaces = append(objs.Namespaces, o)
		case *corev1.Node:
			objs.Nodes = append(objs.Nodes, o)
		case *corev1.Pod:
			objs.Pods = append(objs.Pods, o)
		case *corev1.Service:
			objs.Services = append(objs.Services, o)
		case *networkingv1.NetworkPolicy:
			objs.NetworkPolicies = append(objs.NetworkPolicies, o)
		case *cnpv1beta1.ClusterNetworkPolicy:
			objs.ClusterNetworkPolicies = append(objs.ClusterNetworkPolicies, o)
		case *discoveryv1.EndpointSlice:
			objs.EndpointSlices = append(objs.EndpointSlices, o)
		}
	}
	for k, i := range r.index {
		if r.entries[i].obj != nil {
			objs.sources[k] = r.entries[i].source
		}
	}
	return objs
}
