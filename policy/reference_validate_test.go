package policy

// Validate as it was before the selector cache: the reference's validation.

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nftguard/nftguard/problem"
)

// refValidate mirrors the API server's validation of the fields the
// compiler relies on, so that a manifest applied without an API server is
// refused for the same reasons a cluster would refuse it.
func refValidate(np *networkingv1.NetworkPolicy) []problem.Problem {
	var out []problem.Problem
	bad := func(field, format string, args ...any) {
		out = append(out, problem.Problem{Object: objectOf(np), Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if np.Name == "" {
		bad("metadata.name", "required")
	}
	if _, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil {
		bad("spec.podSelector", "%v", err)
	}
	seen := map[networkingv1.PolicyType]bool{}
	for i, t := range np.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			bad(fmt.Sprintf("spec.policyTypes[%d]", i), "unsupported value %q: must be Ingress or Egress", t)
		}
		if seen[t] {
			bad(fmt.Sprintf("spec.policyTypes[%d]", i), "duplicate value %q", t)
		}
		seen[t] = true
	}
	for i, r := range np.Spec.Ingress {
		f := fmt.Sprintf("spec.ingress[%d]", i)
		for j, p := range r.From {
			refValidatePeer(p, fmt.Sprintf("%s.from[%d]", f, j), bad)
		}
		for j, p := range r.Ports {
			refValidatePort(p, fmt.Sprintf("%s.ports[%d]", f, j), bad)
		}
	}
	for i, r := range np.Spec.Egress {
		f := fmt.Sprintf("spec.egress[%d]", i)
		for j, p := range r.To {
			refValidatePeer(p, fmt.Sprintf("%s.to[%d]", f, j), bad)
		}
		for j, p := range r.Ports {
			refValidatePort(p, fmt.Sprintf("%s.ports[%d]", f, j), bad)
		}
	}
	return out
}

func refValidatePeer(p networkingv1.NetworkPolicyPeer, field string, bad func(string, string, ...any)) {
	n := 0
	if p.PodSelector != nil || p.NamespaceSelector != nil {
		n++
	}
	if p.IPBlock != nil {
		n++
	}
	if n == 0 {
		bad(field, "must specify a peer: podSelector, namespaceSelector or ipBlock")
		return
	}
	if n > 1 {
		bad(field, "may not specify both ipBlock and another peer")
		return
	}
	if p.PodSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.PodSelector); err != nil {
			bad(field+".podSelector", "%v", err)
		}
	}
	if p.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector); err != nil {
			bad(field+".namespaceSelector", "%v", err)
		}
	}
	if b := p.IPBlock; b != nil {
		cidr, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			bad(field+".ipBlock.cidr", "invalid CIDR %q: %v", b.CIDR, err)
			return
		}
		for k, e := range b.Except {
			ef := fmt.Sprintf("%s.ipBlock.except[%d]", field, k)
			ex, err := netip.ParsePrefix(e)
			if err != nil {
				bad(ef, "invalid CIDR %q: %v", e, err)
				continue
			}
			if ex.Addr().Is4() != cidr.Addr().Is4() {
				bad(ef, "%q is not in the same IP family as cidr %q", e, b.CIDR)
				continue
			}
			if ex.Bits() <= cidr.Bits() || !cidr.Masked().Contains(ex.Masked().Addr()) {
				bad(ef, "%q must be a strict subset of cidr %q", e, b.CIDR)
			}
		}
	}
}

func refValidatePort(p networkingv1.NetworkPolicyPort, field string, bad func(string, string, ...any)) {
	if p.Protocol != nil {
		switch *p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			bad(field+".protocol", "unsupported value %q: must be TCP, UDP or SCTP", *p.Protocol)
		}
	}
	if p.Port == nil {
		if p.EndPort != nil {
			bad(field+".endPort", "may not be specified when port is not specified")
		}
		return
	}
	switch p.Port.Type {
	case intstr.Int:
		if p.Port.IntVal < 1 || p.Port.IntVal > 65535 {
			bad(field+".port", "%d is not between 1 and 65535", p.Port.IntVal)
		}
		if p.EndPort != nil {
			if *p.EndPort < p.Port.IntVal {
				bad(field+".endPort", "%d must be greater than or equal to port %d", *p.EndPort, p.Port.IntVal)
			}
			if *p.EndPort > 65535 {
				bad(field+".endPort", "%d is not between 1 and 65535", *p.EndPort)
			}
		}
	case intstr.String:
		if errs := validation.IsValidPortName(p.Port.StrVal); len(errs) > 0 {
			bad(field+".port", "invalid port name %q: %s", p.Port.StrVal, strings.Join(errs, "; "))
		}
		if p.EndPort != nil {
			bad(field+".endPort", "may not be specified when port is a named port")
		}
	}
}
