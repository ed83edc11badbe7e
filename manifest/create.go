package manifest

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	nppolicy "github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// failClosed is what a left-out object is enforced as: a NetworkPolicy
// in its fail-closed form (policy.FailClosedInvalid: its pods stay
// isolated, nothing it allows is installed), so that a mistake in a
// policy never opens the pods it was written to isolate; nil for any
// other kind, and for a policy whose namespace is not a valid name (no
// pod can be in it: the API server refuses such pods too).
func failClosed(obj any, problems []problem.Problem) any {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return nil
	}
	for _, p := range problems {
		if p.Field == "metadata.namespace" {
			return nil
		}
	}
	return nppolicy.FailClosedInvalid(np, problems)
}

// StaysIsolated says whether the object a Problem names is enforced in
// its fail-closed form rather than left out: a NetworkPolicy, unless its
// namespace is not a valid name (see failClosed; such a namespace is
// shown quoted).
func StaysIsolated(p problem.Problem) bool {
	return p.Object.Kind == "NetworkPolicy" && len(apivalidation.ValidateNamespaceName(p.Object.Namespace, false)) == 0
}

// validateCreate checks what the API server refuses when an object is
// created but still serves when an older version stored it: a NetworkPolicy
// ipBlock's cidr and except in other than the strict form
// (StrictIPCIDRValidation, on by default since Kubernetes 1.36): leading
// zeros, an IPv4-mapped IPv6 address, bits set beyond the prefix length;
// and label selectors with keys or values no label can have (refused in
// matchExpressions since Kubernetes 1.27). The compiler reads such a value
// as Kubernetes components do, so that a stored policy keeps its meaning
// (policy.ParseIPBlockCIDR, selection.AsSelector); a manifest is
// what someone is about to create, so it is refused here as the API server
// would refuse it, and the object is reported like one with invalid
// metadata (and, as it, kept in its fail-closed form: failClosed). A value that cannot be read at all is the compiler's to
// report, as before.
func validateCreate(src string, id problem.Object, obj any, meta *metav1.ObjectMeta) []problem.Problem {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return nil
	}
	id.Namespace, id.Name = shown(meta.Namespace), shown(meta.Name)
	var out []problem.Problem
	check := func(path *field.Path, b *networkingv1.IPBlock) {
		if b == nil {
			return
		}
		values := append([]string{b.CIDR}, b.Except...)
		for i, v := range values {
			p := path.Child("ipBlock", "cidr")
			if i > 0 {
				p = path.Child("ipBlock", "except").Index(i - 1)
			}
			if _, _, err := netutils.ParseCIDRSloppy(v); err != nil {
				continue
			}
			for _, e := range validation.IsValidCIDRForLegacyField(p, v, true, nil) {
				out = append(out, problem.Problem{Source: src, Object: id, Field: e.Field, Value: v,
					Reason: e.Detail + " (the API server refuses it when a policy is created)"})
			}
		}
	}
	checkSelector := func(path *field.Path, ls *metav1.LabelSelector) {
		if ls == nil {
			return
		}
		if _, err := metav1.LabelSelectorAsSelector(ls); err == nil {
			return
		}
		if _, err := selection.AsSelector(ls); err != nil {
			return
		}
		for _, e := range metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, path) {
			out = append(out, problem.Problem{Source: src, Object: id, Field: e.Field, Value: fmt.Sprint(e.BadValue),
				Reason: e.Detail + " (the API server refuses it when a policy is created)"})
		}
	}
	spec := field.NewPath("spec")
	checkSelector(spec.Child("podSelector"), &np.Spec.PodSelector)
	peer := func(path *field.Path, p networkingv1.NetworkPolicyPeer) {
		check(path, p.IPBlock)
		checkSelector(path.Child("namespaceSelector"), p.NamespaceSelector)
		checkSelector(path.Child("podSelector"), p.PodSelector)
	}
	for i, r := range np.Spec.Ingress {
		for j := range r.From {
			peer(spec.Child("ingress").Index(i).Child("from").Index(j), r.From[j])
		}
	}
	for i, r := range np.Spec.Egress {
		for j := range r.To {
			peer(spec.Child("egress").Index(i).Child("to").Index(j), r.To[j])
		}
	}
	return out
}
