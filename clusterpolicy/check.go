package clusterpolicy

import (
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Validity is how Compile classifies one ClusterNetworkPolicy (see the
// package documentation, "Invalid and unreadable objects"). It is exported
// so that readers of the same objects (explain) enforce exactly what the
// kernel enforces instead of a second reading of the API's rules.
type Validity struct {
	// Enforced is false for a policy that is left out: its placement
	// (name, tier, priority, subject, number of rules) is invalid, or,
	// from CheckAll, an earlier policy has its name. It then enforces
	// nothing and Ingress and Egress are nil.
	Enforced bool
	// Ingress and Egress are the verdict on each rule of spec.ingress and
	// spec.egress of an enforced policy, index for index.
	Ingress, Egress []RuleCheck
	// Problems and Warnings are what Compile reports for the object.
	Problems, Warnings []problem.Problem
}

// RuleCheck says whether a rule is enforced as written.
type RuleCheck struct {
	// FailClosed: the rule is invalid, or valid but not enforceable as
	// written (domainNames, a peer of an unknown kind). An Accept rule
	// then matches nothing; any other (Deny, Pass, an unknown action)
	// drops all traffic of its direction.
	FailClosed bool
	// Field and Cause are the first reason, e.g.
	// "spec.egress[0].to[1].domainNames" and "domainNames peers are not
	// supported by nftguard"; the full list is in Problems and Warnings.
	Field, Cause string
}

// Check classifies one policy as Compile does, on its own: a policy that
// shares its name with an earlier one is left out only by CheckAll.
func Check(cnp *v1beta1.ClusterNetworkPolicy) Validity {
	vp := validate(cnp, selection.NewSelectors())
	return Validity{Enforced: vp.cp != nil, Ingress: vp.ingress, Egress: vp.egress,
		Problems: vp.problems, Warnings: vp.warnings}
}

// CheckAll classifies the policies of one Input as Compile does, index for
// index: also the second and later policies of one name are left out (two
// objects of one name exist only in manifests; their sets would share
// names), and Compile's Problems and Warnings are those of the result in
// order. Nil entries are not allowed, as in Input.Policies.
func CheckAll(cnps []*v1beta1.ClusterNetworkPolicy) []Validity {
	out := make([]Validity, len(cnps))
	seen := make(map[string]bool, len(cnps))
	for i, cnp := range cnps {
		v := Check(cnp)
		if v.Enforced {
			if seen[cnp.Name] {
				v.Enforced, v.Ingress, v.Egress = false, nil, nil
				v.Problems = append(v.Problems, duplicateName(cnp))
			}
			seen[cnp.Name] = true
		}
		out[i] = v
	}
	return out
}

// duplicateName is the problem of a policy whose name an earlier one took.
func duplicateName(cnp *v1beta1.ClusterNetworkPolicy) problem.Problem {
	return problem.Problem{Object: objectOf(cnp), Reason: "another ClusterNetworkPolicy of the same name comes first"}
}
