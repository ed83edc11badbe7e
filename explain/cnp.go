package explain

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Tier names as explain prints them; the CNP tiers are the API's values.
const (
	TierAdmin         = string(cnpv1beta1.AdminTier)
	TierNetworkPolicy = "NetworkPolicy"
	TierBaseline      = string(cnpv1beta1.BaselineTier)
)

// clusterPolicy is an enforced ClusterNetworkPolicy with its subject parsed
// once.
type clusterPolicy struct {
	name string
	// shown is the name as explain prints it: quoted when it is not a
	// name the API server accepts (control characters could otherwise
	// forge lines of the verdict; the compiler enforces such policies).
	shown    string
	tier     string
	priority int32
	// The subject: pods of namespaces matching nsSel, and when podSel is
	// set (a pods subject) only those matching it.
	nsSel, podSel labels.Selector
	ingress       []cnpRule
	egress        []cnpRule
}

// cnpRule is one rule of either direction, ingress peers read as egress
// peers with only namespaces and pods set (the ingress peer type has no
// other fields).
type cnpRule struct {
	name      string
	action    cnpv1beta1.ClusterNetworkPolicyRuleAction
	peers     []cnpv1beta1.ClusterNetworkPolicyEgressPeer
	protocols []cnpv1beta1.ClusterNetworkPolicyProtocol
	// failClosed, when set, says why the compiler fails the rule closed
	// (invalid, or a peer nftguard cannot match): an Accept rule matches
	// nothing, any other drops all traffic of its direction.
	failClosed string
}

// addClusterPolicies indexes the ClusterNetworkPolicies the compiler
// enforces, with the rules it fails closed, and returns its problems and
// warnings. Which objects and rules count is the compiler's call
// (clusterpolicy.CheckAll), not a second reading of the API's rules: the
// kernel enforces the compiler's, and explain must say what the kernel
// does.
func (c *Cluster) addClusterPolicies(cnps []*cnpv1beta1.ClusterNetworkPolicy) (problems, warnings []problem.Problem) {
	var in []*cnpv1beta1.ClusterNetworkPolicy
	for _, cnp := range cnps {
		if cnp != nil {
			in = append(in, cnp)
		}
	}
	for i, v := range clusterpolicy.CheckAll(in) {
		problems = append(problems, v.Problems...)
		warnings = append(warnings, v.Warnings...)
		if !v.Enforced {
			continue
		}
		cnp := in[i]
		cp := &clusterPolicy{name: cnp.Name, shown: displayName(cnp.Name), tier: string(cnp.Spec.Tier), priority: cnp.Spec.Priority}
		// Check parsed these selectors: an enforced policy's parse.
		if s := cnp.Spec.Subject.Namespaces; s != nil {
			cp.nsSel, _ = selection.AsSelector(s)
		} else {
			cp.nsSel, _ = selection.AsSelector(&cnp.Spec.Subject.Pods.NamespaceSelector)
			cp.podSel, _ = selection.AsSelector(&cnp.Spec.Subject.Pods.PodSelector)
		}
		for k, r := range cnp.Spec.Ingress {
			rule := cnpRule{name: r.Name, action: r.Action, protocols: r.Protocols,
				failClosed: failClosedCause(fmt.Sprintf("spec.ingress[%d]", k), v.Ingress[k])}
			for _, p := range r.From {
				rule.peers = append(rule.peers, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Pods: p.Pods})
			}
			cp.ingress = append(cp.ingress, rule)
		}
		for k, r := range cnp.Spec.Egress {
			cp.egress = append(cp.egress, cnpRule{name: r.Name, action: r.Action, peers: r.To, protocols: r.Protocols,
				failClosed: failClosedCause(fmt.Sprintf("spec.egress[%d]", k), v.Egress[k])})
		}
		c.cnps = append(c.cnps, cp)
	}
	// Tier, then priority, then name: the API leaves the order of equal
	// priorities open, and nftguard (compiler and explain alike) breaks
	// the tie by name so that the verdict never depends on input order.
	// Names are unique here: CheckAll leaves later namesakes out.
	sort.Slice(c.cnps, func(i, j int) bool {
		a, b := c.cnps[i], c.cnps[j]
		if a.tier != b.tier {
			return a.tier == TierAdmin
		}
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		return a.name < b.name
	})
	return problems, warnings
}

// failClosedCause is the compiler's first reason for failing a rule closed,
// its field relative to the rule ("to[1].domainNames: domainNames peers
// are supported only in Accept rules"), or "" for a rule enforced as
// written.
func failClosedCause(ruleField string, rc clusterpolicy.RuleCheck) string {
	if !rc.FailClosed {
		return ""
	}
	f := rc.Field
	if rest, ok := strings.CutPrefix(f, ruleField+"."); ok {
		f = rest
	}
	return f + ": " + rc.Cause
}

// displayName is a policy name as explain prints it: as is when the API
// server would accept it, else quoted.
func displayName(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return problem.Quote(name)
}

// selects reports whether the policy's subject holds the pod. hostNetwork
// pods are never subjects (the caller never asks for them).
func (cp *clusterPolicy) selects(c *Cluster, p *pod) bool {
	if !cp.nsSel.Matches(c.namespaceLabels(p.obj.Namespace)) {
		return false
	}
	return cp.podSel == nil || cp.podSel.Matches(labels.Set(p.obj.Labels))
}

// nodeIndex maps the addresses a nodes peer matches to their nodes: the
// InternalIP and ExternalIP addresses of node.status.addresses, as the
// API prescribes and the compiler programs (not Hostname or InternalDNS
// entries, even when they hold an IP; not addresses with a zone).
func nodeIndex(nodes []*corev1.Node) map[netip.Addr][]*corev1.Node {
	out := map[netip.Addr][]*corev1.Node{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
				out[ip.Unmap()] = append(out[ip.Unmap()], n)
			}
		}
	}
	return out
}
