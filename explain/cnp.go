package explain

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/problem"
)

// cnpAPIVersion is the version ClusterNetworkPolicies are read in (v1alpha2
// has the same schema and arrives converted).
const cnpAPIVersion = "policy.networking.k8s.io/v1beta1"

// Tier names as explain prints them; the CNP tiers are the API's values.
const (
	TierAdmin         = string(cnpv1beta1.AdminTier)
	TierNetworkPolicy = "NetworkPolicy"
	TierBaseline      = string(cnpv1beta1.BaselineTier)
)

// clusterPolicy is a valid ClusterNetworkPolicy with its subject parsed once.
type clusterPolicy struct {
	name     string
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
	// unmatchable names the first peer nftguard cannot match, and why:
	// one with no field set (written against a newer API) or with
	// domainNames (not supported). Such a rule fails closed, as the API
	// prescribes.
	unmatchable string
}

func cnpObject(cnp *cnpv1beta1.ClusterNetworkPolicy) problem.Object {
	return problem.Object{APIVersion: cnpAPIVersion, Kind: "ClusterNetworkPolicy", Name: cnp.Name}
}

// addClusterPolicies validates and indexes the ClusterNetworkPolicies,
// returning the invalid ones as problems and warnings for valid ones with
// rules that fail closed.
func (c *Cluster) addClusterPolicies(cnps []*cnpv1beta1.ClusterNetworkPolicy) (problems, warnings []problem.Problem) {
	for _, cnp := range cnps {
		if cnp == nil {
			continue
		}
		if probs := ValidateClusterNetworkPolicy(cnp); len(probs) > 0 {
			// The API server would have refused it: it enforces
			// nothing (the compiler must skip it too, or the
			// cross-check compares different inputs).
			problems = append(problems, probs...)
			continue
		}
		cp := &clusterPolicy{name: cnp.Name, tier: string(cnp.Spec.Tier), priority: cnp.Spec.Priority}
		if s := cnp.Spec.Subject.Namespaces; s != nil {
			cp.nsSel, _ = metav1.LabelSelectorAsSelector(s)
		} else {
			cp.nsSel, _ = metav1.LabelSelectorAsSelector(&cnp.Spec.Subject.Pods.NamespaceSelector)
			cp.podSel, _ = metav1.LabelSelectorAsSelector(&cnp.Spec.Subject.Pods.PodSelector)
		}
		for i, r := range cnp.Spec.Ingress {
			rule := cnpRule{name: r.Name, action: r.Action, protocols: r.Protocols}
			for _, p := range r.From {
				rule.peers = append(rule.peers, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Pods: p.Pods})
			}
			rule.unmatchable = unmatchable(rule.peers, "from")
			warnings = append(warnings, failClosedWarning(cnp, fmt.Sprintf("spec.ingress[%d]", i), rule)...)
			cp.ingress = append(cp.ingress, rule)
		}
		for i, r := range cnp.Spec.Egress {
			rule := cnpRule{name: r.Name, action: r.Action, peers: r.To, protocols: r.Protocols}
			rule.unmatchable = unmatchable(rule.peers, "to")
			warnings = append(warnings, failClosedWarning(cnp, fmt.Sprintf("spec.egress[%d]", i), rule)...)
			cp.egress = append(cp.egress, rule)
		}
		c.cnps = append(c.cnps, cp)
	}
	// Tier, then priority, then name: the API leaves the order of equal
	// priorities open, and nftguard (compiler and explain alike) breaks
	// the tie by name so that the verdict never depends on input order.
	sort.SliceStable(c.cnps, func(i, j int) bool {
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

// unmatchable returns the first peer nftguard cannot match and why, or "".
func unmatchable(peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer, field string) string {
	for j, p := range peers {
		switch {
		case len(p.DomainNames) > 0:
			return fmt.Sprintf("%s[%d] domainNames is not supported by nftguard", field, j)
		case p.Namespaces == nil && p.Pods == nil && p.Nodes == nil && len(p.Networks) == 0:
			return fmt.Sprintf("%s[%d] sets no peer field nftguard knows (written for a newer API version?)", field, j)
		}
	}
	return ""
}

// failClosedWarning says what a rule with an unmatchable peer does instead.
func failClosedWarning(cnp *cnpv1beta1.ClusterNetworkPolicy, field string, r cnpRule) []problem.Problem {
	if r.unmatchable == "" {
		return nil
	}
	return []problem.Problem{{Object: cnpObject(cnp), Field: field, Reason: r.unmatchable + ": " + failClosedEffect(r.action)}}
}

// failClosedEffect is the API's fail-closed rule for peers an
// implementation cannot match.
func failClosedEffect(a cnpv1beta1.ClusterNetworkPolicyRuleAction) string {
	if a == cnpv1beta1.ClusterNetworkPolicyRuleActionAccept {
		return "fail closed: this Accept rule matches no traffic"
	}
	return fmt.Sprintf("fail closed: this %s rule denies all traffic", a)
}

// selects reports whether the policy's subject holds the pod. hostNetwork
// pods are never subjects (the caller never asks for them).
func (cp *clusterPolicy) selects(c *Cluster, p *pod) bool {
	if !cp.nsSel.Matches(c.namespaceLabels(p.obj.Namespace)) {
		return false
	}
	return cp.podSel == nil || cp.podSel.Matches(labels.Set(p.obj.Labels))
}

// domainNameRE is the API's pattern for a domain name.
var domainNameRE = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\.)+[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\.?$`)

// ValidateClusterNetworkPolicy checks what the API server checks for a
// ClusterNetworkPolicy (the CRD's schema and CEL rules of the experimental
// channel, which is a superset of the standard one): an object that fails
// would never exist in a cluster, so it takes part in no verdict. A peer
// with no field set is not a problem: the API documents it as a newer
// peer kind, which fails closed.
func ValidateClusterNetworkPolicy(cnp *cnpv1beta1.ClusterNetworkPolicy) []problem.Problem {
	var out []problem.Problem
	bad := func(field, format string, args ...any) {
		out = append(out, problem.Problem{Object: cnpObject(cnp), Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	selector := func(field string, s *metav1.LabelSelector) {
		if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
			bad(field, "%v", err)
		}
	}
	s := cnp.Spec
	if cnp.Name == "" {
		bad("metadata.name", "required")
	} else if errs := validation.IsDNS1123Subdomain(cnp.Name); len(errs) > 0 {
		// The API server's rule for names; it also keeps control
		// characters out of the terminal explain prints to.
		bad("metadata.name", "invalid name %q: %s", cnp.Name, strings.Join(errs, "; "))
	}
	if s.Tier != cnpv1beta1.AdminTier && s.Tier != cnpv1beta1.BaselineTier {
		bad("spec.tier", "unsupported value %q: must be Admin or Baseline", s.Tier)
	}
	if s.Priority < 0 || s.Priority > 1000 {
		bad("spec.priority", "%d is not between 0 and 1000", s.Priority)
	}
	switch {
	case s.Subject.Namespaces != nil && s.Subject.Pods != nil:
		bad("spec.subject", "must set exactly one of namespaces and pods, not both")
	case s.Subject.Namespaces != nil:
		selector("spec.subject.namespaces", s.Subject.Namespaces)
	case s.Subject.Pods != nil:
		selector("spec.subject.pods.namespaceSelector", &s.Subject.Pods.NamespaceSelector)
		selector("spec.subject.pods.podSelector", &s.Subject.Pods.PodSelector)
	default:
		bad("spec.subject", "must set exactly one of namespaces and pods")
	}
	const maxItems = 25
	if len(s.Ingress) > maxItems {
		bad("spec.ingress", "%d rules: at most %d are allowed", len(s.Ingress), maxItems)
	}
	if len(s.Egress) > maxItems {
		bad("spec.egress", "%d rules: at most %d are allowed", len(s.Egress), maxItems)
	}
	rule := func(field, peerField, name string, action cnpv1beta1.ClusterNetworkPolicyRuleAction, npeers int, protocols []cnpv1beta1.ClusterNetworkPolicyProtocol) {
		if len(name) > 100 {
			bad(field+".name", "%d characters: at most 100 are allowed", len(name))
		}
		switch action {
		case cnpv1beta1.ClusterNetworkPolicyRuleActionAccept, cnpv1beta1.ClusterNetworkPolicyRuleActionDeny, cnpv1beta1.ClusterNetworkPolicyRuleActionPass:
		default:
			bad(field+".action", "unsupported value %q: must be Accept, Deny or Pass", action)
		}
		if npeers < 1 || npeers > maxItems {
			bad(peerField, "%d peers: from 1 to %d are required", npeers, maxItems)
		}
		if len(protocols) > maxItems {
			bad(field+".protocols", "%d entries: at most %d are allowed", len(protocols), maxItems)
		}
		for k, p := range protocols {
			validateProtocol(fmt.Sprintf("%s.protocols[%d]", field, k), p, bad)
		}
	}
	for i, r := range s.Ingress {
		field := fmt.Sprintf("spec.ingress[%d]", i)
		rule(field, field+".from", r.Name, r.Action, len(r.From), r.Protocols)
		for j, p := range r.From {
			pf := fmt.Sprintf("%s.from[%d]", field, j)
			if p.Namespaces != nil && p.Pods != nil {
				bad(pf, "must set exactly one peer field, not namespaces and pods")
				continue
			}
			validatePodPeer(pf, p.Namespaces, p.Pods, selector)
		}
	}
	for i, r := range s.Egress {
		field := fmt.Sprintf("spec.egress[%d]", i)
		rule(field, field+".to", r.Name, r.Action, len(r.To), r.Protocols)
		noNamedPorts := false
		for j, p := range r.To {
			pf := fmt.Sprintf("%s.to[%d]", field, j)
			var set []string
			if p.Namespaces != nil {
				set = append(set, "namespaces")
			}
			if p.Pods != nil {
				set = append(set, "pods")
			}
			if p.Nodes != nil {
				set = append(set, "nodes")
			}
			if p.Networks != nil {
				set = append(set, "networks")
			}
			if p.DomainNames != nil {
				set = append(set, "domainNames")
			}
			if len(set) > 1 {
				bad(pf, "must set exactly one peer field, not %v", set)
				continue
			}
			validatePodPeer(pf, p.Namespaces, p.Pods, selector)
			if p.Nodes != nil {
				selector(pf+".nodes", p.Nodes)
				noNamedPorts = true
			}
			if p.Networks != nil {
				noNamedPorts = true
				if len(p.Networks) < 1 || len(p.Networks) > maxItems {
					bad(pf+".networks", "%d CIDRs: from 1 to %d are required", len(p.Networks), maxItems)
				}
				seen := map[cnpv1beta1.CIDR]bool{}
				for k, n := range p.Networks {
					nf := fmt.Sprintf("%s.networks[%d]", pf, k)
					pre, err := netip.ParsePrefix(string(n))
					switch {
					case len(n) > 43:
						bad(nf, "%d characters: at most 43 are allowed", len(n))
					case err != nil:
						bad(nf, "invalid CIDR %q: %v", string(n), err)
					case pre.Masked() != pre:
						bad(nf, "%q has host bits set: want %s", string(n), pre.Masked())
					case seen[n]:
						bad(nf, "duplicate value %q", string(n))
					}
					seen[n] = true
				}
			}
			if p.DomainNames != nil {
				noNamedPorts = true
				if len(p.DomainNames) < 1 || len(p.DomainNames) > maxItems {
					bad(pf+".domainNames", "%d names: from 1 to %d are required", len(p.DomainNames), maxItems)
				}
				for k, d := range p.DomainNames {
					if !domainNameRE.MatchString(string(d)) {
						bad(fmt.Sprintf("%s.domainNames[%d]", pf, k), "invalid domain name %q", string(d))
					}
				}
			}
		}
		if noNamedPorts {
			for k, p := range r.Protocols {
				if p.DestinationNamedPort != "" {
					bad(fmt.Sprintf("%s.protocols[%d].destinationNamedPort", field, k),
						"networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames")
				}
			}
		}
	}
	return out
}

func validatePodPeer(field string, ns *metav1.LabelSelector, pods *cnpv1beta1.NamespacedPod, selector func(string, *metav1.LabelSelector)) {
	if ns != nil {
		selector(field+".namespaces", ns)
	}
	if pods != nil {
		selector(field+".pods.namespaceSelector", &pods.NamespaceSelector)
		selector(field+".pods.podSelector", &pods.PodSelector)
	}
}

func validateProtocol(field string, p cnpv1beta1.ClusterNetworkPolicyProtocol, bad func(string, string, ...any)) {
	type proto struct {
		name string
		port *cnpv1beta1.Port
	}
	var set []string
	var ports []proto
	if p.TCP != nil {
		set = append(set, "tcp")
		ports = append(ports, proto{"tcp", p.TCP.DestinationPort})
	}
	if p.UDP != nil {
		set = append(set, "udp")
		ports = append(ports, proto{"udp", p.UDP.DestinationPort})
	}
	if p.SCTP != nil {
		set = append(set, "sctp")
		ports = append(ports, proto{"sctp", p.SCTP.DestinationPort})
	}
	if p.DestinationNamedPort != "" {
		set = append(set, "destinationNamedPort")
	}
	switch {
	case len(set) == 0:
		bad(field, "must set exactly one of tcp, udp, sctp and destinationNamedPort")
		return
	case len(set) > 1:
		bad(field, "must set exactly one of tcp, udp, sctp and destinationNamedPort, not %v", set)
		return
	}
	for _, pr := range ports {
		pf := field + "." + pr.name + ".destinationPort"
		switch port := pr.port; {
		case port == nil:
			bad(pf, "required")
		case port.Number != 0 && port.Range != nil:
			bad(pf, "must set exactly one of number and range, not both")
		case port.Range != nil:
			r := port.Range
			if r.Start < 1 || r.Start > 65535 {
				bad(pf+".range.start", "%d is not between 1 and 65535", r.Start)
			}
			if r.End < 1 || r.End > 65535 {
				bad(pf+".range.end", "%d is not between 1 and 65535", r.End)
			}
			if r.Start >= r.End {
				bad(pf+".range", "Start port must be less than End port (%d, %d)", r.Start, r.End)
			}
		case port.Number < 1 || port.Number > 65535:
			bad(pf+".number", "%d is not between 1 and 65535", port.Number)
		}
	}
}

// nodeIndex maps the node addresses (node.status.addresses that are IPs) to
// their nodes, for nodes peers.
func nodeIndex(nodes []*corev1.Node) map[netip.Addr][]*corev1.Node {
	out := map[netip.Addr][]*corev1.Node{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out[ip.Unmap()] = append(out[ip.Unmap()], n)
			}
		}
	}
	return out
}
