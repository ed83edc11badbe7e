package podchain

import corev1 "k8s.io/api/core/v1"

// End is how a pod chain's drops are written: the one thing logging of
// denied packets changes in a chain. Both tiers use it, so a pod logs in
// every tier or in none, through the same shared, rate-limited chains.
type End uint8

const (
	EndPlain   End = iota // drop (the node does not log)
	EndCounted            // counter drop (the node logs, the namespace did not opt in)
	EndLogged             // counter goto the direction's shared denied chain
)

// EndOf is how the chains of a pod of namespace ns end, given the
// namespaces that opted in to logging (nil: the node does not log).
func EndOf(logged map[string]bool, ns string) End {
	switch {
	case logged == nil:
		return EndPlain
	case logged[ns]:
		return EndLogged
	}
	return EndCounted
}

// drop is the verdict of a rule that denies in a chain of kind k, as end
// writes it.
func (k *Kind) drop(end End) string {
	switch end {
	case EndCounted:
		return "counter drop"
	case EndLogged:
		return "counter " + GotoChain(k.Denied)
	}
	return "drop"
}

// LoggedNamespaces returns the namespaces whose pods log denied packets
// (annotation set to exactly "true"), nil when the node does not log
// (logs false): one rule for both tiers, so a pod logs in every tier or
// in none.
func LoggedNamespaces(logs bool, namespaces []*corev1.Namespace, annotation string) map[string]bool {
	if !logs {
		return nil
	}
	m := map[string]bool{}
	for _, ns := range namespaces {
		if ns != nil && ns.Annotations[annotation] == "true" {
			m[ns.Name] = true
		}
	}
	return m
}
