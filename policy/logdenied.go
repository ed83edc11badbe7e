package policy

import "strings"

// The comments of a pod chain's final rule, which drops what no rule
// allowed: engine.Counters reports them, and the counters of the rules
// that carry them are the pod's denied packets and bytes.
const (
	CommentIsolatedIngress = "isolated for ingress: no rule allowed"
	CommentIsolatedEgress  = "isolated for egress: no rule allowed"
)

// DeniedChain reports whether chain is a pod's ingress or egress chain of
// this compiler (np_ing_NS_POD, np_egr_NS_POD; see names.go) and, if so,
// which namespace's and direction's. The namespace is as nftsafe.NamePart
// wrote it: the name itself for every namespace an API server accepts (a
// DNS label, never shortened: it ends before byte 183), a bounded hashed
// stand-in otherwise. So a label made from it has at most one value per
// namespace.
func DeniedChain(chain string) (namespace string, egress, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(chain, "np_ing_"):
		rest = chain[len("np_ing_"):]
	case strings.HasPrefix(chain, "np_egr_"):
		rest, egress = chain[len("np_egr_"):], true
	default:
		return "", false, false
	}
	ns, _, found := strings.Cut(rest, "_")
	if !found || ns == "" {
		return "", false, false
	}
	return ns, egress, true
}
