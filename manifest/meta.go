package manifest

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nftguard/nftguard/problem"
)

// validateMeta checks the metadata as the API server does on create.
func validateMeta(src string, id problem.Object, meta *metav1.ObjectMeta, k kind) []problem.Problem {
	errs := apivalidation.ValidateObjectMeta(meta, k.namespaced, k.name, field.NewPath("metadata"))
	if len(errs) == 0 {
		return nil
	}
	// The identity shown for the object is quoted where it is not a valid
	// name: it is the input's text, and must not forge output lines.
	id.Namespace, id.Name = shown(meta.Namespace), shown(meta.Name)
	var out []problem.Problem
	for _, e := range errs {
		p := problem.Problem{Source: src, Object: id, Field: e.Field, Reason: e.Detail}
		if p.Reason == "" {
			p.Reason = e.Type.String()
		}
		if s, ok := e.BadValue.(string); ok && e.Field != "metadata.name" && e.Field != "metadata.namespace" {
			p.Value = s
		}
		out = append(out, p)
	}
	return out
}

// shown is a name as it appears in messages: itself when it is a valid
// name, quoted otherwise.
func shown(name string) string {
	if name == "" || len(apivalidation.NameIsDNSSubdomain(name, false)) == 0 {
		return name
	}
	return problem.Quote(name)
}
