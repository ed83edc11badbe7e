package peerslice

import (
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resource's names.
const (
	Group    = "nftguard.io"
	Version  = "v1alpha1"
	Kind     = "PeerSlice"
	Resource = "peerslices"
)

// GroupVersionResource is what the dynamic client and RBAC name.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// PeerSlice holds the records of some pods of its namespace.
type PeerSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Peers are in no particular order; a pod has at most one record in
	// its namespace's slices (while the controller moves a record between
	// slices it may briefly have two equal ones).
	Peers []Peer `json:"peers"`
}

// Peer is the record of one pod. The JSON names are short: every agent
// receives every record change.
type Peer struct {
	// Name is the pod's name.
	Name string `json:"name"`
	// Node is the pod's spec.nodeName: a reader skips its own node's
	// pods, which it watches in full.
	Node string `json:"node,omitempty"`
	// IPs are status.podIPs as written (parsed, and refused, by the
	// compilers, as for a Pod).
	IPs []string `json:"ips"`
	// Labels are the pod's labels, all of them: any selector may read
	// any label.
	Labels map[string]string `json:"labels,omitempty"`
	// Ports are the pod's named ports that some policy refers to, in the
	// order a name is looked up (the first match wins).
	Ports []Port `json:"ports,omitempty"`
}

// Port is one named container port.
type Port struct {
	Name string `json:"name"`
	// Protocol is empty for TCP.
	Protocol string `json:"protocol,omitempty"`
	Port     int32  `json:"port"`
}

// Equal tells whether two records say the same.
func (p *Peer) Equal(o *Peer) bool {
	return p.Name == o.Name && p.Node == o.Node && slices.Equal(p.IPs, o.IPs) &&
		maps.Equal(p.Labels, o.Labels) && slices.Equal(p.Ports, o.Ports)
}

// DeepCopy copies a record.
func (p *Peer) DeepCopy() Peer {
	out := *p
	out.IPs = slices.Clone(p.IPs)
	out.Labels = maps.Clone(p.Labels)
	out.Ports = slices.Clone(p.Ports)
	return out
}

// DeepCopy copies a slice.
func (s *PeerSlice) DeepCopy() *PeerSlice {
	if s == nil {
		return nil
	}
	out := &PeerSlice{TypeMeta: s.TypeMeta}
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if s.Peers != nil {
		out.Peers = make([]Peer, len(s.Peers))
		for i := range s.Peers {
			out.Peers[i] = s.Peers[i].DeepCopy()
		}
	}
	return out
}

// DeepCopyObject makes a PeerSlice a runtime.Object.
func (s *PeerSlice) DeepCopyObject() runtime.Object { return s.DeepCopy() }

// FromUnstructured converts an object of the dynamic client.
func FromUnstructured(u *unstructured.Unstructured) (*PeerSlice, error) {
	out := &PeerSlice{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return nil, fmt.Errorf("PeerSlice %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// ToUnstructured converts a slice for the dynamic client, with its
// apiVersion and kind set.
func ToUnstructured(s *PeerSlice) (*unstructured.Unstructured, error) {
	c := *s
	c.APIVersion, c.Kind = Group+"/"+Version, Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
	if err != nil {
		return nil, fmt.Errorf("PeerSlice %s/%s: %w", s.Namespace, s.Name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// AnnotationPublished is set on the controller's Lease by a leader once
// its first full reconcile is done (every namespace's slices match its
// cache of Pods); its value is that leader's identity. Readers take the
// records as complete once any leader has published them.
const AnnotationPublished = "nftguard.io/peers-published"
