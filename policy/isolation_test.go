package policy

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIsolatingPolicies: the policies that isolate a pod in a direction
// are those selecting it whose policy types (defaulted as the API does)
// include the direction; a selector that does not parse selects nothing;
// the answer is sorted.
func TestIsolatingPolicies(t *testing.T) {
	np := func(name string, sel metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: sel, PolicyTypes: types}}
	}
	all := metav1.LabelSelector{}
	appA := metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}
	appB := metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Nope"}}}
	withEgressRule := np("default-egress", appA)
	withEgressRule.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	nps := []*networkingv1.NetworkPolicy{
		np("z-all", all),
		np("ingress-a", appA, networkingv1.PolicyTypeIngress),
		np("egress-a", appA, networkingv1.PolicyTypeEgress),
		np("both-a", appA, networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress),
		np("ingress-b", appB, networkingv1.PolicyTypeIngress),
		np("bad", bad, networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress),
		np("default-ingress", appA),
		withEgressRule,
	}
	for _, tc := range []struct {
		labels map[string]string
		egress bool
		want   []string
	}{
		// x/bad's podSelector is invalid: the compiler enforces it in
		// its fail-closed form, which isolates every pod of x in the
		// directions it names.
		{map[string]string{"app": "a"}, false, []string{"x/bad", "x/both-a", "x/default-egress", "x/default-ingress", "x/ingress-a", "x/z-all"}},
		{map[string]string{"app": "a"}, true, []string{"x/bad", "x/both-a", "x/default-egress", "x/egress-a"}},
		{map[string]string{"app": "b"}, false, []string{"x/bad", "x/ingress-b", "x/z-all"}},
		{map[string]string{"app": "b"}, true, []string{"x/bad"}},
		{nil, false, []string{"x/bad", "x/z-all"}},
	} {
		if got := IsolatingPolicies(nps, tc.labels, tc.egress); !slices.Equal(got, tc.want) {
			t.Errorf("%v egress=%v: %v, want %v", tc.labels, tc.egress, got, tc.want)
		}
	}
	if got := IsolatingPolicies(nil, map[string]string{"app": "a"}, false); got != nil {
		t.Errorf("no policies: %v", got)
	}
}
