package policy

import (
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/selection"
)

// IsolatingPolicies names the NetworkPolicies among nps (those of the
// pod's namespace) that isolate a pod with the labels podLabels for egress
// (egress true) or ingress, sorted as namespace/name: those whose pod
// selector selects it and whose policy types include the direction, as
// the compiler sees them: a policy that is invalid (Validate) is read in
// its fail-closed form (FailClosedInvalid), as the compiler enforces it,
// so an invalid policy that isolates the pod is named and one that the
// kernel does not hold is not. It is what readers of denied-packet logs
// (package flowlog, and the agent through deniedflow) name as the
// policies that decided, so it lives with the semantics it restates.
func IsolatingPolicies(nps []*networkingv1.NetworkPolicy, podLabels map[string]string, egress bool) []string {
	var out []string
	for _, np := range nps {
		if probs := Validate(np); len(probs) > 0 {
			np = FailClosedInvalid(np, probs)
		}
		ing, egr := policyTypes(np)
		if (!egress && !ing) || (egress && !egr) {
			continue
		}
		if sel, err := selection.AsSelector(&np.Spec.PodSelector); err == nil && sel.Matches(labels.Set(podLabels)) {
			out = append(out, np.Namespace+"/"+np.Name)
		}
	}
	sort.Strings(out)
	return out
}
