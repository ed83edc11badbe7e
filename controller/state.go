package controller

import (
	"maps"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

// state is the desired state: every published pod's record, by namespace,
// and the port names some policy refers to. It is pure: the informers'
// handlers feed it and read back which namespaces a change dirtied.
type state struct {
	// pods are the published pods, by namespace and name: kept to cut
	// their records again when the referenced port names change.
	pods    map[string]map[string]*podset.Pod
	records map[string]map[string]peerslice.Peer
	// refs are each policy's port names (key: kind/namespace/name);
	// refCount counts the policies naming each port name.
	refs     map[string][]string
	refCount map[string]int
	nrecords int
}

func newState() *state {
	return &state{
		pods:     map[string]map[string]*podset.Pod{},
		records:  map[string]map[string]peerslice.Peer{},
		refs:     map[string][]string{},
		refCount: map[string]int{},
	}
}

func (s *state) referenced(name string) bool { return s.refCount[name] > 0 }

// setPod records a pod's new form (nil: deleted, or no longer published)
// and reports whether its namespace's records changed: most pod updates
// (kubelet status writes, annotations) change nothing a record holds.
func (s *state) setPod(namespace, name string, p *podset.Pod) bool {
	if p != nil && !peerslice.Published(p) {
		p = nil
	}
	if p == nil {
		if _, ok := s.pods[namespace][name]; !ok {
			return false
		}
		delete(s.pods[namespace], name)
		delete(s.records[namespace], name)
		s.nrecords--
		if len(s.pods[namespace]) == 0 {
			delete(s.pods, namespace)
			delete(s.records, namespace)
		}
		return true
	}
	if s.pods[namespace] == nil {
		s.pods[namespace] = map[string]*podset.Pod{}
		s.records[namespace] = map[string]peerslice.Peer{}
	}
	s.pods[namespace][name] = p
	rec := peerslice.FromPod(p, s.referenced)
	old, ok := s.records[namespace][name]
	if !ok {
		s.nrecords++
	}
	s.records[namespace][name] = rec
	return !ok || !old.Equal(&rec)
}

// setPolicy records the port names a policy refers to (nil: deleted) and
// returns the namespaces whose records changed because a name became
// referenced or stopped being referenced, sorted.
func (s *state) setPolicy(key string, names []string) []string {
	old := s.refs[key]
	if slices.Equal(old, names) {
		return nil
	}
	flipped := map[string]bool{}
	for _, n := range old {
		s.refCount[n]--
		if s.refCount[n] == 0 {
			delete(s.refCount, n)
			flipped[n] = !flipped[n]
		}
	}
	for _, n := range names {
		s.refCount[n]++
		if s.refCount[n] == 1 {
			flipped[n] = !flipped[n]
		}
	}
	if len(names) == 0 {
		delete(s.refs, key)
	} else {
		s.refs[key] = names
	}
	// A name both dropped and added again is no change.
	maps.DeleteFunc(flipped, func(_ string, v bool) bool { return !v })
	if len(flipped) == 0 {
		return nil
	}
	var dirty []string
	for ns, pods := range s.pods {
		changed := false
		for name, p := range pods {
			if !slices.ContainsFunc(p.Ports, func(q podset.Port) bool { return flipped[q.Name] }) {
				continue
			}
			rec := peerslice.FromPod(p, s.referenced)
			if old := s.records[ns][name]; !old.Equal(&rec) {
				s.records[ns][name] = rec
				changed = true
			}
		}
		if changed {
			dirty = append(dirty, ns)
		}
	}
	slices.Sort(dirty)
	return dirty
}

// desired returns a namespace's records, in no particular order.
func (s *state) desired(namespace string) []peerslice.Peer {
	out := make([]peerslice.Peer, 0, len(s.records[namespace]))
	for _, r := range s.records[namespace] {
		out = append(out, r)
	}
	return out
}

// namespaces are the namespaces that have records.
func (s *state) namespaces() []string { return slices.Sorted(maps.Keys(s.records)) }

// Key of a policy in state.refs.
func policyKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// npPortNames are the port names a NetworkPolicy's rules give, sorted and
// unique: a port name resolves on the destination pod, which for an
// egress rule is a peer, so any of them may be looked up in a record.
func npPortNames(np *networkingv1.NetworkPolicy) []string {
	var out []string
	add := func(ports []networkingv1.NetworkPolicyPort) {
		for _, p := range ports {
			if p.Port != nil && p.Port.Type == intstr.String && p.Port.StrVal != "" {
				out = append(out, p.Port.StrVal)
			}
		}
	}
	for i := range np.Spec.Ingress {
		add(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		add(np.Spec.Egress[i].Ports)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cnpPortNames are the destinationNamedPort names of a
// ClusterNetworkPolicy's rules, sorted and unique.
func cnpPortNames(cnp *cnpv1beta1.ClusterNetworkPolicy) []string {
	var out []string
	add := func(protos []cnpv1beta1.ClusterNetworkPolicyProtocol) {
		for _, p := range protos {
			if p.DestinationNamedPort != "" {
				out = append(out, p.DestinationNamedPort)
			}
		}
	}
	for i := range cnp.Spec.Ingress {
		add(cnp.Spec.Ingress[i].Protocols)
	}
	for i := range cnp.Spec.Egress {
		add(cnp.Spec.Egress[i].Protocols)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
