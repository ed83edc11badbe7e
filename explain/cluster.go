package explain

import (
	"github.com/nftguard/nftguard/podset"
	nppolicy "github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"

	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Input is the cluster state a flow is judged against.
type Input struct {
	// NodeName, when set, judges the flow as the agent of that node
	// enforces it: only pods on that node are isolated. Empty means the
	// whole cluster enforces (every node runs an agent).
	NodeName        string
	Namespaces      []*corev1.Namespace
	Nodes           []*corev1.Node
	Pods            []*podset.Pod
	NetworkPolicies []*networkingv1.NetworkPolicy
	// ClusterNetworkPolicies of either served version, as v1beta1 (the
	// schemas are identical). Nodes give nodes peers their addresses.
	ClusterNetworkPolicies []*cnpv1beta1.ClusterNetworkPolicy
}

// Cluster is the input indexed for evaluating flows. It is read-only after
// New, so one Cluster may answer many flows, also concurrently.
type Cluster struct {
	nodeName string
	nsLabels map[string]labels.Set
	pods     map[string]*pod // namespace/name of live pods, also hostNetwork ones
	byAddr   map[netip.Addr]*pod
	nodeOf   map[netip.Addr]string // node addresses, also of hostNetwork pods
	// external are addresses that only a Node's ExternalIP names: often
	// not configured on the node at all (a cloud's 1:1 NAT), so traffic
	// from them is not the node's own.
	external map[netip.Addr]bool
	policies []*policy
	gone     map[string]bool // terminated pods, to say so when one is named
	// cnps are the valid ClusterNetworkPolicies in evaluation order:
	// Admin before Baseline, then priority, then name.
	cnps      []*clusterPolicy
	nodeAddrs map[netip.Addr][]*corev1.Node // node.status.addresses, for nodes peers
	warnings  []problem.Problem
	domains   DomainAnswers // nil: domainNames peers match nothing known
}

// pod is a live pod reduced to what a verdict needs.
type pod struct {
	obj         *podset.Pod
	key         string
	addrs       []netip.Addr
	hostNetwork bool
}

// policy is a valid NetworkPolicy with its selector parsed once.
type policy struct {
	np       *networkingv1.NetworkPolicy
	key      string
	selector labels.Selector
	ingress  bool
	egress   bool
}

// New indexes the input. Invalid objects are returned as problems and left
// out (the API server would have refused them, so they never take part in a
// verdict); everything else takes part in verdicts. A ClusterNetworkPolicy
// problem may instead name a rule that fails closed, as the compiler
// reports it: the policy then takes part with that rule failing closed.
func New(in Input) (*Cluster, []problem.Problem) {
	c := &Cluster{
		nodeName: in.NodeName,
		nsLabels: map[string]labels.Set{},
		pods:     map[string]*pod{},
		byAddr:   map[netip.Addr]*pod{},
		nodeOf:   map[netip.Addr]string{},
		external: map[netip.Addr]bool{},
		gone:     map[string]bool{},
	}
	var problems []problem.Problem
	for _, ns := range in.Namespaces {
		l := labels.Set{}
		for k, v := range ns.Labels {
			l[k] = v
		}
		// The API server sets this label on every namespace.
		l[corev1.LabelMetadataName] = ns.Name
		c.nsLabels[ns.Name] = l
	}
	local := map[netip.Addr]bool{}
	for _, n := range in.Nodes {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				c.nodeOf[ip.Unmap()] = n.Name
				if a.Type == corev1.NodeExternalIP {
					c.external[ip.Unmap()] = true
				} else {
					local[ip.Unmap()] = true
				}
			}
		}
	}
	for a := range local {
		delete(c.external, a)
	}
	for _, o := range in.Pods {
		key := o.Namespace + "/" + o.Name
		if o.Finished {
			c.gone[key] = true // its address may already belong to another pod
			continue
		}
		p := &pod{obj: o, key: key, hostNetwork: o.HostNetwork}
		bad := false
		for i, ip := range o.IPs {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				problems = append(problems, problem.Problem{
					Object: problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: o.Namespace, Name: o.Name},
					Field:  fmt.Sprintf("status.podIPs[%d]", i), Reason: fmt.Sprintf("invalid IP %q", ip)})
				bad = true
				break
			}
			p.addrs = append(p.addrs, a.Unmap())
		}
		if bad {
			continue
		}
		c.pods[key] = p
		for _, a := range p.addrs {
			if p.hostNetwork {
				// A hostNetwork pod's address is its node's.
				c.nodeOf[a] = o.NodeName
				continue
			}
			c.byAddr[a] = p
		}
	}
	for _, np := range in.NetworkPolicies {
		key := np.Namespace + "/" + np.Name
		// A policy the API server would refuse is enforced in its
		// fail-closed form; the validation and the form are the
		// compiler's, so both read it the same way.
		if probs := nppolicy.Validate(np); len(probs) > 0 {
			problems = append(problems, probs...)
			np = nppolicy.FailClosedInvalid(np, probs)
		}
		sel, _ := selection.AsSelector(&np.Spec.PodSelector)
		p := &policy{np: np, key: key, selector: sel}
		p.ingress, p.egress = nppolicy.PolicyTypes(np)
		c.policies = append(c.policies, p)
	}
	// Sorted, so the rule named as the decider does not depend on file order.
	sort.Slice(c.policies, func(i, j int) bool { return c.policies[i].key < c.policies[j].key })
	c.nodeAddrs = nodeIndex(in.Nodes)
	probs, warns := c.addClusterPolicies(in.ClusterNetworkPolicies)
	problems = append(problems, probs...)
	c.warnings = warns
	return c, problems
}

// Warnings name valid objects that do not take effect as written: rules of
// ClusterNetworkPolicies with a peer nftguard cannot match (domainNames, or
// a peer kind of a newer API version), which fail closed as the API
// prescribes. They are the compiler's warnings, word for word.
func (c *Cluster) Warnings() []problem.Problem {
	return append([]problem.Problem(nil), c.warnings...)
}

// namespaceLabels returns the labels of a namespace; one without a
// Namespace object still carries its name label.
func (c *Cluster) namespaceLabels(ns string) labels.Set {
	if l, ok := c.nsLabels[ns]; ok {
		return l
	}
	return labels.Set{corev1.LabelMetadataName: ns}
}
