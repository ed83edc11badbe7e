package policy

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/problem"
)

// FailClosed is np enforced without its rules: the same subject and the
// same effective policyTypes, no rules. The pods it selects stay isolated
// in the directions it isolates them, and nothing it allows is installed.
// It is what an over-budget policy is enforced as (package budget).
func FailClosed(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	ing, egr := policyTypes(np)
	return failClosed(np, np.Spec.PodSelector, ing, egr)
}

func failClosed(np *networkingv1.NetworkPolicy, sel metav1.LabelSelector, ing, egr bool) *networkingv1.NetworkPolicy {
	out := &networkingv1.NetworkPolicy{TypeMeta: np.TypeMeta, ObjectMeta: np.ObjectMeta,
		Spec: networkingv1.NetworkPolicySpec{PodSelector: sel}}
	if ing {
		out.Spec.PolicyTypes = append(out.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	if egr {
		out.Spec.PolicyTypes = append(out.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	return out
}

// FailClosedInvalid is what an invalid NetworkPolicy is enforced as, so
// that no pod it was written to isolate loses its isolation because of a
// mistake in it: FailClosed, except where problems say the subject or the
// directions cannot be read.
//
//   - A podSelector with a problem (it does not parse, or it holds a value
//     no label can have) selects every pod of the policy's namespace: it
//     was meant to select some of them and which cannot be known. The
//     wider isolation stays inside the namespace of whoever wrote the
//     policy, so no other tenant is affected.
//   - A policyTypes with a value other than Ingress or Egress isolates
//     both directions: the author named a direction that cannot be read.
//     A duplicate value means what it says.
//
// problems are the policy's own (Validate's, or a manifest's).
func FailClosedInvalid(np *networkingv1.NetworkPolicy, problems []problem.Problem) *networkingv1.NetworkPolicy {
	sel := np.Spec.PodSelector
	ing, egr := policyTypes(np)
	for _, p := range problems {
		switch {
		case strings.HasPrefix(p.Field, "spec.podSelector"):
			sel = metav1.LabelSelector{}
		case strings.HasPrefix(p.Field, "spec.policyTypes") && !strings.Contains(p.Reason, "duplicate"):
			ing, egr = true, true
		}
	}
	return failClosed(np, sel, ing, egr)
}
