package policy

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// objectOf names a NetworkPolicy in a problem.
func objectOf(np *networkingv1.NetworkPolicy) problem.Object {
	return problem.Object{APIVersion: problem.NetworkingV1, Kind: "NetworkPolicy", Namespace: np.Namespace, Name: np.Name}
}

// Validate mirrors the API server's validation of the fields the
// compiler relies on, so that a manifest applied without an API server is
// refused for the same reasons a cluster would refuse it. ipBlocks are
// read as ParseIPBlockCIDR reads them, as an API server that stored them
// before its strict validation still serves them; package manifest
// refuses the forms the API server refuses on create.
func Validate(np *networkingv1.NetworkPolicy) []problem.Problem {
	return validate(np, nil)
}

// validator is what validate parses selectors and checks port names with:
// nil parses and checks each anew (Validate), else each distinct one once
// per compile.
type validator struct {
	selectors *selection.Selectors
	portNames map[string][]string // port name → validation errors
}

// selectorError is the error of parsing ls (not nil).
func (v *validator) selectorError(ls *metav1.LabelSelector) error {
	if v == nil {
		_, err := selection.AsSelector(ls)
		return err
	}
	return v.selectors.Parse(ls).Err
}

// portNameErrors is validation.IsValidPortName.
func (v *validator) portNameErrors(name string) []string {
	if v == nil {
		return validation.IsValidPortName(name)
	}
	errs, ok := v.portNames[name]
	if !ok {
		errs = validation.IsValidPortName(name)
		v.portNames[name] = errs
	}
	return errs
}

// validate is Validate with the selectors parsed and port names checked
// through v.
func validate(np *networkingv1.NetworkPolicy, v *validator) []problem.Problem {
	var out []problem.Problem
	bad := func(field, format string, args ...any) {
		out = append(out, problem.Problem{Object: objectOf(np), Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if np.Name == "" {
		bad("metadata.name", "required")
	}
	if err := v.selectorError(&np.Spec.PodSelector); err != nil {
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
		for j, p := range r.From {
			validatePeer(p, fieldPath{"spec.ingress", i, "from", j}, v, bad)
		}
		for j, p := range r.Ports {
			validatePort(p, fieldPath{"spec.ingress", i, "ports", j}, v, bad)
		}
	}
	for i, r := range np.Spec.Egress {
		for j, p := range r.To {
			validatePeer(p, fieldPath{"spec.egress", i, "to", j}, v, bad)
		}
		for j, p := range r.Ports {
			validatePort(p, fieldPath{"spec.egress", i, "ports", j}, v, bad)
		}
	}
	return out
}

// fieldPath names a peer or port of a rule, e.g. spec.ingress[0].from[1];
// the text is only built for a problem.
type fieldPath struct {
	rules string
	i     int
	list  string
	j     int
}

func (f fieldPath) String() string {
	return f.rules + "[" + strconv.Itoa(f.i) + "]." + f.list + "[" + strconv.Itoa(f.j) + "]"
}

func validatePeer(p networkingv1.NetworkPolicyPeer, path fieldPath, v *validator, bad func(string, string, ...any)) {
	n := 0
	if p.PodSelector != nil || p.NamespaceSelector != nil {
		n++
	}
	if p.IPBlock != nil {
		n++
	}
	if n == 0 {
		bad(path.String(), "must specify a peer: podSelector, namespaceSelector or ipBlock")
		return
	}
	if n > 1 {
		bad(path.String(), "may not specify both ipBlock and another peer")
		return
	}
	if p.PodSelector != nil {
		if err := v.selectorError(p.PodSelector); err != nil {
			bad(path.String()+".podSelector", "%v", err)
		}
	}
	if p.NamespaceSelector != nil {
		if err := v.selectorError(p.NamespaceSelector); err != nil {
			bad(path.String()+".namespaceSelector", "%v", err)
		}
	}
	if b := p.IPBlock; b != nil {
		cidr, err := ParseIPBlockCIDR(b.CIDR)
		if err != nil {
			bad(path.String()+".ipBlock.cidr", "invalid CIDR %q: %v", b.CIDR, err)
			return
		}
		for k, e := range b.Except {
			ef := path.String() + ".ipBlock.except[" + strconv.Itoa(k) + "]"
			ex, err := ParseIPBlockCIDR(e)
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

func validatePort(p networkingv1.NetworkPolicyPort, path fieldPath, v *validator, bad func(string, string, ...any)) {
	if p.Protocol != nil {
		switch *p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			bad(path.String()+".protocol", "unsupported value %q: must be TCP, UDP or SCTP", *p.Protocol)
		}
	}
	if p.Port == nil {
		if p.EndPort != nil {
			bad(path.String()+".endPort", "may not be specified when port is not specified")
		}
		return
	}
	switch p.Port.Type {
	case intstr.Int:
		if p.Port.IntVal < 1 || p.Port.IntVal > 65535 {
			bad(path.String()+".port", "%d is not between 1 and 65535", p.Port.IntVal)
		}
		if p.EndPort != nil {
			if *p.EndPort < p.Port.IntVal {
				bad(path.String()+".endPort", "%d must be greater than or equal to port %d", *p.EndPort, p.Port.IntVal)
			}
			if *p.EndPort > 65535 {
				bad(path.String()+".endPort", "%d is not between 1 and 65535", *p.EndPort)
			}
		}
	case intstr.String:
		if errs := v.portNameErrors(p.Port.StrVal); len(errs) > 0 {
			bad(path.String()+".port", "invalid port name %q: %s", p.Port.StrVal, strings.Join(errs, "; "))
		}
		if p.EndPort != nil {
			bad(path.String()+".endPort", "may not be specified when port is a named port")
		}
	}
}
