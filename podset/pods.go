package podset

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is a pod reduced to what the compilers read. Records are shared
// between the agent's caches and every compile: they are never modified
// after they are made, and a changed pod is a new record.
type Pod struct {
	Namespace string
	Name      string
	UID       types.UID // for Events about the pod
	// Labels may be shared between pods with equal labels.
	Labels   map[string]string
	NodeName string
	// IPs are status.podIPs as written (status.podIP when an older writer
	// set only that); they are parsed, and refused, by the compilers.
	IPs []string
	// Ports are the named container ports in lookup order (see
	// NamedPorts): a port name resolves to the first match. The list may
	// be shared between pods.
	Ports []Port
	// HostNetwork pods use their node's address.
	HostNetwork bool
	// Finished pods (Succeeded or Failed) have given their address back.
	Finished bool
}

// Port is one named container port.
type Port struct {
	Name     string
	Protocol corev1.Protocol // never empty: TCP when the spec omits it
	Number   int32
}

// FromAPI reduces a pod object. The record refers to the object's label
// map and strings; the object must not change afterwards.
func FromAPI(p *corev1.Pod) *Pod {
	out := &Pod{
		Namespace:   p.Namespace,
		Name:        p.Name,
		UID:         p.UID,
		Labels:      p.Labels,
		NodeName:    p.Spec.NodeName,
		Ports:       NamedPorts(p),
		HostNetwork: p.Spec.HostNetwork,
		Finished:    Finished(p),
		IPs:         IPs(p),
	}
	return out
}

// Finished tells whether a pod has given its address back (Succeeded or
// Failed).
func Finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// IPs are a pod's addresses as written: status.podIPs, or status.podIP
// when an older writer set only that.
func IPs(p *corev1.Pod) []string {
	switch {
	case len(p.Status.PodIPs) > 0:
		out := make([]string, len(p.Status.PodIPs))
		for i, ip := range p.Status.PodIPs {
			out[i] = ip.IP
		}
		return out
	case p.Status.PodIP != "":
		return []string{p.Status.PodIP}
	}
	return nil
}

// FromAPIList reduces every pod of list, in order.
func FromAPIList(list []*corev1.Pod) []*Pod {
	out := make([]*Pod, len(list))
	for i, p := range list {
		out[i] = FromAPI(p)
	}
	return out
}

// NamedPorts lists the named ports a port name can resolve to, in the
// order Kubernetes looks them up (endpointslice.FindPort, which the
// endpoint controllers resolve a Service's named targetPort with): the
// containers' in declaration order, then those of the init containers that
// keep running beside them (restartPolicy Always: sidecars). A plain init
// container has exited before the app containers start, so its ports are
// never looked up. Nil if there are none.
func NamedPorts(p *corev1.Pod) []Port {
	var out []Port
	add := func(c *corev1.Container) {
		for _, port := range c.Ports {
			if port.Name == "" {
				continue // never looked up
			}
			proto := port.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out = append(out, Port{Name: port.Name, Protocol: proto, Number: port.ContainerPort})
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return out
}

// Same reports whether two records hold the same content.
func (p *Pod) Same(o *Pod) bool {
	return p.Namespace == o.Namespace && p.Name == o.Name && p.UID == o.UID && p.NodeName == o.NodeName &&
		p.HostNetwork == o.HostNetwork && p.Finished == o.Finished &&
		maps.Equal(p.Labels, o.Labels) && slices.Equal(p.IPs, o.IPs) && slices.Equal(p.Ports, o.Ports)
}

// Key is the pod's namespace/name.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// GetNamespace is the pod's namespace, by which a Set groups it.
func (p *Pod) GetNamespace() string { return p.Namespace }

// NamedPort resolves a port name on the pod for a protocol (nil: TCP), as
// Kubernetes does for NetworkPolicy and ClusterNetworkPolicy named ports.
func (p *Pod) NamedPort(name string, proto *corev1.Protocol) (int32, bool) {
	want := corev1.ProtocolTCP
	if proto != nil && *proto != "" {
		want = *proto
	}
	for _, port := range p.Ports {
		if port.Name == name && port.Protocol == want {
			return port.Number, true
		}
	}
	return 0, false
}

// GetObjectMeta names the record for client-go's caches, which key what
// they hold by namespace and name: the agent's pod informer stores records
// instead of API objects.
func (p *Pod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}
