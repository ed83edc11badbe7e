package clusterpolicy

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// APIVersion is what problems name ClusterNetworkPolicies by: the version
// compose hands in (both served versions share the schema).
const APIVersion = "policy.networking.k8s.io/v1beta1"

// The API's bounds (CRD schema and CEL rules of v0.3.0).
const (
	maxRules       = 25
	maxPeers       = 25
	maxProtocols   = 25
	maxNetworks    = 25
	maxDomainNames = 25
	maxRuleName    = 100
	maxPriority    = 1000
)

func objectOf(cnp *v1beta1.ClusterNetworkPolicy) problem.Object {
	return problem.Object{APIVersion: APIVersion, Kind: "ClusterNetworkPolicy", Name: cnp.Name}
}

// validPolicy is a policy object validated: cp is nil when the object is
// left out. Problems and warnings are reported either way; ingress and
// egress (set only when cp is) say why each rule fails closed.
type validPolicy struct {
	cp              *compiledPolicy
	problems        []problem.Problem
	warnings        []problem.Problem
	ingress, egress []RuleCheck
}

// compiledPolicy is a policy that is enforced: its placement (tier,
// priority, subject) is valid. failClosed marks the rules that cannot be
// enforced as written (invalid, or a peer this version cannot read): an
// Accept rule of them matches nothing, a Deny or Pass rule drops
// everything, as the API prescribes for peers of an unknown kind.
type compiledPolicy struct {
	cnp      *v1beta1.ClusterNetworkPolicy
	admin    bool
	subjNS   *metav1.LabelSelector
	subjPod  *metav1.LabelSelector // nil: every pod of the namespaces
	failIng  []bool
	failEgr  []bool
	hasNodes bool // some rule selects nodes: it depends on Input.Nodes
	// domains are the patterns of the egress rules with domainNames
	// peers that are enforced (not failing closed), by rule index.
	domains map[int][]fqdn.Pattern
}

// Validate reports what Compile reports for one object: problems (the
// object is left out, or the named rule fails closed) and warnings (a
// valid rule that fails closed because nftguard cannot enforce it as
// written). Check says which rules fail closed as well.
func Validate(cnp *v1beta1.ClusterNetworkPolicy) (problems, warnings []problem.Problem) {
	v := Check(cnp)
	return v.Problems, v.Warnings
}

// validate checks what the CRD schema and its CEL rules enforce, because
// manifests reach the compiler without an API server. What decides whom a
// policy applies to and in which order (name, tier, priority, subject,
// the number of rules) cannot fail closed in any sensible way: such a
// policy is left out. A bad rule fails closed where it stands (see
// compiledPolicy), so the rules around it keep their meaning and an
// invalid Deny never becomes an allow.
func validate(cnp *v1beta1.ClusterNetworkPolicy, sc *selection.Selectors) *validPolicy {
	vp := &validPolicy{}
	obj := objectOf(cnp)
	bad := func(field, format string, args ...any) {
		vp.problems = append(vp.problems, problem.Problem{Object: obj, Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	s := &cnp.Spec
	if cnp.Name == "" {
		bad("metadata.name", "required")
	}
	if s.Tier != v1beta1.AdminTier && s.Tier != v1beta1.BaselineTier {
		bad("spec.tier", "unsupported value %q: must be Admin or Baseline", s.Tier)
	}
	if s.Priority < 0 || s.Priority > maxPriority {
		bad("spec.priority", "%d is out of range 0-%d", s.Priority, maxPriority)
	}
	cp := &compiledPolicy{cnp: cnp, admin: s.Tier == v1beta1.AdminTier}
	switch {
	case s.Subject.Namespaces != nil && s.Subject.Pods != nil:
		bad("spec.subject", "exactly one of namespaces and pods must be set")
	case s.Subject.Namespaces != nil:
		cp.subjNS = s.Subject.Namespaces
		if err := sc.Parse(cp.subjNS).Err; err != nil {
			bad("spec.subject.namespaces", "%v", err)
		}
	case s.Subject.Pods != nil:
		cp.subjNS, cp.subjPod = &s.Subject.Pods.NamespaceSelector, &s.Subject.Pods.PodSelector
		if err := sc.Parse(cp.subjNS).Err; err != nil {
			bad("spec.subject.pods.namespaceSelector", "%v", err)
		}
		if err := sc.Parse(cp.subjPod).Err; err != nil {
			bad("spec.subject.pods.podSelector", "%v", err)
		}
	default:
		bad("spec.subject", "exactly one of namespaces and pods must be set")
	}
	if len(s.Ingress) > maxRules {
		bad("spec.ingress", "%d rules: at most %d are allowed", len(s.Ingress), maxRules)
	}
	if len(s.Egress) > maxRules {
		bad("spec.egress", "%d rules: at most %d are allowed", len(s.Egress), maxRules)
	}
	if len(vp.problems) > 0 {
		return vp
	}
	rv := ruleValidator{vp: vp, obj: obj, sc: sc}
	cp.failIng = make([]bool, len(s.Ingress))
	vp.ingress = make([]RuleCheck, len(s.Ingress))
	for i := range s.Ingress {
		name, action, peers, protos := ruleOf(cnp, false, i)
		vp.ingress[i] = rv.rule(fmt.Sprintf("spec.ingress[%d]", i), "from", name, action, peers, protos)
		cp.failIng[i] = vp.ingress[i].FailClosed
	}
	cp.failEgr = make([]bool, len(s.Egress))
	vp.egress = make([]RuleCheck, len(s.Egress))
	for i := range s.Egress {
		r := &s.Egress[i]
		vp.egress[i] = rv.rule(fmt.Sprintf("spec.egress[%d]", i), "to", r.Name, r.Action, r.To, r.Protocols)
		cp.failEgr[i] = vp.egress[i].FailClosed
		var pats []fqdn.Pattern
		for _, p := range r.To {
			if p.Nodes != nil {
				cp.hasNodes = true
			}
			for _, d := range p.DomainNames {
				if pat, err := fqdn.ParsePattern(string(d)); err == nil {
					pats = append(pats, pat)
				}
			}
		}
		if len(pats) > 0 && !cp.failEgr[i] {
			if cp.domains == nil {
				cp.domains = map[int][]fqdn.Pattern{}
			}
			cp.domains[i] = pats
		}
	}
	vp.cp = cp
	return vp
}

// ruleValidator checks the rules of one policy.
type ruleValidator struct {
	vp  *validPolicy
	obj problem.Object
	sc  *selection.Selectors
}

// rule validates one rule (ingress peers come as egress peers without the
// egress-only fields) and tells whether it fails closed, and why.
func (rv *ruleValidator) rule(field, peersField, name string, action v1beta1.ClusterNetworkPolicyRuleAction, peers []v1beta1.ClusterNetworkPolicyEgressPeer, protos []v1beta1.ClusterNetworkPolicyProtocol) RuleCheck {
	var rc RuleCheck
	failText := "the rule matches nothing (fail closed)"
	if action != v1beta1.ClusterNetworkPolicyRuleActionAccept {
		failText = "the rule drops all traffic of its direction (fail closed)"
	}
	report := func(to *[]problem.Problem, f, format string, args []any) {
		cause := fmt.Sprintf(format, args...)
		if !rc.FailClosed {
			rc = RuleCheck{FailClosed: true, Field: f, Cause: cause}
		}
		*to = append(*to, problem.Problem{Object: rv.obj, Field: f, Reason: cause + ": " + failText})
	}
	bad := func(f, format string, args ...any) { report(&rv.vp.problems, f, format, args) }
	warn := func(f, format string, args ...any) { report(&rv.vp.warnings, f, format, args) }
	switch action {
	case v1beta1.ClusterNetworkPolicyRuleActionAccept, v1beta1.ClusterNetworkPolicyRuleActionDeny, v1beta1.ClusterNetworkPolicyRuleActionPass:
	default:
		bad(field+".action", "unsupported value %q: must be Accept, Deny or Pass", action)
	}
	if len(name) > maxRuleName {
		bad(field+".name", "%d bytes: at most %d are allowed", len(name), maxRuleName)
	}
	if len(peers) == 0 || len(peers) > maxPeers {
		bad(field+"."+peersField, "%d peers: 1 to %d are required", len(peers), maxPeers)
	}
	addressPeer := false // networks, nodes or domainNames: no named ports
	for j := range peers {
		p := &peers[j]
		pf := fmt.Sprintf("%s.%s[%d]", field, peersField, j)
		n := 0
		if p.Namespaces != nil {
			n++
			if err := rv.sc.Parse(p.Namespaces).Err; err != nil {
				bad(pf+".namespaces", "%v", err)
			}
		}
		if p.Pods != nil {
			n++
			if err := rv.sc.Parse(&p.Pods.NamespaceSelector).Err; err != nil {
				bad(pf+".pods.namespaceSelector", "%v", err)
			}
			if err := rv.sc.Parse(&p.Pods.PodSelector).Err; err != nil {
				bad(pf+".pods.podSelector", "%v", err)
			}
		}
		if p.Nodes != nil {
			n++
			addressPeer = true
			if err := rv.sc.Parse(p.Nodes).Err; err != nil {
				bad(pf+".nodes", "%v", err)
			}
		}
		if p.Networks != nil {
			n++
			addressPeer = true
			if len(p.Networks) == 0 || len(p.Networks) > maxNetworks {
				bad(pf+".networks", "%d networks: 1 to %d are required", len(p.Networks), maxNetworks)
			}
			for k, c := range p.Networks {
				pfx, err := netip.ParsePrefix(string(c))
				switch {
				case err != nil:
					bad(fmt.Sprintf("%s.networks[%d]", pf, k), "invalid CIDR %q", string(c))
				case pfx.Addr().Is4In6():
					// The CRD's isCIDR refuses these: an IPv4 network
					// written as IPv6 would match only IPv6 packets.
					bad(fmt.Sprintf("%s.networks[%d]", pf, k), "CIDR %q is an IPv4-mapped IPv6 address, which the API refuses", string(c))
				case pfx.Masked() != pfx:
					bad(fmt.Sprintf("%s.networks[%d]", pf, k), "CIDR %q has host bits set (want %s)", string(c), pfx.Masked())
				}
			}
		}
		if p.DomainNames != nil {
			n++
			addressPeer = true
			if len(p.DomainNames) == 0 || len(p.DomainNames) > maxDomainNames {
				bad(pf+".domainNames", "%d domain names: 1 to %d are required", len(p.DomainNames), maxDomainNames)
			}
			for k, d := range p.DomainNames {
				if _, err := fqdn.ParsePattern(string(d)); err != nil {
					bad(fmt.Sprintf("%s.domainNames[%d]", pf, k), "%v", err)
				}
			}
			if action != v1beta1.ClusterNetworkPolicyRuleActionAccept {
				// The API: "DomainNames is only supported for Accept
				// rules"; its schema admits them in others.
				warn(pf+".domainNames", "domainNames peers are supported only in Accept rules")
			}
		}
		switch {
		case n == 0:
			// The API: a peer with no known field comes from a newer
			// version of the CRD than this compiler reads.
			warn(pf, "no known peer field is set (a newer API version?)")
		case n > 1:
			bad(pf, "exactly one peer field must be set")
		}
	}
	if protos != nil && (len(protos) == 0 || len(protos) > maxProtocols) {
		bad(field+".protocols", "%d protocols: 1 to %d are required", len(protos), maxProtocols)
	}
	for k := range protos {
		p := &protos[k]
		pf := fmt.Sprintf("%s.protocols[%d]", field, k)
		n := 0
		for _, pp := range []struct {
			set  bool
			name string
			port **v1beta1.Port
		}{
			{p.TCP != nil, "tcp", portOf(p.TCP)},
			{p.UDP != nil, "udp", portOfUDP(p.UDP)},
			{p.SCTP != nil, "sctp", portOfSCTP(p.SCTP)},
		} {
			if !pp.set {
				continue
			}
			n++
			rv.port(pf+"."+pp.name+".destinationPort", *pp.port, bad)
		}
		if p.DestinationNamedPort != "" {
			n++
			if addressPeer {
				bad(pf+".destinationNamedPort", "networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames")
			}
		}
		if n != 1 {
			bad(pf, "exactly one of tcp, udp, sctp and destinationNamedPort must be set")
		}
	}
	return rc
}

// port checks a destinationPort: required, and exactly one of a number
// (1-65535) and a range (start < end, both 1-65535).
func (rv *ruleValidator) port(f string, p *v1beta1.Port, bad func(string, string, ...any)) {
	switch {
	case p == nil:
		bad(f, "required")
	case p.Number != 0 && p.Range != nil, p.Number == 0 && p.Range == nil:
		bad(f, "exactly one of number and range must be set")
	case p.Range != nil:
		if p.Range.Start < 1 || p.Range.Start > 65535 || p.Range.End < 1 || p.Range.End > 65535 {
			bad(f+".range", "ports must be 1-65535")
		} else if p.Range.Start >= p.Range.End {
			bad(f+".range", "start port must be less than end port")
		}
	case p.Number < 1 || p.Number > 65535:
		bad(f+".number", "%d is not a port (1-65535)", p.Number)
	}
}

// The three protocols' ports, as pointers to their (possibly absent)
// destinationPort fields; nil-safe so that validate reads them in one loop.
func portOf(p *v1beta1.ClusterNetworkPolicyProtocolTCP) **v1beta1.Port {
	if p == nil {
		return new(*v1beta1.Port)
	}
	return &p.DestinationPort
}

func portOfUDP(p *v1beta1.ClusterNetworkPolicyProtocolUDP) **v1beta1.Port {
	if p == nil {
		return new(*v1beta1.Port)
	}
	return &p.DestinationPort
}

func portOfSCTP(p *v1beta1.ClusterNetworkPolicyProtocolSCTP) **v1beta1.Port {
	if p == nil {
		return new(*v1beta1.Port)
	}
	return &p.DestinationPort
}

func labelsOf(m map[string]string) labels.Set { return labels.Set(m) }
