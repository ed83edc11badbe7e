package flowlog

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIsolatingPolicies: a record's direction is policy.IsolatingPolicies'
// egress flag; a direction that is neither (forged, unknown) names no
// policy. The semantics are tested in package policy.
func TestIsolatingPolicies(t *testing.T) {
	nps := []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "ingress"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "egress"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}},
	}
	for _, tc := range []struct {
		d    Direction
		want []string
	}{
		{Ingress, []string{"x/ingress"}},
		{Egress, []string{"x/egress"}},
		{Forged, nil},
		{Unknown, nil},
	} {
		if got := IsolatingPolicies(nps, nil, tc.d); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.d, got, tc.want)
		}
	}
}
